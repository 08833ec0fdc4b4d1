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
    tools: int
    """How many entries are tool calls or results (then fitting looks at tool groups)."""
    fitted: tuple[int, list[_Entry]] | None = field(default=None)
    """The entries the last `fit` of `entries` kept, with the capacity it was made for."""
    listed: list[ChatMessage] | None = None
    """The messages of those entries, once asked for (callers get copies)."""
    clean: bool = False
    """True when `entries` are a window `fit` returned, exactly the snapshot's rows."""


@dataclass(slots=True)
class _Plan:
    """What a write wants the window to be: arranged entries, the new ones among them, and
    their total and tool flag when the writer kept them (else they are computed)."""

    entries: list[_Entry] | None
    """None when the plan only appends `added` to the view's entries."""
    added: list[_Entry]
    total: int | None = None
    tools: int | None = None
    """How many of the entries are tool calls or results."""


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
        self.last_evicted = 0
        """How many messages the last write took out of the window (or never let in)."""
        self.last_size: int | None = None
        """What the window the last preview returned weighs by the budget, overhead included."""

    # -- flows -------------------------------------------------------------------------------

    def messages(self) -> Flow[list[ChatMessage]]:
        view = yield from self._load()
        return list(self._fit(view))

    def add(self, messages: Sequence[ChatMessage]) -> Flow[None]:
        if not messages:
            return
        yield from self._write(lambda view: self._plan_add(view, messages))

    def preview(
        self, messages: Sequence[ChatMessage], *, reread: bool = True
    ) -> Flow[list[ChatMessage]]:
        """The window `add(messages)` would leave, without writing: what a model call in the
        middle of a turn sees before the turn is committed. Without `reread` the window last
        read is used as it is (no store call), when there is one."""
        kept = self._view if not reread and self.windowed else None
        view = kept if kept is not None else (yield from self._load())
        changes = self._plan_add(view, messages)
        if changes is None:
            window = self._fit(view)
            self.last_size = self.budget.overhead + sum(map(self.budget.size, window))
            return list(window)
        fitted, _ = self._fit_plan(view, changes, self.budget.capacity(self.memory_id))
        self.last_size = fitted.total
        return [e.message for e in fitted.kept]

    def _plan_add(self, view: _View | None, messages: Sequence[ChatMessage]) -> _Plan | None:
        """`messages` placed after the view's entries (a system message replaces the old one).

        Plain messages are only appended: the entries are listed (a copy of the window) only
        when a system message has to be placed, or when fitting needs them (`_fit_plan`).
        """
        size = self.budget.size
        base = view.entries if view is not None else []
        entries: list[_Entry] | None = None if view is not None else []
        added: list[_Entry] = []
        for message in messages:
            new = _Entry(message, size(message))
            if isinstance(message, SystemMessage):
                current = entries if entries is not None else [*base, *added]
                placed = place(current, new, system_first=self.system_first)
                if placed is None:
                    continue  # a repeat of the system message
                entries = placed
            elif entries is not None:
                entries.append(new)
            added.append(new)
        if not added:
            return None
        if entries is not None:  # no view, or a system message may have replaced another
            return _Plan(entries, added)
        assert view is not None
        total = view.total
        tools = view.tools
        for entry in added:
            total += entry.size
            tools += has_tool_traffic(entry.message)
        return _Plan(None, added, total, tools)

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
                if not checked:
                    view: _View | None = self._view  # windowed, kept: see above
                elif self.windowed or read:
                    view = yield from self._load()
                else:
                    view = None
                changes = plan(view)
                done = None if changes is None else (yield from self._commit(view, changes))
                if done is None and not checked:
                    checked = True  # nothing to write on the kept view: make sure on a read
                    continue
                checked = True  # a retry reads
                return done is not False

        yield from optimistic(attempt, store=self.store, memory_id=self.memory_id)

    def _load(self) -> Flow[_View]:
        """The store's window: the kept view when the store says it has not changed."""
        if not self.windowed:
            stored = yield from call(ChatMemoryStore.get_messages, self.memory_id)
            rows = [StoredMessage(i, m) for i, m in enumerate(check_messages(stored, "the store"))]
            return self._new_view(WindowSnapshot(-1, tuple(rows)))
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
        tools = sum(has_tool_traffic(e.message) for e in entries)
        return _View(snapshot, entries, total, tools)

    def _fit(self, view: _View) -> list[ChatMessage]:
        """The messages of the view fitted to the current capacity (kept: callers copy)."""
        capacity = self.budget.capacity(self.memory_id)
        if view.fitted is None or view.fitted[0] != capacity:
            kept = fit(
                view.entries, _size, capacity=capacity, total=view.total, tools=view.tools > 0
            ).kept
            view.fitted, view.listed = (capacity, kept), None
        if view.listed is None:
            view.listed = [e.message for e in view.fitted[1]]
        return view.listed

    def _commit(self, view: _View | None, plan: _Plan) -> Flow[bool | None]:
        """Commit the plan's entries fitted to the budget: True, False when another writer
        won, None when there was nothing to write."""
        added = plan.added
        capacity = self.budget.capacity(self.memory_id)
        fitted, appended = self._fit_plan(view, plan, capacity)
        if view is None or not self.windowed:
            messages = [e.message for e in fitted.kept]
            yield from call(ChatMemoryStore.update_messages, self.memory_id, messages)
            self.last_evicted = len(fitted.evicted)
            return True
        if appended:
            # a clean view's entries are its snapshot's rows: only the evicted ones leave
            evict = [e.row.seq for e in fitted.evicted if e.row is not None]
        else:
            kept_rows = {id(e.row) for e in fitted.kept if e.row is not None}
            evict = [row.seq for row in view.snapshot.rows if id(row) not in kept_rows]
        # new messages evicted at once (larger than the budget) are stored as history only
        evicted_new = {id(e) for e in fitted.evicted if e.row is None} if fitted.evicted else ()
        counted_by = self.budget.counted_by
        append = [
            NewMessage(
                e.message, id(e) not in evicted_new, e.size if counted_by else None, counted_by
            )
            for e in added
        ]
        self.last_evicted = len(evict) + len(evicted_new)
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
        self._view = self._after(view, fitted, added, append, evict, committed, capacity, plan)
        return True

    def _fit_plan(
        self, view: _View | None, plan: _Plan, capacity: int
    ) -> tuple[Fitted[_Entry], bool]:
        """The plan's entries fitted to `capacity`, and whether that took the appended-only
        shortcut (O(added + evicted) on a clean view)."""
        entries = plan.entries
        if entries is None:  # appended to the view
            assert view is not None
            assert plan.total is not None
            if view.clean:
                fitted = fit_appended(
                    view.entries,
                    plan.added,
                    _size,
                    capacity=capacity,
                    total=plan.total,
                    tools=plan.tools != 0,
                )
                if fitted is not None:
                    return fitted, True
            entries = [*view.entries, *plan.added]
        total = plan.total
        if total is None:
            total = self.budget.overhead + sum(e.size for e in entries)
        tools = None if plan.tools is None else plan.tools > 0
        return fit(entries, _size, capacity=capacity, total=total, tools=tools), False

    def _after(
        self,
        view: _View,
        fitted: Fitted[_Entry],
        added: list[_Entry],
        append: list[NewMessage],
        evict: list[int],
        committed: Committed,
        capacity: int,
        plan: _Plan,
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
        snapshot = WindowSnapshot(
            committed.version, (*rows, *new_rows), stamp=committed.stamp, life=committed.life
        )
        kept = fitted.kept
        if plan.tools is None:
            tools = sum(has_tool_traffic(e.message) for e in kept)
        else:  # the plan's entries are the kept and the evicted ones
            tools = plan.tools
            if tools:
                tools -= sum(has_tool_traffic(e.message) for e in fitted.evicted)
        return _View(snapshot, kept, fitted.total, tools, (capacity, kept), clean=True)
