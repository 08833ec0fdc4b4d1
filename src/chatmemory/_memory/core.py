"""What a window memory does, written once as flows (see `_flow`) for the sync and async shells.

Two ways to talk to a store, chosen once per memory by the contract the store declares:

* a `WindowStore` (every built-in store): the memory keeps the window it last saw (rows, sizes
  and their total, the store's version) and asks the store only whether it changed
  (`load_window(since=...)`), which costs SQLite no I/O and a network store one round trip.
  An `add` appends the new rows and marks the evicted ones in one versioned commit; when another
  writer committed first, nothing is written, and the attempt is made again on a fresh read
  (`_flow.optimistic`). So every message is stored exactly once under any number of writers,
  and what `messages()` returns is always the store's window, fitted to the budget.
* the basic whole-list contract (any object with get/update/delete): read the list, write the
  whole window. Such a store has no version to check, so nothing is kept between operations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .._contracts import (
    AsyncChatMemoryStore,
    AsyncWindowStore,
    ChatMemoryStore,
    Committed,
    NewMessage,
    StoredMessage,
    WindowSnapshot,
    WindowStore,
    check_memory_id,
)
from .._flow import Flow, call, optimistic
from .._messages import ChatMessage, SystemMessage, check_messages
from .._policies.eviction import Fitted, arrange, fit, fit_appended, place, plan_replace
from .._policies.tool_groups import has_tool_traffic
from .budget import Budget

__all__ = ["MemoryCore"]


@dataclass(eq=False, slots=True)
class _Entry:
    message: ChatMessage
    size: int
    row: StoredMessage | None = None
    """The stored row this is; None for a message new in this operation."""


def _size(entry: _Entry) -> int:
    return entry.size


@dataclass(eq=False, slots=True)
class _View:
    """A store's window as the memory works with it: arranged entries and their total."""

    snapshot: WindowSnapshot
    entries: list[_Entry]
    total: int
    """The overhead plus the size of every entry."""
    tools: bool
    """Whether any entry may be a tool call or result (then fitting looks at tool groups)."""
    fitted: tuple[int, Fitted[_Entry]] | None = field(default=None)
    """The last `fit` of `entries`, with the capacity it was made for."""
    clean: bool = False
    """True when `entries` are a window `fit` returned, exactly the snapshot's rows."""


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a write wants the window to be: arranged entries, the new ones among them, and
    their total and tool flag when the writer kept them (else they are computed)."""

    entries: list[_Entry]
    added: list[_Entry]
    total: int | None = None
    tools: bool | None = None
    appended: bool = False
    """True when `entries` are the view's entries followed by `added`."""


