"""Every store under real processes: writers racing on one memory id; writers killed mid-write.

The scenarios are written once and run against each store (SQLite file, Redis, PostgreSQL). A
`Target` says how to reach a store: `spec` is the ``("module:Class", kwargs)`` that the child
processes of `tests/_workers.py` open, isolated per test (its own SQLite file in `tmp_path`, its
own Redis key prefix, its own PostgreSQL schema, removed afterwards), and a target reads the store's
own bookkeeping for the checks the public API does not show. A Redis or PostgreSQL server that does
not answer skips its tests, or fails them under CI=true (`tests.conftest.server_unavailable`).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import random
import signal
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from chatmemory import AiMessage, MessageWindowChatMemory, UserMessage
from tests import _workers
from tests._workers import StoreSpec
from tests.stores import backends  # noqa: F401  (first: it imports every backend module)
from tests.stores.backend_postgres import admin, postgres_table
from tests.stores.backends import BACKENDS, Backend

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")
WINDOW = 20
"""`max_messages` of every writer's `MessageWindowChatMemory`."""


# -- the stores ----------------------------------------------------------------------------------


Target = Backend
"""A backend of `tests/stores` that the reliability tests can reach from child processes."""

TARGETS = {backend.name: backend for backend in BACKENDS if backend.processes is not None}


def on(*names: str) -> list[Any]:
    return [pytest.param(TARGETS[n], id=n, marks=TARGETS[n].marks) for n in names or TARGETS]


@pytest.fixture(params=on())
def target(request: pytest.FixtureRequest) -> Target:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def spec(target: Target, tmp_path: Path) -> Iterator[StoreSpec]:
    """A fresh, isolated store of `target` as a spec; skips (fails under CI) if unreachable."""
    assert target.processes is not None
    with target.processes.isolated(tmp_path, f"rel{uuid.uuid4().hex[:12]}") as store_spec:
        yield store_spec


# -- helpers -------------------------------------------------------------------------------------


@contextmanager
def reaping(*processes: Any) -> Iterator[None]:
    """Kill whichever of `processes` still runs when the block ends, then release them all."""
    try:
        yield
    finally:
        for process in processes:
            if process.is_alive():  # pragma: no cover - only when a test fails or a writer hangs
                process.kill()
                process.join()
            process.close()


def run_processes(processes: list[Any], timeout: float = 600) -> None:
    with reaping(*processes):
        for process in processes:
            process.start()
        deadline = time.monotonic() + timeout
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
        assert [p.exitcode for p in processes] == [0] * len(processes)


def writer(spec: StoreSpec, memory_id: str, prefix: str, count: int, **kwargs: Any) -> Any:
    return SPAWN.Process(
        target=_workers.add_many,
        args=(spec, memory_id, prefix, count),
        kwargs={"max_messages": WINDOW, **kwargs},
    )


Kill = Callable[[int], None]
"""SIGKILLs the process of this pid, choosing the moment."""


def kill_inside_a_write(path: Path) -> Kill:
    """At a moment the process holds the SQLite database's write lock: inside a commit."""

    def kill(pid: int) -> None:
        with closing(sqlite3.connect(path, timeout=0, isolation_level=None)) as db:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    db.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError:  # locked: the writer is between BEGIN and COMMIT
                    os.kill(pid, signal.SIGKILL)
                    return
                db.execute("ROLLBACK")
        raise AssertionError("the writer never took the write lock")  # pragma: no cover

    return kill


def kill_after(seconds: float) -> Kill:
    def kill(pid: int) -> None:
        time.sleep(seconds)
        os.kill(pid, signal.SIGKILL)

    return kill


