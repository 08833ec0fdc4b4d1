"""What only the Redis stores do: key layout, TTLs, owned clients, failures of the server."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    AsyncMessageWindowChatMemory,
    ConfigurationError,
    MessageWindowChatMemory,
    SerializationError,
    StoreError,
    UserMessage,
    message_to_json,
)
from chatmemory.stores import (
    AsyncRedisChatMemoryStore,
    MemorySummary,
    NewMessage,
    RedisChatMemoryStore,
)
from chatmemory.stores import redis as redis_store
from tests.conftest import REDIS_URL
from tests.stores import backends  # noqa: F401  (first: it imports every backend module)
from tests.stores.backend_redis import isolated_prefix
from tests.stores.backends import AwaitableFacade, memory_for

redis = pytest.importorskip("redis")
from redis import Redis  # noqa: E402
from redis.asyncio import Redis as AsyncRedis  # noqa: E402
from redis.asyncio.connection import Connection as AsyncRedisConnection  # noqa: E402
from redis.backoff import NoBackoff  # noqa: E402
from redis.connection import Connection as RedisConnection  # noqa: E402
from redis.crc import key_slot  # noqa: E402
from redis.retry import Retry  # noqa: E402

pytestmark = pytest.mark.redis

TRICKY_IDS = ["{tag}", "x}y{z", "{", "}", "%", "%7B", "%257B", "a:b", "{}", "漢字 ✓", "a\nb"]


@pytest.fixture
def prefix() -> Iterator[str]:
    with isolated_prefix(f"r{uuid.uuid4().hex[:12]}") as prefix:
        yield prefix


@pytest.fixture
def raw() -> Iterator[Any]:
    client = redis.Redis.from_url(REDIS_URL)
    yield client
    client.close()


@pytest.fixture
def store(prefix: str) -> Iterator[RedisChatMemoryStore]:
    with RedisChatMemoryStore(REDIS_URL, prefix=prefix) as store:
        yield store


def add(store: RedisChatMemoryStore, memory_id: str, *texts: str) -> None:
    version = store.load_window(memory_id).version
    append = [NewMessage(UserMessage(t)) for t in texts]
    assert store.commit_window(memory_id, version=version, append=append, evict=[])


def keys_under(raw: Any, prefix: str) -> list[bytes]:
    return sorted(raw.scan_iter(match=prefix.replace("*", "\\*") + "*", count=1000))


# --- key layout ---------------------------------------------------------------------------------


def test_every_key_of_an_id_shares_the_hash_slot_of_the_whole_id(
    store: RedisChatMemoryStore, raw: Any, prefix: str
) -> None:
    add(store, "user:42", "hello", "again")
    committed = store.commit_window(
        "user:42", version=store.load_window("user:42").version, append=[], evict=[0]
    )
    assert committed is not None
    keys = keys_under(raw, prefix)
    base = prefix.encode() + b"{user:42}:"
    assert keys == sorted(base + part for part in (b"info", b"log", b"meta", b"win"))
    assert {key_slot(k) for k in keys} == {key_slot(b"user:42")}
    assert raw.type(base + b"meta") == b"hash"
    assert raw.hgetall(base + b"meta").keys() >= {b"version", b"next_seq"}
    assert raw.hget(base + b"meta", "version") == str(committed.version).encode()
    assert raw.hget(base + b"meta", "next_seq") == b"2"
    # the log holds exactly LangChain4j's JSON of each message, keyed by seq
    assert raw.hgetall(base + b"log") == {
        b"0": message_to_json(UserMessage("hello")).encode(),
        b"1": message_to_json(UserMessage("again")).encode(),
    }
    assert raw.type(base + b"win") == b"zset"
    assert raw.zrange(base + b"win", 0, -1) == [b"1"]
    assert raw.type(base + b"info") == b"hash"


def test_tricky_ids_never_collide_and_their_tag_is_the_whole_id(
    store: RedisChatMemoryStore, raw: Any, prefix: str
) -> None:
    for memory_id in TRICKY_IDS:
        add(store, memory_id, f"I am {memory_id}")
    for memory_id in TRICKY_IDS:
        assert store.get_messages(memory_id) == [UserMessage(f"I am {memory_id}")]
    assert store.memory_ids() == sorted(TRICKY_IDS)
    keys = keys_under(raw, prefix)
    assert len(keys) == 4 * len(TRICKY_IDS)
    by_tag: dict[bytes, set[int]] = {}
    for key in keys:
        rest = key[len(prefix) :]
        # Redis hashes what lies between the first "{" and the next "}"
        assert rest.startswith(b"{")
        tag = rest[1 : rest.index(b"}")]
        by_tag.setdefault(tag, set()).add(key_slot(key))
        assert key_slot(key) == key_slot(tag)
    assert len(by_tag) == len(TRICKY_IDS)
    assert sorted(redis_store._unescape(t.decode()) for t in by_tag) == sorted(TRICKY_IDS)


def test_keys_of_other_prefixes_and_stray_keys_are_not_listed(raw: Any, prefix: str) -> None:
    globby = prefix + "a*[b]?\\"
    with RedisChatMemoryStore(REDIS_URL, prefix=globby) as store:
        add(store, "mine", "x")
        raw.hset(prefix + "aX[b]?\\{theirs}:meta", "version", 1)  # matches the glob unescaped
        raw.hset(globby + "{}:meta", "version", 1)
        raw.hset(globby + "{a}b}:meta", "version", 1)
        raw.hset(globby + "{only-a-log}:log", "0", "{}")
        assert store.memory_ids() == ["mine"]
    assert redis_store._memory_id_of(b"p:", "p:{a%7Bb}:meta") == "a{b"
    assert redis_store._memory_id_of(b"p:", b"p:{a}:log") is None


def test_prefix_and_memory_id_are_checked(prefix: str) -> None:
    with pytest.raises(ConfigurationError, match="hash tag"):
        RedisChatMemoryStore(REDIS_URL, prefix="app{1}:")
    with pytest.raises(ConfigurationError, match="must be a str"):
        RedisChatMemoryStore(REDIS_URL, prefix=b"app:")  # type: ignore[arg-type]
    with RedisChatMemoryStore(REDIS_URL, prefix=prefix) as store:
        with pytest.raises(ConfigurationError, match="non-empty str"):
            store.get_messages("")
        with pytest.raises(ConfigurationError, match="non-empty str"):
            store.load_window(7)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="lone surrogate"):
            store.get_messages("lone \ud800 surrogate")
        with pytest.raises(ConfigurationError, match="errors"):
            store.history("m", errors="ignore")  # type: ignore[arg-type]


def test_a_client_of_the_wrong_kind_is_refused() -> None:
    async_client = redis.asyncio.Redis.from_url(REDIS_URL)
    sync_client = redis.Redis.from_url(REDIS_URL)
    try:
        with pytest.raises(ConfigurationError, match="AsyncRedisChatMemoryStore"):
            RedisChatMemoryStore(client=async_client)
        with pytest.raises(ConfigurationError, match="use RedisChatMemoryStore"):
            AsyncRedisChatMemoryStore(client=sync_client)
    finally:
        sync_client.close()
        asyncio.run(async_client.aclose())


# --- TTL ----------------------------------------------------------------------------------------


def pttls(raw: Any, prefix: str) -> list[int]:
    return [raw.pttl(k) for k in keys_under(raw, prefix)]


def test_ttl_is_set_on_every_key_and_refreshed_by_writes_only(raw: Any, prefix: str) -> None:
    with RedisChatMemoryStore(REDIS_URL, prefix=prefix, ttl=60) as store:
        add(store, "t", "a")
        store.commit_window("t", version=1, append=[NewMessage(AiMessage("b"))], evict=[0])
        ttls = pttls(raw, prefix)
        assert len(ttls) == 4
        assert all(55_000 < t <= 60_000 for t in ttls)
        for key in keys_under(raw, prefix):
            raw.pexpire(key, 5_000)
        store.get_messages("t")
        store.history("t")
        assert all(t <= 5_000 for t in pttls(raw, prefix))  # reads do not refresh
        add(store, "t", "c")
        assert all(55_000 < t <= 60_000 for t in pttls(raw, prefix))  # writes do


def test_ttl_as_timedelta_and_no_ttl(raw: Any, prefix: str) -> None:
    with RedisChatMemoryStore(REDIS_URL, prefix=prefix, ttl=timedelta(minutes=2)) as store:
        add(store, "td", "x")
        assert all(115_000 < t <= 120_000 for t in pttls(raw, prefix))
        assert "ttl=datetime.timedelta(seconds=120)" in repr(store)
    with RedisChatMemoryStore(REDIS_URL, prefix=prefix + "n:") as store:
        add(store, "forever", "x")
        assert pttls(raw, prefix + "n:") == [-1] * 4


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), "60", True])
def test_bad_ttls_are_refused(ttl: Any) -> None:
    with pytest.raises(ConfigurationError, match="ttl"):
        RedisChatMemoryStore(REDIS_URL, ttl=ttl)


def test_an_expired_memory_starts_from_scratch(raw: Any, prefix: str) -> None:
    with RedisChatMemoryStore(REDIS_URL, prefix=prefix, ttl=0.05) as store:
        add(store, "short", "a", "b")
        time.sleep(0.2)
        assert store.load_window("short").version == 0
        assert store.history("short") == []
        assert store.memory_ids() == []
        add(store, "short", "new")
        assert [(h.seq, h.message) for h in store.history("short")] == [(0, UserMessage("new"))]


def test_leftovers_of_a_half_expired_memory_are_dropped(
    store: RedisChatMemoryStore, raw: Any, prefix: str
) -> None:
    add(store, "half", "old-0", "old-1")
    raw.delete(prefix + "{half}:meta")  # as if meta expired a moment before the other keys
    assert store.load_window("half").rows == ()
    assert store.history("half") == []
    add(store, "half", "new")
    assert [(h.seq, h.message, h.in_window) for h in store.history("half")] == [
        (0, UserMessage("new"), True)
    ]


# --- clients ------------------------------------------------------------------------------------


def test_a_client_passed_in_is_not_closed(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    closed: list[str] = []
    monkeypatch.setattr(client, "close", lambda: closed.append("closed"))
    with RedisChatMemoryStore(client=client, prefix=prefix) as store:
        add(store, "c", "x")  # a client decoding responses to str works too
        assert store.get_messages("c") == [UserMessage("x")]
        assert [h.message for h in store.history("c")] == [UserMessage("x")]
        assert store.memory_ids() == ["c"]
    assert closed == []
    monkeypatch.undo()
    client.close()


def test_an_owned_client_is_closed(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RedisChatMemoryStore(REDIS_URL, prefix=prefix)
    real_close = store._client.close
    closed: list[str] = []

    def close() -> None:
        closed.append("closed")
        real_close()

    monkeypatch.setattr(store._client, "close", close)
    with store:
        store.get_messages("x")
    assert closed == ["closed"]


def test_async_clients_passed_in_are_not_closed_and_owned_ones_are(prefix: str) -> None:
    calls: list[str] = []

    def spy(client: Any) -> None:
        real_aclose = client.aclose

        async def aclose(*args: Any) -> None:
            calls.append("aclose")
            await real_aclose(*args)

        client.aclose = aclose

    async def main() -> None:
        client = redis.asyncio.Redis.from_url(REDIS_URL)
        spy(client)
        async with AsyncRedisChatMemoryStore(client=client, prefix=prefix) as store:
            await store.update_messages("a", [UserMessage("x")])
            assert await store.get_messages("a") == [UserMessage("x")]
        assert calls == []
        assert await client.ping()
        await client.aclose()
        assert calls == ["aclose"]  # (by us)
        async with AsyncRedisChatMemoryStore(REDIS_URL, prefix=prefix) as owned:
            spy(owned._client)
            assert await owned.memory_ids() == ["a"]
        assert calls == ["aclose", "aclose"]

    asyncio.run(main())


def test_repr_names_the_server_and_never_the_password(prefix: str) -> None:
    with RedisChatMemoryStore("redis://:s3cret@127.0.0.1:6379/3", prefix=prefix) as store:
        assert repr(store) == f"RedisChatMemoryStore('redis://127.0.0.1:6379/3', prefix={prefix!r})"
    unix = redis.Redis(unix_socket_path="/tmp/nowhere.sock", db=2)
    with RedisChatMemoryStore(client=unix) as store:
        assert "'unix:///tmp/nowhere.sock?db=2'" in repr(store)
    unix.close()

    class Opaque(redis.Redis):  # type: ignore[misc,name-defined]  # a client without a pool to inspect (as a cluster client)
        def __init__(self) -> None:
            self.connection_pool = None

        def get_encoder(self) -> Any:
            return redis.Redis().get_encoder()

    assert repr(RedisChatMemoryStore(client=Opaque())).startswith("RedisChatMemoryStore('Opaque'")


# --- unreadable rows ----------------------------------------------------------------------------


def test_a_corrupt_row_names_the_memory_id_and_the_row(
    store: RedisChatMemoryStore, raw: Any, prefix: str
) -> None:
    add(store, "bad", "zero", "one", "two")
    add(store, "good", "fine")
    raw.hset(prefix + "{bad}:log", "1", b'{"type":"USER","contents":[{"type":"TEXT"')
    for read in (store.load_window, store.get_messages, store.history):
        with pytest.raises(SerializationError) as caught:
            read("bad")
        error = caught.value
        assert (error.memory_id, error.row) == ("bad", 1)
        assert "memory id 'bad'; row 1" in str(error)
        assert "errors='skip'" in str(error)
        assert error.fragment is not None
        assert error.fragment.lstrip("…") in '{"type":"USER","contents":[{"type":"TEXT"'
        assert isinstance(error.__cause__, SerializationError)
    skipped = store.history("bad", errors="skip")
    assert [(h.seq, h.message) for h in skipped] == [
        (0, UserMessage("zero")),
        (2, UserMessage("two")),
    ]
    assert store.get_messages("good") == [UserMessage("fine")]
    raw.hset(prefix + "{bad}:log", "1", b"\xff\xfe not utf-8 \x00")
    with pytest.raises(SerializationError, match="row 1"):
        store.get_messages("bad")


@pytest.mark.parametrize(
    ("info", "match"),
    [
        (None, "metadata"),
        (b"yesterday [null,null]", "metadata"),
        (b"1700000000000000", "metadata"),
        (b"1700000000000000 [1]", "metadata"),
        (b'1700000000000000 ["7",null]', "token count"),
        (b"1700000000000000 [7,8]", "token count"),
        (b"1700000000000000 [true,null]", "token count"),
    ],
)
def test_corrupt_row_metadata_is_an_error_too(
    store: RedisChatMemoryStore, raw: Any, prefix: str, info: bytes | None, match: str
) -> None:
    add(store, "m", "zero", "one")
    if info is None:
        raw.hdel(prefix + "{m}:info", "1")
    else:
        raw.hset(prefix + "{m}:info", "1", info)
    with pytest.raises(SerializationError, match=match) as caught:
        store.load_window("m")
    assert (caught.value.memory_id, caught.value.row) == ("m", 1)
    assert [h.seq for h in store.history("m", errors="skip")] == [0]


def test_a_window_row_missing_from_the_log_is_an_error(
    store: RedisChatMemoryStore, raw: Any, prefix: str
) -> None:
    add(store, "m", "zero", "one")
    raw.hdel(prefix + "{m}:log", "0")
    with pytest.raises(SerializationError, match="missing") as caught:
        store.get_messages("m")
    assert caught.value.row == 0
    assert [h.seq for h in store.history("m")] == [1]  # history lists what the log holds


def test_rows_without_a_sequence_number_are_errors(
    store: RedisChatMemoryStore, raw: Any, prefix: str
) -> None:
    add(store, "m", "zero", "one")
    raw.hset(prefix + "{m}:log", "x", message_to_json(UserMessage("stray")))
    with pytest.raises(SerializationError, match="no sequence number") as caught:
        store.history("m")
    assert caught.value.row == "x"
    assert [h.seq for h in store.history("m", errors="skip")] == [0, 1]
    raw.zadd(prefix + "{m}:win", {"y": 5})
    with pytest.raises(SerializationError, match="row 'y'"):
        store.load_window("m")


def test_async_store_reports_corrupt_rows(prefix: str, raw: Any) -> None:
    async def main() -> None:
        async with AsyncRedisChatMemoryStore(REDIS_URL, prefix=prefix) as store:
            await store.update_messages("bad", [UserMessage("a"), UserMessage("b")])
            raw.hset(prefix + "{bad}:log", "0", "nope")
            with pytest.raises(SerializationError, match="row 0"):
                await store.get_messages("bad")
            with pytest.raises(SerializationError, match="row 0"):
                await store.history("bad")
            assert [h.seq for h in await store.history("bad", errors="skip")] == [1]

    asyncio.run(main())


# --- summaries ----------------------------------------------------------------------------------


def test_summaries_say_when_the_last_message_was_stored(
    store: RedisChatMemoryStore, raw: Any
) -> None:
    before = datetime.now(timezone.utc) - timedelta(seconds=5)  # the server's clock, roughly
    add(store, "s", "one", "two")
    stored = store.summaries()[0].updated_at
    assert stored is not None
    assert before < stored < datetime.now(timezone.utc) + timedelta(seconds=5)
    version = store.load_window("s").version
    assert store.commit_window("s", version=version, append=[], evict=[0])  # stores nothing
    assert store.summaries() == [MemorySummary("s", 2, 1, stored)]
    # an id whose commit stored nothing is still an id; one deleted after the SCAN is not
    assert store.commit_window("empty", version=0, append=[], evict=[])
    assert [(s.memory_id, s.messages, s.updated_at) for s in store.summaries()] == [
        ("empty", 0, None),
        ("s", 2, stored),
    ]
    gone = redis_store._summaries(b"p:", [b"p:{gone}:meta"], [0, 0, [None, None]])
    assert gone == []


# --- commits ------------------------------------------------------------------------------------


def test_a_retried_commit_is_applied_once(store: RedisChatMemoryStore, raw: Any) -> None:
    """What redis-py's retry on a lost reply does: the same EVALSHA again. The retry gets the
    same `Committed` as the first try, so the memory rebuilds the same window from it."""
    keys = store._keys("r")
    args = redis_store._commit_args(
        version=0, ttl_ms=0, token="tok-1", append=[NewMessage(UserMessage("once"))], evict=[]
    )
    first = store._run(redis_store._COMMIT_SCRIPT, keys, args)[0]
    assert first
    again = store._run(redis_store._COMMIT_SCRIPT, keys, args)[0]
    assert again == first  # recognized: the same result again
    other = redis_store._commit_args(
        version=0, ttl_ms=0, token="tok-2", append=[NewMessage(UserMessage("lost"))], evict=[]
    )
    assert store._run(redis_store._COMMIT_SCRIPT, keys, other)[0] == []
    assert [h.message for h in store.history("r")] == [UserMessage("once")]
    # a later commit appending two rows and evicting one, retried: its own version and first seq
    version = redis_store._committed(first).version  # type: ignore[union-attr]
    args = redis_store._commit_args(
        version=version,
        ttl_ms=0,
        token="tok-3",
        append=[NewMessage(UserMessage("a"))] * 2,
        evict=[0],
    )
    done = redis_store._committed(store._run(redis_store._COMMIT_SCRIPT, keys, args)[0])
    again = redis_store._committed(store._run(redis_store._COMMIT_SCRIPT, keys, args)[0])
    assert done is not None
    assert again is not None
    assert (again.version, again.first_seq, again.stamp) == (done.version, 1, done.stamp)
    assert done.version > version
    assert store.load_window("r").version == done.version
    assert [h.seq for h in store.history("r")] == [0, 1, 2]


def test_a_server_that_lost_the_scripts_gets_them_again(
    store: RedisChatMemoryStore, raw: Any, prefix: str
) -> None:
    add(store, "f", "before")
    raw.script_flush()  # what a restart or SCRIPT FLUSH does: every store reloads on NOSCRIPT
    add(store, "f", "after")
    assert [m.text for m in store.get_messages("f")] == ["before", "after"]  # type: ignore[union-attr]

    async def main() -> None:
        async with AsyncRedisChatMemoryStore(REDIS_URL, prefix=prefix) as asynchronous:
            assert len((await asynchronous.load_window("f")).rows) == 2
            raw.script_flush()
            assert len((await asynchronous.load_window("f")).rows) == 2
            version = (await asynchronous.load_window("f")).version
            raw.script_flush()
            done = await asynchronous.commit_window(
                "f", version=version, append=[NewMessage(UserMessage("async"))], evict=[]
            )
            assert done is not None
            assert done.first_seq == 2

    asyncio.run(main())


def test_large_windows_and_evictions_are_done_in_chunks(store: RedisChatMemoryStore) -> None:
    count = 9_000  # past Lua's limit on unpacked arguments
    batch = [NewMessage(UserMessage(str(i)), token_count=i, counted_by="n") for i in range(count)]
    assert store.commit_window("big", version=0, append=batch, evict=[])
    snapshot = store.load_window("big")
    assert [r.seq for r in snapshot.rows] == list(range(count))
    assert [r.token_count for r in snapshot.rows] == list(range(count))
    assert store.commit_window(
        "big", version=snapshot.version, append=[], evict=list(range(count - 1))
    )
    assert [r.seq for r in store.load_window("big").rows] == [count - 1]
    assert len(store.history("big")) == count


def test_sync_and_async_stores_share_the_same_data(
    store: RedisChatMemoryStore, prefix: str
) -> None:
    memory = MessageWindowChatMemory(max_messages=2, id="shared", store=store)
    memory.add(UserMessage("q"), AiMessage("a"), UserMessage("q2"))

    async def main() -> None:
        async with AsyncRedisChatMemoryStore(REDIS_URL, prefix=prefix) as astore:
            assert await astore.get_messages("shared") == [AiMessage("a"), UserMessage("q2")]
            assert len(await astore.history("shared")) == 3
            await astore.delete_messages("shared")

    asyncio.run(main())
    assert store.history("shared") == []


# --- round trips ------------------------------------------------------------------------------


_SETUP = frozenset({"AUTH", "CLIENT", "HELLO", "PING", "SELECT"})


def _name(command: Any) -> str | None:
    """The command's name as sent, or None for what a connection sends while connecting."""
    name = (command.decode() if isinstance(command, bytes) else str(command)).upper()
    return None if name.split()[0] in _SETUP else name


