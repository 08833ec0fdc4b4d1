"""What only the PostgreSQL stores do: identifiers, migrations, pools, rows jsonb cannot hold,
corrupt rows, and the server being unreachable or killing the store's connections."""

from __future__ import annotations

import asyncio
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    AsyncMessageWindowChatMemory,
    ConfigurationError,
    CustomMessage,
    MessageWindowChatMemory,
    SerializationError,
    StoreError,
    UserMessage,
)
from chatmemory.stores import AsyncPostgresChatMemoryStore, NewMessage, PostgresChatMemoryStore
from tests.conftest import POSTGRES_DSN
from tests.stores import backends  # noqa: F401  (first: it imports every backend module)
from tests.stores.backend_postgres import admin, drop_schema, isolated_schema

psycopg = pytest.importorskip("psycopg")
psycopg_pool = pytest.importorskip("psycopg_pool")
from psycopg import sql  # noqa: E402

REFUSED_DSN = "postgresql://someone:s3cret-pw@127.0.0.1:1/nowhere"
"""Nothing listens on port 1: every connection attempt is refused at once."""

postgres = pytest.mark.postgres


def unique() -> str:
    return f"p{uuid.uuid4().hex[:12]}"


@pytest.fixture
def schema() -> Iterator[str]:
    with isolated_schema(unique()) as name:
        yield name


@pytest.fixture
def store(schema: str) -> Iterator[PostgresChatMemoryStore]:
    with PostgresChatMemoryStore(POSTGRES_DSN, schema=schema, timeout=5) as store:
        yield store


def add(store: PostgresChatMemoryStore, memory_id: str, *texts: str) -> None:
    version = store.load_window(memory_id).version
    append = [NewMessage(UserMessage(t)) for t in texts]
    assert store.commit_window(memory_id, version=version, append=append, evict=[])


def texts(store: PostgresChatMemoryStore, memory_id: str) -> list[str | None]:
    return [getattr(h.message, "text", None) for h in store.history(memory_id)]


def table(schema: str, name: str) -> sql.Identifier:
    return sql.Identifier(schema, name)


# --- configuration (no server needed) -----------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"schema": "bad-name"},
        {"schema": "1starts_with_a_digit"},
        {"schema": 'quote"d'},
        {"schema": "a; DROP TABLE x"},
        {"schema": ""},
        {"schema": "x" * 64},
        {"schema": None},
        {"table": "has space"},
        {"table": "x" * 53},  # leaves no room for "<table>_migrations" in 63 characters
        {"table": "ünïcode"},
        {"table": 42},
        {"min_size": -1},
        {"min_size": 5, "max_size": 4},
        {"max_size": 0, "min_size": 0},
        {"max_size": True},
        {"min_size": 1.5},
        {"timeout": 0},
        {"timeout": -1.0},
        {"timeout": "5"},
        {"timeout": True},
    ],
)
@pytest.mark.parametrize("cls", [PostgresChatMemoryStore, AsyncPostgresChatMemoryStore])
def test_bad_settings_are_configuration_errors(cls: Any, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        cls(REFUSED_DSN, **kwargs)


def test_longest_identifiers_are_accepted() -> None:
    with PostgresChatMemoryStore(REFUSED_DSN, schema="S" * 63, table="_" + "t9" * 25 + "x"):
        pass


@pytest.mark.parametrize("cls", [PostgresChatMemoryStore, AsyncPostgresChatMemoryStore])
def test_exactly_one_of_dsn_and_pool(cls: Any) -> None:
    with pytest.raises(ConfigurationError, match="exactly one of `dsn`") as caught:
        cls()
    assert "s3cret" not in str(caught.value)
    pool = psycopg_pool.NullConnectionPool(REFUSED_DSN, open=False)
    with pytest.raises(ConfigurationError, match="exactly one of `dsn`") as caught:
        cls(REFUSED_DSN, pool=pool)
    assert "s3cret" not in str(caught.value)


def test_a_pool_of_the_wrong_kind_is_refused() -> None:
    sync_pool = psycopg_pool.ConnectionPool(REFUSED_DSN, open=False)
    async_pool = psycopg_pool.AsyncConnectionPool(REFUSED_DSN, open=False)
    with pytest.raises(ConfigurationError, match="AsyncConnectionPool"):
        AsyncPostgresChatMemoryStore(pool=sync_pool)
    with pytest.raises(ConfigurationError, match=r"must be a psycopg_pool\.ConnectionPool"):
        PostgresChatMemoryStore(pool=async_pool)
    with pytest.raises(ConfigurationError):
        PostgresChatMemoryStore(pool="postgresql://")  # type: ignore[arg-type]


def test_an_invalid_dsn_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="not a valid PostgreSQL connection string") as e:
        PostgresChatMemoryStore("host=127.0.0.1 password=se cret")
    assert "cret" not in str(e.value)
    assert e.value.__cause__ is None
    with pytest.raises(ConfigurationError, match="invalid"):
        PostgresChatMemoryStore("host=127.0.0.1 port", pool=object())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "dsn", [REFUSED_DSN, "host=127.0.0.1 port=1 user=someone password=s3cret-pw dbname=nowhere"]
)
def test_repr_never_shows_the_password(dsn: str) -> None:
    with PostgresChatMemoryStore(dsn, schema="app", table="chat") as store:
        shown = repr(store)
    assert "s3cret" not in shown
    assert shown == (
        "PostgresChatMemoryStore(host='127.0.0.1', port='1', dbname='nowhere', user='someone', "
        "schema='app', table='chat')"
    )
    assert "s3cret" not in repr(AsyncPostgresChatMemoryStore(dsn))


