"""Everything the sync and async PostgreSQL stores share: SQL, migrations, row codecs, flows.

Each store operation is a flow (see `_flow`): a generator that yields `execute` / `fetchall`
calls, driven by `run` against a psycopg `Cursor` or by `arun` against an `AsyncCursor`, whose
methods have the same names. So every statement, its order and the decoding of its rows exist
once; the two store classes only open a transaction and hand it a cursor.

This module imports psycopg: the stores import it lazily, so chatmemory works without the extra.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, ClassVar, Concatenate, ParamSpec, Protocol, TypeVar

import psycopg
import psycopg_pool
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import AsyncRowFactory, RowFactory, tuple_row

from .._codec.langchain4j import message_to_json
from .._contracts import (
    Committed,
    Errors,
    HistoryEntry,
    MemorySummary,
    NewMessage,
    StoredMessage,
    WindowSnapshot,
    check_errors,
    check_memory_id,
    check_seqs,
    life_of,
)
from .._errors import ConfigurationError, SerializationError, StoreError, shorten
from .._flow import Flow, call
from ._rows import MessageReader

__all__ = ["PostgresCore", "statements"]

P = ParamSpec("P")
R = TypeVar("R")

_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,51}")  # room for the "_migrations" suffix
_SHOWN_CONNINFO = ("host", "hostaddr", "port", "dbname", "user")
_ESCAPES_JSONB_REJECTS = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


@dataclass(frozen=True, slots=True)
class _Migration:
    version: int
    name: str
    statements: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class _Statements:
    """Every statement of one schema and table, composed once (see `statements`)."""

    lock: bytes
    schema_exists: bytes
    create_schema: bytes
    table_exists: bytes
    create_migrations: bytes
    applied: bytes
    record: bytes
    migrations: tuple[_Migration, ...]
    load_window: bytes
    create: bytes
    commit: bytes
    delete_memory: bytes
    delete_messages: bytes
    history: bytes
    some_history: bytes
    memory_ids: bytes
    summaries: bytes


_CLOCK = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"
_WRITE = (
    ", evicted AS (UPDATE {messages} SET in_window = false"
    # The window index finds them by memory id and the range of their seqs (one descent), in
    # every plan: the generic plan PostgreSQL keeps for a prepared statement may have been made
    # when the table was small, and then it reads every entry the window index holds for the
    # memory (those of rows evicted since the last vacuum too) rather than probe each seq of
    # the array. With the range, a plan made for the values costs what the generic plan costs,
    # so PostgreSQL keeps that one instead of planning each commit again (~100 µs a commit).
    " WHERE memory_id = %(id)s AND in_window AND seq BETWEEN %(low)s AND %(high)s"
    " AND seq = ANY(%(evict)s::bigint[])"
    " AND EXISTS (SELECT 1 FROM claimed))"
    ", appended AS (INSERT INTO {messages}"
    " (memory_id, seq, message, in_window, token_count, counted_by)"
    " SELECT %(id)s, c.first_seq + t.ord - 1, t.e -> 0, (t.e ->> 1)::boolean,"
    " (t.e ->> 2)::integer, t.e ->> 3"
    " FROM claimed AS c, jsonb_array_elements(%(rows)s::jsonb) WITH ORDINALITY AS t(e, ord))"
    " SELECT version, first_seq, created_at FROM claimed"
)
"""The eviction and the appended rows of a commit, run only when `claimed` holds a row.

