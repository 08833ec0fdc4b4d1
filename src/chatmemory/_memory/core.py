"""What a window memory does, written once as flows (see `_flow`) for the sync and async shells.

Two ways to talk to a store, chosen once per memory:

* incremental (every built-in store): load the window rows and their version, append the new
  rows and mark the evicted ones in one versioned commit, retry when another writer won;
* the seed contract (any object with get/update/delete): read the list, write the whole window.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .._errors import ConcurrentUpdateError
from .._eviction import arrange, fit, place, plan_replace
from .._flow import Call, Flow, Sleep, backoff
from .._messages import ChatMessage, check_messages
from ..stores._protocol import NewMessage, check_memory_id
from .budget import Budget

__all__ = ["MemoryCore"]


@dataclass(eq=False, slots=True)
class _Entry:
    message: ChatMessage
    seq: int | None = None
    """The stored row this came from; None for a message new in this operation."""


class MemoryCore:
    """The state and flows of one window memory; holds no messages itself."""

    def __init__(
        self,
        *,
        memory_id: str,
        budget: Budget,
        system_first: bool,
        store: object,
        incremental: bool,
    ) -> None:
        self.memory_id = check_memory_id(memory_id)
        self.budget = budget
        self.system_first = bool(system_first)
        self.store = store
        self.incremental = incremental

    # -- flows -------------------------------------------------------------------------------

    def messages(self) -> Flow[list[ChatMessage]]:
        _, loaded = yield from self._load()
        return [e.message for e in self._fit(arrange(loaded, system_first=self.system_first))]

    def add(self, messages: Sequence[ChatMessage]) -> Flow[None]:
        if not messages:
            return
        delays = backoff()
        while True:
            version, loaded = yield from self._load()
            entries = arrange(loaded, system_first=self.system_first)
            added: list[_Entry] = []
            for message in messages:
                new = _Entry(message)
                placed = place(entries, new, system_first=self.system_first)
                if placed is not None:
                    entries = placed
                    added.append(new)
            if not added:
                return  # only a repeat of the system message: nothing to write
            window = self._fit(entries)
            if (yield from self._commit(version, loaded, window, added)):
                return
            yield Sleep(self._next_delay(delays))

    def set(self, messages: Sequence[ChatMessage]) -> Flow[None]:
        if not self.incremental:
            window = self._fit(
                arrange([_Entry(m) for m in messages], system_first=self.system_first)
            )
            yield Call("update_messages", (self.memory_id, [e.message for e in window]))
            return
        delays = backoff()
        while True:
            version, loaded = yield from self._load()
            given = [_Entry(m) for m in messages]
            added = []
            for entry, previous in zip(given, plan_replace(loaded, messages), strict=True):
                if previous is None:
                    added.append(entry)
                else:
                    entry.seq = previous.seq  # already stored: keep its row
            window = self._fit(arrange(given, system_first=self.system_first))
            if (yield from self._commit(version, loaded, window, added)):
                return
            yield Sleep(self._next_delay(delays))

    def clear(self) -> Flow[None]:
        yield Call("delete_messages", (self.memory_id,))

    # -- steps -------------------------------------------------------------------------------

    def _load(self) -> Flow[tuple[int, list[_Entry]]]:
        if not self.incremental:
            stored = yield Call("get_messages", (self.memory_id,))
            return -1, [_Entry(m, i) for i, m in enumerate(check_messages(stored, "the store"))]
        snapshot = yield Call("load_window", (self.memory_id,))
        self.budget.prime(snapshot.rows)
        return snapshot.version, [_Entry(row.message, row.seq) for row in snapshot.rows]

    def _fit(self, entries: list[_Entry]) -> list[_Entry]:
        size = self.budget.size
        return fit(
            entries,
            lambda e: size(e.message),
            capacity=self.budget.capacity(self.memory_id),
            overhead=self.budget.overhead,
        )

    def _commit(
        self, version: int, loaded: list[_Entry], window: list[_Entry], added: list[_Entry]
    ) -> Flow[bool]:
        if not self.incremental:
            yield Call("update_messages", (self.memory_id, [e.message for e in window]))
            return True
        in_window = {id(e) for e in window}
        counted_by = self.budget.counted_by
        append = [
            NewMessage(
                e.message,
                in_window=id(e) in in_window,
                token_count=self.budget.size(e.message) if counted_by else None,
                counted_by=counted_by,
            )
            for e in added
        ]
        kept = {e.seq for e in window}
        evict = [e.seq for e in loaded if e.seq not in kept and e.seq is not None]
        committed = yield Call(
            "commit_window",
            (self.memory_id,),
            {"version": version, "append": append, "evict": evict},
        )
        return bool(committed)

    def _next_delay(self, delays: Iterator[float]) -> float:
        try:
            return next(delays)
        except StopIteration:
            raise ConcurrentUpdateError(
                "other writers changed this memory on every attempt; nothing was written",
                store=self.store,
                memory_id=self.memory_id,
            ) from None