def _recording(sent: list[str]) -> Redis:
    """A client whose connections note the name of every command they send (the store's
    direct connections come from its pool too)."""

    class Recording(RedisConnection):
        def pack_command(self, *args: Any) -> Any:
            name = _name(args[0])
            if name is not None:
                sent.append(name)
            return super().pack_command(*args)  # type: ignore[no-untyped-call]

    return Redis.from_url(REDIS_URL, connection_class=Recording)


def _async_recording(sent: list[str]) -> AsyncRedis:
    class Recording(AsyncRedisConnection):
        def pack_command(self, *args: Any) -> Any:
            name = _name(args[0])
            if name is not None:
                sent.append(name)
            return super().pack_command(*args)

    return AsyncRedis.from_url(REDIS_URL, connection_class=Recording)


def _new(message: Any) -> NewMessage:
    return NewMessage(message)


async def _round_trips(mine: Any, other_store: Any, mode: str, sent: list[str]) -> None:
    """A kept window costs one HGET to confirm, the load script once it changed (and on the
    next read, which clears the mark), and after a lost race the retry reads with the script."""
    memory = memory_for(mine, mode, "trips", max_messages=10)
    other = AwaitableFacade(other_store) if mode == "sync" else other_store
    await memory.add(UserMessage("one"))
    sent.clear()
    assert await memory.messages() == [UserMessage("one")]
    assert sent == ["HGET"]
    v = (await other.load_window("trips")).version
    assert await other.commit_window("trips", version=v, append=[_new(AiMessage("two"))], evict=[])
    sent.clear()
    assert await memory.messages() == [UserMessage("one"), AiMessage("two")]
    assert sent == ["HGET", "EVALSHA"]
    sent.clear()
    await memory.messages()
    await memory.messages()
    assert sent == ["EVALSHA", "HGET"]  # a change seen: the script at once, until unchanged
    v = (await other.load_window("trips")).version
    assert await other.commit_window("trips", version=v, append=[_new(AiMessage("3"))], evict=[])
    sent.clear()
    await memory.add(UserMessage("four"))  # on a stale kept window: the commit loses
    assert sent == ["EVALSHA", "EVALSHA", "EVALSHA"]  # commit, load script, commit
    assert await memory.messages() == [
        UserMessage("one"),
        AiMessage("two"),
        AiMessage("3"),
        UserMessage("four"),
    ]
    await other.delete_messages("trips")
    assert await memory.messages() == []
    assert await memory.messages() == []  # an id seen deleted stays empty


