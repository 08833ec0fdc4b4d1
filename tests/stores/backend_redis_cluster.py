"""The Redis stores in the contract suite on a real Redis Cluster: 3 primaries with one replica
each, started from the machine's `redis-server` once per test session (`tests/redis_cluster.py`)
and torn down at its end. Without `redis-server` the tests skip and say so; under `CI=true`
they fail.

Each test gets its own key prefix; every key under it, on every primary, is deleted afterwards.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest

from chatmemory.stores.redis import close_client
from tests.redis_cluster import client, cluster_url

from .backend_redis import key_prefix
from .backends import Backend, Context, Processes, StoreSpec


def purge(prefix: str) -> int:
    """Delete every key under `prefix` on every primary; how many there were."""
    raw = client()
    try:
        pattern = "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + "*"
        keys = list(raw.scan_iter(match=pattern, count=1000))
        for key in keys:
            raw.delete(key)
        return len(keys)
    finally:
        close_client(raw)


@contextmanager
def isolated_prefix(unique: str) -> Iterator[str]:
    cluster_url()
    prefix = key_prefix(unique)
    try:
        yield prefix
    finally:
        purge(prefix)


@asynccontextmanager
async def open_sync(context: Context) -> AsyncIterator[object]:
    from chatmemory.stores import RedisChatMemoryStore

    with (
        isolated_prefix(context.unique) as prefix,
        RedisChatMemoryStore(cluster_url(), cluster=True, prefix=prefix) as store,
    ):
        yield store


@asynccontextmanager
async def open_async(context: Context) -> AsyncIterator[object]:
    from chatmemory.stores import AsyncRedisChatMemoryStore

    with isolated_prefix(context.unique) as prefix:
        async with AsyncRedisChatMemoryStore(cluster_url(), cluster=True, prefix=prefix) as store:
            yield store


async def corrupt(raw: object, memory_id: str, seq: int) -> None:
    """Overwrite the message of row `seq` in the log hash with JSON cut short."""
    _, log, _, _ = raw._keys(memory_id)  # type: ignore[attr-defined]
    other = client()
    try:
        other.hset(log, str(seq), '{"broken')
    finally:
        close_client(other)


@contextmanager
def isolated_spec(tmp_path: Path, unique: str) -> Iterator[StoreSpec]:
    with isolated_prefix(unique) as prefix:
        yield (
            "chatmemory.stores.redis:RedisChatMemoryStore",
            {"url": cluster_url(), "cluster": True, "prefix": prefix},
        )


def counters(spec: StoreSpec, memory_id: str) -> list[tuple[int, int]]:
    raw = client()
    try:
        meta = raw.hgetall(f"{spec[1]['prefix']}{{{memory_id}}}:meta")
    finally:
        close_client(raw)
    return [(int(meta[b"version"]), int(meta[b"next_seq"]))] if meta else []


BACKEND = Backend(
    "redis-cluster",
    open_sync,
    open_async,
    marks=(pytest.mark.redis,),
    corrupt=corrupt,
    processes=Processes(isolated_spec, counters),
)
