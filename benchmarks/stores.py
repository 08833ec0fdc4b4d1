"""Persistent stores: per-operation cost of a token window as history grows, throughput of
several writer processes, reading a few messages of a long history (`history(seqs=...)`), and
SQLite's bytes on disk per message."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import random
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chatmemory import OpenAiTokenCountEstimator, TokenWindowChatMemory
from chatmemory.stores import NewMessage

from .common import against, conversation, micros, per_op, table

REDIS_URL = os.environ.get("CHATMEMORY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get(
    "CHATMEMORY_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)
SAMPLES = 200
FILL_CHUNK = 1_000


def _sqlite(tmp: Path) -> tuple[str, dict[str, Any]]:
    return "chatmemory.stores.sqlite:SqliteChatMemoryStore", {"path": str(tmp / "bench.db")}


def _redis(tmp: Path) -> tuple[str, dict[str, Any]]:
    prefix = f"bench{uuid.uuid4().hex[:8]}:"
    return "chatmemory.stores.redis:RedisChatMemoryStore", {"url": REDIS_URL, "prefix": prefix}


def _postgres(tmp: Path) -> tuple[str, dict[str, Any]]:
    schema = f"bench{uuid.uuid4().hex[:8]}"
    return "chatmemory.stores.postgres:PostgresChatMemoryStore", {
        "dsn": POSTGRES_DSN,
        "schema": schema,
    }


BACKENDS: dict[str, Callable[[Path], tuple[str, dict[str, Any]]]] = {
    "sqlite (file, WAL)": _sqlite,
    "redis": _redis,
    "postgres": _postgres,
}


def open_store(spec: tuple[str, dict[str, Any]]) -> Any:
    module_name, _, class_name = spec[0].partition(":")
    module = __import__(module_name, fromlist=[class_name])
    return getattr(module, class_name)(**spec[1])


def _cleanup(name: str, spec: tuple[str, dict[str, Any]]) -> None:
    if name == "redis":
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        try:
            keys = list(client.scan_iter(match=spec[1]["prefix"] + "*", count=1000))
            for i in range(0, len(keys), 1000):
                client.delete(*keys[i : i + 1000])
        finally:
            client.close()
    elif name == "postgres":
        import psycopg
        from psycopg import sql

        with psycopg.connect(POSTGRES_DSN, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    sql.Identifier(spec[1]["schema"])
                )
            )


@contextmanager
def _backend(name: str) -> Iterator[tuple[str, dict[str, Any]] | None]:
    with tempfile.TemporaryDirectory() as tmp:
        spec = BACKENDS[name](Path(tmp))
        try:
            store = open_store(spec)
            store.close()
        except Exception as error:  # a server that does not answer: say so, go on
            print(f"\n(skipping {name}: {type(error).__name__}: {error})")
            yield None
            return
        try:
            yield spec
        finally:
            _cleanup(name, spec)


def _fill(store: Any, memory_id: str, count: int, source: Iterator[Any]) -> None:
    """Put `count` evicted messages into history, in big commits: the state after a long chat."""
    added = 0
    while added < count:
        size = min(FILL_CHUNK, count - added)
        version = store.load_window(memory_id).version
        append = [NewMessage(next(source), in_window=False) for _ in range(size)]
        assert store.commit_window(memory_id, version=version, append=append, evict=[])
        added += size


def _opened() -> Iterator[tuple[str, Any]]:
    """Each backend that answers, by name, with a store open on it (closed and cleaned up
    after the loop's body)."""
    for name in BACKENDS:
        with _backend(name) as spec:
            if spec is None:
                continue
            store = open_store(spec)
            try:
                yield name, store
            finally:
                store.close()


def growth(quick: bool) -> str:
    checkpoints = (1_000, 10_000) if quick else (1_000, 10_000, 100_000)
    estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
    rows = []
    for name, store in _opened():
        memory = TokenWindowChatMemory(
            max_tokens=4_000, estimator=estimator, store=store, id="bench"
        )
        source = conversation()
        results = []
        history = 0
        for checkpoint in checkpoints:
            _fill(store, "bench", checkpoint - history - 300, source)
            for message in itertools.islice(source, 300):
                memory.add(message)
            history = checkpoint
            add = per_op(lambda m=memory, s=source: m.add(next(s)), SAMPLES)  # type: ignore[misc]
            history += SAMPLES
            read = per_op(memory.messages, SAMPLES)
            results.append((checkpoint, add, read))
        for checkpoint, add, read in results:
            rows.append(
                [
                    name,
                    f"{checkpoint:,}",
                    micros(add),
                    f"{add / results[0][1]:.2f}×",
                    micros(read),
                    f"{read / results[0][2]:.2f}×",
                ]
            )
    return table(
        f"Token window (4,000 tokens) on each store: cost per operation after N messages "
        f"(median of {SAMPLES})",
        ["store", "N in history", "add", "vs 1,000", "messages()", "vs 1,000"],
        rows,
    )


def _writer(spec: tuple[str, dict[str, Any]], worker: int, ids: int, adds: int, start: Any) -> None:
    store = open_store(spec)
    try:
        estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
        memories = [
            TokenWindowChatMemory(
                max_tokens=4_000, estimator=estimator, store=store, id=f"w{worker}-{i}"
            )
            for i in range(ids)
        ]
        source = conversation(start=worker * 1_000_000)
        start.wait()
        for n in range(adds):
            memories[n % ids].add(next(source))
    finally:
        store.close()


def throughput(quick: bool) -> str:
    processes, ids, adds = 4, 8, (200 if quick else 1_000)
    rows = []
    context = multiprocessing.get_context("spawn")
    for name in BACKENDS:
        with _backend(name) as spec:
            if spec is None:
                continue
            start = context.Barrier(processes + 1)
            workers = [
                context.Process(target=_writer, args=(spec, w, ids, adds, start))
                for w in range(processes)
            ]
            for worker in workers:
                worker.start()
            start.wait()
            began = time.perf_counter()
            for worker in workers:
                worker.join()
            elapsed = time.perf_counter() - began
            assert all(w.exitcode == 0 for w in workers), [w.exitcode for w in workers]
            total = processes * adds
            rows.append(
                [
                    name,
                    f"{processes} × {ids} ids",
                    f"{total:,}",
                    f"{elapsed:.2f} s",
                    f"{total / elapsed:,.0f} adds/s",
                ]
            )
    return table(
        "Throughput: 4 processes, each adding to 8 memory ids of its own (token window 4,000)",
        ["store", "writers", "adds", "time", "throughput"],
        rows,
    )


SHORT_IDS = 300
"""Memory ids of 100 messages read at random: 30,000 messages in all, so that, as in the long
history, most rows read are not among the 2,048 the store keeps decoded."""
PARTIAL_LIMIT = 2.0
"""Goal: 30 messages of the long history read in at most this times the time of 30 of a
100-message one."""


def _neighbours(rng: random.Random, size: int) -> list[int]:
    """What recall reads: 10 matches of a history of `size` messages, each with the message
    before and after it (30 seqs)."""
    return [seq + step for seq in rng.sample(range(1, size - 1), 10) for step in (-1, 0, 1)]


def _history_reads(
    store: Any, rng: random.Random, ids: list[str], size: int, whole_samples: int
) -> tuple[int, float, float]:
    """`size`, and the median seconds of reading the whole history of one of `ids` (over
    `whole_samples` reads) and of reading 30 of its messages (over `SAMPLES`)."""
    whole = per_op(lambda: store.history(rng.choice(ids)), whole_samples)
    some = per_op(lambda: store.history(rng.choice(ids), seqs=_neighbours(rng, size)), SAMPLES)
    return size, whole, some


def partial_history(quick: bool) -> str:
    long = 10_000 if quick else 100_000
    rows = []
    for name, store in _opened():
        source = conversation()
        short = [f"short{i}" for i in range(SHORT_IDS)]
        for memory_id in short:
            _fill(store, memory_id, 100, source)
        _fill(store, "long", long, source)
        rng = random.Random(7)
        assert len(store.history("long", seqs=_neighbours(rng, long))) == 30
        measured = [
            _history_reads(store, rng, short, 100, SAMPLES),
            _history_reads(store, rng, ["long"], long, 3),
        ]
        base = measured[0][2]
        for size, whole_read, some_read in measured:
            rows.append(
                [
                    name,
                    f"{size:,}",
                    f"{whole_read * 1e3:,.1f} ms",
                    micros(some_read),
                    f"{whole_read / some_read:,.0f}×",
                    against(some_read / base, PARTIAL_LIMIT),
                ]
            )
    return table(
        f"History read: 30 messages of N (history(id, seqs=...), 10 matches and their "
        f"neighbours; median of {SAMPLES}) vs the whole history (median of 3 at N={long:,})",
        ["store", "N in history", "whole", "30 seqs", "whole / 30 seqs", "30 seqs vs N=100"],
        rows,
    )


def sqlite_bytes(quick: bool) -> str:
    count = 10_000 if quick else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        spec = _sqlite(Path(tmp))
        store = open_store(spec)
        sample = list(itertools.islice(conversation(), 1_000))
        try:
            _fill(store, "bytes", count, itertools.cycle(sample))
        finally:
            store.close()
        path = Path(spec[1]["path"])
        size = sum(p.stat().st_size for p in path.parent.iterdir() if p.name.startswith(path.name))
        from chatmemory._codec.langchain4j import message_to_json

        payload = sum(len(message_to_json(m).encode()) for m in sample) / len(sample)
    return table(
        "SQLite: bytes on disk per stored message (file + WAL after close)",
        ["messages", "file size", "bytes / message", "of which message JSON"],
        [[f"{count:,}", f"{size / 1e6:.1f} MB", f"{size / count:.0f}", f"{payload:.0f}"]],
    )


def run(quick: bool = False) -> Iterator[str]:
    yield growth(quick)
    yield throughput(quick)
    yield partial_history(quick)
    yield sqlite_bytes(quick)