def test_a_kept_window_is_confirmed_with_one_hget(prefix: str) -> None:
    async def main() -> None:
        sent: list[str] = []
        client = _recording(sent)
        with (
            RedisChatMemoryStore(client=client, prefix=prefix) as mine,
            RedisChatMemoryStore(REDIS_URL, prefix=prefix) as other,
        ):
            await _round_trips(mine, other, "sync", sent)
        client.close()

    asyncio.run(main())


def test_an_async_kept_window_is_confirmed_with_one_hget(prefix: str) -> None:
    async def main() -> None:
        sent: list[str] = []
        client = _async_recording(sent)
        async with (
            AsyncRedisChatMemoryStore(client=client, prefix=prefix) as mine,
            AsyncRedisChatMemoryStore(REDIS_URL, prefix=prefix) as other,
        ):
            await _round_trips(mine, other, "async", sent)
        await client.aclose()

    asyncio.run(main())


def test_what_a_store_remembers_per_id_is_bounded(prefix: str) -> None:
    """Keys and "seen changing" marks are kept for at most 1,024 ids, then forgotten together:
    a forgotten id asks for its version first again."""
    sent: list[str] = []
    client = _recording(sent)
    with (
        RedisChatMemoryStore(client=client, prefix=prefix) as mine,
        RedisChatMemoryStore(REDIS_URL, prefix=prefix) as other,
    ):
        memory = MessageWindowChatMemory(id="hot", max_messages=10, store=mine)
        memory.add(UserMessage("one"))
        for text in ("two", "three"):
            version = other.load_window("hot").version
            assert other.commit_window(
                "hot", version=version, append=[_new(AiMessage(text))], evict=[]
            )
            sent.clear()
            memory.messages()
            if text == "two":
                assert sent == ["HGET", "EVALSHA"]  # now marked as changing
                for n in range(redis_store._KEYS_CACHED):
                    mine.load_window(f"other-{n}")  # fills the memo of keys
        assert sent == ["HGET", "EVALSHA"]  # the mark went with the keys
    client.close()