The parameters are text that PostgreSQL parses: the evicted seqs as an array literal and the new
rows as one JSON array of ``[message, in_window, token_count, counted_by]``, whose messages are
the stored JSON as it is. Binding them as psycopg arrays cost more client time (a dumper chosen
per element, each message escaped by a regex) than the rest of the commit's Python put together.
"""


@lru_cache(maxsize=64)
def statements(schema: str, table: str) -> _Statements:
    """The statements for `schema`.`table` (identifiers already validated), built once."""
    # Quoted as PQescapeIdentifier does; the names are letters, digits and underscores only.
    names = {
        "schema": f'"{schema}"',
        "messages": f'"{schema}"."{table}"',
        "memories": f'"{schema}"."{table}_memories"',
        "migrations": f'"{schema}"."{table}_migrations"',
        "window_index": f'"{table}_window"',
    }

    def q(text: str) -> bytes:
        # bytes, not a psycopg `sql.Composed`: that one is rendered again on every execute
        return text.format(**names).encode()

    first = _Migration(
        1,
        "create the memories and messages tables",
        (
            q(
                'CREATE TABLE {memories} (memory_id text COLLATE "C" PRIMARY KEY,'
                " version bigint NOT NULL, next_seq bigint NOT NULL,"
                " created_at timestamptz NOT NULL DEFAULT now(),"
                " updated_at timestamptz NOT NULL DEFAULT now())"
            ),
            q(
                'CREATE TABLE {messages} (memory_id text COLLATE "C" NOT NULL,'
                " seq bigint NOT NULL, message jsonb NOT NULL,"
                " created_at timestamptz NOT NULL DEFAULT now(),"
                " in_window boolean NOT NULL, token_count integer, counted_by text,"
                " PRIMARY KEY (memory_id, seq))"
            ),
            q("CREATE INDEX {window_index} ON {messages} (memory_id, seq) WHERE in_window"),
        ),
    )
    return _Statements(
        lock=q("SELECT pg_advisory_xact_lock(%s)"),
        schema_exists=q("SELECT 1 FROM pg_namespace WHERE nspname = %s"),
        create_schema=q("CREATE SCHEMA {schema}"),
        table_exists=q("SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = %s"),
        create_migrations=q(
            "CREATE TABLE {migrations} (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        ),
        applied=q("SELECT version FROM {migrations}"),
        record=q("INSERT INTO {migrations} (version, name) VALUES (%s, %s)"),
        migrations=(first,),
        # One statement, one round trip, one snapshot: just the version (in a row of NULLs) when
        # it is the caller's, else the window's rows, with the message text only for rows the
        # caller does not hold (numbered after %(known)s, in the same life of the memory id).
        # The window is a lateral subquery gated by the version test, which PostgreSQL runs
        # once (a one-time filter; OFFSET 0 keeps the planner from pulling the subquery up):
        # an unchanged window reads no message row at all.
        load_window=q(
            "SELECT m.version, m.created_at, w.seq,"
            " CASE WHEN w.seq > %(known)s OR m.created_at IS DISTINCT FROM %(born)s"
            " THEN w.message::text END, w.token_count, w.counted_by"
            " FROM {memories} AS m LEFT JOIN LATERAL (SELECT seq, message, token_count,"
            " counted_by FROM {messages} WHERE memory_id = m.memory_id AND in_window"
            " AND m.version <> %(since)s OFFSET 0) AS w ON true"
            " WHERE m.memory_id = %(id)s ORDER BY w.seq"
        ),
        # A commit is one statement (one round trip, atomic in autocommit): claim the memory's
        # row at the expected version (its row lock makes writers of one id take turns; a
        # writer that waited re-checks the version and finds nothing to claim), then evict and
        # append only if the claim succeeded. Versions are at least the clock in µs, so a
        # memory id deleted and created again never returns to an earlier version.
        create=q(
            "WITH claimed AS (INSERT INTO {memories} (memory_id, version, next_seq)"
            " VALUES (%(id)s, " + _CLOCK + ", %(n)s) ON CONFLICT (memory_id) DO NOTHING"
            " RETURNING version, 0::bigint AS first_seq, created_at)" + _WRITE
        ),
        commit=q(
            "WITH claimed AS (UPDATE {memories} SET version = greatest(version + 1, "
            + _CLOCK
            + "), next_seq = next_seq + %(n)s, updated_at = now()"
            " WHERE memory_id = %(id)s AND version = %(version)s"
            " RETURNING version, next_seq - %(n)s AS first_seq, created_at)" + _WRITE
        ),
        delete_memory=q("DELETE FROM {memories} WHERE memory_id = %s"),
        delete_messages=q("DELETE FROM {messages} WHERE memory_id = %s"),
        history=q(
            "SELECT seq, message::text, created_at, in_window FROM {messages}"
            " WHERE memory_id = %(id)s ORDER BY seq"
        ),
        # The seqs asked for, found by the primary key (memory_id, seq): the cost of the rows
        # asked for, however long the history. The array is text, as in a commit (see `_WRITE`).
        some_history=q(
            "SELECT seq, message::text, created_at, in_window FROM {messages}"
            " WHERE memory_id = %(id)s AND seq = ANY(%(seqs)s::bigint[]) ORDER BY seq"
        ),
        memory_ids=q("SELECT memory_id FROM {memories} ORDER BY memory_id"),
        summaries=q(
            "SELECT m.memory_id, count(w.seq), count(w.seq) FILTER (WHERE w.in_window),"
            " m.updated_at FROM {memories} AS m LEFT JOIN {messages} AS w"
            " ON w.memory_id = m.memory_id GROUP BY m.memory_id, m.updated_at"
            " ORDER BY m.memory_id"
        ),
    )


class _Cursor(Protocol):
    """What the flows call on a psycopg `Cursor` (an `AsyncCursor` has the same, awaited)."""

    def execute(self, query: bytes, params: Params = ..., *, prepare: bool = ...) -> Any: ...

    def fetchall(self) -> list[tuple[Any, ...]]: ...


Params = Sequence[Any] | Mapping[str, Any]


def _fetch(query: bytes, params: Params, *, prepare: bool = False) -> Flow[list[tuple[Any, ...]]]:
    yield from call(_Cursor.execute, query, params, prepare=prepare)
    return (yield from call(_Cursor.fetchall))


def _execute(query: bytes, params: Params = ()) -> Flow[None]:
    yield from call(_Cursor.execute, query, params)


@dataclass(frozen=True, slots=True)
class _Rows:
    """Messages to append, encoded as the commit statement takes them (see `_WRITE`)."""

    count: int
    json: str
    """A JSON array of ``[message, in_window, token_count, counted_by]`` arrays."""


def _checks_memory_id(
    flow: Callable[Concatenate[PostgresCore, str, P], R],
) -> Callable[Concatenate[PostgresCore, str, P], R]:
    """Make `flow` raise `ConfigurationError` for a memory id PostgreSQL cannot hold, at once."""

    @functools.wraps(flow)
    def checked(self: PostgresCore, memory_id: str, /, *args: P.args, **kwargs: P.kwargs) -> R:
        check_memory_id(memory_id)  # valid Unicode
        if "\x00" in memory_id:
            raise ConfigurationError(
                f"PostgreSQL text cannot hold the NUL character, which the memory id "
                f"{memory_id!r} contains; use another id"
            )
        return flow(self, memory_id, *args, **kwargs)

    return checked


class PostgresCore:
    """The validated configuration of a PostgreSQL store and its operations as flows."""

    DatabaseError: ClassVar[type[psycopg.Error]] = psycopg.Error
    """What a failed statement or connection raises; the stores turn it into `StoreError`."""
    row_factory: ClassVar[RowFactory[tuple[Any, ...]]] = staticmethod(tuple_row)
    async_row_factory: ClassVar[AsyncRowFactory[tuple[Any, ...]]] = staticmethod(tuple_row)
    """Rows as tuples whatever the pool's connections are configured with (the flows unpack
    them); messages are read as `jsonb::text`, so the pool's JSON loaders do not matter either."""

    def __init__(
        self,
        dsn: str | None,
        pool: object,
        *,
        pool_type: type[object],
        schema: str,
        table: str,
        min_size: int,
        max_size: int,
        timeout: float,
    ) -> None:
        self._read = MessageReader()
        if (dsn is None) == (pool is None):
            raise ConfigurationError(
                "pass exactly one of `dsn` (a PostgreSQL connection string) and `pool` "
                f"(a {pool_type.__name__}), got dsn={_safe_dsn(dsn)!r} and pool={pool!r}"
            )
        if pool is not None and not isinstance(pool, pool_type):
            raise ConfigurationError(
                f"`pool` must be a psycopg_pool.{pool_type.__name__}, got {pool!r}"
            )
        self.schema = _identifier(schema, "schema", _SCHEMA, 63)
        self.table = _identifier(table, "table", _TABLE, 52)
        _check_pool_size(min_size, max_size, timeout)
        self.dsn = dsn
        self.min_size = min_size
        self.max_size = max_size
        self.timeout = float(timeout)
        self.where = _describe_dsn(dsn) if dsn is not None else f"pool={getattr(pool, 'name', '?')}"
        self.sql = statements(self.schema, self.table)
        digest = hashlib.blake2b(f"chatmemory:{self.schema}".encode(), digest_size=8).digest()
        self.lock_key = int.from_bytes(digest, "big", signed=True)

    def pool_options(self, check: object) -> dict[str, Any]:
        """Keyword arguments for the pool a store creates for itself (opened by the store)."""
        return {
            "conninfo": self.dsn,
            "min_size": self.min_size,
            "max_size": self.max_size,
            "timeout": self.timeout,
            "open": False,
            "kwargs": {"autocommit": True},
            "check": check,  # replaces connections that died while idle (server restart)
            "name": f"chatmemory-{self.schema}.{self.table}",
        }

    def check_database(self, store: object) -> None:
        """Raise `StoreError` at once when the server says the DSN's database does not exist.

        A pool would keep retrying that connection until its timeout and then blame
        reachability; one direct connection tells. Any other failure is left to the pool (a
        server that is down now may be up by the first call).
        """
        try:
            psycopg.connect(
                self.dsn or "", connect_timeout=max(1, int(min(self.timeout, 5)))
            ).close()
        except psycopg.OperationalError as error:
            self.raise_if_missing(store, error)

    def raise_if_missing(self, store: object, error: psycopg.OperationalError) -> None:
        found = re.search(r'database "([^"]+)" does not exist', str(error))
        if found:
            name = found.group(1)
            raise StoreError(
                f"the PostgreSQL database {name!r} does not exist ({self.where}); create it "
                f"(createdb {name}, or CREATE DATABASE {name}) or name another in the DSN",
                store=store,
            ) from None

    def describe(self, store: object) -> str:
        """`repr` of `store`: where it connects (never a password) and its tables."""
        return f"{type(store).__name__}({self.where}, schema={self.schema!r}, table={self.table!r})"

    def store_error(self, store: object, error: psycopg.Error, memory_id: str | None) -> StoreError:
        if isinstance(error, psycopg_pool.PoolTimeout):
            text = (
                f"no PostgreSQL connection became available within {self.timeout:g} s; check that "
                f"the server is running and reachable ({self.where}), or raise `timeout`"
            )
        elif isinstance(error, psycopg_pool.PoolClosed):
            text = "the store is closed (or its connection pool is not open)"
        elif isinstance(error, psycopg.OperationalError):
            text = (
                f"the PostgreSQL server or connection failed, so the transaction was rolled back "
                f"(if the connection broke while committing, it may have committed): "
                f"{type(error).__name__}: {error}"
            )
        else:
            text = f"PostgreSQL refused the operation: {type(error).__name__}: {error}"
        return StoreError(text.strip(), store=store, memory_id=memory_id)

    # -- flows (each checks its arguments when called, before it runs) ----------------------

    def migrate(self) -> Flow[None]:
        """Create or upgrade the tables, one recorded migration at a time.

        Runs in one transaction holding an advisory lock of the schema, so processes opening
        the same schema at once take turns and each migration is applied exactly once.
        Existence is checked before creating, so a role without CREATE privileges can use
        tables that are already there.
        """
        s = self.sql
        yield from _execute(s.lock, (self.lock_key,))
        if not (yield from _fetch(s.schema_exists, (self.schema,))):
            yield from _execute(s.create_schema)
        migrations_table = (self.schema, f"{self.table}_migrations")
        if not (yield from _fetch(s.table_exists, migrations_table)):
            yield from _execute(s.create_migrations)
        applied = {version for (version,) in (yield from _fetch(s.applied, ()))}
        for migration in s.migrations:
            if migration.version not in applied:
                for statement in migration.statements:
                    yield from _execute(statement)
                yield from _execute(s.record, (migration.version, migration.name))

    @_checks_memory_id
    def load_window(
        self, memory_id: str, since: WindowSnapshot | None, errors: Errors
    ) -> Flow[WindowSnapshot]:
        check_errors(errors)
        return self._load(memory_id, since, errors == "skip")

    def _load(
        self, memory_id: str, since: WindowSnapshot | None, skip: bool
    ) -> Flow[WindowSnapshot]:
        params = {
            "id": memory_id,
            "since": since.version if since is not None else -1,
            "known": since.rows[-1].seq if since is not None and since.rows else -1,
            "born": since.stamp if since is not None else None,
        }
        rows = yield from _fetch(self.sql.load_window, params, prepare=True)
        if not rows:
            return since if since is not None and since.version == 0 else WindowSnapshot(0, ())
        version, born = rows[0][0], rows[0][1]
        if since is not None and version == since.version:
            return since
        held = (
            {row.seq: row for row in since.rows}
            if since is not None and since.stamp == born
            else {}
        )
        window: list[StoredMessage] = []
        unreadable: list[int] = []
        for _, _, seq, value, token_count, counted_by in rows:
            if seq is None:
                continue  # a memory whose window is empty: one row of NULLs
            row = held.get(seq) if value is None else None
            if row is None:
                try:
                    row = StoredMessage(
                        seq, self._read(memory_id, seq, value), token_count, counted_by
                    )
                except SerializationError:
                    if not skip:
                        raise
                    unreadable.append(seq)
                    continue
            window.append(row)
        return WindowSnapshot(version, tuple(window), tuple(unreadable), born, life_of(born))

    @_checks_memory_id
    def commit_window(
        self, memory_id: str, version: int, append: Sequence[NewMessage], evict: Sequence[int]
    ) -> Flow[Committed | None]:
        """Encode `append` now (a message that cannot be stored raises before any I/O)."""
        rows = _encode(memory_id, append)
        seqs = [_seq(seq) for seq in evict]
        if not isinstance(version, int) or version < 0:
            raise ConfigurationError(f"`version` must be an int >= 0, got {version!r}")
        return self._commit(memory_id, version, rows, seqs)

    def _commit(
        self, memory_id: str, version: int, rows: _Rows, evict: list[int]
    ) -> Flow[Committed | None]:
        params = {
            "id": memory_id,
            "version": version,
            "n": rows.count,
            "evict": "{" + ",".join([str(seq) for seq in evict]) + "}",
            # text, like the array: psycopg would send an int as int2, int4 or int8 by its
            # size, and prepare the statement again for each combination
            "low": str(min(evict, default=0)),
            "high": str(max(evict, default=-1)),
            "rows": rows.json,
        }
        statement = self.sql.create if version == 0 else self.sql.commit
        claimed = yield from _fetch(statement, params, prepare=True)
        if not claimed:
            return None  # another writer won: nothing was written
        new_version, first_seq, born = claimed[0]
        return Committed(new_version, first_seq, born, life_of(born))

    @_checks_memory_id
    def delete_messages(self, memory_id: str) -> Flow[None]:
        # Two statements, in this order: the first waits for a writer holding the memory's row,
        # the second then sees (and deletes) the rows that writer committed.
        yield from _execute(self.sql.delete_memory, (memory_id,))
        yield from _execute(self.sql.delete_messages, (memory_id,))

    @_checks_memory_id
    def history(
        self, memory_id: str, errors: Errors, seqs: Iterable[int] | None
    ) -> Flow[list[HistoryEntry]]:
        check_errors(errors)
        return self._history(memory_id, errors == "skip", check_seqs(seqs))

    def _history(
        self, memory_id: str, skip: bool, seqs: tuple[int, ...] | None
    ) -> Flow[list[HistoryEntry]]:
        entries: list[HistoryEntry] = []
        if seqs is None:
            rows = yield from _fetch(self.sql.history, {"id": memory_id})
        elif seqs:
            params = {"id": memory_id, "seqs": "{" + ",".join(map(str, seqs)) + "}"}
            rows = yield from _fetch(self.sql.some_history, params, prepare=True)
        else:
            return entries  # nothing asked: no round trip
        for seq, value, created_at, in_window in rows:
            try:
                message = self._read(memory_id, seq, value)
            except SerializationError:
                if skip:
                    continue
                raise
            entries.append(HistoryEntry(seq, message, _utc(created_at), in_window))
        return entries

    def memory_ids(self) -> Flow[list[str]]:
        rows = yield from _fetch(self.sql.memory_ids, ())
        return [memory_id for (memory_id,) in rows]

    def summaries(self) -> Flow[list[MemorySummary]]:
        rows = yield from _fetch(self.sql.summaries, ())
        return [
            MemorySummary(memory_id, messages, in_window, _utc(updated_at))
            for memory_id, messages, in_window, updated_at in rows
        ]


