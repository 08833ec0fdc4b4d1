"""Many processes writing one memory id through PostgreSQL; first opens racing; a writer killed."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from chatmemory._memory.window import MessageWindowChatMemory
from chatmemory._messages import UserMessage
from tests import _workers
from tests.conftest import POSTGRES_DSN
from tests.stores import backends  # noqa: F401  (first: it imports every backend module)
from tests.stores.backend_postgres import admin, isolated_schema

psycopg = pytest.importorskip("psycopg")
from psycopg import sql  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

STORE = "chatmemory.stores.postgres:PostgresChatMemoryStore"
SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def spec() -> Iterator[_workers.StoreSpec]:
    with isolated_schema(f"rel{uuid.uuid4().hex[:12]}") as schema:
        yield (STORE, {"dsn": POSTGRES_DSN, "schema": schema, "timeout": 30})


def run_processes(processes: list[Any], timeout: float = 300) -> None:
    for process in processes:
        process.start()
    deadline = time.monotonic() + timeout
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    try:
        assert [p.exitcode for p in processes] == [0] * len(processes)
    finally:
        for process in processes:
            if process.is_alive():  # pragma: no cover - only when a writer hangs
                process.kill()
                process.join()
            process.close()


def check_whole(spec: _workers.StoreSpec, memory_id: str) -> list[tuple[str, int]]:
    """Every message readable and whole, the window the last 20 of history; (writer, index)s."""
    with _workers.open_store(spec) as store:
        history = store.history(memory_id)
        window = store.get_messages(memory_id)
    written = [_workers.parse_text(h.message.text) for h in history]
    assert [h.seq for h in history] == list(range(len(history)))
    assert window == [h.message for h in history[-20:]]
    assert [h.in_window for h in history] == [i >= len(history) - 20 for i in range(len(history))]
    return written


def test_four_processes_lose_and_duplicate_nothing(spec: _workers.StoreSpec) -> None:
    writers, per_writer = 4, 250
    start = SPAWN.Barrier(writers)
    processes = [
        SPAWN.Process(
            target=_workers.add_many,
            args=(spec, "shared", f"w{w}", per_writer),
            kwargs={"max_messages": 20, "start": start},
        )
        for w in range(writers)
    ]
    run_processes(processes)
    written = check_whole(spec, "shared")
    assert len(written) == writers * per_writer
    expected = [(f"w{w}", i) for w in range(writers) for i in range(per_writer)]
    assert sorted(written) == sorted(expected)  # each message exactly once
    for w in range(writers):  # each writer's messages in its own order
        assert [i for p, i in written if p == f"w{w}"] == list(range(per_writer))
    interleaved = sum(1 for a, b in itertools.pairwise(written) if a[0] != b[0])
    assert interleaved > writers  # the writers really ran at the same time
    schema = spec[1]["schema"]
    memories = sql.Identifier(schema, "chatmemory_messages_memories")
    [(version, next_seq)] = admin(sql.SQL("SELECT version, next_seq FROM {}").format(memories))
    assert next_seq == writers * per_writer
    assert version == writers * per_writer  # one committed version per add, none lost


def test_processes_opening_a_new_schema_at_once_migrate_it_once(
    spec: _workers.StoreSpec,
) -> None:
    openers = 6
    start = SPAWN.Barrier(openers)
    run_processes(
        [
            SPAWN.Process(target=_workers.open_and_add, args=(spec, "first", f"p{n}#0:$", start))
            for n in range(openers)
        ]
    )
    schema = spec[1]["schema"]
    migrations = sql.Identifier(schema, "chatmemory_messages_migrations")
    assert admin(sql.SQL("SELECT version FROM {}").format(migrations)) == [(1,)]
    with _workers.open_store(spec) as store:
        assert len(store.history("first")) == openers


def test_a_writer_killed_mid_loop_leaves_every_message_whole(spec: _workers.StoreSpec) -> None:
    victim = SPAWN.Process(
        target=_workers.add_many,
        args=(spec, "crash", "victim", 1_000_000),
        kwargs={"max_messages": 20, "padding": 50_000, "started": (started := SPAWN.Event())},
    )
    survivor = SPAWN.Process(
        target=_workers.add_many,
        args=(spec, "crash", "survivor", 150),
        kwargs={"max_messages": 20, "padding": 50_000},
    )
    victim.start()
    try:
        assert started.wait(timeout=120)
        survivor.start()
        time.sleep(0.5)  # well inside its loop, most likely mid-transaction
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(timeout=30)
        assert victim.exitcode == -signal.SIGKILL
        survivor.join(timeout=300)
        assert survivor.exitcode == 0
    finally:
        for process in (victim, survivor):
            if process.is_alive():  # pragma: no cover - only when a writer hangs
                process.kill()
                process.join()
            process.close()
    written = check_whole(spec, "crash")
    victims = [i for p, i in written if p == "victim"]
    assert victims == list(range(len(victims)))  # a prefix of its loop, nothing torn
    assert len(victims) >= 1
    assert [i for p, i in written if p == "survivor"] == list(range(150))
    # and the memory goes on as before
    with _workers.open_store(spec) as store:
        MessageWindowChatMemory(id="crash", max_messages=20, store=store).add(
            UserMessage(_workers.text_of("after", 0))
        )
    assert check_whole(spec, "crash")[-1] == ("after", 0)