# --- an unreachable server ----------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_an_unreachable_server_is_a_store_error_naming_the_memory_id() -> None:
    url = f"redis://127.0.0.1:{closed_port()}/0"
    with RedisChatMemoryStore(url) as store, pytest.raises(StoreError) as caught:
        store.get_messages("alice")  # after the store's own retries
    error = caught.value
    assert error.memory_id == "alice"
    assert error.store is store
    assert "memory id 'alice'" in str(error)
    assert "RedisChatMemoryStore" in str(error)
    assert url.removesuffix("/0") in str(error)
    assert isinstance(error.__cause__, redis.ConnectionError)


def no_retry_client(port: int, *, asyncio_: bool = False) -> Any:
    module = redis.asyncio if asyncio_ else redis
    return module.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0))


def test_every_operation_fails_cleanly_when_unreachable() -> None:
    client = no_retry_client(closed_port())
    store = RedisChatMemoryStore(client=client)
    calls = [
        lambda: store.load_window("m"),
        lambda: store.commit_window("m", version=0, append=[NewMessage(AiMessage("x"))], evict=[]),
        lambda: store.update_messages("m", [UserMessage("x")]),
        lambda: store.delete_messages("m"),
        lambda: store.history("m"),
    ]
    for call in calls:
        with pytest.raises(StoreError, match="memory id 'm'") as caught:
            call()  # type: ignore[no-untyped-call]
        assert caught.value.memory_id == "m"
    with pytest.raises(StoreError, match="list the memory ids") as listing:
        store.memory_ids()
    assert listing.value.memory_id is None
    client.close()


