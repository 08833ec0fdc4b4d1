"""The SQLite store's tables, the migrations that create them, and how rows become messages.

Three tables hold any number of memory ids:

``chatmemory_memories``
    one row per memory id: its `version` (every commit bumps it), the `seq` its next message
    gets, and when it was created and last written. `memory_key` is a small integer that the
    other tables use instead of repeating the memory id in every row.
``chatmemory_messages``
    the history: one row per message ever added, holding LangChain4j's JSON. Rows are only ever
    inserted, and deleted with their memory id, never updated. It is a rowid table: a message of
    up to about 4 KB stays on its page, where a WITHOUT ROWID table would move everything past
    about 1 KB to an overflow page (measured: 4.6 KB on disk for a 1 KB message).
``chatmemory_window``
    one small row per message in the window, with its token count and who counted it. Evicting
    a message deletes its row here and leaves the message untouched.

Times are integers: microseconds since 1970-01-01 UTC (8 bytes, where ISO text takes 32; read them
with ``datetime(created_at / 1e6, 'unixepoch')``).

Migrations are numbered and append-only: a released migration is never edited, a change of schema
is a new migration at the end of `MIGRATIONS`. `migrate` records each applied migration in
``chatmemory_migrations`` and applies the missing ones in one ``BEGIN IMMEDIATE`` transaction, so
processes opening a fresh file at the same moment apply each migration exactly once.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from .._errors import SerializationError, StoreError
from ._rows import FIX

__all__ = [
    "LOST_RACE",
    "MIGRATIONS",
    "UPGRADE",
    "Migration",
    "Transaction",
    "migrate",
    "now_micros",
    "pending",
    "read_time",
]


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the schema: applied once per database, in `number` order."""

    number: int
    name: str
    statements: tuple[str, ...]
    """Run one by one inside the migration's transaction (never as a script: Python's
    `executescript` commits first)."""
    for_writes: bool = False
    """True when only writes use what it adds: a read-only store reads a file without it."""


LOST_RACE = "chatmemory: another writer committed first"
"""The error `chatmemory_commit_one` raises when the memory is no longer at the version given."""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "memories, messages and windows",
        (
            """
            CREATE TABLE chatmemory_memories (
                memory_key INTEGER PRIMARY KEY,
                memory_id TEXT NOT NULL UNIQUE,
                version INTEGER NOT NULL,  -- bumped by every commit
                next_seq INTEGER NOT NULL,  -- the seq of the next message added
                created_at INTEGER NOT NULL,  -- microseconds since 1970-01-01 UTC
                updated_at INTEGER NOT NULL  -- microseconds since 1970-01-01 UTC
            )
            """,
            """
            CREATE TABLE chatmemory_messages (
                memory_key INTEGER NOT NULL,  -- chatmemory_memories.memory_key
                seq INTEGER NOT NULL,  -- 0, 1, 2... in the order the messages were added
                created_at INTEGER NOT NULL,  -- microseconds since 1970-01-01 UTC
                message TEXT NOT NULL,  -- LangChain4j ChatMessageSerializer JSON
                PRIMARY KEY (memory_key, seq)
            )
            """,
            """
            CREATE TABLE chatmemory_window (
                memory_key INTEGER NOT NULL,
                seq INTEGER NOT NULL,  -- a message of chatmemory_messages still in the window
                token_count INTEGER,
                counted_by TEXT,  -- the cache_key of the estimator that counted token_count
                PRIMARY KEY (memory_key, seq)
            ) WITHOUT ROWID
            """,
        ),
    ),
    Migration(
        2,
        "one statement per commit",
        (
            # A commit of one message (and at most one eviction) is one INSERT into this view,
            # atomic in autocommit: its trigger bumps the version, evicts, and appends, in C,
            # where a transaction of separate statements costs a Python round trip each. The
            # version check is the UPDATE's WHERE; when it matches nothing, RAISE undoes the
            # statement and the store reports a lost race (`LOST_RACE`).
            """
            CREATE VIEW chatmemory_commit AS SELECT
                NULL AS memory_key, NULL AS memory_id, NULL AS version, NULL AS now,
                NULL AS seq, NULL AS evict, NULL AS message, NULL AS in_window,
                NULL AS token_count, NULL AS counted_by
            WHERE 0
            """,
            f"""
            CREATE TRIGGER chatmemory_commit_one INSTEAD OF INSERT ON chatmemory_commit
            BEGIN
                UPDATE chatmemory_memories
                SET version = max(version + 1, NEW.now), next_seq = next_seq + 1,
                    updated_at = max(updated_at, NEW.now)
                WHERE memory_key = NEW.memory_key AND memory_id = NEW.memory_id
                    AND version = NEW.version AND next_seq = NEW.seq;
                SELECT RAISE(ABORT, '{LOST_RACE}')
                WHERE changes() = 0;
                DELETE FROM chatmemory_window WHERE memory_key = NEW.memory_key AND seq = NEW.evict;
                INSERT INTO chatmemory_messages (memory_key, seq, created_at, message)
                SELECT NEW.memory_key, NEW.seq, updated_at, NEW.message
                FROM chatmemory_memories WHERE memory_key = NEW.memory_key;
                INSERT INTO chatmemory_window (memory_key, seq, token_count, counted_by)
                SELECT NEW.memory_key, NEW.seq, NEW.token_count, NEW.counted_by
                WHERE NEW.in_window;
            END
            """,
        ),
        for_writes=True,
    ),
)

