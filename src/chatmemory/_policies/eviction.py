"""The window eviction policy, shared by every memory: pure functions, no I/O, no mutation.

They work on *entries*, any objects with a `.message`, so a memory can tell which stored rows
a result kept. The rules are LangChain4j's, made stricter where its users hit bugs:

* at most one system message; it is never evicted, even when it alone exceeds the budget;
* the same system message again is ignored; a different one replaces it, appended at the end
  (or put first with `system_first`);
* the oldest other message goes first; messages are never split; a message larger than the
  budget goes with everything older than it;
* a tool call and its results are one unit, evicted whole wherever the results stand; the
  window never holds a result without its call nor a call without its results, except the
  pending call of the last step (the rule of `tool_groups.unsendable`, shared with the
  processors), even when a store hands back such messages.

The window memories differ only in how they measure: one per message, or tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, NamedTuple, Protocol, TypeVar

from .._messages import AiMessage, ChatMessage, SystemMessage, ToolExecutionResultMessage
from .tool_groups import atomic_units, has_tool_traffic, tool_groups, unsendable

__all__ = ["Fitted", "arrange", "fit", "fit_appended", "place", "plan_replace"]


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


class Fitted(NamedTuple, Generic[E]):
    """What `fit` keeps, what it evicts (both in input order), and the kept entries' total."""

    kept: list[E]
    evicted: list[E]
    total: int


def fit(
    entries: Sequence[E],
    size: Callable[[E], int],
    *,
    capacity: int,
    overhead: int = 0,
    total: int | None = None,
    tools: bool | None = None,
) -> Fitted[E]:
    """The entries that stay when `overhead` plus their sizes must not exceed `capacity`.

    Tool groups that no provider accepts (`tool_groups.unsendable`) go first; then the oldest
    unit goes, while the total exceeds `capacity`: a message, or a tool call with all its
    results wherever they stand. The system message always stays.

    A caller that keeps the window between operations passes `total` (overhead plus every
    size) and `tools` (whether any entry is a tool call or result): then a window without tool
    traffic costs O(evicted) size lookups instead of a re-sum.
    """
    if total is None:
        total = overhead + sum(size(e) for e in entries)
    if tools is None:
        tools = any(has_tool_traffic(e.message) for e in entries)
    if tools:
        return _fit_units(entries, size, capacity, total)
    if total <= capacity:
        return Fitted(list(entries), [], total)
    evicted: list[E] = []
    for entry in entries:
        if total <= capacity:
            break
        if not isinstance(entry.message, SystemMessage):
            evicted.append(entry)
            total -= size(entry)
    gone = {id(e) for e in evicted}
    return Fitted([e for e in entries if id(e) not in gone], evicted, total)


def fit_appended(
    kept: Sequence[E],
    added: Sequence[E],
    size: Callable[[E], int],
    *,
    capacity: int,
    total: int,
    tools: bool = True,
) -> Fitted[E] | None:
    """`fit([*kept, *added])` in O(added + evicted), when `kept` is a window `fit` returned.

    Applies when `added` holds no system message and no tool traffic and `kept` does not end
    in a pending tool call (which a plain message would leave without results): then the
    window stays sendable, and only whole units at its head leave. `total` is the overhead plus
    every size of `kept` and `added`; `tools=False` says that no entry of `kept` is a tool call
    or result either (then every unit is one message). Returns None when it does not apply:
    call `fit`.
    """
    for entry in added:
        message = entry.message
        if isinstance(message, SystemMessage) or has_tool_traffic(message):
            return None
    if tools and _ends_pending(kept):
        return None
    entries = [*kept, *added]
    if total <= capacity:
        return Fitted(entries, [], total)
    if not tools:
        oldest = _evict_oldest(entries, size, capacity, total)
        if oldest is not None:
            return oldest
    gone: set[int] = set()
    head = 0
    while total > capacity:
        while head < len(entries) and (
            head in gone or isinstance(entries[head].message, SystemMessage)
        ):
            head += 1
        if head == len(entries):
            break
        unit = _unit_at(entries, head)
        if unit is None:
            return None
        gone.update(unit)
        total -= sum(size(entries[i]) for i in unit)
    order = sorted(gone)
    evicted = [entries[i] for i in order]
    if order and order[-1] - order[0] + 1 == len(order):  # one run (the usual case): slices
        return Fitted([*entries[: order[0]], *entries[order[-1] + 1 :]], evicted, total)
    return Fitted([e for i, e in enumerate(entries) if i not in gone], evicted, total)


def _evict_oldest(
    entries: list[E], size: Callable[[E], int], capacity: int, total: int
) -> Fitted[E] | None:
    """`fit` of a window whose units are single messages, when the evicted ones are one run
    (past a system message at the head); None when a system message stands in that run."""
    first = end = 1 if entries and isinstance(entries[0].message, SystemMessage) else 0
    while total > capacity and end < len(entries):
        if isinstance(entries[end].message, SystemMessage):
            return None
        total -= size(entries[end])
        end += 1
    return Fitted([*entries[:first], *entries[end:]], entries[first:end], total)


def _ends_pending(entries: Sequence[HasMessage]) -> bool:
    """Whether the last step (the last message that is not a tool result) is a tool call."""
    for entry in reversed(entries):
        message = entry.message
        if not isinstance(message, ToolExecutionResultMessage):
            return isinstance(message, AiMessage) and bool(message.tool_execution_requests)
    return False


def _unit_at(entries: Sequence[HasMessage], head: int) -> list[int] | None:
    """The unit starting at `head` of a sendable window: the message, or a call with every
    result answering it (found forward by id, as `tool_groups` pairs them). None when ids are
    missing (positional pairing) or reused by a later call: use `fit`."""
    message = entries[head].message
    if not isinstance(message, AiMessage) or not message.tool_execution_requests:
        return None if isinstance(message, ToolExecutionResultMessage) else [head]
    wanted = {request.id for request in message.tool_execution_requests}
    if None in wanted:
        return None
    unit = [head]
    for index in range(head + 1, len(entries)):  # every result for these ids, to the end
        later = entries[index].message
        if isinstance(later, ToolExecutionResultMessage) and later.id in wanted:
            unit.append(index)
        elif isinstance(later, AiMessage) and any(
            r.id in wanted for r in later.tool_execution_requests
        ):
            return None  # a later call reuses an id: leave it to `fit`
    return unit


def _fit_units(
    entries: Sequence[E], size: Callable[[E], int], capacity: int, total: int
) -> Fitted[E]:
    messages = [e.message for e in entries]
    groups = tool_groups(messages)
    dropped = unsendable(messages, groups)
    total -= sum(size(entries[i]) for i in dropped)
    if total > capacity:
        for unit in atomic_units(messages, groups):
            if total <= capacity:
                break
            if unit[0] in dropped or isinstance(messages[unit[0]], SystemMessage):
                continue
            dropped.update(unit)
            total -= sum(size(entries[i]) for i in unit)
    if not dropped:
        return Fitted(list(entries), [], total)
    kept = [e for i, e in enumerate(entries) if i not in dropped]
    return Fitted(kept, [entries[i] for i in sorted(dropped)], total)


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
