"""The Redis store on a Redis Cluster beside one Redis server (issue 28).

A local cluster (3 primaries, one replica each, on loopback: `tests/redis_cluster.py`) is
started for the part and stopped after; the single server is the one at
CHATMEMORY_TEST_REDIS_URL. Two tables:

- a chat turn (`benchmarks/turn.py`'s: add, `messages()`, add, on a 4,000-token window with
  N messages stored), µs per turn on the single server, on the cluster, and on the cluster
  with `min_replicas_acked=1` (each commit waits for its replica: the cost of `WAIT`), in
  alternating blocks so drift on the machine hits all alike;
- 4 processes adding to 8 memory ids each (`benchmarks/stores.py`'s writers), on 1 primary
  (the single server) and on the cluster's 3. Every process, server and replica shares this
  machine's cores, so this shows what routing costs more than what more machines would give.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

from .common import table
from .stores import _writer
from .turn import BLOCK, REDIS_URL, TURNS, WARMUP, _data, _ours, _p90, _redis_away, _us

N = 1_000
QUICK_N = 100


def _cluster() -> Any:
    from tests.redis_cluster import ClusterUnavailable, LocalCluster

    try:
        return LocalCluster.start()
    except ClusterUnavailable as error:
        return str(error)


def _spec(url: str, **options: Any) -> tuple[str, dict[str, Any]]:
    prefix = f"chatmemory-bench-cluster-{uuid.uuid4().hex[:8]}:"
    return "chatmemory.stores.redis:RedisChatMemoryStore", {"url": url, "prefix": prefix, **options}


def _purge(spec: tuple[str, dict[str, Any]]) -> None:
    import redis
    import redis.cluster

    from chatmemory.stores.redis import close_client

    options = spec[1]
    made = redis.cluster.RedisCluster if options.get("cluster") else redis.Redis
    client = made.from_url(options["url"])
    try:
        for key in list(client.scan_iter(match=options["prefix"] + "*", count=1000)):
            client.delete(key)
    finally:
        close_client(client)


def _open(spec: tuple[str, dict[str, Any]]) -> Any:
    from chatmemory import RedisChatMemoryStore

    return RedisChatMemoryStore(**spec[1])


def turns(url: str, n: int) -> str:
    sides = {
        "one server": _spec(REDIS_URL),
        "cluster (3 primaries)": _spec(url, cluster=True),
        "cluster, min_replicas_acked=1": _spec(url, cluster=True, min_replicas_acked=1),
    }
    messages, _, _ = _data(n, WARMUP + TURNS)
    samples: dict[str, list[float]] = {name: [] for name in sides}
    with ExitStack() as stack:
        runs: dict[str, Callable[[int], None]] = {}
        for name, spec in sides.items():
            stack.callback(_purge, spec)
            store = stack.enter_context(_open(spec))
            runs[name], _ = _ours(store, messages, WARMUP + TURNS)
        for start in range(0, WARMUP + TURNS, BLOCK):
            for name, turn in runs.items():
                for number in range(start, min(start + BLOCK, WARMUP + TURNS)):
                    began = time.perf_counter()
                    turn(number)
                    if number >= WARMUP:
                        samples[name].append(time.perf_counter() - began)
    single = statistics.median(samples["one server"])
    rows = [
        [
            name,
            _us(statistics.median(times)),
            _us(_p90(times)),
            f"{statistics.median(times) / single:.2f}×",
        ]
        for name, times in samples.items()
    ]
    return table(
        f"Chat turn on Redis: one server vs a local cluster (add + messages() + add, 4,000-token "
        f"window, N={n:,} stored; median and p90 of {TURNS} turns each)",
        ["where", "per turn", "p90", "vs one server"],
        rows,
    )


def throughput(url: str, quick: bool) -> str:
    processes, ids, adds = 4, 8, (200 if quick else 1_000)
    context = multiprocessing.get_context("spawn")
    rows = []
    for name, spec in (
        ("1 primary (one server)", _spec(REDIS_URL)),
        ("3 primaries (cluster)", _spec(url, cluster=True)),
    ):
        try:
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
        finally:
            _purge(spec)
        total = processes * adds
        rows.append([name, f"{total:,}", f"{elapsed:.2f} s", f"{total / elapsed:,.0f} adds/s"])
    return table(
        "Throughput on Redis: 4 processes, each adding to 8 memory ids of its own "
        "(token window 4,000), 1 vs 3 primaries, all on this machine",
        ["primaries", "adds", "time", "throughput"],
        rows,
    )


def run(quick: bool = False) -> Iterator[str]:
    reason = _redis_away()
    if reason is not None:
        yield f"\n(skipping the cluster benchmark: the one Redis server does not answer: {reason})"
        return
    cluster = _cluster()
    if isinstance(cluster, str):
        yield f"\n(skipping the cluster benchmark: no local cluster: {cluster})"
        return
    try:
        yield turns(cluster.url, QUICK_N if quick else N)
        yield throughput(cluster.url, quick)
    finally:
        cluster.stop()
