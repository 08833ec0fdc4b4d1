"""Reading a service declaration: what each method's parameters mean, which templates make its
messages, what it returns. Everything that can be checked is checked here, when the service is
created, with a message that says how to fix the declaration.
"""

from __future__ import annotations

import collections.abc as cabc
import enum
import functools
import inspect
import sys
import typing
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from .._errors import ConfigurationError, shorten
from .._messages import (
    AiMessage,
    AudioContent,
    Content,
    ImageContent,
    PdfFileContent,
    TextContent,
    UserMessage,
    VideoContent,
)
from .._prompts import _BUILT_INS, Clock, PromptTemplate
from .._typing import is_union
from ..models import ChatParameters, ChatResponse
from ..models._values import ToolChoice
from ._invocation import InvocationParameters
from ._markers import (
    MODERATE,
    SYSTEM,
    TOOL_CHOICE,
    USER,
    MemoryId,
    TemplateSource,
    UserId,
    UserName,
    V,
    structured_text,
)
from ._output import OutputSpec, output_spec
from ._results import AsyncTokenStream, Result, TokenStream

__all__ = ["Declaration", "MethodPlan", "Returns", "read_declaration", "user_message_of"]

CONTENT_TYPES = (TextContent, ImageContent, AudioContent, VideoContent, PdfFileContent)


class Returns(enum.Enum):
    """How a method hands back its answer."""

    NONE = "none"
    AI_MESSAGE = "ai_message"
    RESPONSE = "response"
    VALUE = "value"
    """The answer parsed into the declared type (`str` is the text as is)."""
    RESULT = "result"
    TEXT_STREAM = "text_stream"
    TOKEN_STREAM = "token_stream"

    @property
    def streams(self) -> bool:
        return self in (Returns.TEXT_STREAM, Returns.TOKEN_STREAM)


class Role(enum.Enum):
    MEMORY_ID = "MemoryId"
    USER_ID = "UserId"
    USER_NAME = "UserName"
    USER_MESSAGE = "UserMessage"
    VARIABLE = "variable"
    CONTENTS = "contents"
    PARAMETERS = "parameters"
    INVOCATION = "invocation"


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    role: Role
    variable: str
    """The template variable the parameter fills (its name, or the `V` name)."""
    renamed: bool = False


@dataclass(frozen=True)
class MethodPlan:
    """One declared method, read and checked."""

    name: str
    where: str
    """``Class.method``, for messages."""
    signature: inspect.Signature
    is_async: bool
    asynchronous: bool
    """Whether the call runs on asyncio (an async def, or an async stream)."""
    params: tuple[Param, ...]
    system: PromptTemplate | None
    user: PromptTemplate | None
    user_param: str | None
    """The parameter whose value is the user's text, verbatim (not a template)."""
    it_param: str | None
    returns: Returns
    output: OutputSpec[Any] | None
    moderated: bool
    tool_choice: ToolChoice | None = None
    """The method's `@tool_choice(...)`, beating the service's."""

    def _param(self, role: Role) -> str | None:
        return next((p.name for p in self.params if p.role is role), None)

    @functools.cached_property
    def memory_param(self) -> str | None:
        return self._param(Role.MEMORY_ID)

    @functools.cached_property
    def user_name_param(self) -> str | None:
        return self._param(Role.USER_NAME)

    @functools.cached_property
    def user_id_param(self) -> str | None:
        return self._param(Role.USER_ID)

    @functools.cached_property
    def parameters_param(self) -> str | None:
        return self._param(Role.PARAMETERS)

    @functools.cached_property
    def invocation_param(self) -> str | None:
        return self._param(Role.INVOCATION)


@dataclass(frozen=True, slots=True)
class Declaration:
    cls: type
    methods: Mapping[str, MethodPlan]
    uses_memory_id: bool


