"""SQLite under real processes: concurrent writers on one memory id; writers killed mid-write."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from chatmemory.stores.sqlite import SqliteChatMemoryStore

from ._workers import StoreSpec, add_many, parse_text, text_of

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")


def spec_for(path: Path) -> StoreSpec:
    return "chatmemory.stores.sqlite:SqliteChatMemoryStore", {"path": str(path)}


def integrity(path: Path) -> str:
    with closing(sqlite3.connect(path)) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


def test_four_processes_adding_to_one_memory_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    writers, adds = 4, 250
    SqliteChatMemoryStore(path).close()  # migrated up front: the race here is the adds
    start = SPAWN.Barrier(writers)
    processes = [
        SPAWN.Process(
            target=add_many,
            args=(spec_for(path), "shared", f"p{w}", adds),
            kwargs={"max_messages": 20, "start": start},
        )
        for w in range(writers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(600)
    assert [p.exitcode for p in processes] == [0] * writers

    with SqliteChatMemoryStore(path) as store:
        history = store.history("shared")
        window = store.get_messages("shared")
    texts = [h.message.text for h in history]  # type: ignore[union-attr]
    assert len(texts) == writers * adds
    assert sorted(texts) == sorted(text_of(f"p{w}", i) for w in range(writers) for i in range(adds))
    for w in range(writers):  # each writer's messages in the order it added them
        assert [parse_text(t)[1] for t in texts if parse_text(t)[0] == f"p{w}"] == list(range(adds))
    assert [h.seq for h in history] == list(range(writers * adds))
    assert window == [h.message for h in history[-20:]]
    assert [h.in_window for h in history] == [False] * (writers * adds - 20) + [True] * 20
    assert integrity(path) == "ok"


def kill_inside_a_write(pid: int, path: Path) -> None:
    """SIGKILL `pid` at a moment it holds the database's write lock: inside a commit."""
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


def test_a_writer_killed_mid_write_leaves_a_store_that_opens_and_reads(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    # 1 MB messages: a commit writes hundreds of pages, and SQLite spills some to the WAL before
    # COMMIT, so a kill inside a commit often leaves a torn transaction in the WAL.
    padding = 1_000_000
    rng = random.Random(1234)
    for attempt in range(6):
        started = SPAWN.Event()
        writer = SPAWN.Process(
            target=add_many,
            args=(spec_for(path), "victim", f"w{attempt}", 10**9),
            kwargs={"max_messages": 20, "padding": padding, "started": started},
        )
        writer.start()
        assert started.wait(60), "the writer never added its first message"
        assert writer.pid is not None
        if attempt % 2 == 0:
            kill_inside_a_write(writer.pid, path)
        else:  # anywhere in the loop
            time.sleep(rng.uniform(0.02, 0.3))
            os.kill(writer.pid, signal.SIGKILL)
        writer.join(60)
        assert writer.exitcode == -signal.SIGKILL

        assert integrity(path) == "ok"
        with SqliteChatMemoryStore(path) as store:
            history = store.history("victim")  # raises if any stored message cannot be read
            window = store.get_messages("victim")
        assert [h.seq for h in history] == list(range(len(history)))
        texts = [h.message.text for h in history]  # type: ignore[union-attr]
        assert all(t == text_of(*parse_text(t), padding) for t in texts)  # every message whole
        for round_ in range(attempt + 1):  # each writer's messages: 0, 1, 2... without a gap
            own = [parse_text(t)[1] for t in texts if parse_text(t)[0] == f"w{round_}"]
            assert own, f"writer {round_} stored nothing"
            assert own == list(range(len(own)))
        assert window == [h.message for h in history[-20:]]
