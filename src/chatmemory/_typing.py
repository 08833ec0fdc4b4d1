"""Reading type hints: the one place that knows what a union is (``X | Y`` and ``Union[X, Y]``
alike) and what an optional is."""

from __future__ import annotations

import types
import typing
from typing import get_args, get_origin

__all__ = ["is_optional", "is_union"]

_UNIONS = (typing.Union, types.UnionType)


def is_union(annotation: object) -> bool:
    """``X | Y`` or ``Union[X, Y]`` (``Optional[X]`` included)."""
    return get_origin(annotation) in _UNIONS


def is_optional(annotation: object) -> bool:
    """A union that takes None."""
    return is_union(annotation) and type(None) in get_args(annotation)