def read_declaration(cls: object, *, reserved: frozenset[str], clock: Clock | None) -> Declaration:
    if not isinstance(cls, type) or not (_is_protocol(cls) or inspect.isabstract(cls)):
        raise ConfigurationError(
            f"ai_service() implements a typing.Protocol or an abstract class (abc.ABC), found "
            f"{cls!r}: declare the methods in a class that derives from Protocol or ABC"
        )
    class_system = _own(cls, SYSTEM)
    class_user = _own(cls, USER)
    namespace = _caller_namespace()
    methods: dict[str, MethodPlan] = {}
    for name, function in _declared_methods(cls, reserved):
        methods[name] = _read_method(
            cls, name, function, class_system, class_user, clock, namespace
        )
    if not methods:
        raise ConfigurationError(
            f"{cls.__name__} declares no method for the service to implement: add a method "
            f"whose body is `...` (in a Protocol) or an @abstractmethod (in an ABC)"
        )
    uses = any(plan.memory_param is not None for plan in methods.values())
    return Declaration(cls, methods, uses)


def _caller_namespace() -> dict[str, Any]:
    """The local names where `ai_service(...)` was called (the first frame outside chatmemory):
    a declaration inside a function may annotate with names imported or defined there, which
    ``from __future__ import annotations`` leaves as strings (pydantic resolves a model's the
    same way)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and str(frame.f_globals.get("__name__", "")).startswith(
        "chatmemory."
    ):
        frame = frame.f_back
    return dict(frame.f_locals)


def _is_protocol(cls: type) -> bool:
    return bool(getattr(cls, "_is_protocol", False))


def _own(cls: type, key: str) -> TemplateSource | None:
    """A decorator's mark on the class itself (a base class's is not inherited)."""
    value = cls.__dict__.get(key)
    return value if isinstance(value, TemplateSource) else None


def _stub_codes() -> frozenset[bytes]:
    def plain(self: object) -> None: ...

    def documented(self: object) -> None:
        """Doc."""

    async def plain_async(self: object) -> None: ...

    async def documented_async(self: object) -> None:
        """Doc."""

    return frozenset(f.__code__.co_code for f in (plain, documented, plain_async, documented_async))


_STUBS = _stub_codes()


def _declared_methods(cls: type, reserved: frozenset[str]) -> list[tuple[str, Callable[..., Any]]]:
    """The methods the service implements: a Protocol's methods whose body is empty (`...`, a
    docstring or `pass`) and an ABC's abstract methods. Others run as written."""
    abstract: frozenset[str] = getattr(cls, "__abstractmethods__", frozenset())
    found: list[tuple[str, Callable[..., Any]]] = []
    for name in dir(cls):
        if name.startswith("_") or name in reserved:
            continue
        function = inspect.getattr_static(cls, name)
        if isinstance(function, (staticmethod, classmethod)) or not inspect.isfunction(function):
            continue
        stub = _is_stub(function)
        if name in abstract or (_is_protocol(cls) and stub and _declared_in_protocol(cls, name)):
            found.append((name, function))
    return found


def _is_stub(function: Callable[..., Any]) -> bool:
    """Whether the body is empty: ``...``, ``pass`` or a docstring alone."""
    code = function.__code__
    return code.co_code in _STUBS and all(
        const is None or const is Ellipsis or const == function.__doc__ for const in code.co_consts
    )


def _declared_in_protocol(cls: type, name: str) -> bool:
    return any(name in base.__dict__ for base in cls.__mro__ if _is_protocol(base))


