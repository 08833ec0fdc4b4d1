"""`@tool`: a Python function (or method) the model may call, its JSON schema made by pydantic
from the type hints, its arguments validated and coerced by the same model before it runs.

```python
@tool
def weather(city: Annotated[str, P("The city, in English")], days: int = 1) -> Forecast:
    '''The forecast for the next days.'''
```

The description comes from the decorator or the docstring's summary; Google, NumPy and reST
parameter sections describe the parameters (`P` wins, then pydantic's ``Field(description=...)``).
``Annotated[int, Field(ge=1, le=7)]`` puts the constraints (and a `Field`'s alias, default,
description) in the schema and enforces them. A parameter with a default or typed ``X | None`` is
not required; ``null`` for a parameter with a default means the default (unless its type takes
``None``). Arguments the function does not take are refused (``additionalProperties: false``),
unless the tool says ``extra_arguments="ignore"``. Numbers reach a `Decimal` parameter exactly as
the model wrote them. A parameter typed `ToolContext` receives the call's context (memory id, user
id, user message, invocation parameters), one typed `ToolMemoryId` the service's memory id; neither
is shown to the model. Everything is worked out once per declaration, on first use.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
import typing
from collections.abc import Callable, Mapping
from typing import (
    Annotated,
    Any,
    Literal,
    NewType,
    TypeAlias,
    TypeVar,
    get_args,
    get_origin,
    overload,
)

import docstring_parser
import pydantic
import pydantic_core
from pydantic.fields import FieldInfo

from .._errors import ConfigurationError, shorten
from .._json_schema import lenient_schema, strict_schema
from .._messages import (
    AudioContent,
    Content,
    ImageContent,
    PdfFileContent,
    TextContent,
    VideoContent,
)
from .._threads import in_thread, run_coroutine
from .._typing import is_optional
from .._validation import explain
from ..models import ToolSpecification
from ._contracts import (
    ReturnBehavior,
    ToolArgumentsError,
    ToolContext,
    ToolExecutionError,
    ToolLimits,
    ToolOutput,
)

__all__ = [
    "ExtraArguments",
    "FunctionTool",
    "P",
    "ToolDeclaration",
    "ToolMemoryId",
    "tool",
    "tool_from",
]

F = TypeVar("F", bound=Callable[..., Any])

ExtraArguments: TypeAlias = Literal["forbid", "ignore"]
"""What a tool does with arguments it does not take: refuse them (`forbid`, the default: the
schema says ``additionalProperties: false`` and the model is told which argument is unknown), or
drop them (`ignore`)."""

ToolMemoryId = NewType("ToolMemoryId", str)
"""Type a tool parameter `ToolMemoryId` (or ``Annotated[str, ToolMemoryId]``) to receive the
memory id of the service call; the model never sees it."""

_ATTRIBUTE = "__chatmemory_tool__"
CONTENT_TYPES = (TextContent, ImageContent, AudioContent, VideoContent, PdfFileContent)
_BEHAVIORS = ("to_model", "immediate", "immediate_if_last")
_EXTRA = ("forbid", "ignore")


class P:
    """Describes a tool parameter: ``Annotated[int, P("How many days, 1 to 7")]``. `name` shows
    the parameter to the model under another name; `required=False` makes a parameter with a
    default optional even in its schema's eyes (it is already when it has a default)."""

    __slots__ = ("description", "name", "required")

    def __init__(
        self, description: str | None = None, *, name: str | None = None, required: bool = True
    ) -> None:
        if description is not None and not isinstance(description, str):
            raise ConfigurationError(f"P(description) must be a str, got {description!r}")
        if name is not None and (not isinstance(name, str) or not name):
            raise ConfigurationError(f"P(name=...) must be a non-empty str, got {name!r}")
        self.description = description
        self.name = name
        self.required = required

    def __repr__(self) -> str:
        return f"P({self.description!r})"