# -- checks and row codecs ---------------------------------------------------------------------


def _identifier(value: object, what: str, pattern: re.Pattern[str], limit: int) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ConfigurationError(
            f"`{what}` must be a letter or underscore followed by letters, digits or "
            f"underscores, at most {limit} characters in all; got {value!r}"
        )
    return value


def _check_pool_size(min_size: object, max_size: object, timeout: object) -> None:
    sizes_ok = (
        isinstance(min_size, int)
        and isinstance(max_size, int)
        and not isinstance(min_size, bool)
        and not isinstance(max_size, bool)
        and 0 <= min_size <= max_size
        and max_size >= 1
    )
    if not sizes_ok:
        raise ConfigurationError(
            f"pool sizes must be ints with 0 <= min_size <= max_size and max_size >= 1, got "
            f"min_size={min_size!r}, max_size={max_size!r}"
        )
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ConfigurationError(f"`timeout` must be a number of seconds > 0, got {timeout!r}")


def _describe_dsn(dsn: str) -> str:
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        # libpq's message quotes parts of the string, which may be a password: not repeated.
        raise ConfigurationError(
            "`dsn` is not a valid PostgreSQL connection string; write it as a URI "
            "(postgresql://user@host:5432/dbname) or as key=value pairs (host=... dbname=...)"
        ) from None
    return ", ".join(f"{key}={params[key]!r}" for key in _SHOWN_CONNINFO if key in params)


