"""Structured output: reading a model's answer as the type a service method declares.

`output_spec(annotation)` is called once per method when the service is created; the spec it
returns holds pydantic `TypeAdapter`s, the response-format schema and the format instructions,
so a call only parses. The reading follows LangChain4j (research §1.5), with pydantic doing the
schemas and the validation:

* Types whose JSON schema is not an object (enums, `Literal`, numbers, dates, lists and sets,
  unions) are asked for inside an object, ``{"value": ...}`` or ``{"values": [...]}`` for
  collections, because a response format's root must be an object; the bare form is accepted
  too, and so is plain text for a single value (``42``, ``2024-05-01``, ``"POSITIVE".``).
* An enum is answered by member name, in any case, dressed in quotes, brackets, code fences or
  a final period; its value is accepted as well.
* A collection of simple values may also come one item per line.
* JSON is found inside prose and code fences: the whole text is tried first (the fast path),
  then the first code fence, then each JSON object or array in the text.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import typing
import uuid
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Annotated, Any, Generic, Literal, TypeAlias, TypeVar, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, TypeAdapter, ValidationError, WithJsonSchema
from pydantic import create_model as _create_model
from pydantic.errors import PydanticUserError
from typing_extensions import is_typeddict

from .._errors import ConfigurationError, OutputParsingError, shorten
from .._json_schema import response_schema
from .._messages import AiMessage
from .._typing import is_optional, is_union
from .._validation import explain
from ..models import ChatResponse, ResponseFormat
from ._markers import member_descriptions
from ._output_text import bare, bare_fence, json_candidates, line_items

__all__ = ["OutputSpec", "output_spec"]

T = TypeVar("T")

_COLLECTIONS = (list, set, frozenset)
_PREFIX = "\nYou must answer strictly in the following format: "
_JSON_PREFIX = "\nYou must answer strictly in the following JSON format: "
_LINES = "\nYou must put every item on a separate line."
_NULLS = ("null", "none")

_SCALARS: dict[type, tuple[str, str | None]] = {
    # type: (what the answer must be, LangChain4j's format instruction without a schema)
    bool: ("true or false", "one of [true, false]"),
    int: ("an integer", "integer number"),
    float: ("a number", "floating point number"),
    Decimal: ("a number", "floating point number"),
    datetime: ("a date and time, yyyy-MM-ddTHH:mm:ss", "yyyy-MM-ddTHH:mm:ss"),
    date: ("a date, yyyy-MM-dd", "yyyy-MM-dd"),
    time: ("a time, HH:mm:ss", "HH:mm:ss"),
    timedelta: ("a duration", None),
    uuid.UUID: ("a UUID", None),
    str: ("a text", None),
}

SUPPORTED = (
    "str, None, AiMessage, ChatResponse, Result[T] (T also AiMessage), a text stream, or a "
    "structured type: an enum, a Literal, int, float, bool, Decimal, date, datetime, time, "
    "UUID, a dataclass, a TypedDict, a pydantic model, list[...], set[...], tuple[...] or "
    "dict[str, ...] of these, or an Optional of one"
)


class OutputSpec(Generic[T]):
    """How a method's answer is asked for and read: built once, used on every call."""

    __slots__ = (
        "_adapter",
        "_format",
        "_instructions",
        "_key",
        "_message",
        "_nullable",
        "_per_line",
        "_single",
        "_wrapper",
        "annotation",
        "expected",
    )

    def __init__(
        self,
        annotation: object,
        *,
        adapter: TypeAdapter[Any] | None = None,
        wrapper: TypeAdapter[Any] | None = None,
        key: str = "value",
        expected: str = "",
        response_format: ResponseFormat | None = None,
        instructions: str = "",
        single: bool = False,
        per_line: bool = False,
        nullable: bool = False,
        message: bool = False,
    ) -> None:
        self.annotation = annotation
        self.expected = expected
        """What the answer must be, in words, for error messages."""
        self._adapter = adapter
        self._wrapper = wrapper
        self._key = key
        self._format = response_format
        self._instructions = instructions
        self._single = single
        self._per_line = per_line
        self._nullable = nullable
        self._message = message

    @property
    def is_text(self) -> bool:
        """The answer is the text as written (`str`): no schema, no instructions."""
        return self._adapter is None

    def response_format(self) -> ResponseFormat | None:
        """The JSON-schema response format, for a model that supports one."""
        return self._format

    def instructions(self) -> str:
        """The format instructions appended to the user message for a model without one."""
        return self._instructions

    def read(self, response: ChatResponse) -> T:
        """The answer of `response`: its AI message as is (`AiMessage`), else its text parsed."""
        if self._message:
            return response.ai_message  # type: ignore[return-value]
        return self.parse(response.ai_message.text or "")

    def parse(self, text: str) -> T:
        """`text` read as the declared type; `OutputParsingError` when it cannot be."""
        adapter = self._adapter
        if adapter is None:
            return text  # type: ignore[return-value]
        errors: list[ValidationError] = []
        try:
            return self._json(text, adapter)  # the fast path: the whole answer is the JSON
        except ValidationError as error:
            errors.append(error)
        if text.strip():
            tried = {text}
            for candidate in json_candidates(text, arrays=self._wrapper is not None):
                if candidate in tried:
                    continue
                tried.add(candidate)
                try:
                    return self._json(candidate, adapter)
                except ValidationError as error:
                    errors.append(error)
            if (self._single or self._per_line) and not _is_object_text(text):
                try:
                    return self._plain(text, adapter)
                except ValidationError as error:
                    errors.append(error)
        raise self._failure(text, errors)

    def _json(self, text: str, adapter: TypeAdapter[Any]) -> T:
        wrapper = self._wrapper
        if wrapper is None:
            return adapter.validate_json(text)  # type: ignore[no-any-return]
        try:
            return getattr(wrapper.validate_json(text), self._key)  # type: ignore[no-any-return]
        except ValidationError as error:
            if not _not_wrapped(error, self._key):
                raise
        return adapter.validate_json(text)  # type: ignore[no-any-return]

    def _plain(self, text: str, adapter: TypeAdapter[Any]) -> T:
        if self._per_line:
            return adapter.validate_python(line_items(text))  # type: ignore[no-any-return]
        value = bare(text)
        if self._nullable and value.lower() in _NULLS:
            return None  # type: ignore[return-value]
        return adapter.validate_python(value)  # type: ignore[no-any-return]

    def _failure(self, text: str, errors: list[ValidationError]) -> OutputParsingError:
        if not text.strip():
            reason = f"expected {self.expected}, got an empty answer"
        else:
            reason = f"expected {self.expected}; {_explain(_most_telling(errors))}"
        return OutputParsingError(
            f'Failed to parse "{shorten(text)}" into {_display(self.annotation)}: {reason}',
            text=text,
            target=self.annotation,
            reason=reason,
        )


