"""`@tool`: a Python function (or method) the model may call, its JSON schema made by pydantic
from the type hints, its arguments validated and coerced by the same model before it runs.

```python
@tool
def weather(city: Annotated[str, P("The city, in English")], days: int = 1) -> Forecast:
    '''The forecast for the next days.'''
```

The description comes from the decorator or the docstring; Google, NumPy and reST parameter
sections describe the parameters (`P` wins). A parameter with a default or typed ``X | None`` is
not required. A parameter typed `ToolMemoryId` receives the service's memory id and is not shown
to the model. Everything is worked out once per function, on first use.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, NewType, TypeVar, Union, get_args, get_origin, overload

import docstring_parser
import pydantic
import pydantic_core

from .._errors import ConfigurationError, shorten
from .._json_schema import lenient_schema, strict_schema
from ..models import ToolSpecification
from ._contracts import (
    ReturnBehavior,
    ToolArgumentsError,
    ToolContext,
    ToolExecutionError,
    ToolOutput,
)

__all__ = ["FunctionTool", "P", "ToolDeclaration", "ToolMemoryId", "tool", "tool_from"]

F = TypeVar("F", bound=Callable[..., Any])

ToolMemoryId = NewType("ToolMemoryId", str)
"""Type a tool parameter `ToolMemoryId` (or ``Annotated[str, ToolMemoryId]``) to receive the
memory id of the service call; the model never sees it."""

_ATTRIBUTE = "__chatmemory_tool__"
_BEHAVIORS = ("to_model", "immediate", "immediate_if_last")


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
) -> Callable[[F], F]: ...


def tool(
    function_or_description: Any = None,
    /,
    *,
    name: str | None = None,
    return_behavior: ReturnBehavior = "to_model",
    strict: bool | None = None,
) -> Any:
    """Mark a function or method as a tool: ``@tool``, ``@tool("What it does")``,
    ``@tool(name="get_weather", return_behavior="immediate", strict=True)``. The function is
    returned unchanged (still callable as before)."""
    if callable(function_or_description) or isinstance(function_or_description, classmethod):
        return _mark(function_or_description, ToolDeclaration(None, None, "to_model", None))
    if function_or_description is not None and not isinstance(function_or_description, str):
        raise ConfigurationError(
            f"@tool takes a description (str), got {function_or_description!r}"
        )
    if return_behavior not in _BEHAVIORS:
        raise ConfigurationError(
            f"`return_behavior` must be one of {', '.join(_BEHAVIORS)}, got {return_behavior!r}"
        )
    if name is not None and (not isinstance(name, str) or not re.fullmatch(r"[\w-]{1,64}", name)):
        raise ConfigurationError(f"a tool name is 1 to 64 letters, digits, _ or -, got {name!r}")
    declaration = ToolDeclaration(name, function_or_description, return_behavior, strict)
    return lambda function: _mark(function, declaration)


def _mark(function: F, declaration: ToolDeclaration) -> F:
    target = function.__func__ if isinstance(function, (staticmethod, classmethod)) else function
    if not inspect.isfunction(target):
        raise ConfigurationError(f"@tool goes on a function or method, got {function!r}")
    setattr(target, _ATTRIBUTE, declaration)
    return function


def declaration_of(function: object) -> ToolDeclaration | None:
    target = getattr(function, "__func__", function)
    found = getattr(target, _ATTRIBUTE, None)
    return found if isinstance(found, ToolDeclaration) else None


def tool_from(
    function: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    return_behavior: ReturnBehavior = "to_model",
    strict: bool | None = None,
) -> FunctionTool:
    """A tool from a function not decorated with `@tool` (a library's, a lambda-free helper)."""
    declared = declaration_of(function)
    if declared is None:
        declared = ToolDeclaration(name, description, return_behavior, strict)
        target = getattr(function, "__func__", function)
        if inspect.isfunction(target):
            setattr(target, _ATTRIBUTE, declared)
    return FunctionTool(function, declared)


@dataclasses.dataclass(frozen=True)
class _Parameter:
    name: str  # the Python name
    field: str  # the pydantic field name (p0, p1...: never clashes with BaseModel's attributes)
    memory_id: bool
    has_default: bool
    default: Any


@dataclasses.dataclass(frozen=True)
class _Compiled:
    specification: ToolSpecification
    model: type[pydantic.BaseModel]
    parameters: tuple[_Parameter, ...]
    returns_none: bool
    is_async: bool


def _compile(function: Callable[..., Any], declared: ToolDeclaration, bound: bool) -> _Compiled:
    target = getattr(function, "__func__", function)
    name = declared.name or target.__name__
    where = f"tool {name!r}"
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception as error:  # a forward reference that does not resolve
        raise ConfigurationError(f"cannot read the type hints of {where}: {error}") from None
    listed = list(inspect.signature(target).parameters.values())
    if bound and listed:
        listed = listed[1:]  # self or cls
    docs = docstring_parser.parse(inspect.getdoc(target) or "")
    described = {p.arg_name: p.description for p in docs.params if p.description}
    fields: dict[str, Any] = {}
    parameters: list[_Parameter] = []
    for index, parameter in enumerate(listed):
        field = f"p{index}"
        spec = _field(parameter, hints.get(parameter.name, Any), described, where)
        if spec is None:
            parameters.append(_Parameter(parameter.name, field, True, False, None))
            continue
        fields[field] = spec
        has_default = parameter.default is not parameter.empty
        parameters.append(_Parameter(parameter.name, field, False, has_default, parameter.default))
    model, schema = _model(name, fields, where)
    description = declared.description
    if description is None:
        parts = [docs.short_description, docs.long_description]
        description = "\n\n".join(p for p in parts if p) or None
    specification = ToolSpecification(
        name=name,
        description=description,
        parameters=_parameters_schema(schema, declared.strict, where) if fields else _EMPTY,
        strict=declared.strict,
    )
    returns = hints.get("return", inspect.Signature.empty)
    return _Compiled(
        specification,
        model,
        tuple(parameters),
        returns is None or returns is type(None),
        inspect.iscoroutinefunction(target),
    )


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
    p = next((m for m in markers if isinstance(m, P)), None)
    if ToolMemoryId in markers or base is ToolMemoryId:
        if p is not None:
            raise ConfigurationError(
                f"parameter {parameter.name!r} of {where} receives the memory id: it is not "
                f"shown to the model, so P(...) cannot describe it"
            )
        return None
    has_default = parameter.default is not parameter.empty
    optional = _is_optional(base)
    if p is not None and not p.required and not has_default and not optional:
        raise ConfigurationError(
            f"parameter {parameter.name!r} of {where} is not required but has no default: "
            f"give it a default or type it X | None"
        )
    default: Any = parameter.default if has_default else (None if optional else ...)
    alias = p.name if p is not None and p.name else parameter.name
    description = (p.description if p is not None else None) or described.get(parameter.name)
    return base, pydantic.Field(default, alias=alias, description=description)


def _model(
    name: str, fields: dict[str, Any], where: str
) -> tuple[type[pydantic.BaseModel], dict[str, Any]]:
    try:
        model = pydantic.create_model(f"{name}_arguments", **fields)
        return model, model.model_json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as error:
        raise ConfigurationError(
            f"{where} has a parameter type pydantic cannot describe: {error}"
        ) from None


def _parameters_schema(schema: dict[str, Any], strict: bool | None, where: str) -> dict[str, Any]:
    if not strict:
        return lenient_schema(schema)
    rewritten = strict_schema(schema)
    if rewritten is None:
        raise ConfigurationError(
            f"{where} cannot be strict: its parameters use what OpenAI's strict mode does not "
            f"support (a dict, a length limit, Any...); drop strict=True or change the types"
        )
    return rewritten


_EMPTY: dict[str, Any] = {"type": "object", "properties": {}}


def _split(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """The type under `Annotated` and its markers."""
    if get_origin(hint) is Annotated:
        base, *markers = get_args(hint)
        return base, tuple(markers)
    return hint, ()


def _is_optional(hint: Any) -> bool:
    origin = get_origin(hint)
    return (origin is Union or origin is types.UnionType) and type(None) in get_args(hint)


class FunctionTool:
    """A function (or bound method) as a `Tool`: its specification, and calls run with the
    model's arguments validated by pydantic."""

    def __init__(self, function: Callable[..., Any], declared: ToolDeclaration) -> None:
        bound = inspect.ismethod(function)
        compiled = declared.compiled.get(bound)
        if compiled is None:
            compiled = declared.compiled[bound] = _compile(function, declared, bound)
        self._function = function
        self._compiled = compiled
        self._behavior: ReturnBehavior = declared.return_behavior

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
                value = _run_coroutine(self._function(**kwargs))
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
                value = await asyncio.to_thread(self._function, **kwargs)
        except Exception as error:
            raise self._failed(error) from error
        return self._output(value)

    def _failed(self, error: Exception) -> ToolExecutionError:
        name = self._compiled.specification.name
        return ToolExecutionError(str(error) or type(error).__name__, tool=name, cause=error)

    def _arguments(self, arguments: str, context: ToolContext) -> dict[str, Any]:
        name = self._compiled.specification.name
        parsed = parse_arguments(arguments, name)
        try:
            validated = self._compiled.model.model_validate(parsed)
        except pydantic.ValidationError as error:
            raise ToolArgumentsError(_explain(error), tool=name, arguments=arguments) from None
        kwargs: dict[str, Any] = {}
        for parameter in self._compiled.parameters:
            if parameter.memory_id:
                kwargs[parameter.name] = context.memory_id
            else:
                kwargs[parameter.name] = getattr(validated, parameter.field)
        return kwargs

    def _output(self, value: Any) -> ToolOutput:
        if value is None:
            return ToolOutput("Success" if self._compiled.returns_none else "null", None)
        if isinstance(value, str):
            return ToolOutput(value, value)
        try:
            text = pydantic_core.to_json(value).decode()
        except pydantic_core.PydanticSerializationError:
            text = str(value)
        return ToolOutput(text, value)


def parse_arguments(arguments: str, tool: str) -> dict[str, Any]:
    """The model's JSON arguments as an object, with LangChain4j's one repair attempt (wrapping
    quotes, escaped quotes, trailing commas); blank means no arguments.

    What cannot be read raises `ToolArgumentsError`, whose message (which the model reads)
    quotes the arguments shortened; the error keeps them whole in `arguments`.
    """
    if not arguments.strip():
        return {}
    not_an_object = False
    for attempt in (arguments, _repaired(arguments)):
        try:
            parsed = json.loads(attempt)
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


def _repaired(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    text = text.replace('\\"', '"')
    return re.sub(r",\s*([}\]])", r"\1", text)


def _explain(error: pydantic.ValidationError, shown: int = 5) -> str:
    """The first `shown` problems, for the model; a count of the rest."""
    problems = []
    items = error.errors(include_url=False)
    for item in items[:shown]:
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        problems.append(f"{where}: {shorten(item['msg'])}")
    if len(items) > shown:
        problems.append(f"and {len(items) - shown} more")
    return "; ".join(problems)


def _run_coroutine(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run an async tool from sync code: on this thread, or on a worker when this thread
    already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


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