def test_repr_with_a_pool_names_the_pool() -> None:
    pool = psycopg_pool.ConnectionPool(REFUSED_DSN, open=False, name="mine")
    store = PostgresChatMemoryStore(pool=pool)
    assert repr(store) == (
        "PostgresChatMemoryStore(pool=mine, schema='public', table='chatmemory_messages')"
    )
    assert store.pool is pool


@pytest.mark.parametrize("memory_id", ["", 7, None, "nul\x00inside", "lone \ud800 surrogate"])
def test_bad_memory_ids_fail_before_any_io(memory_id: Any) -> None:
    with PostgresChatMemoryStore(REFUSED_DSN, timeout=0.2) as store:
        for call in (
            lambda: store.load_window(memory_id),
            lambda: store.history(memory_id),
            lambda: store.delete_messages(memory_id),
            lambda: store.commit_window(memory_id, version=0, append=[], evict=[]),
        ):
            with pytest.raises(ConfigurationError, match="memory id"):
                call()


def test_bad_commit_arguments_fail_before_any_io() -> None:
    with PostgresChatMemoryStore(REFUSED_DSN, timeout=0.2) as store:
        with pytest.raises(ConfigurationError, match="version"):
            store.commit_window("m", version=-1, append=[], evict=[])
        with pytest.raises(ConfigurationError, match="version"):
            store.commit_window("m", version="1", append=[], evict=[])  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="evict"):
            store.commit_window("m", version=1, append=[], evict=["0"])  # type: ignore[list-item]
        with pytest.raises(ConfigurationError, match="evict"):
            store.commit_window("m", version=1, append=[], evict=[True])
        with pytest.raises(ConfigurationError, match="NewMessage"):
            store.commit_window(
                "m",
                version=1,
                append=[UserMessage("x")],  # type: ignore[list-item]
                evict=[],
            )
        with pytest.raises(ConfigurationError, match="errors"):
            store.history("m", errors="ignore")  # type: ignore[arg-type]


def test_a_message_the_codec_cannot_write_names_the_memory_id() -> None:
    with PostgresChatMemoryStore(REFUSED_DSN, timeout=0.2) as store:
        bad = NewMessage(CustomMessage({"x": float("nan")}))
        with pytest.raises(SerializationError, match="memory id 'm'") as caught:
            store.commit_window("m", version=0, append=[bad], evict=[])
    assert caught.value.memory_id == "m"
    assert caught.value.fragment is not None
    assert str(caught.value).count("CustomMessage") == 1


def test_missing_driver_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "chatmemory.stores._postgres_core", raising=False)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ImportError, match=r"pip install 'chatmemory\[postgres\]'"):
        PostgresChatMemoryStore(POSTGRES_DSN)


def test_other_import_errors_are_not_disguised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "chatmemory.stores._postgres_core", None)
    with pytest.raises(ImportError) as caught:
        AsyncPostgresChatMemoryStore(POSTGRES_DSN)
    assert "pip install" not in str(caught.value)


# --- an unreachable server ----------------------------------------------------------------------


def test_unreachable_server_is_a_store_error_naming_the_memory_id() -> None:
    with PostgresChatMemoryStore(REFUSED_DSN, timeout=0.5) as store:
        started = time.monotonic()
        with pytest.raises(StoreError, match="memory id 'alice'") as caught:
            store.load_window("alice")
        assert time.monotonic() - started < 5
        memory = MessageWindowChatMemory(max_messages=5, id="bob", store=store)
        with pytest.raises(StoreError, match="memory id 'bob'"):
            memory.add(UserMessage("hello"))
        with pytest.raises(StoreError) as listing:
            store.memory_ids()
    error = caught.value
    assert error.memory_id == "alice"
    assert error.store is store
    assert isinstance(error.__cause__, psycopg_pool.PoolTimeout)
    assert "reachable" in str(error)
    assert "s3cret" not in str(error)
    assert listing.value.memory_id is None