@dataclasses.dataclass(frozen=True)
class ToolDeclaration:
    """What `@tool` says about a function; the schema is made on first use."""

    name: str | None
    description: str | None
    return_behavior: ReturnBehavior
    strict: bool | None
    extra_arguments: ExtraArguments = "forbid"
    require_descriptions: bool = False
    limits: ToolLimits = dataclasses.field(default_factory=ToolLimits)
    requires_approval: bool = False
    metadata: Mapping[str, Any] | None = None
    compiled: dict[bool, _Compiled] = dataclasses.field(default_factory=dict, compare=False)


@overload
def tool(function: F, /) -> F: ...


@overload
def tool(
    description: str | None = None,
    /,
    *,
    name: str | None = None,
    return_behavior: ReturnBehavior = "to_model",
    strict: bool | None = None,
    extra_arguments: ExtraArguments = "forbid",
    require_descriptions: bool = False,
    retries: int | None = None,
    timeout: float | None = None,
    requires_approval: bool = False,
    metadata: Mapping[str, Any] | None = None,
) -> Callable[[F], F]: ...


def tool(
    function_or_description: Any = None,
    /,
    *,
    name: str | None = None,
    return_behavior: ReturnBehavior = "to_model",
    strict: bool | None = None,
    extra_arguments: ExtraArguments = "forbid",
    require_descriptions: bool = False,
    retries: int | None = None,
    timeout: float | None = None,
    requires_approval: bool = False,
    metadata: Mapping[str, Any] | None = None,
) -> Any:
    """Mark a function or method as a tool: ``@tool``, ``@tool("What it does")``,
    ``@tool(name="get_weather", return_behavior="immediate", strict=True)``. The function is
    returned unchanged (still callable as before). ``extra_arguments="ignore"`` drops arguments
    the function does not take instead of refusing them. `retries` and `timeout` are the tool's
    own `ToolLimits`: how often one service call may send the model back to it (it raised
    `ModelRetry`, or its arguments did not fit), and how many seconds a call of it may take.
    ``requires_approval=True`` stops a service call before the tool runs, until someone
    approves or denies it (`ApprovalRequired`, `service.resume`). ``require_descriptions=True``
    refuses the declaration when a parameter the model sees has no description. `metadata`
    goes on the tool's `ToolSpecification` for the application's own code, never to the model."""
    if callable(function_or_description) or isinstance(function_or_description, classmethod):
        return _mark(function_or_description, ToolDeclaration(None, None, "to_model", None))
    if function_or_description is not None and not isinstance(function_or_description, str):
        raise ConfigurationError(
            f"@tool takes a description (str), got {function_or_description!r}"
        )
    declaration = _declaration(
        name,
        function_or_description,
        return_behavior,
        strict,
        extra_arguments,
        require_descriptions=require_descriptions,
    )
    declaration = dataclasses.replace(
        declaration,
        limits=ToolLimits(retries, timeout),
        requires_approval=bool(requires_approval),
        metadata=metadata,
    )
    return lambda function: _mark(function, declaration)


def _declaration(
    name: str | None,
    description: str | None,
    return_behavior: ReturnBehavior,
    strict: bool | None,
    extra_arguments: ExtraArguments,
    *,
    require_descriptions: bool = False,
) -> ToolDeclaration:
    if return_behavior not in _BEHAVIORS:
        raise ConfigurationError(
            f"`return_behavior` must be one of {', '.join(_BEHAVIORS)}, got {return_behavior!r}"
        )
    if extra_arguments not in _EXTRA:
        raise ConfigurationError(
            f"`extra_arguments` must be one of {', '.join(_EXTRA)}, got {extra_arguments!r}"
        )
    if name is not None and (not isinstance(name, str) or not re.fullmatch(r"[\w-]{1,64}", name)):
        raise ConfigurationError(f"a tool name is 1 to 64 letters, digits, _ or -, got {name!r}")
    if description is not None and not isinstance(description, str):
        raise ConfigurationError(f"a tool description is a str, got {description!r}")
    return ToolDeclaration(
        name, description, return_behavior, strict, extra_arguments, bool(require_descriptions)
    )