def kill_a_writer(
    spec: StoreSpec, memory_id: str, prefix: str, padding: int, kill: Kill, *alongside: Any
) -> None:
    """Start a writer adding to `memory_id` without end; once it has added a message, start the
    `alongside` processes and `kill` the writer. They must then finish cleanly."""
    started = SPAWN.Event()
    victim = writer(spec, memory_id, prefix, 10**9, padding=padding, started=started)
    with reaping(victim, *alongside):
        victim.start()
        assert started.wait(120), "the writer never added its first message"
        for process in alongside:
            process.start()
        assert victim.pid is not None
        kill(victim.pid)
        victim.join(60)
        assert victim.exitcode == -signal.SIGKILL
        for process in alongside:
            process.join(300)
            assert process.exitcode == 0


def check_whole(
    target: Target, spec: StoreSpec, memory_id: str, padding: int = 0
) -> list[tuple[str, int]]:
    """The store opens and reads: every message whole, seqs contiguous, the window the last
    `WINDOW` of history. The (writer, index) of every message, in history's order."""
    assert target.processes is not None
    if target.processes.integrity is not None:
        assert target.processes.integrity(spec) == "ok"
    with _workers.open_store(spec) as store:
        history = store.history(memory_id)  # raises if any stored message cannot be read
        window = store.get_messages(memory_id)
    texts = [h.message.text for h in history]
    written = [_workers.parse_text(t) for t in texts]
    assert texts == [_workers.text_of(p, i, padding) for p, i in written]  # every message whole
    assert [h.seq for h in history] == list(range(len(history)))
    assert window == [h.message for h in history[-WINDOW:]]
    assert [h.in_window for h in history] == [
        i >= len(history) - WINDOW for i in range(len(history))
    ]
    return written


def check_goes_on(target: Target, spec: StoreSpec, memory_id: str, padding: int) -> None:
    """The memory accepts another add, which lands last."""
    with _workers.open_store(spec) as store:
        MessageWindowChatMemory(id=memory_id, max_messages=WINDOW, store=store).add(
            UserMessage(_workers.text_of("after", 0, padding))
        )
    assert check_whole(target, spec, memory_id, padding)[-1] == ("after", 0)


# -- every store ---------------------------------------------------------------------------------


def test_four_processes_adding_to_one_memory_lose_and_duplicate_nothing(
    target: Target, spec: StoreSpec
) -> None:
    writers, per_writer = 4, 250
    start = SPAWN.Barrier(writers)
    run_processes(
        [writer(spec, "shared", f"w{w}", per_writer, start=start) for w in range(writers)]
    )
    written = check_whole(target, spec, "shared")
    assert len(written) == writers * per_writer
    expected = [(f"w{w}", i) for w in range(writers) for i in range(per_writer)]
    assert sorted(written) == sorted(expected)  # each message exactly once
    for w in range(writers):  # each writer's messages in its own order
        assert [i for p, i in written if p == f"w{w}"] == list(range(per_writer))
    interleaved = sum(1 for a, b in itertools.pairwise(written) if a[0] != b[0])
    assert interleaved > writers  # the writers really ran at the same time
    with _workers.open_store(spec) as store:
        assert store.memory_ids() == ["shared"]
    # the next add gets the next seq (versions come from the clock: they only say "changed")
    assert target.processes is not None
    [(version, next_seq)] = target.processes.counters(spec, "shared")
    assert (version > 0, next_seq) == (True, writers * per_writer)


def test_processes_running_service_turns_on_one_id_commit_whole_turns(
    target: Target, spec: StoreSpec
) -> None:
    processes, turns = 3, 40
    start = SPAWN.Barrier(processes)
    run_processes(
        [
            SPAWN.Process(target=_workers.service_turns, args=(spec, "user", f"p{p}", turns, start))
            for p in range(processes)
        ]
    )
    with _workers.open_store(spec) as store:
        history = [entry.message for entry in store.history("user")]
    assert len(history) == 2 * processes * turns
    questions = history[::2]
    for question, answer in zip(questions, history[1::2], strict=True):
        assert isinstance(question, UserMessage)
        assert answer == AiMessage("re " + question.text)  # each turn whole, its two rows adjacent
    asked = sorted(_workers.parse_text(q.text) for q in questions if isinstance(q, UserMessage))
    assert asked == sorted((f"p{p}", i) for p in range(processes) for i in range(turns))