def test_unreachable_server_async() -> None:
    async def main() -> None:
        store = AsyncPostgresChatMemoryStore(REFUSED_DSN, timeout=0.5)
        try:
            memory = AsyncMessageWindowChatMemory(max_messages=5, id="carol", store=store)
            with pytest.raises(StoreError, match="memory id 'carol'") as caught:
                await memory.messages()
            assert isinstance(caught.value.__cause__, psycopg_pool.PoolTimeout)
        finally:
            await store.aclose()

    asyncio.run(main())


def test_a_closed_store_says_so() -> None:
    store = PostgresChatMemoryStore(REFUSED_DSN)
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get_messages("m")

    async def main() -> None:
        never_opened = AsyncPostgresChatMemoryStore(REFUSED_DSN)
        await never_opened.aclose()
        with pytest.raises(StoreError, match="closed"):
            await never_opened.get_messages("m")  # closing for good: not reopened by a call
        assert never_opened.pool.closed
        async with AsyncPostgresChatMemoryStore(REFUSED_DSN) as used:
            await used.open()  # opening twice is harmless
        with pytest.raises(StoreError, match="closed"):
            await used.memory_ids()

    asyncio.run(main())


# --- schema and migrations ----------------------------------------------------------------------


@postgres
def test_migrations_are_recorded_and_applied_once(schema: str) -> None:
    with PostgresChatMemoryStore(POSTGRES_DSN, schema=schema, table="chat") as store:
        assert store.memory_ids() == []
    with PostgresChatMemoryStore(POSTGRES_DSN, schema=schema, table="chat") as again:
        add(again, "m", "hello")
    rows = admin(
        sql.SQL("SELECT version, name, applied_at IS NOT NULL FROM {} ORDER BY version").format(
            table(schema, "chat_migrations")
        )
    )
    assert rows == [(1, "create the memories and messages tables", True)]
    tables = admin(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (schema,)
    )
    assert tables == [("chat",), ("chat_memories",), ("chat_migrations",)]
    [(definition,)] = admin(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = 'chat_window'",
        (schema,),
    )
    assert definition.endswith("(memory_id, seq) WHERE in_window")


@postgres
def test_tables_of_one_schema_are_independent(schema: str) -> None:
    with (
        PostgresChatMemoryStore(POSTGRES_DSN, schema=schema, table="a") as a,
        PostgresChatMemoryStore(POSTGRES_DSN, schema=schema, table="b") as b,
    ):
        add(a, "m", "in a")
        add(b, "m", "in b")
        assert texts(a, "m") == ["in a"]
        assert texts(b, "m") == ["in b"]


