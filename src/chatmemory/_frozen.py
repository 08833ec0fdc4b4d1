"""Deeply immutable JSON-like values, so that messages carrying attributes stay hashable."""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from operator import attrgetter
from typing import Any

__all__ = ["FrozenDict", "freeze", "held", "thaw"]


class FrozenDict(Mapping[str, Any]):
    """An immutable, hashable mapping whose values are frozen too (dicts and lists inside)."""

    __slots__ = ("_data", "_hash")

    _data: dict[str, Any]
    _hash: int

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        frozen: dict[str, Any] = dict(data) if data else {}
        # Plain keys and values (the usual case) are checked at C speed, without a loop here.
        if not _KEYS.issuperset(map(type, frozen)):
            for key in frozen:
                if not isinstance(key, str):
                    raise TypeError(f"attribute keys must be strings, got {key!r}")
        if not _PLAIN.issuperset(map(type, frozen.values())):
            for key, value in frozen.items():
                frozen[key] = freeze(value)
        _set_data(self, frozen)  # `_hash` stays unset until asked for

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    # The dict's own views (read-only), not Mapping's, which call __getitem__ once per key.
    def keys(self) -> KeysView[str]:
        return self._data.keys()

    def values(self) -> ValuesView[Any]:
        return self._data.values()

    def items(self) -> ItemsView[str, Any]:
        return self._data.items()

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:  # the first time
            _set_hash(self, hash(frozenset(self._data.items())))
            return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenDict):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == {k: freeze(v) for k, v in other.items()}
        return NotImplemented

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("FrozenDict is immutable")

    def __repr__(self) -> str:
        return repr(thaw(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (thaw(self),))


# The slots set directly (a FrozenDict refuses setattr): faster than object.__setattr__.
_set_data = FrozenDict.__dict__["_data"].__set__
_set_hash = FrozenDict.__dict__["_hash"].__set__
_KEYS = frozenset({str})
_PLAIN = frozenset({str, int, float, bool, type(None)})
"""The types a frozen value holds as they are (exactly these: a subclass goes through freeze)."""


def freeze(value: Any) -> Any:
    """`value` with every dict turned into a FrozenDict and every list into a tuple."""
    if isinstance(value, FrozenDict):
        return value
    if isinstance(value, Mapping):
        return FrozenDict(value)
    if isinstance(value, (list, tuple)):
        return tuple(freeze(item) for item in value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(
        f"attribute values must be JSON-like (str, int, float, bool, None, list, dict); "
        f"got {type(value).__name__}"
    )


def thaw(value: Any) -> Any:
    """The plain JSON-ready form of a frozen value: dicts and lists again."""
    if isinstance(value, FrozenDict):
        if _PLAIN.issuperset(map(type, value._data.values())):
            return dict(value._data)
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thaw(item) for item in value]
    return value


held: Any = attrgetter("_data")
"""The dict a FrozenDict holds, fetched at C speed (`map(held, frozen_dicts)`), to read a
batch of them without a Python call each: never change it."""