def _is_object_text(text: str) -> bool:
    """The answer is (or tries to be) a JSON object: it is read as JSON or not at all, never as
    a plain value or lines (``{}`` is no list of one item, as in LangChain4j)."""
    return bare_fence(text).lstrip().startswith("{")


def _not_wrapped(error: ValidationError, key: str) -> bool:
    """The JSON is not ``{"value": ...}`` at all (rather than a wrapper with a bad value)."""
    return any(
        e["type"] in ("missing", "model_type") and e["loc"] in ((key,), ()) for e in error.errors()
    )


def _most_telling(errors: list[ValidationError]) -> ValidationError:
    """The error about JSON that was found (not the one saying the text is not JSON)."""
    for error in errors:
        if not all(e["type"] in ("json_invalid", "json_type") for e in error.errors()):
            return error
    return errors[0]


def _explain(error: ValidationError) -> str:
    return explain(error, shown=5, quote_input=True)


def _display(annotation: object) -> str:
    """A type as written in a declaration: ``list[Person]``, ``Color | None``."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is type(None):
        return "None"
    if origin is Annotated:
        return _display(args[0])
    if origin is Literal:
        return f"Literal[{', '.join(map(repr, args))}]"
    if is_union(annotation):
        return " | ".join(map(_display, args))
    if isinstance(annotation, list):  # the parameters of a Callable
        return f"[{', '.join(map(_display, annotation))}]"
    if origin is not None and args:
        return f"{_display(origin)}[{', '.join(map(_display, args))}]"
    name = getattr(annotation, "__qualname__", None)
    return name if isinstance(name, str) and isinstance(annotation, type) else repr(annotation)


# -- building a spec ---------------------------------------------------------------------------


class _Unsupported(Exception):
    pass


def output_spec(annotation: object, *, where: str) -> OutputSpec[Any]:
    """The spec of a method that returns `annotation`; `where` names the method in errors."""
    try:
        try:
            return _cached(annotation)
        except TypeError:  # an annotation that cannot be hashed (a dict in Annotated...)
            return _build(annotation)
    except _Unsupported as error:
        raise _unsupported(annotation, where, str(error)) from None
    except PydanticUserError as error:
        raise _unsupported(annotation, where, str(error).split("\n", 1)[0]) from None


@functools.lru_cache(maxsize=256)
def _cached(annotation: object) -> OutputSpec[Any]:
    return _build(annotation)


def _unsupported(annotation: object, where: str, detail: str) -> ConfigurationError:
    return ConfigurationError(
        f"{where} returns {_display(annotation)}, which the answer cannot be read into: "
        f"{detail}. A service method returns {SUPPORTED}"
    )


def _build(annotation: object) -> OutputSpec[Any]:
    if annotation is str:
        return OutputSpec(annotation)
    if annotation is AiMessage:  # Result[AiMessage]: the message as is, no schema (LangChain4j)
        return OutputSpec(annotation, message=True)
    _check(annotation, top=True)
    shape = _lenient(annotation)
    adapter: TypeAdapter[Any] = TypeAdapter(shape)  # type: ignore[arg-type]
    schema = adapter.json_schema()
    wrapper: TypeAdapter[Any] | None = None
    item = _collection_item(annotation)
    key = "values" if item is not None else "value"
    if _root_type(schema) != "object":
        model = _create_model(_name(annotation), **{key: (shape, ...)})  # type: ignore[call-overload]
        wrapper = TypeAdapter(model)
        schema = wrapper.json_schema()
    cleaned, strict = response_schema(schema)
    return OutputSpec(
        annotation,
        adapter=adapter,
        wrapper=wrapper,
        key=key,
        expected=_expected(annotation),
        response_format=ResponseFormat.json_schema(cleaned, name=_name(annotation), strict=strict),
        instructions=_instructions(annotation, cleaned),
        single=wrapper is not None and item is None,
        per_line=item is not None and _is_scalar(item),
        nullable=_nullable(annotation),
    )


def _check(annotation: object, *, top: bool = False) -> None:
    """`_Unsupported` unless `annotation` is a type an answer can be read into."""
    if annotation is type(None):
        if top:
            raise _Unsupported("None alone carries no answer (declare -> None on the method)")
        return
    origin = get_origin(annotation)
    if origin is Literal:
        return
    if origin is Annotated:
        _check(get_args(annotation)[0], top=top)
        return
    if is_union(annotation) or origin in _COLLECTIONS or origin in (dict, tuple):
        for arg in get_args(annotation)[1 if origin is dict else 0 :]:
            if arg is not Ellipsis:
                _check(arg)
        return
    if annotation in _SCALARS or _is_enum(annotation) or _is_object(annotation):
        return
    if annotation is dict:
        raise _Unsupported("dict needs its key and value types, e.g. dict[str, int]")
    if annotation in _COLLECTIONS or annotation is tuple:
        name = getattr(annotation, "__name__", "")
        raise _Unsupported(f"{name} needs its item type, e.g. {name}[str]")
    raise _Unsupported(f"{_display(annotation)} is not a type pydantic can read from JSON")


def _lenient(annotation: object) -> object:
    """`annotation` read as leniently as LangChain4j reads it, at any depth: enums by name (any
    case, dressed, or a one-item list of it), string `Literal`s in any case, integers written
    as text (``"1e3"``, ``"123.0"``). Enums and `Literal`s at the top and in collections and
    unions are rewritten (their schema lists the names); inside a model, a dataclass or a
    TypedDict the fields' values are mended before pydantic reads them."""
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        names = [member.name for member in annotation]
        schema: dict[str, Any] = {"type": "string", "enum": names}
        described = member_descriptions(annotation)
        if described:
            schema["description"] = "; ".join(f"{n}: {d}" for n, d in described.items())
        return Annotated[
            annotation,
            BeforeValidator(_EnumByName(annotation)),
            WithJsonSchema(schema),
        ]
    if origin is Literal and all(isinstance(a, str) for a in get_args(annotation)):
        return Annotated[annotation, BeforeValidator(_LiteralAnyCase(get_args(annotation)))]
    if origin in _COLLECTIONS:
        return origin[_lenient(get_args(annotation)[0])]
    if is_union(annotation):
        return typing.Union[tuple(_lenient(a) for a in get_args(annotation))]  # noqa: UP007
    mend = _mender(annotation, {})
    return annotation if mend is None else Annotated[annotation, BeforeValidator(mend)]


