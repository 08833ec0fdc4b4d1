"""The window eviction policy, shared by every memory: pure functions, no I/O, no mutation.

They work on *entries*, any objects with a `.message`, so a memory can tell which stored rows
a result kept. The rules are LangChain4j's, made stricter where its users hit bugs:

* at most one system message; it is never evicted, even when it alone exceeds the budget;
* the same system message again is ignored; a different one replaces it, appended at the end
  (or put first with `system_first`);
* the oldest other message goes first; messages are never split; a message larger than the
  budget goes with everything older than it;
* a tool result never heads the window without the call it answers: evicting a tool call
  evicts its results, and results whose call is gone (say, from a store) are dropped too.

The window memories differ only in how they measure: one per message, or tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from ._messages import ChatMessage, SystemMessage, ToolExecutionResultMessage

__all__ = ["arrange", "fit", "place", "plan_replace"]


class HasMessage(Protocol):
    @property
    def message(self) -> ChatMessage: ...


E = TypeVar("E", bound=HasMessage)


def arrange(entries: Sequence[E], *, system_first: bool) -> list[E]:
    """`entries` with at most one system message (the latest), first if `system_first`."""
    system_at = [i for i, entry in enumerate(entries) if isinstance(entry.message, SystemMessage)]
    if not system_at or (len(system_at) == 1 and (not system_first or system_at[0] == 0)):
        return list(entries)
    keep = system_at[-1]
    others = [e for i, e in enumerate(entries) if not isinstance(e.message, SystemMessage)]
    if system_first:
        return [entries[keep], *others]
    return [e for i, e in enumerate(entries) if i == keep or i not in system_at]


def place(entries: Sequence[E], new: E, *, system_first: bool) -> list[E] | None:
    """`entries` (arranged) with `new` added; None when `new` repeats the system message."""
    if not isinstance(new.message, SystemMessage):
        return [*entries, new]
    current = next((e for e in entries if isinstance(e.message, SystemMessage)), None)
    if current is not None and current.message == new.message:
        return None
    others = [e for e in entries if e is not current]
    return [new, *others] if system_first else [*others, new]


def fit(
    entries: Sequence[E],
    size: Callable[[E], int],
    *,
    capacity: int,
    overhead: int = 0,
) -> list[E]:
    """The entries that stay when `overhead` plus their sizes must not exceed `capacity`.

    Evicts from the oldest non-system entry on, and drops tool results left at the head.
    """
    others = [e for e in entries if not isinstance(e.message, SystemMessage)]
    total = overhead + sum(size(e) for e in entries)
    head = 0
    while head < len(others):
        if isinstance(others[head].message, ToolExecutionResultMessage) or total > capacity:
            total -= size(others[head])
            head += 1
        else:
            break
    if head == 0:
        return list(entries)
    evicted = {id(e) for e in others[:head]}
    return [e for e in entries if id(e) not in evicted]


def plan_replace(current: Sequence[E], desired: Sequence[ChatMessage]) -> list[E | None]:
    """For each desired message, the current entry it can reuse, or None for a new row.

    Reused entries form a prefix of `desired` that is a subsequence of `current`, so stored
    order stays history order; everything after the first new message is new too.
    """
    result: list[E | None] = []
    j = 0
    for message in desired:
        while j < len(current) and current[j].message != message:
            j += 1
        if j == len(current):
            break
        result.append(current[j])
        j += 1
    result.extend([None] * (len(desired) - len(result)))
    return result
