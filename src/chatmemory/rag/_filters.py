"""Metadata filters for embedding searches, with one meaning on every store.

``key("year") >= 2020`` style is avoided on purpose (a `==` that does not return a bool surprises
in `if` and in sets); filters are built with methods and combined with ``&``, ``|`` and ``~``::

    key("category").eq("docs") & key("year").gte(2020) & ~key("draft").eq(True)

The meaning, which every store implements (in Python, or translated to SQL):

* a comparison is True only when the key is present and the value compares: numbers with numbers
  (``bool`` is not a number here), strings with strings, booleans with booleans by equality;
  anything else is False (no error);
* `ne` and `not_in` are the negations of `eq` and `in_`: True when the key is absent;
* `in_` / `not_in` take a non-empty collection of values of one of those kinds;
* `contains` (LangChain4j's ``containsString``) is True when the stored value is a str holding
  the given str (case-sensitive; every str holds ""); a value of another kind fails it (LangChain4j
  throws there, which would fail a whole search for one odd segment);
* numbers compare exactly, as Python compares them (an int beyond 2**53 is not rounded to a
  float), and are finite: no store keeps NaN or an infinity, so no filter compares with them.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from .._errors import ConfigurationError

__all__ = ["And", "Compare", "Contains", "Filter", "In", "MetadataKey", "Not", "Or", "key"]

Scalar: TypeAlias = str | int | float | bool
Op: TypeAlias = Literal["eq", "ne", "gt", "gte", "lt", "lte"]

_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}


def _kind(value: object) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "str"
    return None


def _check_scalar(value: object, where: str) -> Scalar:
    if _kind(value) is None:
        raise ConfigurationError(
            f"{where} compares with str, int, float or bool values, got {value!r}"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigurationError(
            f"{where} compares with finite numbers, got {value!r}: no store keeps NaN or an "
            f"infinity in metadata"
        )
    return value  # type: ignore[return-value]


def equal(stored: object, value: Scalar) -> bool:
    """Whether a stored metadata value equals `value` (same kind, same value)."""
    kind = _kind(value)
    return kind is not None and _kind(stored) == kind and stored == value


class Filter:
    """A condition on a segment's metadata; combine with ``&``, ``|`` and ``~``."""

    def test(self, metadata: Mapping[str, Any]) -> bool:
        raise NotImplementedError

    def __and__(self, other: Filter) -> Filter:
        return And(self, _filter(other))

    def __or__(self, other: Filter) -> Filter:
        return Or(self, _filter(other))

    def __invert__(self) -> Filter:
        return Not(self)


def _filter(value: object) -> Filter:
    if not isinstance(value, Filter):
        raise ConfigurationError(f"filters combine with filters, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Compare(Filter):
    """``metadata[key] <op> value``."""

    key: str
    op: Op
    value: Scalar

    def test(self, metadata: Mapping[str, Any]) -> bool:
        if self.key not in metadata:
            return self.op == "ne"
        stored = metadata[self.key]
        if self.op == "eq":
            return equal(stored, self.value)
        if self.op == "ne":
            return not equal(stored, self.value)
        kind = _kind(self.value)
        if kind not in ("number", "str") or _kind(stored) != kind:
            return False
        return _ORDER[self.op](stored, self.value)


@dataclass(frozen=True, slots=True)
class In(Filter):
    """``metadata[key] in values`` (or not in, when `negated`)."""

    key: str
    values: tuple[Scalar, ...]
    negated: bool = False

    def test(self, metadata: Mapping[str, Any]) -> bool:
        if self.key not in metadata:
            return self.negated
        found = any(equal(metadata[self.key], v) for v in self.values)
        return found != self.negated


@dataclass(frozen=True, slots=True)
class Contains(Filter):
    """``metadata[key]`` is a str holding `value`."""

    key: str
    value: str

    def test(self, metadata: Mapping[str, Any]) -> bool:
        stored = metadata.get(self.key)
        return isinstance(stored, str) and self.value in stored


@dataclass(frozen=True, slots=True)
class And(Filter):
    left: Filter
    right: Filter

    def test(self, metadata: Mapping[str, Any]) -> bool:
        return self.left.test(metadata) and self.right.test(metadata)


@dataclass(frozen=True, slots=True)
class Or(Filter):
    left: Filter
    right: Filter

    def test(self, metadata: Mapping[str, Any]) -> bool:
        return self.left.test(metadata) or self.right.test(metadata)


@dataclass(frozen=True, slots=True)
class Not(Filter):
    inner: Filter

    def test(self, metadata: Mapping[str, Any]) -> bool:
        return not self.inner.test(metadata)


@dataclass(frozen=True, slots=True)
class MetadataKey:
    """A metadata key to build filters on: ``key("year").gte(2020)``."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigurationError(f"a metadata key is a non-empty str, got {self.name!r}")

    def _compare(self, op: Op, value: object) -> Compare:
        return Compare(self.name, op, _check_scalar(value, f"key({self.name!r}).{op}"))

    def eq(self, value: Scalar) -> Filter:
        return self._compare("eq", value)

    def ne(self, value: Scalar) -> Filter:
        return self._compare("ne", value)

    def gt(self, value: Scalar) -> Filter:
        return self._compare("gt", value)

    def gte(self, value: Scalar) -> Filter:
        return self._compare("gte", value)

    def lt(self, value: Scalar) -> Filter:
        return self._compare("lt", value)

    def lte(self, value: Scalar) -> Filter:
        return self._compare("lte", value)

    def contains(self, value: str) -> Filter:
        """The stored value is a str holding `value` (LangChain4j's ``containsString``)."""
        if not isinstance(value, str):
            raise ConfigurationError(
                f"key({self.name!r}).contains takes a str, got {value!r}: only text contains text"
            )
        return Contains(self.name, value)

    def in_(self, values: Iterable[Scalar]) -> Filter:
        return In(self.name, self._values(values, "in_"))

    def not_in(self, values: Iterable[Scalar]) -> Filter:
        return In(self.name, self._values(values, "not_in"), negated=True)

    def _values(self, values: Iterable[Scalar], op: str) -> tuple[Scalar, ...]:
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise ConfigurationError(f"key({self.name!r}).{op} takes a collection of values")
        found = tuple(_check_scalar(v, f"key({self.name!r}).{op}") for v in values)
        if not found:
            raise ConfigurationError(f"key({self.name!r}).{op} needs at least one value")
        return found


def key(name: str) -> MetadataKey:
    """The metadata key `name`, to build a filter on."""
    return MetadataKey(name)