_Mend: TypeAlias = Callable[[object], object]


def _mender(annotation: object, memo: dict[object, _Mend | None]) -> _Mend | None:
    """A function that mends a JSON value read for `annotation` (enum names in any case, integers
    written as text...) before pydantic validates it; None when nothing in it needs mending."""
    try:
        if annotation in memo:  # a recursive type: look the mender up when it runs
            return lambda value: _apply(memo.get(annotation), value)
    except TypeError:  # an unhashable Annotated: not remembered (it cannot recur)
        return _build_mender(annotation, memo)
    memo[annotation] = None
    found = _build_mender(annotation, memo)
    memo[annotation] = found
    return found


def _apply(mend: _Mend | None, value: object) -> object:
    return value if mend is None else mend(value)


def _build_mender(annotation: object, memo: dict[object, _Mend | None]) -> _Mend | None:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _mender(args[0], memo)
    if _is_enum(annotation):
        return _EnumByName(annotation, strict=False)
    if origin is Literal and all(isinstance(a, str) for a in args):
        return _LiteralAnyCase(args)
    if annotation is int:
        return _integer
    if is_union(annotation):
        menders = [m for m in (_mender(a, memo) for a in args) if m is not None]
        return functools.partial(_each, menders) if menders else None
    if origin in (*_COLLECTIONS, tuple):
        if origin is not tuple or (len(args) == 2 and args[1] is Ellipsis):
            item = _mender(args[0], memo)
            return None if item is None else functools.partial(_items, item)
        items = [_mender(a, memo) for a in args]
        return functools.partial(_positions, items) if any(items) else None
    if origin is dict and len(args) == 2:
        values = _mender(args[1], memo)
        return None if values is None else functools.partial(_values, values)
    fields = _fields(annotation)
    members = {key: m for key, hint in fields.items() if (m := _mender(hint, memo)) is not None}
    return functools.partial(_members, members) if members else None