class MemoryCore:
    """The state and flows of one window memory: its id, budget, store, and last seen window."""

    def __init__(
        self,
        *,
        memory_id: str,
        budget: Budget,
        system_first: bool,
        store: ChatMemoryStore | WindowStore | AsyncChatMemoryStore | AsyncWindowStore,
        windowed: bool,
    ) -> None:
        self.memory_id = check_memory_id(memory_id)
        self.budget = budget
        self.system_first = bool(system_first)
        self.store = store
        self.windowed = windowed
        self._view: _View | None = None

    # -- flows -------------------------------------------------------------------------------

    def messages(self) -> Flow[list[ChatMessage]]:
        view = yield from self._load()
        return [e.message for e in self._fit(view).kept]

    def add(self, messages: Sequence[ChatMessage]) -> Flow[None]:
        if not messages:
            return
        yield from self._write(lambda view: self._plan_add(view, messages))

    def preview(self, messages: Sequence[ChatMessage]) -> Flow[list[ChatMessage]]:
        """The window `add(messages)` would leave, without writing: what a model call in the
        middle of a turn sees before the turn is committed."""
        view = yield from self._load()
        changes = self._plan_add(view, messages)
        if changes is None:
            return [e.message for e in self._fit(view).kept]
        fitted, _ = self._fit_plan(view, changes, self.budget.capacity(self.memory_id))
        return [e.message for e in fitted.kept]

    def _plan_add(self, view: _View | None, messages: Sequence[ChatMessage]) -> _Plan | None:
        """`messages` placed after the view's entries (a system message replaces the old one)."""
        entries = view.entries if view is not None else []
        added: list[_Entry] = []
        for message in messages:
            new = _Entry(message, self.budget.size(message))
            placed = place(entries, new, system_first=self.system_first)
            if placed is not None:
                entries = placed
                added.append(new)
        if not added:
            return None  # only a repeat of the system message
        if view is None or any(isinstance(e.message, SystemMessage) for e in added):
            return _Plan(entries, added)  # a system message may have replaced another
        total = view.total + sum(e.size for e in added)
        tools = view.tools or any(has_tool_traffic(e.message) for e in added)
        return _Plan(entries, added, total, tools, appended=True)

    def set(self, messages: Sequence[ChatMessage]) -> Flow[None]:
        def plan(view: _View | None) -> _Plan:
            rows = view.snapshot.rows if view is not None else ()
            given: list[_Entry] = []
            added: list[_Entry] = []
            for message, previous in zip(messages, plan_replace(rows, messages), strict=True):
                entry = _Entry(message, self.budget.size(message), previous)
                given.append(entry)
                if previous is None:
                    added.append(entry)
            return _Plan(arrange(given, system_first=self.system_first), added)

        yield from self._write(plan, read=False)

    def clear(self) -> Flow[None]:
        self._view = None
        yield from call(ChatMemoryStore.delete_messages, self.memory_id)

    # -- steps -------------------------------------------------------------------------------

    def _write(
        self, plan: Callable[[_View | None], _Plan | None], *, read: bool = True
    ) -> Flow[None]:
        """Plan on the window and commit, in the optimistic loop of `_flow`.

        The first attempt plans on the kept view without asking the store (the versioned
        commit is the check: a stale view makes it fail, and the next attempt reads), so an
        `add` costs one commit when nobody else wrote. A plan with nothing to write is trusted
        only on a checked view. A basic whole-list store is read only when `read` (`set`
        replaces its list without looking).
        """
        checked = not self.windowed or self._view is None  # a first read is a check

        def attempt() -> Flow[bool]:
            nonlocal checked
            while True:
                view = (yield from self._load(check=checked)) if self.windowed or read else None
                changes = plan(view)
                done = None if changes is None else (yield from self._commit(view, changes))
                if done is None and not checked:
                    checked = True  # nothing to write on the kept view: make sure on a read
                    continue
                checked = True  # a retry reads
                return done is not False

        yield from optimistic(attempt, store=self.store, memory_id=self.memory_id)

    def _load(self, *, check: bool = True) -> Flow[_View]:
        """The store's window: the kept view when the store says it has not changed, or
        without asking at all when not `check` (see `_write`)."""
        if not self.windowed:
            stored = yield from call(ChatMemoryStore.get_messages, self.memory_id)
            rows = [StoredMessage(i, m) for i, m in enumerate(check_messages(stored, "the store"))]
            return self._new_view(WindowSnapshot(-1, tuple(rows)))
        if self._view is not None and not check:
            return self._view
        since = self._view.snapshot if self._view is not None else None
        snapshot = yield from call(WindowStore.load_window, self.memory_id, since=since)
        if self._view is None or snapshot is not since:
            self._view = self._new_view(snapshot)
        return self._view

    def _new_view(self, snapshot: WindowSnapshot) -> _View:
        row_size = self.budget.row_size
        entries = [_Entry(row.message, row_size(row), row) for row in snapshot.rows]
        entries = arrange(entries, system_first=self.system_first)
        total = self.budget.overhead + sum(e.size for e in entries)
        tools = any(has_tool_traffic(e.message) for e in entries)
        return _View(snapshot, entries, total, tools)

    def _fit(self, view: _View) -> Fitted[_Entry]:
        capacity = self.budget.capacity(self.memory_id)
        if view.fitted is None or view.fitted[0] != capacity:
            fitted = fit(view.entries, _size, capacity=capacity, total=view.total, tools=view.tools)
            view.fitted = (capacity, fitted)
        return view.fitted[1]

    def _commit(self, view: _View | None, plan: _Plan) -> Flow[bool | None]:
        """Commit the plan's entries fitted to the budget: True, False when another writer
        won, None when there was nothing to write."""
        added, tools = plan.added, plan.tools
        capacity = self.budget.capacity(self.memory_id)
        fitted, appended = self._fit_plan(view, plan, capacity)
        if appended:
            # a clean view's entries are its snapshot's rows: only the evicted ones leave
            evict = [e.row.seq for e in fitted.evicted if e.row is not None]
        elif view is not None and self.windowed:
            kept_rows = {id(e.row) for e in fitted.kept if e.row is not None}
            evict = [row.seq for row in view.snapshot.rows if id(row) not in kept_rows]
        if view is None or not self.windowed:
            messages = [e.message for e in fitted.kept]
            yield from call(ChatMemoryStore.update_messages, self.memory_id, messages)
            return True
        evicted_new = {id(e) for e in fitted.evicted if e.row is None}
        counted_by = self.budget.counted_by
        append = [
            NewMessage(
                e.message,
                in_window=id(e) not in evicted_new,
                token_count=e.size if counted_by else None,
                counted_by=counted_by,
            )
            for e in added
        ]
        if not append and not evict:
            return None  # `set` to what the store holds already
        committed = yield from call(
            WindowStore.commit_window,
            self.memory_id,
            version=view.snapshot.version,
            append=append,
            evict=evict,
        )
        if committed is None:
            return False  # another writer won; `_load` sees its window on the next attempt
        self._view = self._after(view, fitted, added, append, evict, committed, capacity, tools)
        return True

    def _fit_plan(
        self, view: _View | None, plan: _Plan, capacity: int
    ) -> tuple[Fitted[_Entry], bool]:
        """The plan's entries fitted to `capacity`, and whether that took the appended-only
        shortcut (O(added + evicted) on a clean view)."""
        total = plan.total
        if total is None:
            total = self.budget.overhead + sum(e.size for e in plan.entries)
        if plan.appended and view is not None and view.clean:
            fitted = fit_appended(view.entries, plan.added, _size, capacity=capacity, total=total)
            if fitted is not None:
                return fitted, True
        return fit(plan.entries, _size, capacity=capacity, total=total, tools=plan.tools), False

    def _after(
        self,
        view: _View,
        fitted: Fitted[_Entry],
        added: list[_Entry],
        append: list[NewMessage],
        evict: list[int],
        committed: Committed,
        capacity: int,
        tools: bool | None,
    ) -> _View:
        """The view of the window this commit made, built without reading it back: the rows
        that stayed (evictions are mostly at the head: a slice) and the new ones."""
        rows = view.snapshot.rows
        if evict:
            # every evicted seq is one of `rows`: look only as far as the last of them (the
            # head of the window, past a pinned system message), and slice the rest
            gone = set(evict)
            found = end = 0
            while found < len(gone) and end < len(rows):
                found += rows[end].seq in gone
                end += 1
            if found == end:
                rows = rows[end:]
            else:
                rows = (*(row for row in rows[:end] if row.seq not in gone), *rows[end:])
        new_rows = []
        for offset, (entry, new) in enumerate(zip(added, append, strict=True)):
            if new.in_window:
                entry.row = StoredMessage(
                    committed.first_seq + offset, new.message, new.token_count, new.counted_by
                )
                new_rows.append(entry.row)
        snapshot = WindowSnapshot(committed.version, (*rows, *new_rows), stamp=committed.stamp)
        kept = fitted.kept
        if tools is None:
            tools = any(has_tool_traffic(e.message) for e in kept)
        done = (capacity, Fitted(kept, [], fitted.total))
        return _View(snapshot, kept, fitted.total, tools, done, clean=True)
