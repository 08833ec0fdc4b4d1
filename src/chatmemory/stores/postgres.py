"""PostgreSQL stores (psycopg 3 and psycopg_pool; ``pip install 'chatmemory[postgres]'``).

Two tables per store, created and upgraded by numbered migrations recorded in a third:

* ``<table>_memories``: one row per memory id with its version and next sequence number;
* ``<table>``: one row per message ever added (the LangChain4j JSON as ``jsonb``), keyed by
  ``(memory_id, seq)``, with ``in_window`` telling the window from the history, and a partial
  index over the window rows.

A commit is one statement (one round trip, atomic in autocommit): the version check and bump,
the eviction marks and the new rows, the same work after 100 messages as after 100,000; a
writer that lost the race to another one writes nothing and tries again. Asking whether a
window changed is one statement too, which reads no message when it has not.

The statements and the decoding of rows live in `_postgres_core` as flows; the two classes here
only run those flows in a transaction, on a pooled connection.
"""

from __future__ import annotations

import asyncio
import math
import select
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._contracts import (
    AsyncHistoryStore,
    AsyncWindowStore,
    Committed,
    Errors,
    HistoryEntry,
    HistoryStore,
    MemorySummary,
    NewMessage,
    WindowSnapshot,
    WindowStore,
)
from .._flow import Flow, arun, run
from .._threads import in_thread
from ._basic import AsyncBasicContract, BasicContract
from ._idle import Idle

if TYPE_CHECKING:
    from psycopg import AsyncConnection, Connection
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    from ._postgres_core import PostgresCore

__all__ = ["AsyncPostgresChatMemoryStore", "PostgresChatMemoryStore"]

T = TypeVar("T")
C = TypeVar("C", bound="Connection[Any] | AsyncConnection[Any]")

_INSTALL = "pip install 'chatmemory[postgres]'"
_IDLE = 0
"""`psycopg.pq.TransactionStatus.IDLE` (psycopg is imported only when a store is made)."""


def _core(
    dsn: str | None,
    pool: object,
    *,
    asynchronous: bool,
    schema: str,
    table: str,
    min_size: int,
    max_size: int,
    timeout: float,
) -> PostgresCore:
    try:
        import psycopg_pool

        from ._postgres_core import PostgresCore
    except ImportError as error:
        if error.name is not None and error.name.partition(".")[0] not in (
            "psycopg",
            "psycopg_pool",
        ):
            raise
        raise ImportError(
            f"the PostgreSQL stores need psycopg 3 and psycopg_pool, which are not installed "
            f"or do not load ({error}); install them with: {_INSTALL}"
        ) from error
    return PostgresCore(
        dsn,
        pool,
        pool_type=psycopg_pool.AsyncConnectionPool if asynchronous else psycopg_pool.ConnectionPool,
        schema=schema,
        table=table,
        min_size=min_size,
        max_size=max_size,
        timeout=timeout,
    )


class _RecentlyUsed:
    """Which pooled connections answered a moment ago, so that the pool's check (a round trip,
    to replace connections that died while idle, e.g. across a server restart) runs only where
    it can find something: on a connection idle for more than `IDLE` seconds, or one whose
    socket has something to read while it should be silent (the server closed it, or sent the
    error that it is terminating it), which costs a `select`, not a round trip. A busy store
    then pays no extra round trip per call."""

    IDLE = 10.0

    def __init__(self) -> None:
        self._last: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()

    def used(self, conn: object) -> None:
        self._last[conn] = time.monotonic()

    def fresh(self, conn: Connection | AsyncConnection) -> bool:
        if time.monotonic() - self._last.get(conn, -math.inf) >= self.IDLE:
            return False
        try:
            readable, _, _ = select.select([conn.fileno()], [], [], 0)
        except (OSError, ValueError):  # a closed socket
            return False
        return not readable


class _Kept(Generic[C]):
    """The pool's connections the store keeps checked out between calls (see `Idle`).

    psycopg_pool hands its connections out in turn, and a checkout and return cost more than
    the statement's own client time: a store that takes the connection it used last skips
    both, and talks to a server process that has just run the same prepared statements (a
    commit in a chat turn: ~470 -> ~330 µs, `python benchmarks/run.py turn`). A connection
    goes back to the pool, where its checks and lifetime apply, after a failed call, when it
    has been out of the pool for `HELD` seconds (or the pool's shorter `max_lifetime`), when
    it has been idle for `_RecentlyUsed.IDLE` seconds or the server has closed it, and on
    close.
    """

    HELD = 60.0

    __slots__ = ("_held", "_idle", "recent")

    def __init__(self, pool: object, recent: _RecentlyUsed) -> None:
        self._idle: Idle[tuple[C, float]] = Idle(getattr(pool, "max_size", None))
        """(connection, when it left the pool)."""
        lifetime = getattr(pool, "max_lifetime", None)
        self._held = min(self.HELD, lifetime) if isinstance(lifetime, (int, float)) else self.HELD
        self.recent = recent

    def take(self) -> tuple[tuple[C, float] | None, C | None]:
        """(a kept connection fit for a call and when it left the pool, or None), then a kept
        connection to give back to the pool first (or None)."""
        lease = self._idle.take()
        if lease is None:
            return None, None
        if self.recent.fresh(lease[0]):
            return lease, None
        return None, lease[0]

    def keeps(self, conn: C, taken: float) -> bool:
        """Whether `conn`, after a call that succeeded, waits here (else it goes back)."""
        self.recent.used(conn)
        if time.monotonic() - taken >= self._held or conn.info.transaction_status != _IDLE:
            return False
        return self._idle.keep((conn, taken))

    def close(self) -> list[C]:
        """The idle connections, to give back; none is kept from now on."""
        return [conn for conn, _ in self._idle.close()]