def _read_method(
    cls: type,
    name: str,
    function: Callable[..., Any],
    class_system: TemplateSource | None,
    class_user: TemplateSource | None,
    clock: Clock | None,
    namespace: dict[str, Any],
) -> MethodPlan:
    where = f"{cls.__name__}.{name}"
    try:
        hints = _hints(cls, function, namespace)
    except Exception as error:
        raise ConfigurationError(
            f"cannot read the annotations of {where}: {error}; import the names they use in "
            f"the module that declares {cls.__name__}, or where ai_service(...) is called"
        ) from None
    signature = inspect.signature(function)
    params, extra = _read_params(where, signature, hints)
    returns, output = _read_return(where, hints.get("return", inspect.Signature.empty))
    is_async = inspect.iscoroutinefunction(function)
    asynchronous = is_async or _is_async_stream(hints.get("return"))
    if is_async and returns.streams:
        raise ConfigurationError(
            f"{where} is an async def that returns a stream: declare it with plain `def` (it "
            f"returns the stream at once; iterate it with `async for`)"
        )
    method_system = getattr(function, SYSTEM, None)
    system_source = method_system if isinstance(method_system, TemplateSource) else class_system
    system = system_source.load(clock) if system_source is not None else None
    user, user_param = _user_message(where, function, params, class_user, clock)
    variables = {p.variable for p in params}
    it_param = _it_param(where, params, variables, [t for t in (system, user) if t is not None])
    if not extra:
        for kind, template in (("system", system), ("user", user)):
            if template is not None:
                _check_variables(where, kind, template, variables, it_param)
    moderated = bool(getattr(function, MODERATE, False))
    choice = getattr(function, TOOL_CHOICE, None)
    return MethodPlan(
        name=name,
        where=where,
        signature=signature,
        is_async=is_async,
        asynchronous=asynchronous,
        params=params,
        system=system,
        user=user,
        user_param=user_param,
        it_param=it_param,
        returns=returns,
        output=output,
        moderated=moderated,
        tool_choice=choice if isinstance(choice, str) else None,
    )


def _hints(cls: type, function: Callable[..., Any], namespace: dict[str, Any]) -> dict[str, Any]:
    """The method's annotations, resolved in its module; a name the module lacks is looked up
    where `ai_service(...)` is called (never shadowing the module's own names)."""
    try:
        return typing.get_type_hints(function, include_extras=True)
    except NameError:
        local = {**namespace, cls.__name__: cls}
        return typing.get_type_hints(function, localns=local, include_extras=True)


def _read_params(
    where: str, signature: inspect.Signature, hints: Mapping[str, Any]
) -> tuple[tuple[Param, ...], bool]:
    params: list[Param] = []
    extra = False
    for index, parameter in enumerate(signature.parameters.values()):
        if index == 0:
            continue  # self
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            raise ConfigurationError(
                f"{where} takes *{parameter.name}: a service method's parameters are template "
                f"variables by name, so give each one a name"
            )
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            extra = True
            continue
        params.append(_read_param(where, parameter.name, hints.get(parameter.name)))
    for role in (
        Role.MEMORY_ID,
        Role.USER_ID,
        Role.USER_NAME,
        Role.USER_MESSAGE,
        Role.PARAMETERS,
        Role.INVOCATION,
    ):
        marked = [p.name for p in params if p.role is role]
        if len(marked) > 1:
            raise ConfigurationError(
                f"{where} marks {len(marked)} parameters {role.value} ({', '.join(marked)}): "
                f"mark one"
            )
    seen: dict[str, str] = {}
    for p in params:
        if p.variable in seen and p.role not in (Role.CONTENTS, Role.PARAMETERS, Role.INVOCATION):
            raise ConfigurationError(
                f"{where}: parameters {seen[p.variable]!r} and {p.name!r} both fill the template "
                f"variable {p.variable!r}; rename one with V(...)"
            )
        seen[p.variable] = p.name
    return tuple(params), extra


def _read_param(where: str, name: str, hint: object) -> Param:
    markers: list[object] = []
    base = hint
    if get_origin(hint) is Annotated:
        base, *markers = get_args(hint)
    roles: dict[object, Role] = {
        marker: role
        for marker, role in (
            (MemoryId, Role.MEMORY_ID),
            (UserId, Role.USER_ID),
            (UserName, Role.USER_NAME),
        )
        if any(m is marker for m in markers)
    }
    if any(m is UserMessage for m in markers):
        roles[UserMessage] = Role.USER_MESSAGE
    renames = [m for m in markers if isinstance(m, V)]
    if len(roles) > 1 or len(renames) > 1:
        raise ConfigurationError(
            f"{where}: parameter {name!r} carries more than one marker; give it one"
        )
    variable = renames[0].name if renames else name
    if roles:
        return Param(name, next(iter(roles.values())), variable, bool(renames))
    if _is_contents(base):
        return Param(name, Role.CONTENTS, variable)
    for kind, role in ((ChatParameters, Role.PARAMETERS), (InvocationParameters, Role.INVOCATION)):
        if base is kind or (
            is_union(base) and kind in get_args(base) and set(get_args(base)) <= {kind, type(None)}
        ):
            return Param(name, role, variable)
    return Param(name, Role.VARIABLE, variable, bool(renames))