def test_every_async_operation_fails_cleanly_when_unreachable() -> None:
    async def main() -> None:
        client = no_retry_client(closed_port(), asyncio_=True)
        store = AsyncRedisChatMemoryStore(client=client)
        calls = [
            lambda: store.load_window("m"),
            lambda: store.commit_window("m", version=0, append=[], evict=[]),
            lambda: store.get_messages("m"),
            lambda: store.delete_messages("m"),
            lambda: store.history("m"),
        ]
        for call in calls:
            with pytest.raises(StoreError, match="memory id 'm'"):
                await call()  # type: ignore[no-untyped-call]
        with pytest.raises(StoreError, match="list the memory ids"):
            await store.memory_ids()
        await client.aclose()

    asyncio.run(main())


# --- a server going away mid-run ----------------------------------------------------------------


class Proxy:
    """A TCP proxy to Redis on 127.0.0.1 that a test can break on purpose."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.cut: tuple[bytes, int] | None = None
        self.drop: bytes | None = None
        self.armed = False
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.threads: list[threading.Thread] = []
        self.stopped = False
        self._spawn(self._accept)

    def cut_request(self, marker: bytes, keep: int) -> None:
        """Forward only the first `keep` bytes of the next request holding `marker`, then break
        that connection and stop listening: the server has gone away."""
        self.cut = (marker, keep)

    def drop_reply(self, marker: bytes) -> None:
        """Forward the next request holding `marker` but swallow its reply and break the
        connection (the client reconnects and retries)."""
        self.drop = marker

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self.threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self.lock:
                self.sockets += [client, server]
            self._spawn(self._pump, client, server, True)
            self._spawn(self._pump, server, client, False)

    def _pump(self, source: socket.socket, sink: socket.socket, request: bool) -> None:
        try:
            while data := source.recv(65536):
                with self.lock:
                    if request and self.cut is not None and self.cut[0] in data:
                        sink.sendall(data[: self.cut[1]])
                        self.cut = None
                        self.stop()
                        break
                    if request and self.drop is not None and self.drop in data:
                        self.drop = None
                        self.armed = True
                    elif not request and self.armed:
                        self.armed = False
                        break
                sink.sendall(data)
        except OSError:
            pass
        self._break(source, sink)

    def _break(self, *sockets: socket.socket) -> None:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self._break(self.listener)  # wakes the thread blocked in accept()
            self.listener.close()

    def close(self) -> None:
        self.stop()
        with self.lock:
            self._break(*self.sockets)
        for thread in self.threads:
            thread.join(timeout=5)
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    kwargs = redis.connection.parse_url(REDIS_URL)
    proxy = Proxy((kwargs.get("host", "127.0.0.1"), kwargs.get("port", 6379)))
    yield proxy
    proxy.close()


COMMIT = hashlib.sha1(redis_store._COMMIT.encode()).hexdigest().encode()
"""What every commit request holds: the sha1 of the commit script (EVALSHA)."""


def test_a_server_going_away_mid_commit_leaves_nothing_half_written(
    proxy: Proxy, prefix: str
) -> None:
    url = f"redis://127.0.0.1:{proxy.port}/0"
    with (
        RedisChatMemoryStore(url, prefix=prefix) as store,
        RedisChatMemoryStore(REDIS_URL, prefix=prefix) as direct,
    ):
        memory = MessageWindowChatMemory(max_messages=3, id="mid", store=store)
        for i in range(5):
            memory.add(UserMessage(f"m{i}"))
        before = (direct.load_window("mid"), direct.history("mid"))
        proxy.cut_request(COMMIT, 100_000)  # the server sees only part of the commit
        with pytest.raises(StoreError, match="memory id 'mid'") as caught:
            memory.add(UserMessage("x" * 1_000_000), AiMessage("never stored"))
        assert isinstance(caught.value.__cause__, redis.ConnectionError)
        assert "commit the window" in str(caught.value)
        assert (direct.load_window("mid"), direct.history("mid")) == before
        assert [m.text for m in direct.get_messages("mid")] == ["m2", "m3", "m4"]  # type: ignore[union-attr]


@pytest.mark.parametrize("own_client", [True, False])
def test_a_lost_reply_is_retried_and_applied_exactly_once(
    proxy: Proxy, prefix: str, own_client: bool
) -> None:
    url = f"redis://127.0.0.1:{proxy.port}/0"
    client = None if own_client else redis.Redis(host="127.0.0.1", port=proxy.port)
    with RedisChatMemoryStore(url, client=client, prefix=prefix) as store:
        memory = MessageWindowChatMemory(max_messages=3, id="lost", store=store)
        memory.add(UserMessage("first"))
        proxy.drop_reply(COMMIT)  # the commit runs, its reply never arrives
        memory.add(UserMessage("second"))
        assert [h.message.text for h in store.history("lost")] == ["first", "second"]  # type: ignore[union-attr]
    if client is not None:
        client.close()


def test_the_async_store_survives_and_reports_a_server_going_away(
    proxy: Proxy, prefix: str
) -> None:
    async def main() -> None:
        url = f"redis://127.0.0.1:{proxy.port}/0"
        async with AsyncRedisChatMemoryStore(url, prefix=prefix) as store:
            await store.update_messages("a", [UserMessage("one")])
            proxy.drop_reply(COMMIT)
            await store.update_messages("a", [UserMessage("one"), UserMessage("two")])
            assert [h.seq for h in await store.history("a")] == [0, 1]
            proxy.cut_request(COMMIT, 10)
            with pytest.raises(StoreError, match="memory id 'a'"):
                await store.update_messages("a", [UserMessage("three")])
        async with AsyncRedisChatMemoryStore(REDIS_URL, prefix=prefix) as direct:
            assert [h.message.text for h in await direct.history("a")] == ["one", "two"]  # type: ignore[union-attr]

    asyncio.run(main())


def test_a_killed_connection_is_reconnected_transparently(
    store: RedisChatMemoryStore, raw: Any
) -> None:
    add(store, "k", "before")
    raw.client_kill_filter(_type="normal", skipme=True)  # every other client, this store's too
    add(store, "k", "after")
    assert [m.text for m in store.get_messages("k")] == ["before", "after"]  # type: ignore[union-attr]


# --- the optional extra -------------------------------------------------------------------------


def test_without_redis_installed_the_store_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import chatmemory.stores

    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    monkeypatch.delitem(sys.modules, "chatmemory.stores.redis")
    monkeypatch.setattr(chatmemory.stores, "redis", redis_store)
    module = importlib.import_module("chatmemory.stores.redis")
    assert module is not redis_store
    for cls in (module.RedisChatMemoryStore, module.AsyncRedisChatMemoryStore):
        with pytest.raises(ImportError, match=r"pip install 'chatmemory\[redis\]'"):
            cls()


def test_import_chatmemory_stores_needs_no_redis() -> None:
    code = (
        "import sys; sys.modules['redis'] = None\n"
        "import chatmemory.stores as s\n"
        "try:\n"
        "    s.RedisChatMemoryStore()\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "pip install 'chatmemory[redis]'" in done.stdout


def test_unknown_attributes_of_the_stores_package_are_errors() -> None:
    import chatmemory.stores

    with pytest.raises(AttributeError, match="NoSuchStore"):
        chatmemory.stores.NoSuchStore  # noqa: B018


# --- direct connections ---------------------------------------------------------------------


def test_a_small_pool_is_never_exhausted_by_the_store(prefix: str) -> None:
    """The window commands borrow connections of the client's pool; a store leaves at most a
    quarter of the pool's maximum idle, so the client's other commands still get one."""
    pool = redis.BlockingConnectionPool.from_url(REDIS_URL, max_connections=1, timeout=2)
    client = Redis(connection_pool=pool)
    with RedisChatMemoryStore(client=client, prefix=prefix) as store:
        memory = MessageWindowChatMemory(id="small", max_messages=5, store=store)
        memory.add(UserMessage("a"))
        assert memory.messages() == [UserMessage("a")]
        assert [h.message for h in store.history("small")] == [UserMessage("a")]  # no wait
        memory.add(AiMessage("b"))
        assert client.ping()
    client.close()
    pool.disconnect()  # a pool passed to a client is not closed with it


def test_a_store_gives_the_connections_it_kept_back_to_the_pool_when_closed(prefix: str) -> None:
    pool = redis.BlockingConnectionPool.from_url(REDIS_URL, max_connections=4, timeout=0.2)
    client = Redis(connection_pool=pool)
    store = RedisChatMemoryStore(client=client, prefix=prefix)
    MessageWindowChatMemory(id="kept", max_messages=5, store=store).add(UserMessage("a"))
    taken = [pool.get_connection() for _ in range(3)]
    with pytest.raises(redis.ConnectionError):  # the store keeps the fourth for its next call
        pool.get_connection()
    store.close()
    taken.append(pool.get_connection())  # given back
    for connection in taken:
        pool.release(connection)
    client.close()
    pool.disconnect()


def test_a_store_closed_during_a_call_gives_that_connection_back(prefix: str) -> None:
    closing: list[RedisChatMemoryStore] = []

    class ClosingOnRead(RedisConnection):
        def read_response(self, *args: Any, **kwargs: Any) -> Any:
            if closing:
                closing.pop().close()  # another thread closing the store meanwhile
            return super().read_response(*args, **kwargs)

    pool = redis.BlockingConnectionPool.from_url(
        REDIS_URL, max_connections=4, timeout=0.2, connection_class=ClosingOnRead
    )
    client = Redis(connection_pool=pool)
    store = RedisChatMemoryStore(client=client, prefix=prefix)
    store.load_window("c")
    closing.append(store)
    assert store.load_window("c").version == 0  # the call in flight completes
    with pytest.raises(StoreError, match="closed"):
        store.load_window("c")
    taken = [pool.get_connection() for _ in range(4)]  # every connection is back
    for connection in taken:
        pool.release(connection)
    client.close()
    pool.disconnect()


def test_a_store_inherited_through_fork_takes_new_connections(store: RedisChatMemoryStore) -> None:
    memory = MessageWindowChatMemory(id="forked", max_messages=5, store=store)
    memory.add(UserMessage("parent"))
    route: Any = store._route
    route._pid = -1  # as in a child process: the parent's sockets are not its own
    memory.add(UserMessage("child"))
    assert memory.messages() == [UserMessage("parent"), UserMessage("child")]


def test_an_async_store_on_a_small_pool_gives_each_connection_back(prefix: str) -> None:
    async def main() -> None:
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            REDIS_URL, max_connections=1, timeout=2
        )
        client = AsyncRedis(connection_pool=pool)
        async with AsyncRedisChatMemoryStore(client=client, prefix=prefix) as store:
            memory = AsyncMessageWindowChatMemory(id="small", max_messages=5, store=store)
            await memory.add(UserMessage("a"))
            assert await memory.messages() == [UserMessage("a")]
            assert len(await store.history("small")) == 1
            await memory.add(AiMessage("b"))
            assert await client.ping()
        await client.aclose()
        await pool.aclose()  # a pool passed to a client is not closed with it

    asyncio.run(main())
