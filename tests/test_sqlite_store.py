"""SqliteChatMemoryStore beyond the shared contract: schema and migrations, the file, failures,
and the asyncio store's worker thread. Everything runs on real SQLite databases."""

from __future__ import annotations

import asyncio
import multiprocessing
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatmemory import (
    AiMessage,
    ConfigurationError,
    MessageWindowChatMemory,
    SerializationError,
    StoreError,
    UserMessage,
    message_to_json,
)
from chatmemory.stores import NewMessage
from chatmemory.stores import sqlite as sqlite_module
from chatmemory.stores._sqlite_schema import MIGRATIONS, Migration, migrate
from chatmemory.stores.sqlite import (
    AsyncSqliteChatMemoryStore,
    SqliteChatMemoryStore,
    _retry_while_locked,
)

from ._workers import open_and_add

SPEC = "chatmemory.stores.sqlite:SqliteChatMemoryStore"
TABLES = {"chatmemory_memories", "chatmemory_messages", "chatmemory_window"}


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "chat.db"


@contextmanager
def raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection to the file (another program looking at it), closed after."""
    with closing(sqlite3.connect(path, isolation_level=None)) as connection:
        yield connection


def connection_of(store: SqliteChatMemoryStore) -> sqlite3.Connection:
    connection = store._connection
    assert connection is not None
    return connection


# -- schema and migrations -------------------------------------------------------------------


def test_migrations_are_numbered_in_order() -> None:
    assert [m.number for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert len({m.name for m in MIGRATIONS}) == len(MIGRATIONS)


def test_migrations_are_recorded_and_reopening_applies_nothing(path: Path) -> None:
    SqliteChatMemoryStore(path).close()
    with raw(path) as db:
        recorded = db.execute("SELECT id, name, applied_at FROM chatmemory_migrations").fetchall()
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    assert [(number, name) for number, name, _ in recorded] == [
        (m.number, m.name) for m in MIGRATIONS
    ]
    assert datetime.fromisoformat(recorded[0][2]).utcoffset() == timedelta(0)
    assert tables >= TABLES | {"chatmemory_migrations"}

    with SqliteChatMemoryStore(path) as store:
        assert migrate(connection_of(store), store) == []
    with raw(path) as db:
        assert db.execute("SELECT id, name, applied_at FROM chatmemory_migrations").fetchall() == (
            recorded
        )


def test_a_database_at_an_older_level_is_migrated_forward(path: Path) -> None:
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("old", [UserMessage("written before the upgrade")])
    later = (
        *MIGRATIONS,
        Migration(
            len(MIGRATIONS) + 1,
            "a later index",
            ("CREATE INDEX later ON chatmemory_messages (created_at)",),
        ),
    )
    with raw(path) as db:
        assert migrate(db, "owner", later) == [later[-1].number]
        assert migrate(db, "owner", later) == []
        numbers = [n for (n,) in db.execute("SELECT id FROM chatmemory_migrations ORDER BY id")]
        assert numbers == [m.number for m in later]
        text = db.execute("SELECT message FROM chatmemory_messages").fetchone()[0]
    assert text == message_to_json(UserMessage("written before the upgrade"))


def test_a_failing_migration_leaves_the_database_as_it_was(path: Path) -> None:
    SqliteChatMemoryStore(path).close()
    broken = (
        *MIGRATIONS,
        Migration(len(MIGRATIONS) + 1, "broken", ("CREATE TABLE half_done (a)", "NOT SQL AT ALL")),
    )
    with raw(path) as db:
        with pytest.raises(sqlite3.OperationalError):
            migrate(db, "owner", broken)
        assert not db.in_transaction
        names = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        assert "half_done" not in names
        assert db.execute("SELECT count(*) FROM chatmemory_migrations").fetchone() == (
            len(MIGRATIONS),
        )


def test_a_database_from_a_newer_chatmemory_is_refused(path: Path) -> None:
    SqliteChatMemoryStore(path).close()
    with raw(path) as db:
        db.execute("INSERT INTO chatmemory_migrations VALUES (99, 'from the future', 'x')")
    with pytest.raises(StoreError, match=r"newer chatmemory.*migration 99 'from the future'"):
        SqliteChatMemoryStore(path)


def test_the_store_shares_a_file_with_the_applications_own_tables(path: Path) -> None:
    with raw(path) as db:
        db.execute("CREATE TABLE app_users (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO app_users (name) VALUES ('ada')")
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("ada", [UserMessage("hi")])
        assert store.get_messages("ada") == [UserMessage("hi")]
    with raw(path) as db:
        assert db.execute("SELECT name FROM app_users").fetchall() == [("ada",)]


def test_processes_opening_a_fresh_file_at_once_migrate_it_once(path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    count = 6
    start = context.Barrier(count)
    spec = (SPEC, {"path": str(path)})
    workers = [
        context.Process(target=open_and_add, args=(spec, "m", f"process {i}", start))
        for i in range(count)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0] * count
    with raw(path) as db:
        assert db.execute("SELECT id FROM chatmemory_migrations").fetchall() == [
            (m.number,) for m in MIGRATIONS
        ]
    with SqliteChatMemoryStore(path) as store:
        texts = sorted(h.message.text for h in store.history("m"))  # type: ignore[union-attr,type-var]
    assert texts == sorted(f"process {i}" for i in range(count))


def test_a_lock_answered_at_once_is_retried_until_the_timeout() -> None:
    attempts: list[float] = []

    def locked_twice() -> str:
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "wal"

    assert _retry_while_locked(locked_twice, 5.0) == "wal"
    assert len(attempts) == 3

    def always_locked() -> str:
        raise sqlite3.OperationalError("database is locked")

    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        _retry_while_locked(always_locked, 0.05)
    assert 0.02 < time.monotonic() - started < 1.0

    def broken() -> str:
        attempts.append(0)
        raise sqlite3.OperationalError("disk I/O error")

    attempts.clear()
    with pytest.raises(sqlite3.OperationalError, match="disk"):
        _retry_while_locked(broken, 5.0)
    assert len(attempts) == 1  # not a lock: not retried


# -- the file --------------------------------------------------------------------------------


def test_wal_synchronous_busy_timeout_and_secure_delete_are_set(path: Path) -> None:
    with SqliteChatMemoryStore(path, timeout=2.5) as store:
        connection = connection_of(store)

        def pragma(name: str) -> object:
            return connection.execute(f"PRAGMA {name}").fetchone()[0]

        assert pragma("journal_mode") == "wal"
        assert pragma("busy_timeout") == 2500
        assert pragma("synchronous") == 1  # NORMAL
        assert pragma("secure_delete") == 1
    with raw(path) as db:  # WAL is a property of the file: every connection uses it
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_every_statement_searches_by_key_and_none_scans_the_history(path: Path) -> None:
    statements = [
        sqlite_module._VERSION,
        sqlite_module._EVICT,
        sqlite_module._BUMP,
        sqlite_module._WINDOW,
        sqlite_module._WHOLE_HISTORY,
        sqlite_module._SOME_HISTORY,
        sqlite_module._KEY,
        *sqlite_module._FORGET,
    ]
    with SqliteChatMemoryStore(path) as store:
        connection = connection_of(store)
        for statement in statements:
            numbered = [int(n) for n in re.findall(r"\?(\d+)", statement)]
            parameters = (1,) * (max(numbered) if numbered else statement.count("?"))
            rows = connection.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)
            plan = [row[3] for row in rows]
            assert plan, statement
            tables = [step for step in plan if "json_each" not in step and "SUBQUERY" not in step]
            assert all(step.startswith("SEARCH") for step in tables), (statement, plan)


def test_an_add_and_a_read_do_the_same_work_after_1_000_and_100_000_messages(
    path: Path,
) -> None:
    """Work is counted in SQLite VM instructions: deterministic, unlike a timer. (Descending a
    deeper B-tree is still one instruction; any scan or rewrite of the history would add
    thousands.)"""
    with SqliteChatMemoryStore(path) as store:
        connection = connection_of(store)
        memory = MessageWindowChatMemory(id="long", max_messages=20, store=store)
        old = [NewMessage(UserMessage(f"old {i}"), in_window=False) for i in range(10_000)]

        stored = 0

        def fill_history_to(total: int) -> None:
            nonlocal stored
            while stored < total:
                version = store.load_window("long").version
                append = old[: min(len(old), total - stored)]
                assert store.commit_window("long", version=version, append=append, evict=[])
                stored += len(append)

        def instructions(operation: Any) -> int:
            count = 0

            def tick() -> int:
                nonlocal count
                count += 1
                return 0

            connection.set_progress_handler(tick, 1)
            try:
                operation()
            finally:
                connection.set_progress_handler(None, 1)
            return count

        work = []
        some = []
        for total in (1_000, 100_000):
            fill_history_to(total - 40)
            for i in range(40):  # a full window of rows, and rows evicted from it
                memory.add(UserMessage(f"q{i}"))
            work.append(
                (instructions(lambda: memory.add(AiMessage("a"))), instructions(memory.messages))
            )
            # 30 rows of the history: old ones, ones evicted from the window, window rows
            seqs = range(total - 45, total - 15)
            some.append(instructions(lambda seqs=seqs: store.history("long", seqs=seqs)))
            stored += 41
        assert len(store.history("long")) == 100_000 + 1
    assert work[0] == work[1], work
    assert max(work[0]) < 1_000, work
    assert some[0] == some[1], some


def test_bytes_on_disk_per_message_stay_close_to_the_json(path: Path) -> None:
    count = 3_000
    messages = [
        UserMessage(f"question {i}: " + "how does this work " * (5 + i % 40))
        if i % 2 == 0
        else AiMessage(f"answer {i}: " + "it works like this " * (5 + i % 60))
        for i in range(count)
    ]
    payload = sum(len(message_to_json(m).encode()) for m in messages) / count
    with SqliteChatMemoryStore(path) as store:
        memory = MessageWindowChatMemory(id="bytes", max_messages=20, store=store)
        for message in messages:
            memory.add(message)
    files = [p for p in path.parent.iterdir() if p.name.startswith(path.name)]
    per_message = sum(p.stat().st_size for p in files) / count
    # Measured: about 1.25 × the JSON plus 10 bytes (page fill, keys, time, index entry).
    assert per_message < 1.4 * payload + 40, (per_message, payload)


def test_delete_leaves_no_trace_of_the_messages_in_the_file(path: Path) -> None:
    secret = f"SECRET-{uuid.uuid4().hex}"
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("leaving", [UserMessage(f"{secret} short"), AiMessage("ok")])
        store.update_messages("leaving", [UserMessage(f"{secret} long " + "x" * 20_000)])
        store.update_messages("staying", [UserMessage("kept")])
        store.delete_messages("leaving")
        assert store.memory_ids() == ["staying"]
    # closing the last connection moved the WAL into the file; secure_delete zeroed the rows
    assert secret.encode() not in b"".join(
        p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name)
    )
    with raw(path) as db:
        for table in TABLES:
            keys = db.execute(f"SELECT DISTINCT memory_key FROM {table}").fetchall()
            assert len(keys) == 1, table


def test_a_memory_database_belongs_to_its_store_object() -> None:
    with SqliteChatMemoryStore() as one, SqliteChatMemoryStore(":memory:") as two:
        one.update_messages("m", [UserMessage("one")])
        assert two.get_messages("m") == []
        assert repr(one) == "SqliteChatMemoryStore(':memory:')"
        assert one.path == ":memory:"


def test_two_stores_on_one_file_see_each_other_and_conflict_safely(path: Path) -> None:
    with SqliteChatMemoryStore(path) as one, SqliteChatMemoryStore(path) as two:
        one.update_messages("m", [UserMessage("a")])
        snapshot = two.load_window("m")
        assert [r.message for r in snapshot.rows] == [UserMessage("a")]
        assert one.commit_window(
            "m", version=snapshot.version, append=[NewMessage(UserMessage("b"))], evict=[]
        )
        assert not two.commit_window(
            "m", version=snapshot.version, append=[NewMessage(UserMessage("lost"))], evict=[0]
        )
        assert two.get_messages("m") == [UserMessage("a"), UserMessage("b")]


def test_a_writer_whose_memory_was_deleted_meanwhile_does_not_bring_it_back(path: Path) -> None:
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("m", [UserMessage("a")])
        stale = store.load_window("m")
        store.delete_messages("m")
        append = [NewMessage(UserMessage("b"))]
        assert not store.commit_window("m", version=stale.version, append=append, evict=[0])
        assert store.memory_ids() == []
        assert store.history("m") == []


def test_times_never_go_backwards_within_a_memory_id(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = iter([3_000_000, 1_000_000, 2_000_000, 5_000_000])
    monkeypatch.setattr(sqlite_module, "now_micros", lambda: next(clock))
    with SqliteChatMemoryStore(path) as store:
        for i in range(4):
            snapshot = store.load_window("m")
            append = [NewMessage(UserMessage(str(i)))]
            assert store.commit_window("m", version=snapshot.version, append=append, evict=[])
        stamps = [h.created_at for h in store.history("m")]
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    assert [(s - epoch).total_seconds() for s in stamps] == [3, 3, 3, 5]


# -- rows that cannot be read ----------------------------------------------------------------


def _corrupt(path: Path, memory_id: str, seq: int, column: str, value: object) -> None:
    with raw(path) as db:
        db.execute(
            f"UPDATE chatmemory_messages SET {column} = ? WHERE seq = ? AND memory_key = "
            f"(SELECT memory_key FROM chatmemory_memories WHERE memory_id = ?)",
            (value, seq, memory_id),
        )


@pytest.mark.parametrize(
    "payload",
    [
        '{"contents": [{"text": "cut off',
        '{"type": "HUMAN", "text": "not a LangChain4j type"}',
        42,
        b"\xff\xfe\x00binary",
    ],
    ids=["not-json", "not-a-message", "a-number", "bytes"],
)
def test_a_corrupt_row_names_the_memory_and_row_and_spares_the_rest(
    path: Path, payload: object
) -> None:
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("a", [UserMessage("0"), AiMessage("1"), UserMessage("2")])
        store.update_messages("b", [UserMessage("b's")])
        _corrupt(path, "a", 1, "message", payload)
        for read in (store.get_messages, store.load_window, store.history):
            with pytest.raises(SerializationError) as info:
                read("a")
            assert (info.value.memory_id, info.value.row) == ("a", 1)
            assert "memory id 'a'" in str(info.value)
            assert "row 1" in str(info.value)
            assert "errors='skip'" in str(info.value)
            assert isinstance(info.value.__cause__, SerializationError)
        skipped = store.history("a", errors="skip")
        assert [(h.seq, h.message) for h in skipped] == [
            (0, UserMessage("0")),
            (2, UserMessage("2")),
        ]
        assert store.get_messages("b") == [UserMessage("b's")]
        assert store.memory_ids() == ["a", "b"]
        store.delete_messages("a")  # the way out: forget the broken memory
        assert store.get_messages("a") == []


def test_a_window_row_whose_message_is_gone_is_a_serialization_error(path: Path) -> None:
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("a", [UserMessage("0"), UserMessage("1")])
        with raw(path) as db:
            db.execute("DELETE FROM chatmemory_messages WHERE seq = 0")
        with pytest.raises(SerializationError, match="missing") as info:
            store.get_messages("a")
        assert (info.value.memory_id, info.value.row) == ("a", 0)
        assert [h.seq for h in store.history("a")] == [1]


@pytest.mark.parametrize(("value", "reason"), [("yesterday", "not an integer"), (2**62, "range")])
def test_a_corrupt_time_fails_history_only(path: Path, value: object, reason: str) -> None:
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("a", [UserMessage("0"), UserMessage("1")])
        _corrupt(path, "a", 0, "created_at", value)
        with pytest.raises(SerializationError, match=reason) as info:
            store.history("a")
        assert (info.value.memory_id, info.value.row) == ("a", 0)
        assert [h.seq for h in store.history("a", errors="skip")] == [1]
        assert store.get_messages("a") == [UserMessage("0"), UserMessage("1")]


# -- failures --------------------------------------------------------------------------------


def test_a_closed_store_raises_store_error(path: Path) -> None:
    store = SqliteChatMemoryStore(path)
    store.update_messages("m", [UserMessage("x")])
    store.close()
    store.close()  # closing twice is fine
    assert repr(store) == f"SqliteChatMemoryStore({str(path)!r}, closed)"
    calls = [
        lambda: store.get_messages("m"),
        lambda: store.update_messages("m", []),
        lambda: store.load_window("m"),
        lambda: store.commit_window("m", version=1, append=[], evict=[]),
        lambda: store.delete_messages("m"),
        lambda: store.history("m"),
    ]
    for call in calls:
        with pytest.raises(StoreError, match="the store is closed") as info:
            call()  # type: ignore[no-untyped-call]
        assert info.value.store is store
        assert info.value.memory_id == "m"
    with pytest.raises(StoreError, match="cannot list the memory ids: the store is closed"):
        store.memory_ids()


def test_a_store_carried_across_fork_refuses_to_work(path: Path) -> None:
    with SqliteChatMemoryStore(path) as store:
        store._pid = -1  # as in a child process that inherited the store through fork()
        with pytest.raises(StoreError, match="fork"):
            store.get_messages("m")


@pytest.mark.parametrize("where", ["missing-directory", "a-directory"])
def test_a_path_that_cannot_be_opened_raises_store_error(tmp_path: Path, where: str) -> None:
    path = tmp_path / "no" / "such" / "chat.db" if where == "missing-directory" else tmp_path
    with pytest.raises(StoreError, match="could not open the database") as info:
        SqliteChatMemoryStore(path)
    assert str(path) in str(info.value)
    assert "directory exists" in str(info.value)
    assert isinstance(info.value.__cause__, sqlite3.Error)


def test_a_file_that_is_not_a_database_raises_store_error(path: Path) -> None:
    path.write_bytes(b"this is a text file, not a database\n" * 200)
    with pytest.raises(StoreError, match="not a SQLite database or is damaged"):
        SqliteChatMemoryStore(path)


def test_a_lock_held_past_the_timeout_raises_store_error_and_writes_nothing(path: Path) -> None:
    with SqliteChatMemoryStore(path, timeout=0.2) as store:
        store.update_messages("m", [UserMessage("before")])
        snapshot = store.load_window("m")
        with raw(path) as other:
            other.execute("BEGIN IMMEDIATE")  # another process is writing
            assert store.load_window("m") == snapshot  # readers never wait for a writer (WAL)
            started = time.monotonic()
            with pytest.raises(StoreError, match=r"locked.*timeout=0\.2 s") as info:
                store.commit_window(
                    "m", version=snapshot.version, append=[NewMessage(UserMessage("x"))], evict=[0]
                )
            assert time.monotonic() - started >= 0.15
            assert info.value.memory_id == "m"
            assert isinstance(info.value.__cause__, sqlite3.OperationalError)
            other.execute("ROLLBACK")
        assert store.load_window("m") == snapshot
        assert store.commit_window(
            "m", version=snapshot.version, append=[NewMessage(UserMessage("x"))], evict=[0]
        )


def test_a_commit_that_fails_halfway_leaves_nothing_behind(path: Path) -> None:
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("m", [UserMessage("a"), UserMessage("b")])
        window, history = store.load_window("m"), store.history("m")
        connection = connection_of(store)
        # fails the last statement of the commit, after the rows were inserted and evicted
        connection.execute(
            "CREATE TEMP TRIGGER fail_late AFTER UPDATE ON chatmemory_memories "
            "BEGIN SELECT RAISE(ABORT, 'simulated failure'); END"
        )
        with pytest.raises(StoreError, match="simulated failure") as info:
            store.commit_window(
                "m", version=window.version, append=[NewMessage(UserMessage("c"))], evict=[0]
            )
        assert info.value.memory_id == "m"
        assert not connection.in_transaction
        connection.execute("DROP TRIGGER fail_late")
        assert store.load_window("m") == window
        assert store.history("m") == history


def test_a_full_disk_raises_store_error_and_writes_nothing(path: Path) -> None:
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("m", [UserMessage("small")])
        connection = connection_of(store)
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        connection.execute(f"PRAGMA max_page_count = {pages}")  # no room to grow
        with pytest.raises(StoreError, match=r"disk.*full") as info:
            store.update_messages("m", [UserMessage("small"), UserMessage("x" * 100_000)])
        assert info.value.memory_id == "m"
        assert store.get_messages("m") == [UserMessage("small")]


@pytest.mark.parametrize("timeout", [-1, float("nan"), float("inf"), "3", True, None])
def test_a_bad_timeout_is_a_configuration_error(timeout: Any) -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        SqliteChatMemoryStore(timeout=timeout)
    with pytest.raises(ConfigurationError, match="timeout"):
        AsyncSqliteChatMemoryStore(timeout=timeout)


@pytest.mark.parametrize("bad", [123, b"chat.db", None])
def test_a_bad_path_is_a_configuration_error(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="path"):
        SqliteChatMemoryStore(bad)


def test_bad_arguments_are_configuration_errors() -> None:
    with SqliteChatMemoryStore() as store:
        for bad in ("", None, 5):
            with pytest.raises(ConfigurationError, match="memory id"):
                store.get_messages(bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="errors"):
            store.history("m", errors="ignore")  # type: ignore[arg-type]


# -- asyncio ---------------------------------------------------------------------------------


def test_the_async_store_works_on_its_own_thread_and_never_blocks_the_loop(path: Path) -> None:
    async def main() -> None:
        async with AsyncSqliteChatMemoryStore(path, timeout=10) as store:
            assert repr(store) == f"AsyncSqliteChatMemoryStore({str(path)!r})"
            assert store.path == str(path)
            name = await store._run(None, lambda _: threading.current_thread().name)
            assert name.startswith("chatmemory-sqlite")
            await store.update_messages("m", [UserMessage("a")])
            with raw(path) as other:
                other.execute("BEGIN IMMEDIATE")  # the worker will wait for this lock...
                write = asyncio.create_task(
                    store.update_messages("m", [UserMessage("a"), UserMessage("b")])
                )
                ticks = 0
                started = time.monotonic()
                while time.monotonic() - started < 0.3:  # ...while the loop keeps running
                    await asyncio.sleep(0.01)
                    ticks += 1
                assert not write.done()
                assert ticks >= 10
                other.execute("COMMIT")
            await write
            assert await store.get_messages("m") == [UserMessage("a"), UserMessage("b")]

    asyncio.run(main())


def test_a_closed_async_store_raises_store_error(path: Path) -> None:
    async def main() -> None:
        store = AsyncSqliteChatMemoryStore(path)
        await store.update_messages("m", [UserMessage("x")])
        await store.aclose()
        await store.aclose()
        assert repr(store) == f"AsyncSqliteChatMemoryStore({str(path)!r}, closed)"
        with pytest.raises(StoreError, match="closed") as info:
            await store.get_messages("m")
        assert info.value.memory_id == "m"
        with pytest.raises(StoreError, match="closed"):
            await store.memory_ids()
        unused = AsyncSqliteChatMemoryStore(path)  # never opened: closing is still fine
        await unused.aclose()

    asyncio.run(main())
    with SqliteChatMemoryStore(path) as store:
        assert store.get_messages("m") == [UserMessage("x")]


def test_the_async_store_reports_open_errors_and_tries_again_on_the_next_call(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "later"
    path = directory / "chat.db"

    async def main() -> None:
        with pytest.raises(StoreError, match="could not open"):
            async with AsyncSqliteChatMemoryStore(path):
                pass  # pragma: no cover - not reached
        store = AsyncSqliteChatMemoryStore(path)
        try:
            with pytest.raises(StoreError, match="could not open"):
                await store.memory_ids()
            directory.mkdir()
            await store.update_messages("m", [UserMessage("x")])
            assert await store.memory_ids() == ["m"]
            assert [h.seq for h in await store.history("m")] == [0]
            await store.delete_messages("m")
            assert await store.load_window("m") == (await store.load_window("nobody"))
        finally:
            await store.aclose()

    asyncio.run(main())


def test_a_token_count_stored_as_text_is_recounted_not_a_type_error(path: Path) -> None:
    from chatmemory import OpenAiTokenCountEstimator, TokenWindowChatMemory

    estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
    with SqliteChatMemoryStore(path) as store:
        memory = TokenWindowChatMemory(id="m", max_tokens=30, estimator=estimator, store=store)
        memory.add(*(UserMessage(f"message {i} of many") for i in range(5)))
    with raw(path) as db:
        db.execute("UPDATE chatmemory_window SET token_count = 'twelve'")
        db.commit()
    with SqliteChatMemoryStore(path) as store:
        memory = TokenWindowChatMemory(id="m", max_tokens=30, estimator=estimator, store=store)
        window = memory.messages()
        assert window
        assert estimator.count_messages(window) <= 30


# -- one-statement commits -------------------------------------------------------------------


def _one(text: str) -> list[NewMessage]:
    return [NewMessage(UserMessage(text))]


def test_a_file_without_one_statement_commits_is_read_and_then_upgraded(path: Path) -> None:
    """Migration 2 adds what only writes use: a read-only store reads a file that lacks it,
    and the first store that writes adds it."""
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("m", [UserMessage("a"), UserMessage("b")])
    with raw(path) as db:  # the file as chatmemory left it before migration 2
        db.execute("DROP TRIGGER chatmemory_commit_one")
        db.execute("DROP VIEW chatmemory_commit")
        db.execute("DELETE FROM chatmemory_migrations WHERE id = 2")
    with SqliteChatMemoryStore(path, read_only=True) as reader:
        assert reader.get_messages("m") == [UserMessage("a"), UserMessage("b")]
    with raw(path) as db:
        assert db.execute("SELECT id FROM chatmemory_migrations").fetchall() == [(1,)]
    with SqliteChatMemoryStore(path) as store:
        snapshot = store.load_window("m")
        assert store.commit_window("m", version=snapshot.version, append=_one("c"), evict=[0])
        assert store.get_messages("m") == [UserMessage("b"), UserMessage("c")]
    with raw(path) as db:
        assert db.execute("SELECT id FROM chatmemory_migrations").fetchall() == [(1,), (2,)]


def test_a_commit_on_counters_another_store_moved_loses_and_writes_nothing(path: Path) -> None:
    with SqliteChatMemoryStore(path) as mine, SqliteChatMemoryStore(path) as other:
        first = mine.commit_window("m", version=0, append=_one("a"), evict=[])
        assert first is not None
        theirs = other.load_window("m")
        assert other.commit_window("m", version=theirs.version, append=_one("b"), evict=[])
        history = mine.history("m")
        assert mine.commit_window("m", version=first.version, append=_one("x"), evict=[0]) is None
        assert mine.history("m") == history  # nothing of the lost commit
        fresh = mine.load_window("m")
        done = mine.commit_window("m", version=fresh.version, append=_one("c"), evict=[0])
        assert done is not None
        assert done.first_seq == 2
        assert [row.message for row in other.load_window("m").rows] == [
            UserMessage("b"),
            UserMessage("c"),
        ]


def test_an_id_deleted_and_created_again_behind_a_store_is_not_written_as_before(
    path: Path,
) -> None:
    with SqliteChatMemoryStore(path) as mine, SqliteChatMemoryStore(path) as other:
        first = mine.commit_window("m", version=0, append=_one("old life"), evict=[])
        assert first is not None
        other.delete_messages("m")
        other.update_messages("n", [UserMessage("another id")])  # may reuse the freed key
        other.update_messages("m", [UserMessage("new life")])
        assert mine.commit_window("m", version=first.version, append=_one("x"), evict=[]) is None
        assert other.get_messages("n") == [UserMessage("another id")]
        assert [h.message for h in other.history("m")] == [UserMessage("new life")]


def test_a_store_writing_to_many_ids_stays_right_on_each(path: Path) -> None:
    """What a store notes per id for one-statement commits is bounded (1,024 ids at once)."""
    with SqliteChatMemoryStore(path) as store:
        memories = [
            MessageWindowChatMemory(id=f"id-{n}", max_messages=2, store=store) for n in range(1100)
        ]
        for turn in ("a", "b", "c"):
            for memory in memories:
                memory.add(UserMessage(f"{memory.id} {turn}"))
        for memory in (memories[0], memories[-1]):
            assert memory.messages() == [
                UserMessage(f"{memory.id} b"),
                UserMessage(f"{memory.id} c"),
            ]
            assert len(store.history(memory.id)) == 3


_STEPS = st.lists(
    st.tuples(st.integers(0, 1), st.sampled_from(["add", "add2", "set", "clear"]), st.integers()),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_STEPS)
def test_memories_on_two_stores_of_one_file_match_a_fresh_read(
    tmp_path: Path, steps: list[tuple[int, str, int]]
) -> None:
    """Each store keeps its own counters for one-statement commits and each memory its window;
    whatever the other store did in between, every add lands exactly once and both memories
    return what a fresh read finds."""
    path = tmp_path / f"{uuid.uuid4().hex}.db"
    with SqliteChatMemoryStore(path) as first, SqliteChatMemoryStore(path) as second:
        memories = [
            MessageWindowChatMemory(id="m", max_messages=3, store=store)
            for store in (first, second)
        ]
        added: list[str] = []
        for number, (which, action, seed) in enumerate(steps):
            memory, text = memories[which], f"{number}:{seed}"
            if action == "add":
                memory.add(UserMessage(text))
                added.append(text)
            elif action == "add2":
                memory.add(UserMessage(text), AiMessage(text))
                added += [text, text]
            elif action == "set":
                memory.set([UserMessage(text)])
                added.append(text)
            else:
                memory.clear()
                added.clear()
            with SqliteChatMemoryStore(path, read_only=True) as reader:
                fresh = MessageWindowChatMemory(id="m", max_messages=3, store=reader).messages()
                history = [h.message.text for h in reader.history("m")]  # type: ignore[union-attr]
            assert memories[0].messages() == fresh
            assert memories[1].messages() == fresh
            assert history == added
