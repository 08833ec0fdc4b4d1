"""Context that is not the conversation (a working-memory record, recalled messages) placed in a
request: at the end of its first system message, the oldest messages making room for it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._messages import ChatMessage, SystemMessage
from .tool_groups import atomic_units

__all__ = ["with_block"]


def with_block(
    window: Sequence[ChatMessage],
    block: str,
    fits: Callable[[list[ChatMessage]], bool] | None = None,
    *,
    first: bool = False,
    keep: int = 0,
) -> list[ChatMessage]:
    """`window` with `block` at the end of its first system message, which stays where it is
    (or goes first with `first=True`), or as a system message first when there is none; the
    oldest other messages (whole tool groups, never the last, never one of the last `keep`:
    a service call's own messages) make room while `fits` says the request is too large."""
    at = next((i for i, m in enumerate(window) if isinstance(m, SystemMessage)), None)
    if at is None:
        system, before, rest = SystemMessage(block), 0, list(window)
    else:
        given = window[at]
        assert isinstance(given, SystemMessage)
        system = SystemMessage(f"{given.text}\n\n{block}")
        before, rest = (0 if first else at), [*window[:at], *window[at + 1 :]]
    units = atomic_units(rest)
    last = len(rest) - keep
    start = 0
    while True:
        kept = rest[start:]
        place = max(before - start, 0)
        placed = [*kept[:place], system, *kept[place:]]
        if fits is None or fits(placed) or len(units) <= 1 or units[0][-1] >= last:
            return placed
        start = units.pop(0)[-1] + 1
