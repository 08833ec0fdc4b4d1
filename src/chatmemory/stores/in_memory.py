"""Stores that keep everything in this process's memory."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .._contracts import (
    AsyncHistoryStore,
    AsyncWindowStore,
    Committed,
    Errors,
    HistoryEntry,
    HistoryStore,
    MemorySummary,
    NewMessage,
    StoredMessage,
    WindowSnapshot,
    WindowStore,
    check_errors,
    check_memory_id,
    check_seqs,
)
from .._errors import ConfigurationError
from ._basic import AsyncBasicContract, BasicContract

__all__ = ["AsyncInMemoryChatMemoryStore", "InMemoryChatMemoryStore"]


@dataclass(slots=True)
class _Log:
    version: int = 0
    next_seq: int = 0
    window: dict[int, StoredMessage] = field(default_factory=dict)
    history: list[tuple[StoredMessage, datetime]] | None = None
    updated_at: datetime | None = None
    snapshot: WindowSnapshot | None = None
    """The window at `version`, made on the first read after a commit."""
    life: str = ""
    """The version of the commit that created the id this time (see `WindowSnapshot.life`)."""


class InMemoryChatMemoryStore(BasicContract, WindowStore, HistoryStore):
    """Many memory ids in a dict, safe to share between threads; gone when the process ends.

    It never hands out or keeps a list it does not own. With `keep_history=False` it holds only
    the windows (bounded memory for long conversations); `history()` then returns the window.
    """

    def __init__(self, *, keep_history: bool = True) -> None:
        self._keep_history = keep_history
        self._logs: dict[str, _Log] = {}
        self._lock = threading.Lock()
        # Versions come from one counter for the whole store, so a memory id deleted and added
        # again never returns to a version an earlier reader saw (no ABA on `since`).
        self._versions = itertools.count(1)

    def _check(self, memory_id: str) -> None:
        check_memory_id(memory_id)

    def load_window(
        self, memory_id: str, *, since: WindowSnapshot | None = None, errors: Errors = "raise"
    ) -> WindowSnapshot:
        """The window; `since` itself when unchanged (rows here are always readable)."""
        self._check(memory_id)
        check_errors(errors)
        with self._lock:
            log = self._logs.get(memory_id)
            if log is None:
                return since if since is not None and since.version == 0 else WindowSnapshot(0, ())
            if since is not None and since.version == log.version:
                return since
            if log.snapshot is None:
                log.snapshot = WindowSnapshot(
                    log.version, tuple(log.window.values()), life=log.life
                )
            return log.snapshot

    def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> Committed | None:
        self._check(memory_id)
        now = datetime.now(timezone.utc)
        with self._lock:
            log = self._logs.get(memory_id) or _Log(history=[] if self._keep_history else None)
            if log.version != version:
                return None
            first_seq = log.next_seq
            for seq in evict:
                log.window.pop(seq, None)
            for new in append:
                row = StoredMessage(log.next_seq, new.message, new.token_count, new.counted_by)
                log.next_seq += 1
                if new.in_window:
                    log.window[row.seq] = row
                if log.history is not None:
                    log.history.append((row, now))
            log.version = next(self._versions)
            log.life = log.life or str(log.version)
            log.updated_at = now
            log.snapshot = None
            self._logs[memory_id] = log
            return Committed(log.version, first_seq, life=log.life)

    def delete_messages(self, memory_id: str) -> None:
        self._check(memory_id)
        with self._lock:
            self._logs.pop(memory_id, None)

    def history(
        self, memory_id: str, *, errors: Errors = "raise", seqs: Iterable[int] | None = None
    ) -> list[HistoryEntry]:
        """Everything added to `memory_id` (or the rows numbered `seqs`, each found by its
        number); rows here are always readable, so `errors` is moot."""
        self._check(memory_id)
        check_errors(errors)
        wanted = check_seqs(seqs)
        with self._lock:
            log = self._logs.get(memory_id)
            if log is None:
                return []
            if log.history is None:
                window = log.window
                rows = (
                    window.values()
                    if wanted is None
                    else [window[s] for s in wanted if s in window]
                )
                now = datetime.now(timezone.utc)
                return [HistoryEntry(row.seq, row.message, now, True) for row in rows]
            # a row's place in the history is its seq: both count every message added
            history = log.history
            kept = history if wanted is None else [history[s] for s in wanted if s < len(history)]
            return [
                HistoryEntry(row.seq, row.message, at, row.seq in log.window) for row, at in kept
            ]

    def memory_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._logs)

    def summaries(self) -> list[MemorySummary]:
        with self._lock:
            return [
                MemorySummary(
                    memory_id,
                    log.next_seq if log.history is not None else len(log.window),
                    len(log.window),
                    log.updated_at,
                )
                for memory_id, log in sorted(self._logs.items())
            ]

    def close(self) -> None:
        """Nothing to release; here so every store can be closed the same way."""

    def __repr__(self) -> str:
        return f"InMemoryChatMemoryStore(memory_ids={len(self._logs)})"


class SingleMemoryStore(InMemoryChatMemoryStore):
    """The private default store of a memory: one memory id, the window only."""

    def __init__(self, memory_id: str) -> None:
        super().__init__(keep_history=False)
        self._memory_id = memory_id

    def _check(self, memory_id: str) -> None:
        if memory_id != self._memory_id:
            raise ConfigurationError(
                f"this memory's private store holds memory id {self._memory_id!r} only, "
                f"not {memory_id!r}; pass a shared store (e.g. InMemoryChatMemoryStore()) "
                f"to use several ids"
            )


class AsyncInMemoryChatMemoryStore(AsyncBasicContract, AsyncWindowStore, AsyncHistoryStore):
    """`InMemoryChatMemoryStore` for asyncio memories. Its calls do no I/O and never block."""

    def __init__(self, *, keep_history: bool = True, store: InMemoryChatMemoryStore | None = None):
        self.sync = (
            store if store is not None else InMemoryChatMemoryStore(keep_history=keep_history)
        )
        """The sync store holding the data (share it to see the same memories from sync code)."""

    async def load_window(
        self, memory_id: str, *, since: WindowSnapshot | None = None, errors: Errors = "raise"
    ) -> WindowSnapshot:
        return self.sync.load_window(memory_id, since=since, errors=errors)

    async def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> Committed | None:
        return self.sync.commit_window(memory_id, version=version, append=append, evict=evict)

    async def delete_messages(self, memory_id: str) -> None:
        self.sync.delete_messages(memory_id)

    async def history(
        self, memory_id: str, *, errors: Errors = "raise", seqs: Iterable[int] | None = None
    ) -> list[HistoryEntry]:
        return self.sync.history(memory_id, errors=errors, seqs=seqs)

    async def memory_ids(self) -> list[str]:
        return self.sync.memory_ids()

    async def summaries(self) -> list[MemorySummary]:
        return self.sync.summaries()

    async def aclose(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return f"AsyncInMemoryChatMemoryStore({self.sync!r})"