def test_a_kept_window_sees_what_another_process_committed(target: Target, spec: StoreSpec) -> None:
    """A memory keeps its window between operations; another process's commits on the same id
    show in its next read, and its next add (on the stale kept window) lands after them."""
    with _workers.open_store(spec) as store:
        memory = MessageWindowChatMemory(id="kept", max_messages=WINDOW, store=store)
        memory.add(UserMessage(_workers.text_of("parent", 0)))
        assert memory.messages() == [UserMessage(_workers.text_of("parent", 0))]
        for round_ in range(2):
            run_processes([writer(spec, "kept", f"child{round_}", 15)])
            with _workers.open_store(spec) as other:
                expected = other.get_messages("kept")
            assert memory.messages() == expected  # the other process's rows, not the kept ones
            memory.add(UserMessage(_workers.text_of("parent", round_ + 1)))
            written = check_whole(target, spec, "kept")
            assert written[-1] == ("parent", round_ + 1)
            assert memory.messages() == store.get_messages("kept")
    assert [i for p, i in written if p == "parent"] == [0, 1, 2]  # each add stored once
    assert [i for p, i in written if p == "child1"] == list(range(15))


def test_a_writer_killed_mid_loop_leaves_a_store_that_opens_and_reads(
    target: Target, spec: StoreSpec
) -> None:
    padding, survivor_adds = 50_000, 150
    survivor = writer(spec, "crash", "survivor", survivor_adds, padding=padding)
    # 0.5 s: well inside its loop, most likely mid-commit
    kill_a_writer(spec, "crash", "victim", padding, kill_after(0.5), survivor)
    written = check_whole(target, spec, "crash", padding)
    victims = [i for p, i in written if p == "victim"]
    assert victims == list(range(len(victims)))  # a prefix of its loop, nothing torn
    assert len(victims) >= 1
    assert [i for p, i in written if p == "survivor"] == list(range(survivor_adds))
    check_goes_on(target, spec, "crash", padding)


# -- one store -----------------------------------------------------------------------------------


@pytest.mark.parametrize("target", on("sqlite"), indirect=True)
def test_sqlite_writers_killed_holding_the_write_lock_leave_a_store_that_opens_and_reads(
    target: Target, spec: StoreSpec
) -> None:
    # 1 MB messages: a commit writes hundreds of pages, and SQLite spills some to the WAL before
    # COMMIT, so a kill inside a commit often leaves a torn transaction in the WAL.
    padding = 1_000_000
    rng = random.Random(1234)
    for round_ in range(6):
        if round_ % 2 == 0:
            kill = kill_inside_a_write(Path(spec[1]["path"]))
        else:  # anywhere in the loop
            kill = kill_after(rng.uniform(0.02, 0.3))
        kill_a_writer(spec, "victim", f"w{round_}", padding, kill)
        written = check_whole(target, spec, "victim", padding)
        for earlier in range(round_ + 1):  # each writer's messages: 0, 1, 2... without a gap
            own = [i for p, i in written if p == f"w{earlier}"]
            assert own, f"writer {earlier} stored nothing"
            assert own == list(range(len(own)))
    check_goes_on(target, spec, "victim", padding)


@pytest.mark.parametrize("target", on("postgres"), indirect=True)
def test_processes_opening_a_new_postgres_schema_at_once_migrate_it_once(
    target: Target, spec: StoreSpec
) -> None:
    from psycopg import sql

    openers = 6
    start = SPAWN.Barrier(openers)
    run_processes(
        [
            SPAWN.Process(
                target=_workers.open_and_add,
                args=(spec, "first", _workers.text_of(f"p{n}", 0), start),
            )
            for n in range(openers)
        ]
    )
    migrations = postgres_table(spec, "migrations")
    assert admin(sql.SQL("SELECT version FROM {}").format(migrations)) == [(1,)]
    written = check_whole(target, spec, "first")
    assert sorted(written) == sorted((f"p{n}", 0) for n in range(openers))