def _is_contents(annotation: object) -> bool:
    """A parameter typed as a content (an image, audio...) or a list of them."""
    if isinstance(annotation, type):
        return issubclass(annotation, CONTENT_TYPES)
    if get_origin(annotation) in (list, tuple, cabc.Sequence, cabc.Iterable):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        return bool(args) and all(_is_contents(a) or _is_content_union(a) for a in args)
    return _is_content_union(annotation)


def _is_content_union(annotation: object) -> bool:
    """A union of contents, or of contents and lists of them (``ImageContent |
    list[ImageContent]``, `Content` itself); Optional too."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    return (
        bool(args)
        and is_union(annotation)
        and all(
            (isinstance(a, type) and issubclass(a, CONTENT_TYPES)) or _is_contents(a) for a in args
        )
    )


def _user_message(
    where: str,
    function: Callable[..., Any],
    params: tuple[Param, ...],
    class_user: TemplateSource | None,
    clock: Clock | None,
) -> tuple[PromptTemplate | None, str | None]:
    """The template of the user message, or the parameter that holds it verbatim.

    In order: the method's `user_message(...)`; a parameter marked `UserMessage`; the class's
    `user_message(...)`; the one parameter that is neither marked nor a content; else the
    message is made of the content parameters alone.
    """
    method_user = getattr(function, USER, None)
    marked = next((p.name for p in params if p.role is Role.USER_MESSAGE), None)
    if isinstance(method_user, TemplateSource):
        if marked is not None:
            raise ConfigurationError(
                f"{where} has a user_message(...) template and a parameter marked UserMessage "
                f"({marked!r}): use one (the template can name the parameter as {{{{{marked}}}}})"
            )
        return method_user.load(clock), None
    if marked is not None:
        return None, marked
    if class_user is not None:
        return class_user.load(clock), None
    free = [p.name for p in params if p.role is Role.VARIABLE and not p.renamed]
    if len(free) == 1:
        return None, free[0]
    if any(p.role is Role.CONTENTS for p in params) and not free:
        return None, None
    detail = (
        "it has no parameter for it"
        if not free
        else f"it has {len(free)} parameters that could be it ({', '.join(free)})"
    )
    raise ConfigurationError(
        f"{where} has no user message: {detail}. Mark the parameter that holds the user's "
        f"text Annotated[str, UserMessage], or decorate the method with "
        f"@user_message('...{{{{name}}}}...')"
    )


def _it_param(
    where: str, params: tuple[Param, ...], variables: set[str], templates: list[PromptTemplate]
) -> str | None:
    if "it" in variables or not any("it" in t.variables for t in templates):
        return None
    free = [
        p.name for p in params if p.role not in (Role.CONTENTS, Role.PARAMETERS, Role.INVOCATION)
    ]
    if len(free) == 1:
        return free[0]
    raise ConfigurationError(
        f"{where} uses {{{{it}}}}, which names the method's only parameter, but it has "
        f"{len(free)}: name the variable after a parameter, or mark one Annotated[..., V('it')]"
    )


def _check_variables(
    where: str, kind: str, template: PromptTemplate, variables: set[str], it_param: str | None
) -> None:
    known = variables | _BUILT_INS.keys() | ({"it"} if it_param is not None else set())
    missing = sorted(template.variables - known)
    if missing:
        names = ", ".join("{{" + m + "}}" for m in missing)
        raise ConfigurationError(
            f"the {kind} message of {where} uses {names}, but {where} has no parameter of that "
            f"name: add one, or mark a parameter Annotated[..., V({missing[0]!r})]"
        )


def _is_async_stream(annotation: object) -> bool:
    if annotation is AsyncTokenStream:
        return True
    return get_origin(annotation) in (cabc.AsyncIterator, cabc.AsyncIterable)


_EXAMPLES = "for example Result[str] or Result[Person]"


def _read_return(where: str, annotation: object) -> tuple[Returns, OutputSpec[Any] | None]:
    if annotation is inspect.Signature.empty:
        raise ConfigurationError(
            f"{where} has no return annotation: declare what it returns (-> str, -> None, "
            f"-> Result[...], a model class...)"
        )
    if annotation is None or annotation is type(None):
        return Returns.NONE, None
    if annotation is AiMessage:
        return Returns.AI_MESSAGE, None
    if annotation is ChatResponse:
        return Returns.RESPONSE, None
    if annotation in (TokenStream, AsyncTokenStream):
        return Returns.TOKEN_STREAM, None
    origin = get_origin(annotation)
    if annotation is Result or origin is Result:
        args = get_args(annotation)
        if not args or args[0] is Any or isinstance(args[0], typing.TypeVar):
            raise ConfigurationError(
                f"the return type {annotation!r} of {where} must be parameterized with a "
                f"concrete type, {_EXAMPLES}"
            )
        return Returns.RESULT, output_spec(args[0], where=where)
    if origin in (cabc.Iterator, cabc.Iterable, cabc.AsyncIterator, cabc.AsyncIterable):
        if get_args(annotation) != (str,):
            raise ConfigurationError(
                f"{where} returns {annotation!r}: a streaming method yields text, declare "
                f"Iterator[str] / AsyncIterator[str], or TokenStream / AsyncTokenStream for events"
            )
        return Returns.TEXT_STREAM, None
    return Returns.VALUE, output_spec(annotation, where=where)


def user_message_of(
    plan: MethodPlan,
    arguments: Mapping[str, object],
    extra: Mapping[str, object],
    text: str | None,
) -> UserMessage:
    """The user message of a call: `text` (the rendered template) first, then the user's text
    parameter and the content parameters in the order they are declared, then the contents
    passed through ``**kwargs``. A user-message parameter holding contents (an image, a list
    of them) gives its contents, never their `str()`."""
    contents: list[Content] = [TextContent(text)] if text is not None else []
    for param in plan.params:
        value = arguments[param.name]
        if param.name == plan.user_param:
            if value is None:
                raise ConfigurationError(
                    f"{plan.where}: the user message ({param.name!r}) is None; pass text"
                )
            found = _as_contents(value)
            if found is None:
                structured = structured_text(value)
                if structured is None:
                    structured = value if isinstance(value, str) else str(value)
                found = [TextContent(structured)]
            contents.extend(found)
        elif param.role is Role.CONTENTS and value is not None:
            found = _as_contents(value)
            if found is None:
                raise ConfigurationError(
                    f"{plan.where}: parameter {param.name!r} holds contents (images, audio...), "
                    f"got {shorten(repr(value))}"
                )
            contents.extend(found)
    for value in extra.values():
        contents.extend(_as_contents(value) or ())
    if not contents:
        raise ConfigurationError(f"{plan.where}: the call has no user message content")
    name = arguments[plan.user_name_param] if plan.user_name_param else None
    return UserMessage(contents=contents, name=None if name is None else str(name))


def _as_contents(value: object) -> list[Content] | None:
    """`value` as contents: a content, or a list or tuple of them; None for anything else."""
    if isinstance(value, CONTENT_TYPES):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, CONTENT_TYPES) for v in value):
        return list(value)
    return None


def memory_id_of(value: object, plan: MethodPlan) -> str:
    """The memory id a call passes: a str (an int or UUID is turned into one)."""
    if value is None:
        raise ConfigurationError(
            f"The value of parameter {plan.memory_param!r} marked MemoryId in {plan.where} must "
            f"not be None: pass the id of the conversation (e.g. the user's id)"
        )
    if isinstance(value, str):
        return value
    if isinstance(value, (int, uuid.UUID)) and not isinstance(value, bool):
        return str(value)
    raise ConfigurationError(
        f"the MemoryId of {plan.where} must be a str, an int or a UUID, got {value!r}"
    )