def _mark(function: F, declaration: ToolDeclaration) -> F:
    target = function.__func__ if isinstance(function, (staticmethod, classmethod)) else function
    if not inspect.isfunction(target):
        raise ConfigurationError(f"@tool goes on a function or method, got {function!r}")
    setattr(target, _ATTRIBUTE, declaration)
    return function


def declaration_of(function: object) -> ToolDeclaration | None:
    """The `@tool` of a function, a method, a `functools.partial` of one, or a callable object
    whose ``__call__`` is one."""
    if isinstance(function, functools.partial):
        function = function.func
    elif not inspect.isroutine(function) and not isinstance(function, type):
        function = inspect.getattr_static(type(function), "__call__", None)
    target = getattr(function, "__func__", function)
    found = getattr(target, _ATTRIBUTE, None)
    return found if isinstance(found, ToolDeclaration) else None


def tool_from(
    function: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    return_behavior: ReturnBehavior | None = None,
    strict: bool | None = None,
    extra_arguments: ExtraArguments | None = None,
    require_descriptions: bool | None = None,
    retries: int | None = None,
    timeout: float | None = None,
    requires_approval: bool | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> FunctionTool:
    """A tool from a function not decorated with `@tool` (a library's, a lambda-free helper), a
    `functools.partial` (the arguments it binds are not shown to the model) or a callable object
    (its ``__call__``; named after its class).

    Each call declares a tool of its own and leaves `function` as it was; what is not given
    comes from the function's `@tool`, if it has one."""
    if not callable(function):
        raise ConfigurationError(f"tool_from takes a function, got {function!r}")
    marked = declaration_of(function) or ToolDeclaration(None, None, "to_model", None)
    declared = _declaration(
        name if name is not None else marked.name,
        description if description is not None else marked.description,
        return_behavior if return_behavior is not None else marked.return_behavior,
        strict if strict is not None else marked.strict,
        extra_arguments if extra_arguments is not None else marked.extra_arguments,
        require_descriptions=(
            require_descriptions
            if require_descriptions is not None
            else marked.require_descriptions
        ),
    )
    limits = ToolLimits(
        retries if retries is not None else marked.limits.retries,
        timeout if timeout is not None else marked.limits.timeout,
    )
    approval = marked.requires_approval if requires_approval is None else requires_approval
    return FunctionTool(
        function,
        dataclasses.replace(
            declared,
            limits=limits,
            requires_approval=bool(approval),
            metadata=metadata if metadata is not None else marked.metadata,
        ),
    )


@dataclasses.dataclass(frozen=True)
class _Parameter:
    name: str  # the Python name
    field: str  # the pydantic field name (p0, p1...: never clashes with BaseModel's attributes)
    memory_id: bool
    has_default: bool
    default: Any
    context: bool = False
    """Typed `ToolContext`: receives the call's context (memory id, user, invocation
    parameters), not shown to the model."""


@dataclasses.dataclass(frozen=True)
class _Compiled:
    specification: ToolSpecification
    model: type[pydantic.BaseModel]
    parameters: tuple[_Parameter, ...]
    returns_none: bool
    is_async: bool
    null_is_default: frozenset[str]  # the arguments for which null means the default
    exact: bool  # a Decimal somewhere in the parameters: numbers are read remembering their text


@dataclasses.dataclass(frozen=True)
class _Source:
    """What a tool is read from: a function, a bound method, a `functools.partial` (without the
    parameters it binds by keyword) or a callable object (its ``__call__``)."""

    name: str
    parameters: list[inspect.Parameter]
    annotated: Callable[..., Any]
    """The function whose annotations and docstring describe the tool."""
    doc: str


def _source(function: Callable[..., Any], bound: bool, declared_name: str | None) -> _Source:
    label = declared_name or ""
    if isinstance(function, functools.partial):
        annotated = getattr(function.func, "__func__", function.func)
        listed = [
            p
            for p in _signature(function, label).parameters.values()
            if p.name not in function.keywords
        ]
        doc = inspect.getdoc(annotated)
        name = getattr(annotated, "__name__", None)
    elif not inspect.isroutine(function) and not isinstance(function, type):
        annotated = type(function).__call__  # a callable object
        listed = list(_signature(function, label).parameters.values())
        own = annotated.__doc__ or type(function).__doc__  # getdoc would inherit object's
        doc = inspect.cleandoc(own) if own else None
        name = type(function).__name__
    else:
        annotated = getattr(function, "__func__", function)
        listed = list(_signature(annotated, label).parameters.values())
        if bound and listed:
            listed = listed[1:]  # self or cls
        doc = inspect.getdoc(annotated)
        name = getattr(annotated, "__name__", None)
    return _Source(
        declared_name or str(name or type(function).__name__), listed, annotated, doc or ""
    )


def _signature(target: Callable[..., Any], name: str) -> inspect.Signature:
    try:
        return inspect.signature(target)
    except (TypeError, ValueError):  # a builtin such as min
        raise ConfigurationError(
            f"tool {name or getattr(target, '__name__', repr(target))!r}: Python cannot read the "
            f"parameters of {target!r} (a builtin has no signature); wrap it in a function with "
            f"typed parameters, for instance "
            f"`def smallest(a: float, b: float) -> float: return min(a, b)`"
        ) from None


def _compile(function: Callable[..., Any], declared: ToolDeclaration, bound: bool) -> _Compiled:
    source = _source(function, bound, declared.name)
    name = source.name
    where = f"tool {name!r}"
    try:
        hints = typing.get_type_hints(source.annotated, include_extras=True)
    except Exception as error:  # a forward reference that does not resolve
        raise ConfigurationError(f"cannot read the type hints of {where}: {error}") from None
    listed = source.parameters
    docs = _docstring(source.doc)
    described = {p.arg_name: p.description for p in docs.params if p.description}
    fields: dict[str, Any] = {}
    parameters: list[_Parameter] = []
    for index, parameter in enumerate(listed):
        field = f"p{index}"
        if _split(hints.get(parameter.name, Any))[0] is ToolContext:
            parameters.append(_Parameter(parameter.name, field, False, False, None, context=True))
            continue
        spec = _field(parameter, hints.get(parameter.name, Any), described, where)
        if spec is None:
            parameters.append(_Parameter(parameter.name, field, True, False, None))
            continue
        fields[field] = spec
        has_default = parameter.default is not parameter.empty
        parameters.append(_Parameter(parameter.name, field, False, has_default, parameter.default))
    model, schema = _model(name, fields, declared.extra_arguments, where)
    if declared.require_descriptions:
        _check_described(model, where)
    description = declared.description
    if description is None:
        returns = docs.returns.description if docs.returns is not None else None
        parts = [
            docs.short_description,
            docs.long_description,
            f"Returns: {returns}" if returns else None,
        ]
        description = "\n\n".join(p for p in parts if p) or None
    specification = ToolSpecification(
        name=name,
        description=description,
        parameters=_parameters_schema(schema, declared.strict, where),
        strict=declared.strict,
        metadata=declared.metadata or {},
    )
    returns = hints.get("return", inspect.Signature.empty)
    return _Compiled(
        specification,
        model,
        tuple(parameters),
        returns is None or returns is type(None),
        inspect.iscoroutinefunction(source.annotated),
        frozenset(
            info.alias or field
            for field, info in model.model_fields.items()
            if not info.is_required() and not _takes_none(info.annotation)
        ),
        _has_decimal(model.__pydantic_core_schema__),
    )


def _has_decimal(schema: object) -> bool:
    """Whether pydantic's core schema validates a `Decimal` anywhere."""
    if isinstance(schema, dict):
        return schema.get("type") == "decimal" or any(_has_decimal(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_decimal(item) for item in schema)
    return False


_SECTION = re.compile(
    r"(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    r"Returns?|Yields?|Raises|Exceptions|Attributes|Examples?|Notes?|Warnings?|Todo)\s*:\s*$",
    re.MULTILINE,
)


def _docstring(text: str) -> docstring_parser.Docstring:
    """The parsed docstring; one that starts with a Google section (``Args:``) has no summary
    (the parser would take the section's title for one). ``Args:`` on the quotes' line
    leaves the entries unindented once cleaned: they are indented again."""
    if not _SECTION.match(text):
        return docstring_parser.parse(text)
    lines = text.splitlines()
    if len(lines) > 1 and lines[1][:1].strip():
        lines = [line if _SECTION.match(line) else "    " + line for line in lines]
    parsed = docstring_parser.parse("-\n\n" + "\n".join(lines))
    parsed.short_description = parsed.long_description = None
    return parsed


def _field(
    parameter: inspect.Parameter, hint: Any, described: dict[str, str], where: str
) -> tuple[Any, Any] | None:
    """The pydantic field of a parameter, or None for the memory id."""
    if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
        raise ConfigurationError(f"{where} cannot take *{parameter.name}: name each parameter")
    if isinstance(parameter.default, P):
        raise ConfigurationError(
            f"parameter {parameter.name!r} of {where} has P(...) as its default; write "
            f"Annotated[type, P(...)] instead"
        )
    base, markers = _split(hint)
    if isinstance(parameter.default, FieldInfo):  # days: int = Field(1, ge=1), as pydantic-ai
        markers = (*markers, parameter.default)
        parameter = parameter.replace(default=parameter.empty)
    p = next((m for m in markers if isinstance(m, P)), None)
    if ToolMemoryId in markers or base is ToolMemoryId:
        if p is not None:
            raise ConfigurationError(
                f"parameter {parameter.name!r} of {where} receives the memory id: it is not "
                f"shown to the model, so P(...) cannot describe it"
            )
        return None
    infos = [m for m in markers if isinstance(m, FieldInfo)]
    others = tuple(m for m in markers if not isinstance(m, P))
    has_default = parameter.default is not parameter.empty
    field_default = any(not info.is_required() for info in infos)
    optional = _is_optional(base)
    if p is not None and not p.required and not (has_default or field_default or optional):
        raise ConfigurationError(
            f"parameter {parameter.name!r} of {where} is not required but has no default: "
            f"give it a default or type it X | None"
        )
    settings: dict[str, Any] = {}  # only what is set here: a Field in Annotated keeps the rest
    if has_default:
        settings["default"] = parameter.default
    elif optional and not field_default:
        settings["default"] = None
    settings.update(_naming(parameter.name, p, infos, described))
    arguments = (base, *others)
    typed = Annotated[arguments] if others else base
    return typed, pydantic.Field(**settings)


def _naming(
    name: str, p: P | None, infos: list[FieldInfo], described: dict[str, str]
) -> dict[str, str]:
    """The alias and description a parameter's field is given: `P`'s, else a `Field`'s in
    `Annotated` (kept by pydantic), else the Python name and the docstring's."""
    settings: dict[str, str] = {}
    if p is not None and p.name:
        settings["alias"] = p.name
    elif not any(info.alias for info in infos):
        settings["alias"] = name
    if p is not None and p.description:
        settings["description"] = p.description
    elif not any(info.description for info in infos) and name in described:
        settings["description"] = described[name]
    return settings


def _check_described(model: type[pydantic.BaseModel], where: str) -> None:
    """`require_descriptions`: every parameter the model sees has a description (`P`, `Field`,
    the docstring's ``Args:``)."""
    missing = [
        info.alias or name for name, info in model.model_fields.items() if not info.description
    ]
    if missing:
        raise ConfigurationError(
            f"{where} requires every parameter to be described, but {', '.join(missing)} "
            f"{'has' if len(missing) == 1 else 'have'} no description: describe "
            f"{'it' if len(missing) == 1 else 'them'} in the docstring's Args: section, with "
            f"Annotated[type, P('...')] or with Field(description=...)"
        )


def _takes_none(annotation: Any) -> bool:
    return annotation in (Any, None, type(None)) or _is_optional(annotation)


def _model(
    name: str, fields: dict[str, Any], extra: ExtraArguments, where: str
) -> tuple[type[pydantic.BaseModel], dict[str, Any]]:
    try:
        config = pydantic.ConfigDict(extra=extra, use_attribute_docstrings=True)
        model = pydantic.create_model(f"{name}_arguments", __config__=config, **fields)
        return model, model.model_json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as error:
        raise ConfigurationError(
            f"{where} has a parameter type pydantic cannot describe: {error}"
        ) from None


def _parameters_schema(schema: dict[str, Any], strict: bool | None, where: str) -> dict[str, Any]:
    """The parameters as the model sees them; an empty object is ``{"type": "object",
    "properties": {}}`` (with ``required: []`` in strict mode, which OpenAI requires)."""
    schema.setdefault("properties", {})
    if not strict:
        return lenient_schema(schema)
    rewritten = strict_schema(schema)
    if rewritten is None:
        raise ConfigurationError(
            f"{where} cannot be strict: its parameters use what OpenAI's strict mode does not "
            f"support (a dict, a length limit, Any...); drop strict=True or change the types"
        )
    return rewritten


def _split(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """The type under `Annotated` and its markers."""
    if get_origin(hint) is Annotated:
        base, *markers = get_args(hint)
        return base, tuple(markers)
    return hint, ()


def _is_optional(hint: Any) -> bool:
    return is_optional(hint)


class FunctionTool:
    """A function (or bound method) as a `Tool`: its specification, and calls run with the
    model's arguments validated by pydantic."""

    def __init__(self, function: Callable[..., Any], declared: ToolDeclaration) -> None:
        bound = inspect.ismethod(function)
        plain = bound or inspect.isfunction(function)  # a partial or an object: each its own
        compiled = declared.compiled.get(bound) if plain else None
        if compiled is None:
            compiled = _compile(function, declared, bound)
            if plain:
                declared.compiled[bound] = compiled
        self._function = function
        self._compiled = compiled
        self._behavior: ReturnBehavior = declared.return_behavior
        self.limits = declared.limits
        self.requires_approval = declared.requires_approval

    def __repr__(self) -> str:
        return f"FunctionTool({self._compiled.specification.name!r})"

    @property
    def specification(self) -> ToolSpecification:
        return self._compiled.specification

    @property
    def return_behavior(self) -> ReturnBehavior:
        return self._behavior

    def execute(self, arguments: str, context: ToolContext) -> ToolOutput:
        kwargs = self._arguments(arguments, context)
        try:
            if self._compiled.is_async:
                value = run_coroutine(self._function(**kwargs))
            else:
                value = self._function(**kwargs)
        except Exception as error:
            raise self._failed(error) from error
        return self._output(value)

    async def aexecute(self, arguments: str, context: ToolContext) -> ToolOutput:
        kwargs = self._arguments(arguments, context)
        try:
            if self._compiled.is_async:
                value = await self._function(**kwargs)
            else:
                value = await in_thread(self._function, **kwargs)
        except Exception as error:
            raise self._failed(error) from error
        return self._output(value)

    def _failed(self, error: Exception) -> ToolExecutionError:
        name = self._compiled.specification.name
        return ToolExecutionError(str(error) or type(error).__name__, tool=name, cause=error)

    def _arguments(self, arguments: str, context: ToolContext) -> dict[str, Any]:
        name = self._compiled.specification.name
        parsed = _parse(arguments, name, _Number if self._compiled.exact else float)
        for key in self._compiled.null_is_default.intersection(parsed):
            if parsed[key] is None:
                del parsed[key]
        try:
            validated = self._compiled.model.model_validate(parsed)
        except pydantic.ValidationError as error:
            raise ToolArgumentsError(_explain(error), tool=name, arguments=arguments) from None
        kwargs: dict[str, Any] = {}
        for parameter in self._compiled.parameters:
            if parameter.context:
                kwargs[parameter.name] = context
            elif parameter.memory_id:
                kwargs[parameter.name] = context.memory_id
            else:
                kwargs[parameter.name] = _plain(getattr(validated, parameter.field))
        return kwargs

    def _output(self, value: Any) -> ToolOutput:
        if value is None:
            return ToolOutput("Success" if self._compiled.returns_none else "null", None)
        if isinstance(value, str):
            return ToolOutput(value, value)
        contents = _contents(value)
        if contents:
            texts = [c.text for c in contents if isinstance(c, TextContent)]
            return ToolOutput("\n".join(texts), value, contents=contents)
        try:
            text = pydantic_core.to_json(value).decode()
        except pydantic_core.PydanticSerializationError:
            text = str(value)
        return ToolOutput(text, value)


def _contents(value: object) -> tuple[Content, ...]:
    """A tool's result as contents: an image (audio, PDF...), or a list or tuple of contents and
    texts with at least one that is not text; empty for anything else (sent as JSON text)."""
    if isinstance(value, CONTENT_TYPES):
        return (value,) if not isinstance(value, TextContent) else ()
    if not isinstance(value, (list, tuple)) or not value:
        return ()
    if not all(isinstance(item, (str, *CONTENT_TYPES)) for item in value):
        return ()
    found = tuple(TextContent(item) if isinstance(item, str) else item for item in value)
    return found if any(not isinstance(c, TextContent) for c in found) else ()


def parse_arguments(arguments: str, tool: str) -> dict[str, Any]:
    """The model's JSON arguments as an object, with LangChain4j's one repair attempt (wrapping
    quotes, escaped quotes, trailing commas); blank means no arguments.

    What cannot be read raises `ToolArgumentsError`, whose message (which the model reads)
    quotes the arguments shortened; the error keeps them whole in `arguments`.
    """
    return _parse(arguments, tool, float)


def _parse(arguments: str, tool: str, number: Callable[[str], Any]) -> dict[str, Any]:
    if not arguments.strip():
        return {}
    not_an_object = False
    for attempt in (arguments, _repaired(arguments)):
        try:
            parsed = json.loads(attempt, parse_float=number)
        except json.JSONDecodeError:
            continue
        except RecursionError:  # deeper than the parser goes; no repair makes it shallower
            raise ToolArgumentsError(
                "the arguments are JSON nested too deeply to read; send a JSON object of the "
                "tool's parameters",
                tool=tool,
                arguments=arguments,
            ) from None
        if isinstance(parsed, dict):
            return parsed
        not_an_object = True
    quoted = shorten(arguments)
    if not_an_object:
        raise ToolArgumentsError(
            f"the arguments must be a JSON object, got {quoted}", tool=tool, arguments=arguments
        )
    raise ToolArgumentsError(
        f"the arguments are not valid JSON: {quoted}", tool=tool, arguments=arguments
    )


class _Number(float):
    """A JSON number with a fraction, as a float that remembers how it was written: a
    `Decimal` is made from the text (exact), anything else from the float. Only for tools with
    a `Decimal` among their parameters."""

    text: str

    def __new__(cls, text: str) -> _Number:
        number = super().__new__(cls, text)
        number.text = text
        return number

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


def _plain(value: Any) -> Any:
    """`value` with the `_Number`s an untyped parameter (`Any`, `dict[str, Any]`) kept turned
    into plain floats."""
    if isinstance(value, _Number):
        return float(value)
    if type(value) is dict:
        return {key: _plain(item) for key, item in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_plain(item) for item in value)
    return value


def _repaired(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    text = text.replace('\\"', '"')
    return re.sub(r",\s*([}\]])", r"\1", text)


def _explain(error: pydantic.ValidationError) -> str:
    """The first problems, for the model; a count of the rest."""
    return explain(error, whole="arguments", shown=5, cut=True, say=_SAY)


_SAY = {"extra_forbidden": "this tool takes no such argument; leave it out"}


def tools_of(item: object) -> list[FunctionTool]:
    """The `@tool` functions of an object's class (the most derived override wins), bound."""
    found: list[FunctionTool] = []
    seen: set[str] = set()
    for klass in type(item).__mro__:
        for attribute, raw in vars(klass).items():
            if attribute in seen or attribute.startswith("__"):
                continue
            seen.add(attribute)
            target = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
            declared = declaration_of(target)
            if declared is not None:
                found.append(FunctionTool(getattr(item, attribute), declared))
    return found
