"""Stores that keep everything in this process's memory."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal

from .._errors import ConfigurationError
from ._protocol import HistoryEntry, NewMessage, StoredMessage, WindowSnapshot, check_memory_id
from ._seed import AsyncSeedContract, SeedContract

__all__ = ["AsyncInMemoryChatMemoryStore", "InMemoryChatMemoryStore"]


@dataclass(slots=True)
class _Log:
    version: int = 0
    next_seq: int = 0
    window: dict[int, StoredMessage] = field(default_factory=dict)
    history: list[tuple[StoredMessage, datetime]] | None = None


class InMemoryChatMemoryStore(SeedContract):
    """Many memory ids in a dict, safe to share between threads; gone when the process ends.

    It never hands out or keeps a list it does not own. With `keep_history=False` it holds only
    the windows (bounded memory for long conversations); `history()` then returns the window.
    """

    def __init__(self, *, keep_history: bool = True) -> None:
        self._keep_history = keep_history
        self._logs: dict[str, _Log] = {}
        self._lock = threading.Lock()

    def _check(self, memory_id: str) -> None:
        check_memory_id(memory_id)

    def load_window(self, memory_id: str) -> WindowSnapshot:
        self._check(memory_id)
        with self._lock:
            log = self._logs.get(memory_id)
            if log is None:
                return WindowSnapshot(0, ())
            return WindowSnapshot(log.version, tuple(log.window.values()))

    def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> bool:
        self._check(memory_id)
        now = datetime.now(timezone.utc)
        with self._lock:
            log = self._logs.get(memory_id) or _Log(history=[] if self._keep_history else None)
            if log.version != version:
                return False
            for seq in evict:
                log.window.pop(seq, None)
            for new in append:
                row = StoredMessage(log.next_seq, new.message, new.token_count, new.counted_by)
                log.next_seq += 1
                if new.in_window:
                    log.window[row.seq] = row
                if log.history is not None:
                    log.history.append((row, now))
            log.version += 1
            self._logs[memory_id] = log
            return True

    def delete_messages(self, memory_id: str) -> None:
        self._check(memory_id)
        with self._lock:
            self._logs.pop(memory_id, None)

    def history(
        self, memory_id: str, *, errors: Literal["raise", "skip"] = "raise"
    ) -> list[HistoryEntry]:
        """Everything added to `memory_id`; rows here are always readable, so `errors` is moot."""
        self._check(memory_id)
        with self._lock:
            log = self._logs.get(memory_id)
            if log is None:
                return []
            if log.history is None:
                return [
                    HistoryEntry(row.seq, row.message, datetime.now(timezone.utc), True)
                    for row in log.window.values()
                ]
            return [
                HistoryEntry(row.seq, row.message, at, row.seq in log.window)
                for row, at in log.history
            ]

    def memory_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._logs)

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


class AsyncInMemoryChatMemoryStore(AsyncSeedContract):
    """`InMemoryChatMemoryStore` for asyncio memories. Its calls do no I/O and never block."""

    def __init__(self, *, keep_history: bool = True, store: InMemoryChatMemoryStore | None = None):
        self.sync = (
            store if store is not None else InMemoryChatMemoryStore(keep_history=keep_history)
        )
        """The sync store holding the data (share it to see the same memories from sync code)."""

    async def load_window(self, memory_id: str) -> WindowSnapshot:
        return self.sync.load_window(memory_id)

    async def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> bool:
        return self.sync.commit_window(memory_id, version=version, append=append, evict=evict)

    async def delete_messages(self, memory_id: str) -> None:
        self.sync.delete_messages(memory_id)

    async def history(
        self, memory_id: str, *, errors: Literal["raise", "skip"] = "raise"
    ) -> list[HistoryEntry]:
        return self.sync.history(memory_id, errors=errors)

    async def memory_ids(self) -> list[str]:
        return self.sync.memory_ids()

    async def aclose(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return f"AsyncInMemoryChatMemoryStore({self.sync!r})"
