"""SQLite stores: the embedded default. One file, shared by threads and by processes."""

from __future__ import annotations

import asyncio
import json
import math
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from .._codec.langchain4j import message_to_json
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
    life_of,
)
from .._errors import ConfigurationError, SerializationError, StoreError
from .._sqlite import forgetting, scrub
from ._basic import AsyncBasicContract, BasicContract
from ._rows import MessageReader
from ._sqlite_schema import (
    LOST_RACE,
    UPGRADE,
    Transaction,
    migrate,
    now_micros,
    pending,
    read_time,
)

__all__ = ["AsyncSqliteChatMemoryStore", "SqliteChatMemoryStore"]

T = TypeVar("T")

# A new memory's version, and every bump, is at least the current time in microseconds: so a
# memory id deleted and created again never returns to a version an earlier reader saw.
_CREATE = """
    INSERT INTO chatmemory_memories (memory_id, version, next_seq, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?) ON CONFLICT (memory_id) DO NOTHING
    RETURNING memory_key, version, created_at, updated_at
"""
_BUMP = """
    UPDATE chatmemory_memories
    SET version = max(version + 1, ?2), next_seq = next_seq + ?3, updated_at = max(updated_at, ?2)
    WHERE memory_id = ?1 AND version = ?4
    RETURNING memory_key, version, created_at, next_seq - ?3, updated_at
"""
_EVICT = "DELETE FROM chatmemory_window WHERE memory_key = ? AND seq = ?"
_APPEND = """
    INSERT INTO chatmemory_messages (memory_key, seq, created_at, message) VALUES (?, ?, ?, ?)
"""
_ENTER_WINDOW = """
    INSERT INTO chatmemory_window (memory_key, seq, token_count, counted_by) VALUES (?, ?, ?, ?)
"""
_VERSION = (
    "SELECT version, created_at, memory_key, next_seq FROM chatmemory_memories WHERE memory_id = ?"
)
_COMMIT_ONE = """
    INSERT INTO chatmemory_commit (memory_key, memory_id, version, now, seq, evict, message,
        in_window, token_count, counted_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_KEPT = 1024
"""Memory ids whose key and counters a store keeps for one-statement commits (then it starts
over)."""
# One statement is one consistent read: the version and the rows of the same snapshot. The
# window's primary key gives the rows in seq order (no sort); messages are read only for rows
# numbered after `?1` (those the caller does not hold yet).
_WINDOW = """
    SELECT mem.version, mem.created_at, w.seq, m.message, w.token_count, w.counted_by,
        mem.memory_key, mem.next_seq
    FROM chatmemory_memories AS mem
    LEFT JOIN chatmemory_window AS w ON w.memory_key = mem.memory_key
    LEFT JOIN chatmemory_messages AS m ON m.memory_key = w.memory_key AND m.seq = w.seq
        AND w.seq > ?1
    WHERE mem.memory_id = ?2
    ORDER BY w.seq
"""
_HISTORY = """
    SELECT m.seq, m.message, m.created_at, w.seq IS NOT NULL
    FROM chatmemory_memories AS mem
    JOIN chatmemory_messages AS m ON m.memory_key = mem.memory_key
    LEFT JOIN chatmemory_window AS w ON w.memory_key = m.memory_key AND w.seq = m.seq
    WHERE mem.memory_id = ?1 {only}
    ORDER BY m.seq
"""
_WHOLE_HISTORY = _HISTORY.format(only="")
# The seqs asked for, as one JSON array: each is found by the primary keys (memory_key, seq) of
# the messages and the window, so the read costs what the rows asked for cost, however long
# the history.
_SOME_HISTORY = _HISTORY.format(only="AND m.seq IN (SELECT value FROM json_each(?2))")
_KEY = "SELECT memory_key FROM chatmemory_memories WHERE memory_id = ?"
_FORGET = (
    "DELETE FROM chatmemory_window WHERE memory_key = ?",
    "DELETE FROM chatmemory_messages WHERE memory_key = ?",
    "DELETE FROM chatmemory_memories WHERE memory_key = ?",
)
_MEMORY_IDS = "SELECT memory_id FROM chatmemory_memories ORDER BY memory_id"
_SUMMARIES = """
    SELECT mem.memory_id,
        (SELECT count(*) FROM chatmemory_messages AS m WHERE m.memory_key = mem.memory_key),
        (SELECT count(*) FROM chatmemory_window AS w WHERE w.memory_key = mem.memory_key),
        mem.updated_at
    FROM chatmemory_memories AS mem ORDER BY mem.memory_id
