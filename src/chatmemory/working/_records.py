"""Where working memory lives: a versioned record per key, changed only by compare-and-set, so
concurrent updates for one user serialize (the loser reloads, re-applies its patch, retries)
and nothing is lost.

`RecordStore` is the contract; in-memory and SQLite stores are here, Redis and PostgreSQL in
their own modules (their drivers are optional extras).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .._errors import ConcurrentUpdateError, ConfigurationError, StoreError
from .._sqlite import forgetting, scrub

__all__ = [
    "InMemoryRecordStore",
    "Record",
    "RecordStore",
    "SqliteRecordStore",
    "check_key",
    "conflict",
    "failures",
]


@dataclass(frozen=True, slots=True)
class Record:
    """A stored record: its text and version (1 after the first save, +1 per save)."""

    text: str
    version: int


@runtime_checkable
class RecordStore(Protocol):
    """Versioned text records by key."""

    def load(self, key: str) -> Record | None:
        """The record under `key`, or None."""
        ...

    def save(self, key: str, text: str, *, expected: int) -> int:
        """Store `text` under `key` if its version is still `expected` (0: no record yet) and
        return the new version; `ConcurrentUpdateError` when another writer got there first."""
        ...

    def delete(self, key: str) -> bool:
        """Remove the record; whether there was one."""
        ...


def check_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise ConfigurationError(
            f"a working-memory key (user or memory id) is a non-empty str, got {key!r}"
        )
    return key


@contextmanager
def failures(
    store: object, errors: tuple[type[Exception], ...], doing: str, key: str
) -> Iterator[None]:
    """The driver's `errors` raised inside become `StoreError`s saying what failed."""
    try:
        yield
    except errors as error:
        raise StoreError(
            f"cannot {doing} the working memory of {key!r}: {error}", store=store
        ) from error


def conflict(store: object, key: str, expected: int) -> ConcurrentUpdateError:
    return ConcurrentUpdateError(
        f"the working memory of {key!r} changed since version {expected} was read",
        store=store,
        memory_id=key,
    )


class InMemoryRecordStore:
    """Records in this process's memory (tests, single-process apps)."""

    def __init__(self) -> None:
        self._records: dict[str, Record] = {}
        self._lock = threading.Lock()

    def load(self, key: str) -> Record | None:
        return self._records.get(check_key(key))

    def save(self, key: str, text: str, *, expected: int) -> int:
        check_key(key)
        with self._lock:
            current = self._records.get(key)
            if (current.version if current else 0) != expected:
                raise conflict(self, key, expected)
            self._records[key] = Record(text, expected + 1)
            return expected + 1

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._records.pop(check_key(key), None) is not None


class SqliteRecordStore:
    """Records in a SQLite file (it may be the chat-memory file: the table is its own,
    ``chatmemory_working_memory``). Safe across threads and processes. A record deleted or
    replaced is overwritten in the file (``secure_delete``; `scrub()` empties the ``-wal``)."""

    _CREATE = (
        "CREATE TABLE IF NOT EXISTS chatmemory_working_memory ("
        "key TEXT PRIMARY KEY, text TEXT NOT NULL, version INTEGER NOT NULL, "
        "updated_at REAL NOT NULL)"
    )

    def __init__(self, path: str | os.PathLike[str] = ":memory:", *, timeout: float = 30.0) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        try:
            self._connection = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            if self.path != ":memory:":
                self._connection.execute("PRAGMA journal_mode=WAL")
            forgetting(self._connection)
            self._connection.execute(self._CREATE)
        except sqlite3.Error as error:
            raise StoreError(f"cannot open {self.path!r}: {error}", store=self) from error

    def __repr__(self) -> str:
        return f"SqliteRecordStore({self.path!r})"

    def load(self, key: str) -> Record | None:
        check_key(key)
        with self._lock:
            row = self._connection.execute(
                "SELECT text, version FROM chatmemory_working_memory WHERE key = ?", (key,)
            ).fetchone()
        return Record(row[0], row[1]) if row else None

    def save(self, key: str, text: str, *, expected: int) -> int:
        check_key(key)
        now = time.time()
        with self._lock:
            if expected == 0:
                cursor = self._connection.execute(
                    "INSERT INTO chatmemory_working_memory VALUES (?, ?, 1, ?) "
                    "ON CONFLICT(key) DO NOTHING",
                    (key, text, now),
                )
            else:
                cursor = self._connection.execute(
                    "UPDATE chatmemory_working_memory SET text = ?, version = version + 1, "
                    "updated_at = ? WHERE key = ? AND version = ?",
                    (text, now, key, expected),
                )
        if cursor.rowcount != 1:
            raise conflict(self, key, expected)
        return expected + 1

    def delete(self, key: str) -> bool:
        check_key(key)
        with self._lock:
            cursor = self._connection.execute(
                "DELETE FROM chatmemory_working_memory WHERE key = ?", (key,)
            )
        return cursor.rowcount > 0

    def scrub(self) -> bool:
        """Empty the ``-wal`` file into the database, so no copy of a deleted or replaced
        record is left there (``secure_delete`` zeroes them in the database); False when
        another connection's read kept the log from being emptied."""
        try:
            with self._lock:
                return scrub(self._connection)
        except sqlite3.Error as error:
            message = f"cannot empty the -wal file of {self.path!r}: {error}"
            raise StoreError(message, store=self) from error

    def close(self) -> None:
        self._connection.close()