def _fields(annotation: object) -> dict[str, object]:
    """The JSON keys of an object type and their types (a model's aliases and names both)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found: dict[str, object] = {}
        for name, info in annotation.model_fields.items():
            hint: object = info.annotation
            if info.metadata:
                hint = Annotated.__class_getitem__((hint, *info.metadata))  # type: ignore[attr-defined]
            for key in (name, info.alias, info.validation_alias):
                if isinstance(key, str):
                    found[key] = hint
        return found
    if _is_object(annotation):
        try:
            return dict(typing.get_type_hints(annotation, include_extras=True))
        except Exception:  # pragma: no cover - pydantic has resolved them already
            return {}
    return {}


def _each(menders: list[_Mend], value: object) -> object:
    for mend in menders:
        value = mend(value)
    return value


def _items(mend: _Mend, value: object) -> object:
    return [mend(item) for item in value] if isinstance(value, list) else value


def _positions(menders: list[_Mend | None], value: object) -> object:
    if not isinstance(value, list):
        return value
    return [_apply(m, item) for m, item in zip(menders, value, strict=False)] + value[
        len(menders) :
    ]


def _values(mend: _Mend, value: object) -> object:
    return {k: mend(v) for k, v in value.items()} if isinstance(value, dict) else value


def _members(menders: dict[str, _Mend], value: object) -> object:
    if not isinstance(value, dict):
        return value
    return {k: menders[k](v) if k in menders else v for k, v in value.items()}


def _integer(value: object) -> object:
    """An integer written as text (``"-7"``, ``"1e3"``, ``"123.0"``) as the int it names."""
    if not isinstance(value, str):
        return value
    try:
        number = Decimal(bare(value))
    except ArithmeticError:
        return value
    if number.is_finite() and number == number.to_integral_value():
        return int(number)
    return value


class _EnumByName:
    """A before-validator: a member's name (any case, dressed, alone in a list) or value
    becomes the member. `strict` raises for what names no member (the top level, whose message
    lists the names); otherwise pydantic reports it."""

    def __init__(self, cls: type[enum.Enum], *, strict: bool = True) -> None:
        self.cls = cls
        self.strict = strict
        self.names = {m.name.casefold(): m for m in cls}
        self.values = {str(m.value).casefold(): m for m in cls}

    def __call__(self, value: object) -> object:
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if not isinstance(value, str):
            return value
        key = bare(value).casefold()
        member = self.names.get(key) or self.values.get(key)
        if member is None and self.strict:
            raise ValueError(f"Input should be one of {', '.join(m.name for m in self.cls)}")
        return value if member is None else member


class _LiteralAnyCase:
    def __init__(self, choices: tuple[str, ...]) -> None:
        self.choices = {c.casefold(): c for c in choices}

    def __call__(self, value: object) -> object:
        if not isinstance(value, str):
            return value
        return self.choices.get(bare(value).casefold(), value)


def _root_type(schema: dict[str, Any]) -> object:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return schema["$defs"][ref.removeprefix("#/$defs/")].get("type")
    return schema.get("type")


def _collection_item(annotation: object) -> object | None:
    return get_args(annotation)[0] if get_origin(annotation) in _COLLECTIONS else None


def _non_null(annotation: object) -> list[object]:
    return [a for a in get_args(annotation) if a is not type(None)]


def _nullable(annotation: object) -> bool:
    return is_optional(annotation)


def _is_scalar(annotation: object) -> bool:
    if get_origin(annotation) is Literal:
        return True
    return isinstance(annotation, type) and (
        annotation in _SCALARS or issubclass(annotation, enum.Enum)
    )


def _is_object(annotation: object) -> bool:
    return isinstance(annotation, type) and (
        issubclass(annotation, BaseModel)
        or dataclasses.is_dataclass(annotation)
        or is_typeddict(annotation)
    )


def _is_enum(annotation: object) -> typing.TypeGuard[type[enum.Enum]]:
    return isinstance(annotation, type) and issubclass(annotation, enum.Enum)


def _name(annotation: object) -> str:
    """A response-format name from the type: letters, digits, ``_`` and ``-``, at most 64."""
    text = _display(annotation)
    name = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in text)
    return "_".join(part for part in name.split("_") if part)[:64] or "answer"


def _expected(annotation: object) -> str:
    if _nullable(annotation):
        return " or ".join(_expected(a) for a in _non_null(annotation)) + " or null"
    if _is_enum(annotation):
        return "one of " + ", ".join(m.name for m in annotation)
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(annotation))
    item = _collection_item(annotation)
    if item is not None:
        lines = " (or one per line)" if _is_scalar(item) else ""
        return f'a JSON array, or {{"values": [...]}}, of {_plural(item)}{lines}'
    if isinstance(annotation, type) and annotation in _SCALARS:
        return _SCALARS[annotation][0]
    if _is_object(annotation):
        return f"a JSON object of {_display(annotation)}"
    return f"a JSON value of {_display(annotation)}"


def _plural(item: object) -> str:
    if _is_enum(item):
        return "names among " + ", ".join(m.name for m in item)
    if isinstance(item, type) and item in _SCALARS:
        return f"items each {_SCALARS[item][0]}"
    return f"{_display(item)} items"


def _instructions(annotation: object, schema: dict[str, Any]) -> str:
    """LangChain4j's format instructions (§1.5) for a model without JSON-schema support; the
    JSON schema itself where LangChain4j writes a pseudo-JSON (or nothing)."""
    item = _collection_item(annotation)
    if _is_enum(annotation):
        return "\nYou must answer strictly with one of these enums:\n" + _lines(annotation)
    if get_origin(annotation) is Literal and all(isinstance(a, str) for a in get_args(annotation)):
        return "\nYou must answer strictly with one of these values:\n" + "\n".join(
            get_args(annotation)
        )
    if _is_enum(item):
        return (
            "\nYou must answer strictly with zero or more of these enums on a separate line:\n"
            + _lines(item)
        )
    if item is str:
        return _LINES
    if isinstance(annotation, type) and annotation in _SCALARS:
        instruction = _SCALARS[annotation][1]
        if instruction is not None:
            return _PREFIX + instruction
    return _JSON_PREFIX + json.dumps(schema)


def _lines(cls: type[enum.Enum]) -> str:
    described = member_descriptions(cls)
    return "\n".join(
        f"{m.name} - {described[m.name]}" if m.name in described else m.name for m in cls
    )