@postgres
def test_concurrent_first_opens_migrate_once(schema: str) -> None:
    starters = 8
    barrier = threading.Barrier(starters)
    failures: list[BaseException] = []

    def first_open(i: int) -> None:
        try:
            with PostgresChatMemoryStore(POSTGRES_DSN, schema=schema, timeout=10) as store:
                barrier.wait()
                add(store, f"id{i}", f"from {i}")
        except BaseException as error:  # pragma: no cover - reported below
            failures.append(error)

    threads = [threading.Thread(target=first_open, args=(i,)) for i in range(starters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    migrations = table(schema, "chatmemory_messages_migrations")
    assert admin(sql.SQL("SELECT version FROM {}").format(migrations)) == [(1,)]
    with PostgresChatMemoryStore(POSTGRES_DSN, schema=schema) as store:
        assert store.memory_ids() == sorted(f"id{i}" for i in range(starters))


@postgres
def test_first_calls_from_many_threads_on_one_store(schema: str) -> None:
    with PostgresChatMemoryStore(POSTGRES_DSN, schema=schema, min_size=4) as store:
        store.pool.wait()
        barrier = threading.Barrier(4)

        def first_call(i: int) -> None:
            barrier.wait()
            add(store, f"id{i}", "hello")

        threads = [threading.Thread(target=first_call, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert store.memory_ids() == ["id0", "id1", "id2", "id3"]


@postgres
def test_concurrent_first_opens_async(schema: str) -> None:
    async def main() -> None:
        stores = [AsyncPostgresChatMemoryStore(POSTGRES_DSN, schema=schema) for _ in range(6)]
        try:
            await asyncio.gather(*(s.memory_ids() for s in stores))
            await asyncio.gather(*(s.get_messages("x") for s in stores))  # already migrated
            # one store, several first calls at once: one migrates, the others wait for it
            one = AsyncPostgresChatMemoryStore(POSTGRES_DSN, schema=schema, min_size=4)
            stores.append(one)
            await one.open()
            await one.pool.wait()
            await asyncio.gather(*(one.get_messages(f"y{i}") for i in range(4)))
        finally:
            await asyncio.gather(*(s.aclose() for s in stores))

    asyncio.run(main())
    migrations = table(schema, "chatmemory_messages_migrations")
    assert admin(sql.SQL("SELECT count(*) FROM {}").format(migrations)) == [(1,)]


@postgres
def test_an_existing_schema_is_used_as_it_is(schema: str) -> None:
    admin(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    with PostgresChatMemoryStore(POSTGRES_DSN, schema=schema) as store:
        add(store, "m", "x")
        assert texts(store, "m") == ["x"]


# --- pools ----------------------------------------------------------------------------------------


@postgres
def test_a_pool_passed_in_is_used_and_not_closed(schema: str) -> None:
    # The caller's pool: not autocommit (psycopg's default), dict rows, its own JSON loader.
    def configure(conn: Any) -> None:
        psycopg.types.json.set_json_loads(lambda data: "not what the store expects", conn)

    with psycopg_pool.ConnectionPool(
        POSTGRES_DSN,
        min_size=1,
        max_size=2,
        kwargs={"row_factory": psycopg.rows.dict_row},
        configure=configure,
        open=True,
    ) as pool:
        with PostgresChatMemoryStore(pool=pool, schema=schema) as store:
            assert store.pool is pool
            add(store, "m", "one", "two")  # every call still commits
            assert store.get_messages("m") == [UserMessage("one"), UserMessage("two")]
        assert not pool.closed
        with pool.connection() as conn:
            row: object = conn.execute("SELECT 1 AS one").fetchone()
            assert row == {"one": 1}
        with PostgresChatMemoryStore(POSTGRES_DSN, schema=schema) as other:
            assert texts(other, "m") == ["one", "two"]


@postgres
def test_an_async_pool_passed_in_is_used_and_not_closed(schema: str) -> None:
    async def main() -> None:
        async with psycopg_pool.AsyncConnectionPool(
            POSTGRES_DSN, min_size=1, max_size=4, open=False
        ) as pool:
            async with AsyncPostgresChatMemoryStore(pool=pool, schema=schema) as store:
                await store.update_messages("m", [UserMessage("a"), AiMessage("b")])
                assert store.pool is pool
                # the store keeps the connection it used last, as the sync store does
                asked = requests(pool)
                memory = AsyncMessageWindowChatMemory(max_messages=3, id="w", store=store)
                for text in "abcd":
                    await memory.add(UserMessage(text))
                assert await memory.messages() == [UserMessage(t) for t in "bcd"]
                assert requests(pool) == asked
                assert lent(pool) == 1
            assert lent(pool) == 0  # given back on close
            assert not pool.closed
            async with pool.connection() as conn:
                assert await (await conn.execute("SELECT 1")).fetchone() == (1,)
            # without `async with`: the first call opens the store's own pool
            own = AsyncPostgresChatMemoryStore(POSTGRES_DSN, schema=schema)
            try:
                assert await own.get_messages("m") == [UserMessage("a"), AiMessage("b")]
            finally:
                await own.aclose()
            assert own.pool.closed

    asyncio.run(main())


# --- connections kept between calls --------------------------------------------------------------


def requests(pool: Any) -> int:
    """How many connections `pool` has handed out so far."""
    return int(pool.get_stats().get("requests_num", 0))


def lent(pool: Any) -> int:
    """How many of `pool`'s connections are out of it now."""
    stats = pool.get_stats()
    return int(stats["pool_size"] - stats["pool_available"])


@postgres
def test_a_store_keeps_the_connection_it_used_last(schema: str) -> None:
    with PostgresChatMemoryStore(POSTGRES_DSN, schema=schema, max_size=4) as store:
        memory = MessageWindowChatMemory(max_messages=3, id="m", store=store)
        memory.add(UserMessage("first"))
        asked = requests(store.pool)
        for i in range(20):
            memory.add(UserMessage(str(i)))
            assert memory.messages()[-1] == UserMessage(str(i))
        assert requests(store.pool) == asked  # no call went to the pool again
        assert lent(store.pool) == 1

        # callers at the same time: one takes the kept connection, the others the pool's
        def one(number: int) -> None:
            window = MessageWindowChatMemory(max_messages=100, id=f"t{number % 4}", store=store)
            window.add(UserMessage(str(number)))

        with ThreadPoolExecutor(4) as threads:
            list(threads.map(one, range(40)))
        assert [sorted(texts(store, f"t{i}"), key=int) for i in range(4)] == [  # type: ignore[arg-type]
            [str(n) for n in range(i, 40, 4)] for i in range(4)
        ]
        assert lent(store.pool) == 1  # still at most a quarter of max_size
    assert store.pool.closed


@postgres
@pytest.mark.parametrize("max_size", [1, 2, 3])
def test_a_small_pool_gets_every_connection_back(schema: str, max_size: int) -> None:
    with (
        psycopg_pool.ConnectionPool(POSTGRES_DSN, min_size=1, max_size=max_size) as pool,
        PostgresChatMemoryStore(pool=pool, schema=schema) as store,
    ):
        for i in range(3):
            add(store, "m", str(i))
            assert lent(pool) == 0
        with pool.connection(timeout=1) as conn:  # the caller's own use never waits
            assert conn.execute("SELECT 1").fetchone() == (1,)


@postgres
def test_a_pool_passed_in_gets_the_kept_connection_back_on_close(schema: str) -> None:
    with psycopg_pool.ConnectionPool(POSTGRES_DSN, min_size=1, max_size=4) as pool:
        store = PostgresChatMemoryStore(pool=pool, schema=schema)
        add(store, "m", "one")
        assert lent(pool) == 1
        store.close()
        assert lent(pool) == 0
        assert not pool.closed
        add(store, "m", "two")  # a closed store on an open pool still works, keeping nothing
        assert lent(pool) == 0
        assert texts(store, "m") == ["one", "two"]


@postgres
@pytest.mark.parametrize("setting", ["_Kept.HELD", "_RecentlyUsed.IDLE"])
def test_a_connection_kept_long_or_idle_goes_back_through_the_pool(
    schema: str, setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # HELD: out of the pool this long, its lifetime is the pool's to judge again;
    # IDLE: unused this long, the pool's check runs on it before the next call
    monkeypatch.setattr(f"chatmemory.stores.postgres.{setting}", 0.0)
    with PostgresChatMemoryStore(POSTGRES_DSN, schema=schema, max_size=4) as store:
        add(store, "m", "a")
        asked = requests(store.pool)
        add(store, "m", "b")
        add(store, "m", "c")
        assert requests(store.pool) == asked + 4  # each load and commit: from the pool
        assert texts(store, "m") == ["a", "b", "c"]


@postgres
def test_commits_run_on_their_prepared_generic_plan(schema: str) -> None:
    """PostgreSQL plans a prepared statement again for each call when a plan made for the
    values looks cheaper than the generic plan (~100 µs of a commit's server time): once a
    memory's history has grown, a commit that evicts one message must not look so."""
    with PostgresChatMemoryStore(POSTGRES_DSN, schema=schema) as first:
        grown = MessageWindowChatMemory(max_messages=150, id="m", store=first)
        for start in range(0, 4_000, 100):
            grown.add(*(UserMessage(str(i)) for i in range(start, start + 100)))
    with psycopg_pool.ConnectionPool(POSTGRES_DSN, min_size=1, max_size=4) as pool:
        pool.wait()  # its one connection is open: the store takes that one
        with PostgresChatMemoryStore(pool=pool, schema=schema) as store:
            memory = MessageWindowChatMemory(max_messages=150, id="m", store=store)
            for i in range(30):  # each commit evicts one message
                memory.add(UserMessage(f"turn {i}"))
        with pool.connection() as conn:  # the one connection the store used, given back
            plans = conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE 'WITH claimed AS (UPDATE %'"
            ).fetchall()
    assert plans == [(30 - 5, 5)]  # planned for the first five only, as PostgreSQL does


@postgres
def test_a_connection_is_kept_no_longer_than_the_pools_max_lifetime(schema: str) -> None:
    with psycopg_pool.ConnectionPool(
        POSTGRES_DSN, min_size=1, max_size=4, max_lifetime=0.2
    ) as pool:
        pool.wait()
        with PostgresChatMemoryStore(pool=pool, schema=schema) as store:
            add(store, "m", "a")
            asked = requests(pool)
            add(store, "m", "b")
            assert requests(pool) == asked  # kept
            time.sleep(0.3)
            add(store, "m", "c")  # its load gives it back, the commit takes one from the pool
            assert requests(pool) == asked + 1
            assert texts(store, "m") == ["a", "b", "c"]


@postgres
def test_sync_and_async_stores_share_the_tables(
    schema: str, store: PostgresChatMemoryStore
) -> None:
    add(store, "shared", "from sync")

    async def main() -> None:
        async with AsyncPostgresChatMemoryStore(POSTGRES_DSN, schema=schema) as other:
            memory = AsyncMessageWindowChatMemory(max_messages=10, id="shared", store=other)
            await memory.add(AiMessage("from async"))

    asyncio.run(main())
    assert store.get_messages("shared") == [UserMessage("from sync"), AiMessage("from async")]


# --- what jsonb cannot hold -----------------------------------------------------------------------


@postgres
@pytest.mark.parametrize("bad", ["nul \x00 inside", "lone \udc00 surrogate", "\ud83d"])
def test_a_message_jsonb_cannot_hold_is_rejected_and_nothing_is_written(
    store: PostgresChatMemoryStore, bad: str
) -> None:
    add(store, "m", "before")
    before = store.load_window("m")
    batch = [NewMessage(UserMessage("fine")), NewMessage(AiMessage(bad))]
    with pytest.raises(SerializationError, match="jsonb cannot hold") as caught:
        store.commit_window("m", version=before.version, append=batch, evict=[0])
    assert caught.value.memory_id == "m"
    assert store.load_window("m") == before
    assert texts(store, "m") == ["before"]
    memory = MessageWindowChatMemory(max_messages=5, id="fresh", store=store)
    with pytest.raises(SerializationError, match="message 0 of the batch"):
        memory.add(UserMessage(bad))
    assert "fresh" not in store.memory_ids()
    assert store.history("fresh") == []


@postgres
def test_text_that_only_looks_like_an_escape_is_stored(store: PostgresChatMemoryStore) -> None:
    look_alikes = ["\\u0000", "\\\\u0000", "\\ud800", "emoji 🧠 \U0001f600", "\\" * 5 + "u0000"]
    messages = [UserMessage(text) for text in look_alikes]
    messages.append(
        UserMessage(
            "\\u0000 with attributes",
            attributes={"n": 1, "x": 2.5, "ok": True, "none": None, "list": [1, "\\uD800"]},
        )
    )
    memory = MessageWindowChatMemory(max_messages=10, id="m", store=store)
    memory.add(messages)
    assert store.get_messages("m") == messages
    assert texts(store, "m")[:-1] == look_alikes


def test_errors_without_a_fragment_are_located() -> None:
    from chatmemory.stores._postgres_core import _located

    error = _located(SerializationError("cannot read"), "m", 3)
    assert str(error) == "cannot read; memory id 'm'; row 3"
    assert (error.memory_id, error.row, error.fragment) == ("m", 3, None)


@postgres
def test_a_commit_at_a_version_the_id_never_had_writes_nothing(
    store: PostgresChatMemoryStore,
) -> None:
    append = [NewMessage(UserMessage("x"))]
    assert not store.commit_window("unknown", version=3, append=append, evict=[])
    assert store.memory_ids() == []
    add(store, "m", "a")
    version = store.load_window("m").version
    committed = store.commit_window("m", version=version, append=[], evict=[41, 42])
    assert committed is not None  # seqs not in the window are ignored
    assert store.load_window("m").version == committed.version > version
    assert texts(store, "m") == ["a"]


# --- corrupt rows ---------------------------------------------------------------------------------


def corrupt(schema: str, memory_id: str, seq: int, value: str) -> None:
    admin(
        sql.SQL("UPDATE {} SET message = %s::jsonb WHERE memory_id = %s AND seq = %s").format(
            table(schema, "chatmemory_messages")
        ),
        (value, memory_id, seq),
    )


@postgres
@pytest.mark.parametrize(
    "value", ['{"type": "NOT_A_TYPE"}', '"just a string"', "[1, 2]", '{"type": "USER"}', "null"]
)
def test_a_corrupt_row_names_memory_id_and_row(
    schema: str, store: PostgresChatMemoryStore, value: str
) -> None:
    add(store, "m", "zero", "one", "two")
    add(store, "other", "unaffected")
    corrupt(schema, "m", 1, value)
    with pytest.raises(SerializationError) as caught:
        store.history("m")
    error = caught.value
    assert (error.memory_id, error.row) == ("m", 1)
    assert "memory id 'm'" in str(error)
    assert "row 1" in str(error)
    assert error.fragment is not None
    assert str(error).count("; in ") == 1  # the fragment is quoted once
    assert isinstance(error.__cause__, SerializationError)
    skipped = store.history("m", errors="skip")
    assert [h.seq for h in skipped] == [0, 2]
    with pytest.raises(SerializationError, match="row 1"):
        store.load_window("m")  # the corrupt row is in the window
    assert texts(store, "other") == ["unaffected"]
    # evicted from the window, it no longer stands in the way of the memory
    version = store.load_window("other").version
    assert version > 0
    admin(
        sql.SQL("UPDATE {} SET in_window = false WHERE memory_id = 'm' AND seq = 1").format(
            table(schema, "chatmemory_messages")
        )
    )
    assert [r.seq for r in store.load_window("m").rows] == [0, 2]


@postgres
def test_a_corrupt_row_async(schema: str) -> None:
    async def main() -> None:
        async with AsyncPostgresChatMemoryStore(POSTGRES_DSN, schema=schema) as store:
            await store.update_messages("m", [UserMessage("a"), UserMessage("b")])
            corrupt(schema, "m", 0, '{"type": "SYSTEM", "text": 5}')
            with pytest.raises(SerializationError, match="row 0"):
                await store.history("m")
            assert [h.seq for h in await store.history("m", errors="skip")] == [1]

    asyncio.run(main())


# --- the server killing the store's connections ---------------------------------------------------


def server_pids(application_name: str, *, waiting: bool = False) -> list[int]:
    query = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
    if waiting:
        query += " AND wait_event_type = 'Lock'"
    return [pid for (pid,) in admin(query, (application_name,))]


def terminate(pids: list[int]) -> None:
    for pid in pids:
        admin("SELECT pg_terminate_backend(%s)", (pid,))


def wait_for(condition: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("timed out")  # pragma: no cover


@postgres
def test_a_connection_killed_mid_commit_writes_nothing_and_the_store_recovers(
    schema: str,
) -> None:
    name = f"cm_{unique()}"
    dsn = f"{POSTGRES_DSN}?application_name={name}"
    with PostgresChatMemoryStore(dsn, schema=schema, timeout=5) as store:
        add(store, "m", "zero", "one")
        before = store.load_window("m")
        history_before = store.history("m")
        # Another session locks row 0, so the commit stops after bumping the version, while
        # marking row 0 evicted: the server then kills the store's connection.
        with psycopg.connect(POSTGRES_DSN) as blocker:
            blocker.execute(
                sql.SQL("SELECT 1 FROM {} WHERE memory_id = 'm' AND seq = 0 FOR UPDATE").format(
                    table(schema, "chatmemory_messages")
                )
            )
            outcome: list[BaseException | bool] = []

            def commit() -> None:
                try:
                    outcome.append(
                        store.commit_window(  # type: ignore[arg-type]
                            "m",
                            version=before.version,
                            append=[NewMessage(UserMessage("two"))],
                            evict=[0],
                        )
                    )
                except BaseException as error:
                    outcome.append(error)

            writer = threading.Thread(target=commit)
            writer.start()
            terminate(wait_for(lambda: server_pids(name, waiting=True)))
            writer.join(10)
            blocker.rollback()
        [error] = outcome
        assert isinstance(error, StoreError)
        assert error.memory_id == "m"
        assert isinstance(error.__cause__, psycopg.OperationalError)
        assert "connection" in str(error)
        # nothing half-written: same version, same rows, row 0 still in the window
        assert store.load_window("m") == before
        assert store.history("m") == history_before
        # the store recovers: the next call works
        add(store, "m", "two")
        assert texts(store, "m") == ["zero", "one", "two"]


@postgres
@pytest.mark.parametrize("max_size", [2, 4])  # 4: the store keeps one of them out of the pool
def test_idle_connections_killed_by_the_server_are_replaced(schema: str, max_size: int) -> None:
    name = f"cm_{unique()}"
    dsn = f"{POSTGRES_DSN}?application_name={name}"
    with PostgresChatMemoryStore(dsn, schema=schema, min_size=2, max_size=max_size) as store:
        add(store, "m", "before")
        assert lent(store.pool) == max_size // 4
        pids = wait_for(lambda: (p := server_pids(name)) and len(p) >= 2 and p)
        terminate(pids)
        wait_for(lambda: not set(server_pids(name)) & set(pids))
        add(store, "m", "after")  # the very next call works
        assert texts(store, "m") == ["before", "after"]


@postgres
def test_a_connection_killed_mid_run_async(schema: str) -> None:
    name = f"cm_{unique()}"
    dsn = f"{POSTGRES_DSN}?application_name={name}"

    async def main() -> None:
        async with AsyncPostgresChatMemoryStore(dsn, schema=schema) as store:
            memory = AsyncMessageWindowChatMemory(max_messages=1, id="m", store=store)
            await memory.add(UserMessage("zero"))
            with psycopg.connect(POSTGRES_DSN) as blocker:
                blocker.execute(
                    sql.SQL("SELECT 1 FROM {} WHERE memory_id = 'm' FOR UPDATE").format(
                        table(schema, "chatmemory_messages_memories")
                    )
                )
                adding = asyncio.create_task(memory.add(UserMessage("one")))
                pids = await asyncio.to_thread(wait_for, lambda: server_pids(name, waiting=True))
                await asyncio.to_thread(terminate, pids)
                with pytest.raises(StoreError, match="memory id 'm'"):
                    await adding
                blocker.rollback()
            assert [h.message for h in await store.history("m")] == [UserMessage("zero")]
            await memory.add(UserMessage("one"))
            assert await memory.messages() == [UserMessage("one")]

    asyncio.run(main())


@postgres
def test_other_database_errors_are_store_errors(
    schema: str, store: PostgresChatMemoryStore
) -> None:
    add(store, "m", "x")
    # a row left behind by hand for a memory id the store does not know: the insert collides
    admin(
        sql.SQL(
            "INSERT INTO {} (memory_id, seq, message, in_window) VALUES ('ghost', 0, '{{}}', true)"
        ).format(table(schema, "chatmemory_messages"))
    )
    asked = requests(store.pool)
    with pytest.raises(StoreError, match="UniqueViolation") as caught:
        add(store, "ghost", "collides")  # the load's connection is kept, the commit's is not
    assert caught.value.memory_id == "ghost"
    assert lent(store.pool) == 0
    add(store, "m", "y")
    assert requests(store.pool) == asked + 1
    assert texts(store, "m") == ["x", "y"]
    assert "ghost" not in store.memory_ids()
    drop_schema(schema)
    with pytest.raises(StoreError, match="does not exist"):
        store.get_messages("m")


@postgres
def test_a_database_that_does_not_exist_is_named_at_once() -> None:
    import time

    from tests.conftest import POSTGRES_DSN

    dsn = POSTGRES_DSN.rsplit("/", 1)[0] + "/chatmemory_no_such_db"
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"'chatmemory_no_such_db' does not exist.*createdb"):
        PostgresChatMemoryStore(dsn, timeout=10)

    async def main() -> None:
        with pytest.raises(StoreError, match="does not exist"):
            async with AsyncPostgresChatMemoryStore(dsn, timeout=10):
                pass

    asyncio.run(main())
    assert time.monotonic() - started < 5


@postgres
def test_a_commit_reads_no_more_than_the_window_whatever_plan_is_cached(
    store: PostgresChatMemoryStore,
) -> None:
    """A commit's generic plan, made when the table was empty, finds the evicted rows by their
    seqs, not among every entry the window index holds for the memory (the rows evicted since
    the last vacuum are still there)."""
    statement = store._pg.sql.commit
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", statement.decode())))
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        store.memory_ids()  # the tables exist, empty
        nothing = {"id": "m", "version": 2**40, "n": 0, "evict": "{}", "low": "0", "high": "-1"}
        conn.execute(statement, {**nothing, "rows": "[]"}, prepare=True)  # claims nothing
        (name,) = conn.execute("SELECT name FROM pg_prepared_statements").fetchone() or ("",)
        memory = MessageWindowChatMemory(max_messages=10, id="m", store=store)
        for start in range(0, 2_000, 100):  # 1,990 rows evicted, their index entries left
            memory.add(*(UserMessage(str(i)) for i in range(start, start + 100)))
        window = store.load_window("m")
        oldest = window.rows[0].seq
        args = {
            "id": "m",
            "version": window.version,
            "n": 0,
            "evict": f"{{{oldest}}}",
            "low": str(oldest),
            "high": str(oldest),
            "rows": "[]",
        }
        plan = psycopg.ClientCursor(conn).execute(
            f"EXPLAIN ANALYZE EXECUTE {name}({', '.join(['%s'] * len(names))})".encode(),
            [args[n] for n in names],
        )
        text = "\n".join(line for (line,) in plan.fetchall())
    assert "Rows Removed by Filter" not in text, text
    assert "(seq >= $" in text, text
    assert "_window" in text
    assert store.load_window("m").rows[0].seq == oldest + 1


@postgres
def test_a_partial_history_read_finds_its_rows_by_key_whatever_plan_is_cached(
    store: PostgresChatMemoryStore,
) -> None:
    """`history(seqs=...)`'s generic plan, made when the table was empty, still looks the seqs
    up in the primary key (no scan of the memory's history)."""
    statement = store._pg.sql.some_history
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        store.memory_ids()  # the tables exist, empty
        conn.execute(statement, {"id": "m", "seqs": "{1}"}, prepare=True)
        (name,) = conn.execute("SELECT name FROM pg_prepared_statements").fetchone() or ("",)
        for _ in range(3):  # 3,000 rows of history
            append = [NewMessage(UserMessage(str(i)), in_window=False) for i in range(1_000)]
            version = store.load_window("m").version
            assert store.commit_window("m", version=version, append=append, evict=[])
        plan = psycopg.ClientCursor(conn).execute(
            f"EXPLAIN ANALYZE EXECUTE {name}(%s, %s)".encode(), ["m", "{5,1500,2999,4000}"]
        )
        text = "\n".join(line for (line,) in plan.fetchall())
    assert "Seq Scan" not in text, text
    (found,) = [line for line in text.splitlines() if "Index Cond" in line]
    assert "_pkey" in text, text
    assert "(memory_id = $1) AND (seq = ANY ($2))" in found, text
    assert [h.seq for h in store.history("m", seqs=[5, 1500, 2999, 4000])] == [5, 1500, 2999]
