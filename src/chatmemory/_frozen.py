"""Deeply immutable JSON-like values, so that messages carrying attributes stay hashable."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["FrozenDict", "freeze", "thaw"]


class FrozenDict(Mapping[str, Any]):
    """An immutable, hashable mapping whose values are frozen too (dicts and lists inside)."""

    __slots__ = ("_data", "_hash")

    _data: dict[str, Any]
    _hash: int | None

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        frozen: dict[str, Any] = {}
        for key, value in (data or {}).items():
            if not isinstance(key, str):
                raise TypeError(f"attribute keys must be strings, got {key!r}")
            frozen[key] = freeze(value)
        object.__setattr__(self, "_data", frozen)
        object.__setattr__(self, "_hash", None)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(frozenset(self._data.items())))
        return self._hash  # type: ignore[return-value]

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
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thaw(item) for item in value]
    return value