class PostgresChatMemoryStore(BasicContract, WindowStore, HistoryStore):
    """Memories in PostgreSQL, shared by every process that connects to the same tables.

    Pass a connection string (`dsn`) and the store keeps its own `psycopg_pool.ConnectionPool`
    (`min_size`..`max_size` connections; a call waits at most `timeout` seconds for one and then
    raises `StoreError`), opened now and closed by `close()`. Or pass your own `pool`: the store
    uses it and never closes it (`min_size`, `max_size` and `timeout` are then ignored).

    The tables `<table>`, `<table>_memories` and `<table>_migrations` live in `schema`; both
    names are checked (letters, digits, underscores) and created or upgraded on first use.
    Every failure of the server or the connection raises `StoreError` naming the memory id,
    with the psycopg error as its cause; each call is one transaction, so nothing is
    half-written, and the next call uses a fresh connection. Safe to share between threads.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: ConnectionPool[Connection] | None = None,
        schema: str = "public",
        table: str = "chatmemory_messages",
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 10.0,
    ) -> None:
        self._pg = _core(
            dsn,
            pool,
            asynchronous=False,
            schema=schema,
            table=table,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
        )
        self._owns_pool = pool is None
        recent = _RecentlyUsed()
        if pool is None:
            from psycopg_pool import ConnectionPool

            self._pg.check_database(self)

            def check(conn: Connection) -> None:
                if not recent.fresh(conn):
                    ConnectionPool.check_connection(conn)

            pool = ConnectionPool(**self._pg.pool_options(check))
            pool.open()
        self._pool = pool
        self._kept: _Kept[Connection] = _Kept(pool, recent)
        self._migrated = False
        self._migrate_lock = threading.Lock()

    @property
    def pool(self) -> ConnectionPool[Connection]:
        """The connection pool the store runs on."""
        return self._pool

    def load_window(
        self, memory_id: str, *, since: WindowSnapshot | None = None, errors: Errors = "raise"
    ) -> WindowSnapshot:
        """The window; with `since`, one statement that returns `since` when unchanged and
        otherwise only the messages `since` does not hold."""
        return self._run(memory_id, self._pg.load_window(memory_id, since, errors), single=True)

    def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> Committed | None:
        """One statement, one round trip (see `_postgres_core`)."""
        flow = self._pg.commit_window(memory_id, version, append, evict)
        return self._run(memory_id, flow, single=True)

    def delete_messages(self, memory_id: str) -> None:
        self._run(memory_id, self._pg.delete_messages(memory_id))

    def history(
        self, memory_id: str, *, errors: Errors = "raise", seqs: Iterable[int] | None = None
    ) -> list[HistoryEntry]:
        """Every message ever added to `memory_id`, oldest first; with `seqs`, only those
        numbered so (found by the primary key, whatever the length of the history)."""
        return self._run(memory_id, self._pg.history(memory_id, errors, seqs), single=True)

    def memory_ids(self) -> list[str]:
        return self._run(None, self._pg.memory_ids(), single=True)

    def summaries(self) -> list[MemorySummary]:
        """Per memory id, counted by PostgreSQL in one query (nothing is decoded)."""
        return self._run(None, self._pg.summaries(), single=True)

    def _run(self, memory_id: str | None, flow: Flow[T], *, single: bool = False) -> T:
        """Run `flow` on a pooled connection: in a transaction, unless it is `single` (one
        statement) and the connection is in autocommit, where the statement is its own."""
        try:
            # getconn/putconn, not pool.connection(): that one ends with a COMMIT, a round trip
            # a single autocommitted statement does not need (putconn rolls back what is open).
            lease, stale = self._kept.take()
            if stale is not None:
                self._pool.putconn(stale)
            conn, taken = lease or (self._pool.getconn(), time.monotonic())
            kept = False
            try:
                if not self._migrated:
                    self._migrate(conn)
                if single and conn.autocommit:
                    with conn.cursor(row_factory=self._pg.row_factory) as cursor:
                        result = run(flow, cursor)
                else:
                    result = self._transaction(conn, flow)
                kept = self._kept.keeps(conn, taken)
                return result
            finally:
                if not kept:
                    self._pool.putconn(conn)
        except self._pg.DatabaseError as error:
            raise self._pg.store_error(self, error, memory_id) from error

    def _migrate(self, conn: Connection) -> None:
        with self._migrate_lock:
            if self._migrated:  # another thread did it while this one waited
                return
            self._transaction(conn, self._pg.migrate())
            self._migrated = True

    def _transaction(self, conn: Connection, flow: Flow[T]) -> T:
        with conn.transaction(), conn.cursor(row_factory=self._pg.row_factory) as cursor:
            return run(flow, cursor)

    def close(self) -> None:
        """Give back the connections the store keeps and close the pool it created (a pool
        passed in is left open)."""
        for conn in self._kept.close():
            self._pool.putconn(conn)
        if self._owns_pool:
            self._pool.close()

    def __repr__(self) -> str:
        return self._pg.describe(self)


class AsyncPostgresChatMemoryStore(AsyncBasicContract, AsyncWindowStore, AsyncHistoryStore):
    """`PostgresChatMemoryStore` for asyncio, on a `psycopg_pool.AsyncConnectionPool`.

    A pool the store creates is opened by `open()`, by `async with store`, or else by the first
    call, inside the running event loop; `aclose()` closes it. A pool passed in must be open
    and is never closed by the store. Same tables, rows and errors as the sync store, so sync
    and async applications can share them.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: AsyncConnectionPool[AsyncConnection] | None = None,
        schema: str = "public",
        table: str = "chatmemory_messages",
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 10.0,
    ) -> None:
        self._pg = _core(
            dsn,
            pool,
            asynchronous=True,
            schema=schema,
            table=table,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
        )
        self._opening = pool is None
        """True until the pool the store creates is opened (or the store is closed)."""
        self._owns_pool = pool is None
        recent = _RecentlyUsed()
        if pool is None:
            from psycopg_pool import AsyncConnectionPool

            async def check(conn: AsyncConnection) -> None:
                if not recent.fresh(conn):
                    await AsyncConnectionPool.check_connection(conn)

            pool = AsyncConnectionPool(**self._pg.pool_options(check))
        self._pool = pool
        self._kept: _Kept[AsyncConnection] = _Kept(pool, recent)
        self._migrated = False
        self._migrate_lock = asyncio.Lock()

    @property
    def pool(self) -> AsyncConnectionPool[AsyncConnection]:
        """The connection pool the store runs on."""
        return self._pool

    async def open(self) -> None:
        """Open the pool the store created, in the running loop (the first call does it too)."""
        if self._opening:
            await in_thread(self._pg.check_database, self)
            await self._pool.open()
            self._opening = False

    async def load_window(
        self, memory_id: str, *, since: WindowSnapshot | None = None, errors: Errors = "raise"
    ) -> WindowSnapshot:
        flow = self._pg.load_window(memory_id, since, errors)
        return await self._run(memory_id, flow, single=True)

    async def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> Committed | None:
        flow = self._pg.commit_window(memory_id, version, append, evict)
        return await self._run(memory_id, flow, single=True)

    async def delete_messages(self, memory_id: str) -> None:
        await self._run(memory_id, self._pg.delete_messages(memory_id))

    async def history(
        self, memory_id: str, *, errors: Errors = "raise", seqs: Iterable[int] | None = None
    ) -> list[HistoryEntry]:
        flow = self._pg.history(memory_id, errors, seqs)
        return await self._run(memory_id, flow, single=True)

    async def memory_ids(self) -> list[str]:
        return await self._run(None, self._pg.memory_ids(), single=True)

    async def summaries(self) -> list[MemorySummary]:
        """Per memory id, counted by PostgreSQL in one query (nothing is decoded)."""
        return await self._run(None, self._pg.summaries(), single=True)

    async def _run(self, memory_id: str | None, flow: Flow[T], *, single: bool = False) -> T:
        try:
            await self.open()
            lease, stale = self._kept.take()  # and getconn/putconn: see the sync store's `_run`
            if stale is not None:
                await self._pool.putconn(stale)
            conn, taken = lease or (await self._pool.getconn(), time.monotonic())
            kept = False
            try:
                if not self._migrated:
                    await self._migrate(conn)
                if single and conn.autocommit:
                    async with conn.cursor(row_factory=self._pg.async_row_factory) as cursor:
                        result = await arun(flow, cursor)
                else:
                    result = await self._transaction(conn, flow)
                kept = self._kept.keeps(conn, taken)
                return result
            finally:
                if not kept:
                    await self._pool.putconn(conn)
        except self._pg.DatabaseError as error:
            raise self._pg.store_error(self, error, memory_id) from error

    async def _migrate(self, conn: AsyncConnection) -> None:
        async with self._migrate_lock:
            if self._migrated:  # another task did it while this one waited
                return
            await self._transaction(conn, self._pg.migrate())
            self._migrated = True

    async def _transaction(self, conn: AsyncConnection, flow: Flow[T]) -> T:
        rows = self._pg.async_row_factory
        async with conn.transaction(), conn.cursor(row_factory=rows) as cursor:
            return await arun(flow, cursor)

    async def aclose(self) -> None:
        """Give back the connections the store keeps and close the pool it created (a pool
        passed in is left open)."""
        self._opening = False
        for conn in self._kept.close():
            await self._pool.putconn(conn)
        if self._owns_pool:
            await self._pool.close()

    async def __aenter__(self) -> AsyncPostgresChatMemoryStore:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return self._pg.describe(self)