"""


def _same_life(since: WindowSnapshot | None, born: object) -> bool:
    """Whether `since` was read from the memory id created at `born`: rows of an earlier life
    (deleted and created again since, its seqs starting over) cannot be reused."""
    stamp = since.stamp if since is not None else None
    return isinstance(stamp, tuple) and stamp[2] == born


def _updated(micros: object) -> datetime | None:
    if type(micros) is not int:
        return None
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=micros)


def _check_path(path: object) -> str:
    name = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(name, str):
        raise ConfigurationError(
            f"`path` must be a str or os.PathLike naming the database file (or ':memory:'), "
            f"got {path!r}"
        )
    return name


def _check_timeout(timeout: object) -> float:
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not math.isfinite(timeout)
        or timeout < 0
    ):
        raise ConfigurationError(
            f"`timeout` must be a number of seconds, zero or more, got {timeout!r}"
        )
    return float(timeout)


def _retry_while_locked(attempt: Callable[[], T], timeout: float) -> T:
    """`attempt()`, tried again while it fails with "database is locked", for up to `timeout` s.

    For the statements where SQLite answers "locked" at once instead of waiting out the busy
    timeout: switching a fresh file to WAL while another process does the same is one.
    """
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            return attempt()
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _hint(error: sqlite3.Error, timeout: float) -> str:
    text = str(error).lower()
    if "locked" in text or "busy" in text:
        return (
            f"Another connection held the lock for longer than timeout={timeout:g} s: raise "
            f"`timeout`, or keep the other connection's transactions short"
        )
    if "unable to open" in text or "readonly" in text or "read-only" in text:
        return "Check that the directory exists and that this process may write to it and the file"
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return "The file is not a SQLite database or is damaged: restore it from a backup"
    if "disk" in text or "full" in text:
        return "Check the disk: it may be full, unplugged or failing"
    return "See the SQLite error this one was raised from"


class _Using:
    """`SqliteChatMemoryStore._using`: a class, not a generator, since it wraps every read and
    commit, where a generator's frames cost more than the store's own Python."""

    __slots__ = ("_action", "_memory_id", "_store")

    def __init__(self, store: SqliteChatMemoryStore, action: str, memory_id: str | None) -> None:
        self._store = store
        self._action = action
        self._memory_id = memory_id

    def __enter__(self) -> sqlite3.Connection:
        store = self._store
        store._lock.acquire()
        try:
            return store._connection_for(self._action, self._memory_id)
        except BaseException:
            store._lock.release()
            raise

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _: object
    ) -> None:
        store = self._store
        store._lock.release()
        if isinstance(error, sqlite3.Error):
            raise store._failure(self._action, error, self._memory_id) from error


class SqliteChatMemoryStore(BasicContract, WindowStore, HistoryStore):
    """Memories in a SQLite file: the history of every memory id, kept until deleted.

    Every message is one row, kept as history; the window is the part not yet evicted. Adding a
    message writes that row and marks the rows that leave the window, so it costs the same after
    100 messages as after 100,000, and each commit is checked against the memory's version:
    concurrent writers, threads or processes, never lose each other's messages. Stored rows
    never change, so the store keeps the last 2,048 messages it decoded (those under 16 KiB):
    reading a window again decodes only its new rows.

    `path` is the database file, created if missing (its directory must exist), or
    ``":memory:"`` (the default) for a database that lives as long as this store object.
    `timeout` is how long, in seconds, to wait for a lock another connection holds before
    raising `StoreError` (SQLite's ``busy_timeout``). With ``read_only=True`` the file is opened
    for reading and changed in no way (no tables created, no journal mode switched): for
    inspecting another application's file; a file without chatmemory tables then raises
    `StoreError` ("no chatmemory data"), and so does every write. With ``create=False`` the
    store writes, but only to a chatmemory database that is already there (upgrading it if an
    older chatmemory wrote it): a missing file, or one without chatmemory tables, raises
    `StoreError` and is left as it was, for tools that change existing memories only.

    **Sharing.** One store may be used from any number of threads: it has one connection,
    used under a lock (one connection per thread measured no faster, and the lock spares threads
    SQLite's sleep-and-retry on lock contention). Any number of processes may open the same file,
    each with its own store; the file must be on a local disk (WAL needs shared memory, which
    network file systems do not provide). Do not carry a store across ``fork()``: open a new one
    in the child.

    **Durability.** The database is in WAL mode with ``synchronous=NORMAL``: a committed write
    survives the process crashing or being killed, and the file is never left half-written.
    After a power loss or an operating-system crash, the last commits before it may be lost
    (the database stays consistent). ``secure_delete`` is on: `delete_messages` overwrites the
    deleted messages in the file (copies may linger in the ``-wal`` file until `scrub()`, which
    `forget_user` calls, empties it).

    SQLite failures raise `StoreError` naming the store and the memory id; a write that fails is
    rolled back whole. A stored row that cannot be read raises `SerializationError` naming the
    memory id and the row (its seq); other rows and memory ids stay readable. Close the store
    with `close()` or a ``with`` block; after that, every call raises `StoreError`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        timeout: float = 30.0,
        read_only: bool = False,
        create: bool = True,
    ):
        self._path = _check_path(path)
        self._timeout = _check_timeout(timeout)
        self._read_only = bool(read_only)
        self._create = bool(create)
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._read = MessageReader()
        self._writes = 0
        self._data_version: int | None = None
        """The last `PRAGMA data_version` read (see `_seen`)."""
        self._kept: dict[str, tuple[int, int, int, object]] = {}
        """Per memory id, as this store last read or wrote it: its key, version, next seq and
        creation time, what a commit of one message needs to be one statement."""
        self._connection: sqlite3.Connection | None = None
        self._connection = self._open()
        self._cursor = self._connection.cursor()
        """Runs the statements of reads and commits (under the lock): one cursor made once,
        where `connection.execute` makes one per statement."""

    @property
    def path(self) -> str:
        """The database file (or ``":memory:"``)."""
        return self._path

    # -- the window contract -----------------------------------------------------------------

    def load_window(
        self, memory_id: str, *, since: WindowSnapshot | None = None, errors: Errors = "raise"
    ) -> WindowSnapshot:
        """The window of `memory_id`; with `since`, `since` itself while nothing changed.

        Whether anything changed costs no I/O when no other connection wrote to the file
        since (``PRAGMA data_version``) and this store did not either; otherwise one indexed
        read of the version. Only rows numbered after those of `since` are decoded.
        """
        check_memory_id(memory_id)
        check_errors(errors)
        with self._using("read the window", memory_id):
            cursor = self._cursor
            seen = self._seen(cursor)
            if since is not None:
                if isinstance(since.stamp, tuple) and since.stamp[:2] == seen:
                    return since
                found = cursor.execute(_VERSION, (memory_id,)).fetchone()
                if (found[0] if found else 0) == since.version:
                    born = found[1] if found else None
                    object.__setattr__(since, "stamp", (*seen, born))  # confirmed as of now
                    if found:
                        self._keep(memory_id, found[2], found[0], found[3], born)
                    return since
            known = since.rows[-1].seq if since is not None and since.rows else -1
            rows = cursor.execute(_WINDOW, (known, memory_id)).fetchall()
            if known >= 0 and rows and not _same_life(since, rows[0][1]):
                rows = cursor.execute(_WINDOW, (-1, memory_id)).fetchall()
                since = None
            if rows:
                first = rows[0]
                self._keep(memory_id, first[6], first[0], first[7], first[1])
        return self._snapshot(memory_id, rows, since, errors, seen)

    def _keep(self, memory_id: str, key: int, version: int, next_seq: int, born: object) -> None:
        """Note where `memory_id` stands (see `_kept`): a commit at that version is then one
        statement, and one made on stale counters fails the version check like any other."""
        if len(self._kept) >= _KEPT and memory_id not in self._kept:
            self._kept.clear()
        self._kept[memory_id] = (key, version, next_seq, born)

    def _snapshot(
        self,
        memory_id: str,
        rows: list[tuple[Any, ...]],
        since: WindowSnapshot | None,
        errors: Errors,
        seen: tuple[int, int],
    ) -> WindowSnapshot:
        if not rows:
            return WindowSnapshot(0, (), stamp=(*seen, None))
        held = {row.seq: row for row in since.rows} if since is not None else {}
        window: list[StoredMessage] = []
        unreadable: list[int] = []
        for _, _, seq, payload, count, counted_by, _, _ in rows:
            if seq is None:
                continue  # the one row of an empty window
            row = held.get(seq)
            if row is None:
                try:
                    row = StoredMessage(seq, self._read(memory_id, seq, payload), count, counted_by)
                except SerializationError:
                    if errors == "raise":
                        raise
                    unreadable.append(seq)
                    continue
            window.append(row)
        born = rows[0][1]
        stamp = (*seen, born)
        return WindowSnapshot(rows[0][0], tuple(window), tuple(unreadable), stamp, life_of(born))

    def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> Committed | None:
        check_memory_id(memory_id)
        self._writable(memory_id)
        payloads = [message_to_json(new.message) for new in append]  # before taking any lock
        evicted = [int(seq) for seq in evict]
        kept = self._kept.get(memory_id)
        if kept is not None and kept[1] == version and len(payloads) == 1 and len(evicted) < 2:
            return self._commit_one(memory_id, kept, append[0], payloads[0], evicted)
        with self._using("commit the window", memory_id) as connection, Transaction(connection):
            cursor = self._cursor
            self._writes += 1
            now = now_micros()
            if version == 0:
                row = cursor.execute(_CREATE, (memory_id, now, len(payloads), now, now)).fetchone()
                first_seq = 0
            else:
                row = cursor.execute(_BUMP, (memory_id, now, len(payloads), version)).fetchone()
                first_seq = row[3] if row is not None else 0
            if row is None:
                self._kept.pop(memory_id, None)
                return None  # another writer got there first: nothing written
            key, new_version, born, created = row[0], row[1], row[2], row[-1]
            if len(evicted) == 1:  # the usual case: one statement, no executemany
                cursor.execute(_EVICT, (key, evicted[0]))
            elif evicted:
                cursor.executemany(_EVICT, [(key, seq) for seq in evicted])
            if len(payloads) == 1:
                new = append[0]
                cursor.execute(_APPEND, (key, first_seq, created, payloads[0]))
                if new.in_window:
                    cursor.execute(_ENTER_WINDOW, (key, first_seq, new.token_count, new.counted_by))
            elif payloads:
                cursor.executemany(
                    _APPEND,
                    [(key, first_seq + i, created, text) for i, text in enumerate(payloads)],
                )
                cursor.executemany(
                    _ENTER_WINDOW,
                    [
                        (key, first_seq + i, new.token_count, new.counted_by)
                        for i, new in enumerate(append)
                        if new.in_window
                    ],
                )
            self._keep(memory_id, key, new_version, first_seq + len(payloads), born)
            # No PRAGMA here: the data_version this connection last read is older than this
            # commit, so a snapshot stamped with it is confirmed the moment nothing else was
            # committed since, and only looked up again (`_VERSION`) otherwise.
            stamp = (self._data_version, self._writes, born)
        return Committed(new_version, first_seq, stamp, life_of(born))

    def _commit_one(
        self,
        memory_id: str,
        kept: tuple[int, int, int, object],
        new: NewMessage,
        payload: str,
        evicted: list[int],
    ) -> Committed | None:
        """A commit of one message and at most one eviction as one statement (migration 2),
        on the counters `_kept` holds; its result follows from them (the statement returns
        nothing): the version the trigger sets and the seq it appended at."""
        key, version, seq, born = kept
        evict = evicted[0] if evicted else None
        with self._using("commit the window", memory_id):
            self._writes += 1
            now = now_micros()
            row = (key, memory_id, version, now, seq, evict, payload, new.in_window)
            try:
                self._cursor.execute(_COMMIT_ONE, (*row, new.token_count, new.counted_by))
            except sqlite3.IntegrityError as error:
                if str(error) != LOST_RACE:
                    raise
                self._kept.pop(memory_id, None)
                return None  # another writer got there first: nothing written
            new_version = max(version + 1, now)
            self._keep(memory_id, key, new_version, seq + 1, born)
            stamp = (self._data_version, self._writes, born)  # as in `commit_window`
        return Committed(new_version, seq, stamp, life_of(born))

    def delete_messages(self, memory_id: str) -> None:
        """Forget `memory_id`: its window, its whole history and the id itself."""
        check_memory_id(memory_id)
        self._writable(memory_id)
        with self._using("delete the memory", memory_id) as connection, Transaction(connection):
            self._writes += 1
            self._kept.pop(memory_id, None)
            row = connection.execute(_KEY, (memory_id,)).fetchone()
            if row is not None:
                for statement in _FORGET:
                    connection.execute(statement, row)

    def history(
        self, memory_id: str, *, errors: Errors = "raise", seqs: Iterable[int] | None = None
    ) -> list[HistoryEntry]:
        """Every message ever added to `memory_id`, oldest first (reads the whole history);
        with `seqs`, only the messages numbered so (those that exist), found by their keys.

        A row that cannot be read raises `SerializationError` naming the memory id and the row;
        with `errors="skip"` such rows are left out and the rest is returned.
        """
        check_memory_id(memory_id)
        check_errors(errors)
        wanted = check_seqs(seqs)
        with self._using("read the history", memory_id) as connection:
            if wanted is None:
                rows = connection.execute(_WHOLE_HISTORY, (memory_id,)).fetchall()
            elif wanted:
                rows = connection.execute(_SOME_HISTORY, (memory_id, json.dumps(wanted))).fetchall()
            else:
                rows = []
        entries = []
        for seq, payload, created_at, in_window in rows:
            try:
                message = self._read(memory_id, seq, payload)
                created = read_time(memory_id, seq, created_at)
            except SerializationError:
                if errors == "raise":
                    raise
                continue
            entries.append(HistoryEntry(seq, message, created, in_window == 1))
        return entries

    def memory_ids(self) -> list[str]:
        with self._using("list the memory ids", None) as connection:
            return [memory_id for (memory_id,) in connection.execute(_MEMORY_IDS).fetchall()]

    def summaries(self) -> list[MemorySummary]:
        """Per memory id, its rows and window rows, counted by SQLite (nothing is decoded)."""
        with self._using("summarize the memories", None) as connection:
            rows = connection.execute(_SUMMARIES).fetchall()
        return [
            MemorySummary(memory_id, messages, in_window, _updated(updated_at))
            for memory_id, messages, in_window, updated_at in rows
        ]

    def scrub(self) -> bool:
        """Empty the ``-wal`` file into the database, so no copy of a deleted message is left
        there (`delete_messages` already zeroed it in the database); False when another
        connection's read kept the log from being emptied."""
        with self._using("empty the write-ahead log", None) as connection:
            return scrub(connection)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database connection; closing again does nothing."""
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def __repr__(self) -> str:
        closed = ", closed" if self._connection is None else ""
        mode = ", read_only=True" if self._read_only else ""
        return f"{type(self).__name__}({self._path!r}{mode}{closed})"

    def _writable(self, memory_id: str) -> None:
        if self._read_only:
            raise StoreError(
                f"this store was opened read-only; open {self._path!r} without read_only to write",
                store=self,
                memory_id=memory_id,
            )

    # -- internals ---------------------------------------------------------------------------

    def _seen(self, cursor: sqlite3.Cursor) -> tuple[int, int]:
        """What changes whenever the file may have: another connection's commit bumps SQLite's
        data_version, ours bump `_writes` (counted on every attempt, so a failed one also
        invalidates). A commit stamps its snapshot with the data_version last read, which
        precedes it: conservative, since any other commit after that read changes the value.

        A snapshot's stamp is this plus the creation time of the memory id's row, which tells
        the life of the memory id its rows belong to."""
        self._data_version = cursor.execute("PRAGMA data_version").fetchone()[0]
        return self._data_version, self._writes

    def _open(self) -> sqlite3.Connection:
        if self._read_only:
            return self._open_read_only()
        if not self._create:
            self._open_existing().close()  # before anything could create or convert the file
        try:
            connection = sqlite3.connect(
                self._path,
                timeout=self._timeout,  # sets busy_timeout
                isolation_level=None,  # we issue BEGIN / COMMIT ourselves
                check_same_thread=False,  # shared by threads, under self._lock
            )
        except sqlite3.Error as error:
            raise self._failure("open the database", error, None) from error
        try:
            _retry_while_locked(
                lambda: connection.execute("PRAGMA journal_mode = WAL").fetchone(), self._timeout
            )
            connection.execute("PRAGMA synchronous = NORMAL")
            forgetting(connection)
            migrate(connection, self)
        except BaseException as error:
            connection.close()
            if isinstance(error, sqlite3.Error):
                raise self._failure("open the database", error, None) from error
            raise
        return connection

    def _open_read_only(self) -> sqlite3.Connection:
        """Open without changing anything: no tables created, no journal mode switched."""
        connection = self._open_existing()
        try:
            if pending(connection, self):
                raise StoreError(
                    f"{self._path!r} was written by an older chatmemory: {UPGRADE}", store=self
                )
        except BaseException:
            connection.close()
            raise
        return connection

    def _open_existing(self) -> sqlite3.Connection:
        """A read-only connection to the file, which must exist and hold chatmemory's tables.

        A file in a directory this process may not write to cannot get WAL's shared-memory
        file; it is then opened as immutable (no other process may be writing it meanwhile).
        """
        if self._path == ":memory:" or not os.path.isfile(self._path):
            raise StoreError(f"no such database file: {self._path!r}", store=self)
        uri = "file:" + urllib.parse.quote(os.path.abspath(self._path)) + "?mode=ro"
        connection = None
        for suffix in ("", "&immutable=1"):
            try:
                connection = sqlite3.connect(
                    uri + suffix,
                    uri=True,
                    timeout=self._timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
                tables = connection.execute(
                    "SELECT name FROM sqlite_master WHERE name = 'chatmemory_memories'"
                ).fetchall()
                break
            except sqlite3.Error as error:
                if connection is not None:
                    connection.close()
                    connection = None
                if suffix:
                    raise self._failure("open the database read-only", error, None) from error
        assert connection is not None
        if not tables:
            connection.close()
            raise StoreError(
                f"no chatmemory data in {self._path!r}: it has no chatmemory tables",
                store=self,
            )
        return connection

    def _using(self, action: str, memory_id: str | None) -> _Using:
        """The connection, held under the lock; SQLite errors become `StoreError`."""
        return _Using(self, action, memory_id)

    def _connection_for(self, action: str, memory_id: str | None) -> sqlite3.Connection:
        """The open connection of this process (the caller holds the lock)."""
        connection = self._connection
        if connection is None:
            raise StoreError(
                f"cannot {action}: the store is closed; open a new {type(self).__name__}",
                store=self,
                memory_id=memory_id,
            )
        if self._pid != os.getpid():
            raise StoreError(
                f"cannot {action}: this store was opened in process {self._pid} and came "
                f"into this one through fork(), which SQLite connections do not survive; "
                f"open a new {type(self).__name__} in this process",
                store=self,
                memory_id=memory_id,
            )
        return connection

    def _failure(self, action: str, error: sqlite3.Error, memory_id: str | None) -> StoreError:
        return StoreError(
            f"SQLite could not {action} in {self._path!r}: {error}. "
            f"{_hint(error, self._timeout)}; no write is ever applied in part",
            store=self,
            memory_id=memory_id,
        )


class AsyncSqliteChatMemoryStore(AsyncBasicContract, AsyncWindowStore, AsyncHistoryStore):
    """`SqliteChatMemoryStore` for asyncio: it runs the sync store on a dedicated worker
    thread, so the event loop never blocks on SQLite.

    The worker is one thread (a ``ThreadPoolExecutor(max_workers=1)``) owning one
    `SqliteChatMemoryStore`; every call is forwarded to it with ``loop.run_in_executor`` and
    runs in the order it was made. The database is opened on the worker too, by ``async with``
    or by the first call, because opening may wait for another process's lock. Behaviour,
    files and errors are those of `SqliteChatMemoryStore`, so sync and async code may share a
    file. Close with ``await store.aclose()`` or ``async with``; the worker thread ends when
    its last call is done.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        timeout: float = 30.0,
        read_only: bool = False,
        create: bool = True,
    ):
        self._path = _check_path(path)
        self._timeout = _check_timeout(timeout)
        self._read_only = bool(read_only)
        self._create = bool(create)
        self._store: SqliteChatMemoryStore | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chatmemory-sqlite")
        self._closed = False

    @property
    def path(self) -> str:
        """The database file (or ``":memory:"``)."""
        return self._path

    async def load_window(
        self, memory_id: str, *, since: WindowSnapshot | None = None, errors: Errors = "raise"
    ) -> WindowSnapshot:
        return await self._run(
            memory_id, lambda store: store.load_window(memory_id, since=since, errors=errors)
        )

    async def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> Committed | None:
        return await self._run(
            memory_id,
            lambda store: store.commit_window(
                memory_id, version=version, append=append, evict=evict
            ),
        )

    async def delete_messages(self, memory_id: str) -> None:
        """Forget `memory_id`: its window, its whole history and the id itself."""
        await self._run(memory_id, lambda store: store.delete_messages(memory_id))

    async def scrub(self) -> bool:
        """Empty the ``-wal`` file into the database (see the sync store)."""
        return await self._run(None, lambda store: store.scrub())

    async def history(
        self, memory_id: str, *, errors: Errors = "raise", seqs: Iterable[int] | None = None
    ) -> list[HistoryEntry]:
        """Every message ever added to `memory_id`, or those numbered `seqs`, oldest first
        (see the sync store)."""
        return await self._run(
            memory_id, lambda store: store.history(memory_id, errors=errors, seqs=seqs)
        )

    async def memory_ids(self) -> list[str]:
        return await self._run(None, lambda store: store.memory_ids())

    async def summaries(self) -> list[MemorySummary]:
        return await self._run(None, lambda store: store.summaries())

    async def aclose(self) -> None:
        """Close the database on the worker and let the worker end; closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._close_store)
        finally:
            self._executor.shutdown(wait=False)

    async def __aenter__(self) -> AsyncSqliteChatMemoryStore:
        try:
            await self._run(None, lambda store: None)  # open now, so errors show here
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        closed = ", closed" if self._closed else ""
        mode = ", read_only=True" if self._read_only else ""
        return f"{type(self).__name__}({self._path!r}{mode}{closed})"

    async def _run(self, memory_id: str | None, call: Callable[[SqliteChatMemoryStore], T]) -> T:
        if self._closed:
            raise StoreError(
                f"the store is closed; open a new {type(self).__name__}",
                store=self,
                memory_id=memory_id,
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._on_worker, call)

    def _on_worker(self, call: Callable[[SqliteChatMemoryStore], T]) -> T:
        if self._store is None:
            self._store = SqliteChatMemoryStore(
                self._path, timeout=self._timeout, read_only=self._read_only, create=self._create
            )
        return call(self._store)

    def _close_store(self) -> None:
        if self._store is not None:
            self._store.close()