UPGRADE = "open it once without read_only to upgrade it"
"""What to do about a database an older chatmemory wrote, when it was opened read-only."""

_CREATE_MIGRATIONS_TABLE = """
    CREATE TABLE IF NOT EXISTS chatmemory_migrations (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        applied_at TEXT NOT NULL  -- ISO 8601, UTC
    )
"""


class Transaction:
    """Run the block in one transaction: committed at the end, rolled back on any exception.

    ``BEGIN IMMEDIATE`` takes the write lock up front, waiting for it up to the busy timeout;
    a deferred transaction that reads first and writes later could fail on the upgrade instead.
    A class, not a generator: it wraps every commit, where a generator's frames cost more than
    the statements it runs.
    """

    __slots__ = ("_begin", "_connection")

    def __init__(self, connection: sqlite3.Connection, begin: str = "BEGIN IMMEDIATE") -> None:
        self._connection = connection
        self._begin = begin

    def __enter__(self) -> None:
        self._connection.execute(self._begin)

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        connection = self._connection
        if kind is None:
            connection.execute("COMMIT")
        elif connection.in_transaction:  # SQLite already rolled back after some errors
            connection.rollback()


def _applied(connection: sqlite3.Connection) -> dict[int, str]:
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chatmemory_migrations'"
    ).fetchone()
    if exists is None:
        return {}
    return dict(connection.execute("SELECT id, name FROM chatmemory_migrations").fetchall())


def _pending(
    connection: sqlite3.Connection, migrations: tuple[Migration, ...], owner: object
) -> list[Migration]:
    applied = _applied(connection)
    known = {m.number for m in migrations}
    unknown = sorted(set(applied) - known)
    if unknown:
        raise StoreError(
            f"the database was migrated by a newer chatmemory (it has migration {unknown[-1]} "
            f"{applied[unknown[-1]]!r}, this version knows up to {max(known)}); upgrade "
            f"chatmemory to use it",
            store=owner,
        )
    return [m for m in migrations if m.number not in applied]


def pending(connection: sqlite3.Connection, owner: object) -> list[int]:
    """The numbers of the migrations the database lacks that reading needs (reads only)."""
    return [m.number for m in _pending(connection, MIGRATIONS, owner) if not m.for_writes]


def migrate(
    connection: sqlite3.Connection,
    owner: object,
    migrations: tuple[Migration, ...] = MIGRATIONS,
) -> list[int]:
    """Apply the migrations the database does not have yet; return their numbers.

    Reads first and takes the write lock only when something is missing, so opening an
    up-to-date database never waits for a writer. The list is checked again under the lock:
    another process may have migrated in between. `owner` is the store named in errors.
    """
    if not _pending(connection, migrations, owner):
        return []
    with Transaction(connection):
        connection.execute(_CREATE_MIGRATIONS_TABLE)
        pending = _pending(connection, migrations, owner)
        for migration in pending:
            for statement in migration.statements:
                connection.execute(statement)
            connection.execute(
                "INSERT INTO chatmemory_migrations (id, name, applied_at) VALUES (?, ?, ?)",
                (migration.number, migration.name, datetime.now(timezone.utc).isoformat()),
            )
    return [m.number for m in pending]


# -- rows ------------------------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def now_micros() -> int:
    """The current time, in microseconds since 1970-01-01 UTC."""
    return time.time_ns() // 1000


def read_time(memory_id: str, seq: int, value: object) -> datetime:
    """The `created_at` of row `seq` as an aware UTC datetime."""
    if type(value) is not int:
        raise SerializationError(
            f"the time stored with a message is {type(value).__name__} {value!r}, not an "
            f"integer number of microseconds; {FIX}",
            memory_id=memory_id,
            row=seq,
        )
    try:
        return _EPOCH + timedelta(microseconds=value)
    except OverflowError:
        raise SerializationError(
            f"the time stored with a message ({value} µs after 1970) is out of range; {FIX}",
            memory_id=memory_id,
            row=seq,
        ) from None
