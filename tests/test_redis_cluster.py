"""The Redis stores on a real Redis Cluster (3 primaries, one replica each, on loopback; see
`tests/redis_cluster.py`): slots that move (ASK, MOVED), a stale slot map, a dead node, replica
acknowledgements (`min_replicas_acked`), and a primary killed while 8 processes write.

The contract suites run on the cluster too (`tests/stores/backend_redis_cluster.py`).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    AsyncMessageWindowChatMemory,
    ConfigurationError,
    MessageWindowChatMemory,
    StoreError,
    UserMessage,
)
from chatmemory._flow import run
from chatmemory.stores import AsyncRedisChatMemoryStore, NewMessage, RedisChatMemoryStore
from chatmemory.stores._redis_routes import (
    MOVES,
    AsyncClusterRoute,
    ClusterRoute,
    rerouted,
)
from chatmemory.stores.redis import close_client
from tests import _workers
from tests.conftest import REDIS_URL
from tests.redis_cluster import LocalCluster, client, session_cluster
from tests.stores import backends  # noqa: F401  (first: it imports every backend module)
from tests.stores.backend_redis_cluster import isolated_prefix

redis = pytest.importorskip("redis")
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode  # noqa: E402
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster  # noqa: E402
from redis.cluster import ClusterNode  # noqa: E402
from redis.crc import key_slot  # noqa: E402
from redis.exceptions import (  # noqa: E402
    ClusterDownError,
    ConnectionError,
    MovedError,
    RedisClusterException,
)

pytestmark = pytest.mark.redis


@pytest.fixture
def cluster() -> LocalCluster:
    return session_cluster()


@pytest.fixture
def prefix(cluster: LocalCluster) -> Iterator[str]:
    with isolated_prefix(uuid.uuid4().hex[:12]) as prefix:
        yield prefix


def _texts(entries: Any) -> list[str]:
    return [str(getattr(entry.message, "text", "")) for entry in entries]


def _slot(store: Any, memory_id: str) -> int:
    return key_slot(store._keys(memory_id)[0])


def _port_serving(raw: Any, slot: int) -> int:
    return int(raw.nodes_manager.get_node_from_slot(slot).port)


def _node_id(cluster: LocalCluster, port: int) -> str:
    return cluster.cli(port, "cluster", "myid").strip()


# --- where commands go --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_slot_moved_mid_conversation_is_followed_through_ask_tryagain_and_moved(
    cluster: LocalCluster, prefix: str, mode: str
) -> None:
    """While a slot migrates, a memory id whose keys are not on the old node yet is answered
    ASK: a one-key read goes to the new node (after ASKING); a commit, which names four keys
    the new node does not all hold, is answered TRYAGAIN there and waits. Once the slot has
    moved the commit goes through (MOVED updates the slot map)."""
    raw = client()
    memory_id = f"migrating-{mode}"
    store: Any = (RedisChatMemoryStore if mode == "sync" else AsyncRedisChatMemoryStore)(
        cluster.url, cluster=True, prefix=prefix
    )

    async def call(method: Any, *args: Any, **kwargs: Any) -> Any:
        result = method(*args, **kwargs)
        return await result if mode == "async" else result

    async def main() -> None:
        slot = _slot(store, memory_id)
        source = _port_serving(raw, slot)
        target = next(port for port in cluster.primaries() if port != source)
        source_id, target_id = _node_id(cluster, source), _node_id(cluster, target)
        empty = await call(store.load_window, memory_id)
        cluster.cli(target, "cluster", "setslot", str(slot), "importing", source_id)
        cluster.cli(source, "cluster", "setslot", str(slot), "migrating", target_id)
        assert await call(store.load_window, memory_id, since=empty) is empty  # ASK: one HGET

        def finish_migration() -> None:
            time.sleep(0.3)
            others = [port for port in cluster.primaries() if port not in (source, target)]
            for port in (target, source, *others):
                cluster.cli(port, "cluster", "setslot", str(slot), "node", target_id)

        mover = threading.Thread(target=finish_migration)
        mover.start()
        started = time.monotonic()
        done = await call(
            store.commit_window,
            memory_id,
            version=0,
            append=[NewMessage(UserMessage("asked")), NewMessage(AiMessage("moved"))],
            evict=[],
        )
        waited = time.monotonic() - started
        mover.join()
        assert done is not None
        assert waited >= 0.25  # it waited for the migration to end
        history = await call(store.history, memory_id)
        assert [entry.message for entry in history] == [UserMessage("asked"), AiMessage("moved")]
        assert _port_serving(store._client, slot) == target
        await call(store.aclose if mode == "async" else store.close)

    try:
        asyncio.run(main())
    finally:
        close_client(raw)


def test_a_stale_slot_map_pointing_at_a_dead_address_is_refreshed(
    cluster: LocalCluster, prefix: str
) -> None:
    with RedisChatMemoryStore(cluster.url, cluster=True, prefix=prefix) as store:
        slot = _slot(store, "stale")
        manager = store._client.nodes_manager  # type: ignore[union-attr]
        manager.slots_cache[slot] = [ClusterNode("127.0.0.1", 1)]  # type: ignore[no-untyped-call]
        MessageWindowChatMemory(id="stale", max_messages=5, store=store).add(UserMessage("hi"))
        assert manager.get_node_from_slot(slot).port != 1
        assert [str(getattr(m, "text", "")) for m in store.get_messages("stale")] == ["hi"]


def test_an_async_store_learns_the_slot_map_on_first_use_and_refreshes_it(
    cluster: LocalCluster, prefix: str
) -> None:
    async def main() -> None:
        async with AsyncRedisChatMemoryStore(cluster.url, cluster=True, prefix=prefix) as store:
            memory = AsyncMessageWindowChatMemory(id="a", max_messages=5, store=store)
            await memory.add(UserMessage("one"))
            slot = _slot(store, "a")
            dead = AsyncClusterNode("127.0.0.1", 1)
            store._client.nodes_manager.slots_cache[slot] = [dead]  # type: ignore[union-attr]
            await memory.add(UserMessage("two"))
            assert _texts(await store.history("a")) == ["one", "two"]
            assert await store.memory_ids() == ["a"]
            assert [s.messages for s in await store.summaries()] == [2]

    asyncio.run(main())


def test_ids_on_every_primary_are_listed_and_summarized(cluster: LocalCluster, prefix: str) -> None:
    """`memory_ids` and `summaries` scan every primary: ids spread over all three are found."""
    raw = client()
    try:
        with RedisChatMemoryStore(cluster.url, cluster=True, prefix=prefix) as store:
            ids = [f"user-{n}" for n in range(24)]
            for memory_id in ids:
                MessageWindowChatMemory(id=memory_id, max_messages=5, store=store).add(
                    UserMessage(memory_id)
                )
            ports = {_port_serving(raw, _slot(store, memory_id)) for memory_id in ids}
            assert len(ports) == 3  # (24 ids: the odds of missing a primary are 3 * (2/3)**24)
            assert store.memory_ids() == sorted(ids)
            assert [(s.memory_id, s.messages) for s in store.summaries()] == [
                (memory_id, 1) for memory_id in sorted(ids)
            ]
            store.delete_messages("user-0")
            assert "user-0" not in store.memory_ids()
    finally:
        close_client(raw)


def test_scripts_the_nodes_lost_are_sent_again(cluster: LocalCluster, prefix: str) -> None:
    with RedisChatMemoryStore(cluster.url, cluster=True, prefix=prefix) as store:
        memory = MessageWindowChatMemory(id="flushed", max_messages=5, store=store)
        memory.add(UserMessage("before"))
        for port in cluster.alive():
            cluster.cli(port, "script", "flush")
        memory.add(UserMessage("after"))
        assert [e.message for e in store.history("flushed")] == [
            UserMessage("before"),
            UserMessage("after"),
        ]


# --- configuration -------------------------------------------------------------------------------


def test_a_single_node_client_on_a_cluster_is_told_to_pass_cluster_true(
    cluster: LocalCluster, prefix: str
) -> None:
    raw = client()
    try:
        with RedisChatMemoryStore(cluster.url, prefix=prefix) as store:
            elsewhere = next(
                f"id-{n}"
                for n in range(100)
                if _port_serving(raw, _slot(store, f"id-{n}")) != cluster.ports[0]
            )
            with pytest.raises(StoreError, match="a Redis Cluster node: pass cluster=True"):
                store.load_window(elsewhere)
    finally:
        close_client(raw)


def test_clients_and_options_that_do_not_fit_are_refused(cluster: LocalCluster) -> None:
    sync_cluster = client()
    async_cluster = AsyncRedisCluster.from_url(cluster.url)
    plain = redis.Redis.from_url(REDIS_URL)
    async_plain = redis.asyncio.Redis.from_url(REDIS_URL)
    try:
        with pytest.raises(ConfigurationError, match="use AsyncRedisChatMemoryStore"):
            RedisChatMemoryStore(client=async_cluster)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="use RedisChatMemoryStore"):
            AsyncRedisChatMemoryStore(client=sync_cluster)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match=r"cluster=True needs a redis\.cluster"):
            RedisChatMemoryStore(client=plain, cluster=True)
        with pytest.raises(
            ConfigurationError, match=r"cluster=True needs a redis\.asyncio\.cluster"
        ):
            AsyncRedisChatMemoryStore(client=async_plain, cluster=True)
        bad: Any
        for bad in (-1, 1.5, True, "1"):
            with pytest.raises(ConfigurationError, match="`min_replicas_acked` must be an int"):
                RedisChatMemoryStore(client=plain, min_replicas_acked=bad)
        seconds: Any
        for seconds in (0, -1, float("inf"), "1", True):
            with pytest.raises(ConfigurationError, match="`replica_ack_timeout` must be a pos"):
                RedisChatMemoryStore(
                    client=plain, min_replicas_acked=1, replica_ack_timeout=seconds
                )
            with pytest.raises(ConfigurationError, match="`failover_timeout` must be a pos"):
                RedisChatMemoryStore(client=plain, failover_timeout=seconds)
        with RedisChatMemoryStore(client=sync_cluster) as given:
            assert repr(given).startswith(f"RedisChatMemoryStore('{cluster.url} (cluster)'")
            assert given.memory_ids() is not None
        assert sync_cluster.ping()  # a client passed in stays open
    finally:
        close_client(sync_cluster)
        plain.close()
        asyncio.run(async_cluster.aclose())
        asyncio.run(async_plain.aclose())


def test_an_unreachable_cluster_is_a_store_error_saying_where() -> None:
    with pytest.raises(StoreError, match=r"Redis at redis://127\.0\.0\.1:1/0 failed to join"):
        RedisChatMemoryStore("redis://user:secret@127.0.0.1:1/0", cluster=True)

    async def main() -> None:
        store = AsyncRedisChatMemoryStore(
            "redis://127.0.0.1:1/0", cluster=True, failover_timeout=0.2
        )
        with pytest.raises(StoreError, match=r"failover_timeout=0\.2 s") as caught:
            await store.load_window("m")
        assert "secret" not in str(caught.value)
        await store.aclose()

    asyncio.run(main())


# --- replica acknowledgements --------------------------------------------------------------------


def test_min_replicas_acked_waits_for_the_replica_and_says_when_too_few_answered(
    cluster: LocalCluster, prefix: str
) -> None:
    with RedisChatMemoryStore(
        cluster.url, cluster=True, prefix=prefix, min_replicas_acked=1
    ) as store:
        memory = MessageWindowChatMemory(id="acked", max_messages=5, store=store)
        memory.add(UserMessage("on two nodes"))
        assert memory.messages() == [UserMessage("on two nodes")]
    with RedisChatMemoryStore(
        cluster.url,
        cluster=True,
        prefix=prefix,
        min_replicas_acked=2,  # each primary has one replica
        replica_ack_timeout=0.05,
    ) as store:
        memory = MessageWindowChatMemory(id="acked", max_messages=5, store=store)
        with pytest.raises(StoreError, match=r"stored on the primary, but 1 of the 2 replicas"):
            memory.add(UserMessage("on the primary"))
        assert _texts(store.history("acked")) == [
            "on two nodes",
            "on the primary",
        ]


def test_min_replicas_acked_on_a_single_server_without_replicas(prefix: str) -> None:
    from tests.stores.backend_redis import isolated_prefix as single_prefix

    async def main(prefix: str) -> None:
        async with AsyncRedisChatMemoryStore(
            REDIS_URL, prefix=prefix, min_replicas_acked=1, replica_ack_timeout=0.01
        ) as store:
            memory = AsyncMessageWindowChatMemory(id="alone", max_messages=5, store=store)
            with pytest.raises(StoreError, match="0 of the 1 replicas"):
                await memory.add(UserMessage("no replica"))

    with single_prefix(uuid.uuid4().hex[:12]) as single:
        asyncio.run(main(single))


# --- failover ------------------------------------------------------------------------------------

WRITERS = 8
IDS_PER_WRITER = 3


@pytest.mark.slow
def test_a_primary_killed_while_eight_processes_write_loses_no_acknowledged_turn(
    tmp_path: Path,
) -> None:
    """8 processes add whole turns (user + AI message) to 3 ids each, with
    `min_replicas_acked=1`; a primary is killed (SIGKILL) mid-stream. Its replica is promoted;
    every acknowledged turn is stored exactly once and whole, no turn is stored twice or torn,
    and every writer is writing again within a bound (measured: printed with -s)."""
    try:
        cluster = LocalCluster.start()
    except Exception as error:  # the session cluster's reasons, said the same way
        session_cluster()
        raise AssertionError(f"a second cluster did not start: {error}") from error
    context = multiprocessing.get_context("spawn")
    prefix = f"chatmemory-test:failover{uuid.uuid4().hex[:8]}:"
    spec = (
        "chatmemory.stores.redis:RedisChatMemoryStore",
        {
            "url": cluster.url,
            "cluster": True,
            "prefix": prefix,
            "min_replicas_acked": 1,
            "failover_timeout": 15.0,
        },
    )
    stop = context.Event()
    writers = [
        context.Process(
            target=_workers.write_through_failover,
            args=(
                spec,
                f"w{w}",
                [f"w{w}-c{c}" for c in range(IDS_PER_WRITER)],
                stop,
                str(tmp_path / f"w{w}.json"),
            ),
        )
        for w in range(WRITERS)
    ]
    try:
        for writer in writers:
            writer.start()
        with RedisChatMemoryStore(cluster.url, cluster=True, prefix=prefix) as observer:
            deadline = time.monotonic() + 120
            while len(observer.memory_ids()) < WRITERS * IDS_PER_WRITER:
                assert time.monotonic() < deadline, "the writers did not start"
                time.sleep(0.1)
            time.sleep(0.5)
            victim = next(port for port in cluster.primaries() if port != cluster.ports[0])
            killed_at = time.time()
            cluster.kill(victim)
            with RedisChatMemoryStore(
                cluster.url, cluster=True, prefix=prefix, failover_timeout=0.1
            ) as impatient:  # a call that may not wait out the failover is told why
                on_victim = next(
                    f"w{w}-c{c}"
                    for w in range(WRITERS)
                    for c in range(IDS_PER_WRITER)
                    if _port_serving(impatient._client, _slot(impatient, f"w{w}-c{c}")) == victim
                )
                with pytest.raises(StoreError, match=r"failover_timeout=0\.1 s"):
                    impatient.load_window(on_victim)
            promoted = cluster.await_healthy(timeout=60)
            # the promoted replica has no replica of its own until the old primary is back
            cluster.restart(victim)
            rejoined = promoted + cluster.await_healthy(timeout=60)
            while not all(  # every conversation has a turn stored since
                summary.updated_at is not None
                and summary.updated_at.timestamp() > killed_at + rejoined + 0.5
                for summary in observer.summaries()
            ):
                assert time.time() < killed_at + 90, "the writers did not resume"
                time.sleep(0.1)
            stop.set()
            for writer in writers:
                writer.join(120)
            assert [writer.exitcode for writer in writers] == [0] * WRITERS
            stored = {
                memory_id: _texts(observer.history(memory_id))
                for memory_id in observer.memory_ids()
            }
    finally:
        for writer in writers:
            if writer.is_alive():
                writer.kill()
        cluster.stop()

    acknowledged, unacknowledged, resumed = _checked(tmp_path, stored, killed_at)
    print(
        f"\nfailover: {acknowledged} turns acknowledged, none lost, {unacknowledged} not "
        f"(StoreError: no replica confirmed them), none torn or doubled; replica promoted "
        f"{promoted:.2f} s after the kill, old primary back as its replica after "
        f"{rejoined:.2f} s; every conversation acknowledged again {resumed:.2f} s after the kill"
    )
    assert resumed < rejoined + 15


def _checked(
    tmp_path: Path, stored: dict[str, list[str]], killed_at: float
) -> tuple[int, int, float]:
    """Check the writers' logs against what is `stored`: every acknowledged turn twice (its
    user and its AI message), any other turn twice or not at all, every message whole. The
    numbers of acknowledged and other turns, and how long after the kill the last conversation
    had a turn acknowledged again."""
    acknowledged = unacknowledged = 0
    again: dict[str, float] = {}
    for w in range(WRITERS):
        log = json.loads((tmp_path / f"w{w}.json").read_text())
        for memory_id, n, ok, at in log:
            text = _workers.text_of(f"w{w}/{memory_id}", n)
            seen = stored[memory_id].count(text)
            if ok:
                acknowledged += 1
                assert seen == 2, f"acknowledged turn {text} is stored {seen} times, not 2"
                if at > killed_at:
                    again.setdefault(memory_id, at - killed_at)
            else:
                unacknowledged += 1
                assert seen in (0, 2), f"unacknowledged turn {text} is torn or doubled"
    for memory_id, texts in stored.items():
        assert set(Counter(texts).values()) == {2}, f"{memory_id}: a message is not stored twice"
        for text in texts:
            _workers.parse_text(text)  # whole
    assert len(again) == WRITERS * IDS_PER_WRITER, "a conversation was never written again"
    return acknowledged, unacknowledged, max(again.values())


# --- the reroute flow's limits -------------------------------------------------------------------


def test_rerouting_gives_up_after_sixteen_moves() -> None:
    """A slot bounced between nodes (MOVED after MOVED) is given up on, as redis-py does."""

    class Bouncing:
        moves = 0

        def moved(self, error: Exception) -> None:
            self.moves += 1

        def to_slot(self, slot: int, commands: Any) -> Exception:
            return MovedError(f"{slot} 127.0.0.1:2")

    bouncing = Bouncing()
    with pytest.raises(MovedError):
        run(rerouted(5, [("PING",)], MovedError("5 127.0.0.1:2"), 10.0), bouncing)
    assert bouncing.moves == MOVES


def test_routes_report_an_unknown_node_and_a_refresh_that_failed(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(*args: Any, **kwargs: Any) -> None:
        raise RedisClusterException("no node answered")

    raw = client()
    try:
        route = ClusterRoute(raw, 1.0)
        assert isinstance(route.to_node("127.0.0.1", 1, [("PING",)]), ClusterDownError)
        monkeypatch.setattr(raw.nodes_manager, "initialize", down)
        assert isinstance(route.refresh(), RedisClusterException)
    finally:
        close_client(raw)

    async def main() -> None:
        async_raw = AsyncRedisCluster.from_url(cluster.url)
        route = AsyncClusterRoute(async_raw, 1.0)
        assert (await route.send(b"k", [("PING",)])) == [b"PONG"]
        assert isinstance(await route.to_node("127.0.0.1", 1, [("PING",)]), ClusterDownError)
        dead = AsyncClusterNode("127.0.0.1", 1)
        async_raw.nodes_manager.nodes_cache[dead.name] = dead
        assert isinstance(await route.to_node("127.0.0.1", 1, [("PING",)]), ConnectionError)
        await route.close()
        await async_raw.aclose()

    asyncio.run(main())