def _safe_dsn(dsn: str | None) -> str | None:
    """`dsn` for an error message, with anything that may be a password hidden."""
    if dsn is None:
        return None
    try:
        return _describe_dsn(dsn) or "<default>"
    except ConfigurationError:
        return "<invalid>"


def _seq(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"`evict` must hold row numbers (int), got {value!r}")
    return value


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _encode(memory_id: str, append: Sequence[NewMessage]) -> _Rows:
    parts = []
    for index, new in enumerate(append):
        if not isinstance(new, NewMessage):
            raise ConfigurationError(f"`append` must hold NewMessage values, got {new!r}")
        try:
            text = message_to_json(new.message)
        except SerializationError as error:
            raise _located(error, memory_id, None) from error
        if _ESCAPES_JSONB_REJECTS.search(text) and _jsonb_rejects(json.loads(text)):
            raise SerializationError(
                f"PostgreSQL jsonb cannot hold the NUL character (\\u0000) or a lone surrogate, "
                f"which message {index} of the batch contains; remove them (for example "
                f"text.replace('\\x00', '')) and add it again. Nothing was written",
                fragment=text,
                memory_id=memory_id,
            )
        count = new.token_count
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            raise ConfigurationError(f"`token_count` must be an int or None, got {count!r}")
        if new.counted_by is not None and not isinstance(new.counted_by, str):
            raise ConfigurationError(f"`counted_by` must be a str or None, got {new.counted_by!r}")
        in_window = "true" if new.in_window else "false"
        counted = _json_text(new.counted_by)
        parts.append(f"[{text},{in_window},{'null' if count is None else count},{counted}]")
    return _Rows(len(parts), "[" + ",".join(parts) + "]")


@lru_cache(maxsize=64)
def _json_text(value: str | None) -> str:
    """`value` as JSON (the few estimator keys a store sees, encoded once)."""
    return json.dumps(value)


def _jsonb_rejects(value: object) -> bool:
    """Whether a JSON value holds a string that jsonb refuses (NUL, lone surrogate)."""
    if isinstance(value, str):
        return "\x00" in value or not _utf8(value)
    if isinstance(value, dict):
        return any(_jsonb_rejects(k) or _jsonb_rejects(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_jsonb_rejects(item) for item in value)
    return False


def _located(error: SerializationError, memory_id: str, seq: int | None) -> SerializationError:
    """`error` again, saying which memory id and row it comes from."""
    text = str(error)
    if error.fragment is not None:
        text = text.removesuffix(f"; in {shorten(error.fragment)!r}")
    return SerializationError(text, fragment=error.fragment, memory_id=memory_id, row=seq)


def _utc(stamp: datetime) -> datetime:
    return stamp.astimezone(timezone.utc)
