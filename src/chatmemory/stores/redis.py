"""Redis stores: many application servers sharing one set of conversations.

Every memory id lives in four keys that share one Redis Cluster hash tag, the whole memory id::

    {prefix}{<id>}:meta   HASH   version, next_seq, commit (token of the last commit), born
                                 (when this life of the id began, µs), updated (µs of the
                                 last message stored)
    {prefix}{<id>}:log    HASH   seq -> the message as LangChain4j JSON, nothing else
    {prefix}{<id>}:info   HASH   seq -> "<created_at µs since the epoch> [token_count, counted_by]"
    {prefix}{<id>}:win    ZSET   the seqs still in the window (score = seq)

In `<id>`, `%`, `{` and `}` are percent-encoded, so the hash tag is always exactly the memory id,
two ids never share a key, and all keys of an id sit in one cluster slot. Reading the window is
one Lua script touching only the window's rows (a reader that holds the current version learns
so from one HGET); a commit is one Lua script that checks the
version, appends rows, takes evicted seqs out of the window and bumps the version, so adding a
message costs the same after 100 or 100,000 of them, and a write is applied whole or not at all.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
import os
import re
import secrets
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from .._codec.langchain4j import message_to_json
from .._contracts import (
    AsyncHistoryStore,
    AsyncWindowStore,
    Committed,
    Errors,
    HistoryEntry,
    HistoryStore,
    MemorySummary,
    NewMessage,
    StoredMessage,
    WindowSnapshot,
    WindowStore,
    check_errors,
    check_memory_id,
    life_of,
)
from .._errors import ConfigurationError, SerializationError, StoreError
from ._basic import AsyncBasicContract, BasicContract
from ._idle import Idle
from ._rows import FIX, MessageReader

try:
    import redis
    import redis.asyncio
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.backoff import ExponentialWithJitterBackoff
    from redis.retry import Retry
except ImportError:  # the optional extra is not installed: the stores say so when constructed
    _redis_missing = True
else:
    _redis_missing = False

if TYPE_CHECKING:
    from redis.commands.core import AsyncScript, Script

__all__ = ["AsyncRedisChatMemoryStore", "RedisChatMemoryStore"]

DEFAULT_URL = "redis://localhost:6379/0"
DEFAULT_PREFIX = "chatmemory:"

_PARTS = (b"meta", b"log", b"info", b"win")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_GLOB_SPECIAL = frozenset(b"*?[]\\")
_KEYS_CACHED = 1024
"""Memory ids whose keys a store remembers (then it starts over)."""

# --- Lua (KEYS are always meta, log, info, win of one memory id) ----------------------------------

_LUA_HMGET = """
local function hmget(key, fields)
  local out = {}
  for first = 1, #fields, 1000 do
    local part = redis.call('HMGET', key, unpack(fields, first, math.min(first + 999, #fields)))
    for i = 1, #part do out[#out + 1] = part[i] end
  end
  return out
end
"""

# ARGV: the version the caller holds (0 for none), the largest seq it holds (-1 for none), and
# the birth time of the memory id's life its rows come from. Replies {} for an unknown id, {1}
# when the caller's version is current (versions never repeat for a memory id, so that is the
# whole check), else the version, the birth time, the window's seqs, and the messages and infos
# of the seqs the caller does not hold.
_LOAD = (
    _LUA_HMGET
    + """
local meta = redis.call('HMGET', KEYS[1], 'version', 'born')
if not meta[1] then return {} end
if meta[1] == ARGV[1] then return {1} end
local known = tonumber(ARGV[2])
if meta[2] ~= ARGV[3] then known = -1 end
local seqs = redis.call('ZRANGE', KEYS[4], 0, -1)
local fresh = {}
for i = 1, #seqs do
  local n = tonumber(seqs[i])
  if not n or n > known then fresh[#fresh + 1] = seqs[i] end
end
return {tonumber(meta[1]), meta[2] or '', seqs, hmget(KEYS[2], fresh), hmget(KEYS[3], fresh)}
"""
)

_HISTORY = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
return {redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3]),
        redis.call('ZRANGE', KEYS[4], 0, -1)}
"""

# ARGV: expected version, ttl in ms (0: none), commit token, number of evicted seqs, the evicted
# seqs, then three values per appended row: "1"/"0" (in the window), message JSON, info tail.
# Replies {} when the version does not match, else {new version, first seq, birth time}. A version
# is at least the server's time in microseconds, so a memory id deleted (or expired) and created
# again never returns to a version an earlier reader saw. The token of the last commit stays in
# meta: a client retrying that very commit after losing its reply gets the same answer again
# (it was the last commit, so the version and next seq in meta are still the ones it made).
_COMMIT = """
local current = redis.call('HMGET', KEYS[1], 'version', 'next_seq', 'commit', 'born')
local evicted = tonumber(ARGV[4])
local seq = tonumber(current[2]) or 0
if (current[1] or '0') ~= ARGV[1] then
  if current[3] == ARGV[3] then
    local appended = (#ARGV - 4 - evicted) / 3
    return {tonumber(current[1]), seq - appended, current[4]}
  end
  return {}
end
local now = redis.call('TIME')
local micros = tonumber(now[1]) * 1000000 + tonumber(now[2])
local stamp = string.format('%d', micros)
local first = seq
for first_arg = 5, 4 + evicted, 1000 do
  redis.call('ZREM', KEYS[4], unpack(ARGV, first_arg, math.min(first_arg + 999, 4 + evicted)))
end
local born = current[4]
if not current[1] then
  -- a new (or deleted, or expired) id: nothing that a half-done expiry left may survive
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
  born = false
end
if not born then
  born = stamp
  redis.call('HSET', KEYS[1], 'born', born)
end
local info = stamp .. ' '
for i = 5 + evicted, #ARGV, 3 do
  local field = string.format('%d', seq)
  redis.call('HSET', KEYS[2], field, ARGV[i + 1])
  redis.call('HSET', KEYS[3], field, info .. ARGV[i + 2])
  if ARGV[i] == '1' then redis.call('ZADD', KEYS[4], field, field) end
  seq = seq + 1
end
local version = math.max((tonumber(current[1]) or 0) + 1, micros)
if seq > first then  -- 'updated' is when the last message was stored
  redis.call('HSET', KEYS[1], 'version', string.format('%d', version), 'next_seq',
             string.format('%d', seq), 'commit', ARGV[3], 'updated', stamp)
else
  redis.call('HSET', KEYS[1], 'version', string.format('%d', version), 'next_seq',
             string.format('%d', seq), 'commit', ARGV[3])
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
return {version, first, born}
"""


# --- keys -----------------------------------------------------------------------------------------


def _require_redis(cls: str) -> None:
    if _redis_missing:
        raise ImportError(
            f"{cls} needs the redis package, an optional extra: pip install 'chatmemory[redis]'"
        )


def _retry_policy() -> tuple[ExponentialWithJitterBackoff, int]:
    """How a client the store makes itself retries a command after a connection error."""
    return ExponentialWithJitterBackoff(cap=0.5, base=0.01), 3


def _check_prefix(prefix: object) -> bytes:
    if not isinstance(prefix, str):
        raise ConfigurationError(f"`prefix` must be a str, got {prefix!r}")
    if "{" in prefix or "}" in prefix:
        raise ConfigurationError(
            f"`prefix` must not contain '{{' or '}}' (the memory id is the key's hash tag), "
            f"got {prefix!r}"
        )
    return prefix.encode()


def _escape(memory_id: str) -> bytes:
    """`memory_id` as it appears between the braces of its keys."""
    check_memory_id(memory_id)  # valid Unicode: it encodes
    escaped = memory_id.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    return escaped.encode()


_UNESCAPE = {"%25": "%", "%7B": "{", "%7D": "}"}


def _unescape(escaped: str) -> str:
    return re.sub("%25|%7B|%7D", lambda match: _UNESCAPE[match.group()], escaped)


def _keys(prefix: bytes, memory_id: str) -> list[bytes]:
    """The meta, log, info and win keys of `memory_id`, all in the slot of hash tag `memory_id`."""
    base = prefix + b"{" + _escape(memory_id) + b"}:"
    return [base + part for part in _PARTS]


def _meta_pattern(prefix: bytes) -> bytes:
    """The SCAN pattern matching the meta key of every memory id under `prefix`."""
    escaped = b"".join(b"\\" + bytes([c]) if c in _GLOB_SPECIAL else bytes([c]) for c in prefix)
    return escaped + b"{*}:meta"


def _memory_id_of(prefix: bytes, key: bytes | str) -> str | None:
    """The memory id whose meta key is `key`; None for a key that is not one."""
    raw = key.encode() if isinstance(key, str) else key
    head, tail = prefix + b"{", b"}:meta"
    if not (raw.startswith(head) and raw.endswith(tail)):
        return None
    inner = raw[len(head) : -len(tail)]
    if not inner or b"}" in inner:
        return None
    return _unescape(inner.decode())


def _ttl_ms(ttl: object) -> int:
    """`ttl` in milliseconds, 0 for none."""
    if ttl is None:
        return 0
    if isinstance(ttl, timedelta):
        seconds = ttl.total_seconds()
    elif isinstance(ttl, (int, float)) and not isinstance(ttl, bool):
        seconds = float(ttl)
    else:
        raise ConfigurationError(f"`ttl` must be seconds or a timedelta, got {ttl!r}")
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ConfigurationError(f"`ttl` must be positive and finite, got {ttl!r}")
    return math.ceil(seconds * 1000)


# --- arguments and replies -----------------------------------------------------------------------


def _commit_args(
    *, version: int, ttl_ms: int, token: str, append: Sequence[NewMessage], evict: Sequence[int]
) -> list[int | str]:
    args: list[int | str] = [int(version), ttl_ms, token, len(evict), *map(int, evict)]
    for new in append:
        args += (
            "1" if new.in_window else "0",
            message_to_json(new.message),
            _info_tail(new.token_count, new.counted_by),
        )
    return args


@functools.lru_cache(maxsize=4096, typed=True)
def _info_tail(token_count: int | None, counted_by: str | None) -> str:
    """A row's `[token_count, counted_by]` as stored after its time; the same few recur."""
    return json.dumps([token_count, counted_by], separators=(",", ":"))


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _unreadable(
    what: str, memory_id: str, row: object, fragment: str | None, cause: Exception | None = None
) -> NoReturn:
    raise SerializationError(
        f"{what}; {FIX}",
        fragment=fragment,
        memory_id=memory_id,
        row=row,
    ) from cause


def _seq(memory_id: str, raw: bytes | str) -> int:
    text = _text(raw)
    if not (text.isascii() and text.isdigit()):
        _unreadable("a stored row has no sequence number", memory_id, text, None)
    return int(text)


@functools.lru_cache(maxsize=4096)
def _count_and_counter(extra: str) -> tuple[object, object]:
    """The `[token_count, counted_by]` tail of a row's info; the same few tails recur."""
    token_count, counted_by = json.loads(extra)
    return token_count, counted_by


def _info(
    memory_id: str, seq: int, raw: bytes | str | None
) -> tuple[datetime, int | None, str | None]:
    """When row `seq` was stored, and its token count and who counted it."""
    text = "" if raw is None else _text(raw)
    stamp, _, extra = text.partition(" ")
    try:
        created = _EPOCH + timedelta(microseconds=int(stamp))
        token_count, counted_by = _count_and_counter(extra)
    except (ValueError, TypeError, OverflowError) as error:
        _unreadable("the stored row's metadata cannot be read", memory_id, seq, text, error)
    if not (
        (token_count is None or type(token_count) is int)
        and (counted_by is None or isinstance(counted_by, str))
    ):
        _unreadable("the stored row's token count cannot be read", memory_id, seq, text)
    return created, token_count, counted_by


def _load_args(since: WindowSnapshot | None) -> list[Any]:
    """The load script's ARGV: what `since` holds (its stamp is the birth time of its id's life)."""
    if since is None:
        return [0, -1, b""]
    stamp = since.stamp if isinstance(since.stamp, (bytes, str)) else b""
    return [since.version, since.rows[-1].seq if since.rows else -1, stamp]


def _snapshot(
    memory_id: str,
    reply: list[Any],
    read: MessageReader,
    since: WindowSnapshot | None,
    errors: Errors,
) -> WindowSnapshot:
    if not reply:
        if since is not None and since.version == 0:
            return since
        return WindowSnapshot(0, ())
    if len(reply) == 1:
        assert since is not None  # the script answers "current" only to a caller holding one
        return since
    version, born, seqs, payloads, infos = reply
    held = {row.seq: row for row in since.rows} if since is not None and since.stamp == born else {}
    fresh = iter(zip(payloads, infos, strict=True))
    rows: list[StoredMessage] = []
    unreadable: list[int] = []
    for raw_seq in seqs:
        seq = _seq(memory_id, raw_seq)
        row = held.get(seq)
        if row is None:
            payload, info = next(fresh)
            try:
                _, token_count, counted_by = _info(memory_id, seq, info)
                row = StoredMessage(seq, read(memory_id, seq, payload), token_count, counted_by)
            except SerializationError:
                if errors == "raise":
                    raise
                unreadable.append(seq)
                continue
        rows.append(row)
    return WindowSnapshot(version, tuple(rows), tuple(unreadable), born, life_of(born))


def _committed(reply: list[Any]) -> Committed | None:
    """The commit script's reply: {} when the version did not match, else the new version,
    the first seq (both integers) and the birth time of the id's life, the snapshot's stamp."""
    if not reply:
        return None
    version, first_seq, born = reply
    return Committed(version, first_seq, born, life_of(born))


def _summaries(prefix: bytes, keys: list[bytes], counts: list[Any]) -> list[MemorySummary]:
    summaries = []
    for key, (messages, in_window, (version, updated)) in zip(keys, _triples(counts), strict=True):
        memory_id = _memory_id_of(prefix, key)
        if memory_id is None or version is None:  # not ours, or deleted since the SCAN
            continue
        at = None
        if updated is not None and _text(updated).isdigit():
            at = _EPOCH + timedelta(microseconds=int(_text(updated)))
        summaries.append(MemorySummary(memory_id, int(messages), int(in_window), at))
    return sorted(summaries, key=lambda summary: summary.memory_id)


def _count(pipe: Any, meta_key: bytes) -> None:
    """Queue the counts of one memory id, from its meta key: log rows, window rows, and the
    version (None: deleted meanwhile) and time of the last message stored."""
    base = meta_key[: -len(b"meta")]
    pipe.hlen(base + b"log")
    pipe.zcard(base + b"win")
    pipe.hmget(meta_key, "version", "updated")


def _triples(values: list[Any]) -> list[tuple[Any, Any, Any]]:
    return list(zip(values[::3], values[1::3], values[2::3], strict=True))


def _history(
    memory_id: str, reply: list[Any], errors: Literal["raise", "skip"], read: MessageReader
) -> list[HistoryEntry]:
    if not reply:
        return []
    flat_log, flat_info, window = reply
    infos = dict(zip(flat_info[::2], flat_info[1::2], strict=True))
    in_window = set(window)
    rows = []
    for field, payload in sorted(zip(flat_log[::2], flat_log[1::2], strict=True), key=_by_seq):
        try:
            seq = _seq(memory_id, field)
            created, _, _ = _info(memory_id, seq, infos.get(field))
            message = read(memory_id, seq, payload)
        except SerializationError:
            if errors == "raise":
                raise
            continue
        rows.append(HistoryEntry(seq, message, created, field in in_window))
    return rows


def _by_seq(pair: tuple[bytes | str, object]) -> tuple[int, int]:
    """Log rows in seq order (any unnumbered field last), so errors come in that order too."""
    text = _text(pair[0])
    return (0, int(text)) if text.isascii() and text.isdigit() else (1, 0)


def _memory_ids(prefix: bytes, keys: Iterable[bytes | str]) -> list[str]:
    found = {_memory_id_of(prefix, key) for key in keys}
    return sorted(memory_id for memory_id in found if memory_id is not None)


def _where(client: object) -> str:
    """Where `client` connects, for messages and reprs (never its password)."""
    pool = getattr(client, "connection_pool", None)
    kwargs: dict[str, Any] = getattr(pool, "connection_kwargs", None) or {}
    db = kwargs.get("db", 0)
    if "path" in kwargs:
        return f"unix://{kwargs['path']}?db={db}"
    if "host" in kwargs:
        return f"redis://{kwargs['host']}:{kwargs.get('port', 6379)}/{db}"
    return type(client).__name__


# --- direct connections -------------------------------------------------------------------------


class _Direct:
    """Connections of the client's pool, kept checked out for the commands of a chat turn.

    A window read (HGET of the version, or the load script) and a commit (the commit script)
    go straight to a connection: redis-py's command path (a checkout from the pool and back,
    the retry wrapper, observability hooks) costs about 50 µs per command in redis-py 8, more
    than the round trip to a local server. The connections come from the client's own pool,
    so its settings and limits hold; each is used by one caller at a time (idle ones wait in
    a list, whose pop and append are atomic), and all go back to the pool on `close`. At most
    a quarter of the pool's `max_connections` wait idle here, so the client's other commands
    always find one (a pool of 1 to 3 gets every connection back after each call). After a
    fork the parent's connections are left alone and new ones are taken.
    """

    __slots__ = ("_idle", "_pid", "_pool")

    # Any: much of redis-py's connection API has no annotations
    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._idle: Idle[Any] = Idle(getattr(pool, "max_connections", None))
        self._pid = os.getpid()

    def call(self, *args: Any) -> Any:
        """The reply to one command, retried after connection errors as the client retries
        (a retried commit is recognized by its token and not applied twice)."""
        if self._pid != os.getpid():
            self._idle.forget()
            self._pid = os.getpid()
        connection = self._idle.take()
        if connection is None:
            connection = self._pool.get_connection()

        def once() -> Any:
            connection.send_packed_command(connection.pack_command(*args))
            return connection.read_response()

        try:
            return connection.retry.call_with_retry(once, lambda _: connection.disconnect())
        finally:  # a failed connection reconnects when next used
            if not self._idle.keep(connection):
                self._pool.release(connection)

    def close(self) -> None:
        idle = self._idle.close()
        if self._pid == os.getpid():
            for connection in idle:
                self._pool.release(connection)


class _AsyncDirect:
    """`_Direct` for redis.asyncio: one task at a time per connection, the same way."""

    __slots__ = ("_idle", "_pool")

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._idle: Idle[Any] = Idle(getattr(pool, "max_connections", None))

    async def call(self, *args: Any) -> Any:
        """`_Direct.call`, awaited; a cancelled call leaves its connection disconnected."""
        connection = self._idle.take()
        if connection is None:
            connection = await self._pool.get_connection()

        async def once() -> Any:
            await connection.send_packed_command(connection.pack_command(*args))
            return await connection.read_response()

        async def failed(_: Exception) -> None:
            await connection.disconnect()

        try:
            return await connection.retry.call_with_retry(once, failed)
        finally:
            if not self._idle.keep(connection):
                await self._pool.release(connection)

    async def aclose(self) -> None:
        for connection in self._idle.close():
            await self._pool.release(connection)


# --- the stores ----------------------------------------------------------------------------------


class _RedisStore:
    """What the sync and async stores share: configuration, keys, errors, repr."""

    def __init__(self, prefix: str, ttl: object, client: object) -> None:
        self._prefix = _check_prefix(prefix)
        self._ttl_ms = _ttl_ms(ttl)
        self._ttl = ttl
        self._owns_client = client is None
        """Whether the store makes (and so closes) its client: checked before making it."""
        self._where = ""
        self._read = MessageReader()
        self._closed = False
        self._key_cache: dict[str, list[bytes]] = {}
        self._token_prefix = secrets.token_hex(8) + ":"
        self._tokens = itertools.count()
        """A commit's token (see `_COMMIT`): this store's random prefix and a counter, unique
        without asking the OS for randomness on every commit."""
        self._moving: set[str] = set()
        """Memory ids whose last check found a change (or whose commit lost a race): their
        next read runs the load script at once. A subset of the ids in `_key_cache`."""

    def _keys(self, memory_id: str) -> list[bytes]:
        """The keys of `memory_id` (validated on first use, then remembered: callers only read)."""
        try:
            return self._key_cache[memory_id]
        except (KeyError, TypeError):  # TypeError: not even hashable; `_keys` says what is wrong
            keys = _keys(self._prefix, memory_id)
            if len(self._key_cache) >= _KEYS_CACHED:
                self._key_cache.clear()
                self._moving.clear()
            self._key_cache[memory_id] = keys
            return keys

    def _asks_version_first(self, memory_id: str) -> bool:
        """Whether a read holding a snapshot should first ask for the version alone: a plain
        HGET, cheaper than the load script, answers "unchanged", the usual case for a memory
        that keeps its window. Not for an id just seen changing: there the script answers in
        one round trip what would otherwise take two."""
        return memory_id not in self._moving

    def _unchanged(
        self, memory_id: str, since: WindowSnapshot, version: bytes | str | None
    ) -> bool:
        """Whether the stored `version` (HGET of meta, None for an unknown id) is `since`'s;
        versions never repeat for a memory id, so that is the whole check (as in `_LOAD`)."""
        same = since.version == 0 if version is None else _text(version) == str(since.version)
        if not same:
            self._moving.add(memory_id)
        return same

    def _loaded(
        self, memory_id: str, reply: list[Any], since: WindowSnapshot | None, errors: Errors
    ) -> WindowSnapshot:
        """The snapshot the load script's `reply` describes (`since` itself when unchanged)."""
        if since is not None and len(reply) == 1:  # unchanged
            self._moving.discard(memory_id)
            return since
        return _snapshot(memory_id, reply, self._read, since, errors)

    def _after_commit(self, memory_id: str, reply: list[Any]) -> Committed | None:
        committed = _committed(reply)
        if committed is None:  # lost a race: the retry's read will find a change
            self._moving.add(memory_id)
        return committed

    def _commit_args(
        self, version: int, append: Sequence[NewMessage], evict: Sequence[int]
    ) -> list[int | str]:
        return _commit_args(
            version=version,
            ttl_ms=self._ttl_ms,
            token=f"{self._token_prefix}{next(self._tokens)}",
            append=append,
            evict=evict,
        )

    def _closed_error(self, action: str, memory_id: str | None) -> StoreError:
        return StoreError(
            f"cannot {action}: the store is closed; open a new {type(self).__name__}",
            store=self,
            memory_id=memory_id,
        )

    def _failure(self, action: str, memory_id: str | None, error: Exception) -> StoreError:
        return StoreError(
            f"Redis at {self._where} failed to {action} ({type(error).__name__}: "
            f"{str(error).rstrip('.')}); check that the server is running and reachable. "
            f"A write is applied whole or not at all",
            store=self,
            memory_id=memory_id,
        )

    @contextlib.contextmanager
    def _failing(self, action: str, memory_id: str | None = None) -> Iterator[None]:
        if self._closed:
            raise self._closed_error(action, memory_id)
        try:
            yield
        except redis.RedisError as error:
            raise self._failure(action, memory_id, error) from error

    def __repr__(self) -> str:
        ttl = "" if self._ttl is None else f", ttl={self._ttl!r}"
        prefix = self._prefix.decode()
        return f"{type(self).__name__}({self._where!r}, prefix={prefix!r}{ttl})"


class RedisChatMemoryStore(_RedisStore, BasicContract, WindowStore, HistoryStore):
    """Memories in Redis, shared by every process that uses the same server and `prefix`.

    Every message is kept as history (until `delete_messages` or the `ttl`); the window is the
    part not yet evicted. Writes are atomic per memory id and checked against a version, so
    concurrent writers on many machines never lose each other's messages.

    `url` is any redis-py URL (`redis://`, `rediss://`, `unix://`); or pass `client`, a
    `redis.Redis` you configured yourself: the store then neither owns nor closes it. `ttl`
    (seconds or a timedelta) makes every key of a memory id expire that long after its last
    write; each write starts the countdown again, reads do not.

    Redis failures raise `StoreError` naming the memory id. A store made from `url` retries a
    command up to 3 times after a connection error (a client passed in retries as configured);
    a commit whose reply was lost and that is retried is recognized and not applied twice.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        client: redis.Redis | None = None,
        prefix: str = DEFAULT_PREFIX,
        ttl: float | timedelta | None = None,
    ) -> None:
        _require_redis(type(self).__name__)
        if isinstance(client, redis.asyncio.Redis):
            raise ConfigurationError(
                "`client` is a redis.asyncio.Redis; use AsyncRedisChatMemoryStore with it"
            )
        super().__init__(prefix, ttl, client)
        self._client: redis.Redis = (
            redis.Redis.from_url(url, retry=Retry(*_retry_policy())) if client is None else client
        )
        self._where = _where(self._client)
        self._direct = _Direct(self._client.connection_pool)
        self._load: Script = self._client.register_script(_LOAD)
        self._commit: Script = self._client.register_script(_COMMIT)
        self._read_history: Script = self._client.register_script(_HISTORY)

    def _run(self, script: Script, keys: list[bytes], args: list[Any]) -> Any:
        """EVALSHA `script` on the four `keys` on a direct connection (see `_Direct`); it
        loads the script if the server lost it."""
        try:
            return self._direct.call("EVALSHA", script.sha, 4, *keys, *args)
        except redis.exceptions.NoScriptError:
            return script(keys=keys, args=args)

    def load_window(
        self, memory_id: str, *, since: WindowSnapshot | None = None, errors: Errors = "raise"
    ) -> WindowSnapshot:
        """The window; with `since`, one round trip that returns `since` when unchanged (a
        plain HGET of the version) and otherwise only the messages `since` does not hold (the
        load script; after a change, the next read runs the script at once)."""
        keys = self._keys(memory_id)
        check_errors(errors)
        if self._closed:
            raise self._closed_error("read the window", memory_id)
        try:
            if (
                since is not None
                and self._asks_version_first(memory_id)
                and self._unchanged(memory_id, since, self._direct.call("HGET", keys[0], "version"))
            ):
                return since
            reply = self._run(self._load, keys, _load_args(since))
        except redis.RedisError as error:
            raise self._failure("read the window", memory_id, error) from error
        return self._loaded(memory_id, reply, since, errors)

    def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> Committed | None:
        keys = self._keys(memory_id)
        args = self._commit_args(version, append, evict)
        if self._closed:
            raise self._closed_error("commit the window", memory_id)
        try:
            reply = self._run(self._commit, keys, args)
        except redis.RedisError as error:
            raise self._failure("commit the window", memory_id, error) from error
        return self._after_commit(memory_id, reply)

    def delete_messages(self, memory_id: str) -> None:
        keys = self._keys(memory_id)
        with self._failing("delete the memory", memory_id):
            self._client.delete(*keys)

    def history(self, memory_id: str, *, errors: Errors = "raise") -> list[HistoryEntry]:
        """Every message ever added to `memory_id`, oldest first (reads the whole history)."""
        keys = self._keys(memory_id)
        check_errors(errors)
        with self._failing("read the history", memory_id):
            reply = self._read_history(keys=keys)
        return _history(memory_id, reply, errors, self._read)

    def memory_ids(self) -> list[str]:
        """The memory ids under this store's prefix, sorted.

        This SCANs the whole database (cost grows with every key in it, not only ours) without
        blocking the server; ids written or deleted meanwhile may or may not be listed.
        """
        with self._failing("list the memory ids"):
            keys = list(self._client.scan_iter(match=_meta_pattern(self._prefix), count=1000))
        return _memory_ids(self._prefix, keys)

    def summaries(self) -> list[MemorySummary]:
        """Per memory id, counted by Redis (HLEN, ZCARD): a SCAN, then one pipelined trip."""
        with self._failing("summarize the memories"):
            keys = list(self._client.scan_iter(match=_meta_pattern(self._prefix), count=1000))
            pipe = self._client.pipeline(transaction=False)
            for key in keys:
                _count(pipe, key)
            counts = pipe.execute()
        return _summaries(self._prefix, keys, counts)

    def close(self) -> None:
        """Close the connections, unless the client was passed in (its owner closes it).
        Every later call raises `StoreError`."""
        self._closed = True
        self._direct.close()  # back to the pool, which a passed-in client's owner closes
        if self._owns_client:
            self._client.close()


class AsyncRedisChatMemoryStore(
    _RedisStore, AsyncBasicContract, AsyncWindowStore, AsyncHistoryStore
):
    """`RedisChatMemoryStore` for asyncio, on `redis.asyncio`; same keys, so both can share data.

    Pass `client`, a `redis.asyncio.Redis`, to configure the connection yourself; the store then
    neither owns nor closes it. Close the store with `await store.aclose()` or `async with`.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        client: redis.asyncio.Redis | None = None,
        prefix: str = DEFAULT_PREFIX,
        ttl: float | timedelta | None = None,
    ) -> None:
        _require_redis(type(self).__name__)
        if isinstance(client, redis.Redis):
            raise ConfigurationError(
                "`client` is a sync redis.Redis; use RedisChatMemoryStore with it"
            )
        super().__init__(prefix, ttl, client)
        self._client: redis.asyncio.Redis = (
            redis.asyncio.Redis.from_url(url, retry=AsyncRetry(*_retry_policy()))
            if client is None
            else client
        )
        self._where = _where(self._client)
        self._direct = _AsyncDirect(self._client.connection_pool)
        self._load: AsyncScript = self._client.register_script(_LOAD)
        self._commit: AsyncScript = self._client.register_script(_COMMIT)
        self._read_history: AsyncScript = self._client.register_script(_HISTORY)

    async def _run(self, script: AsyncScript, keys: list[bytes], args: list[Any]) -> Any:
        """`RedisChatMemoryStore._run`, awaited."""
        try:
            return await self._direct.call("EVALSHA", script.sha, 4, *keys, *args)
        except redis.exceptions.NoScriptError:
            return await script(keys=keys, args=args)

    async def load_window(
        self, memory_id: str, *, since: WindowSnapshot | None = None, errors: Errors = "raise"
    ) -> WindowSnapshot:
        keys = self._keys(memory_id)
        check_errors(errors)
        if self._closed:
            raise self._closed_error("read the window", memory_id)
        try:
            if (
                since is not None
                and self._asks_version_first(memory_id)
                and self._unchanged(
                    memory_id, since, await self._direct.call("HGET", keys[0], "version")
                )
            ):
                return since
            reply = await self._run(self._load, keys, _load_args(since))
        except redis.RedisError as error:
            raise self._failure("read the window", memory_id, error) from error
        return self._loaded(memory_id, reply, since, errors)

    async def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> Committed | None:
        keys = self._keys(memory_id)
        args = self._commit_args(version, append, evict)
        if self._closed:
            raise self._closed_error("commit the window", memory_id)
        try:
            reply = await self._run(self._commit, keys, args)
        except redis.RedisError as error:
            raise self._failure("commit the window", memory_id, error) from error
        return self._after_commit(memory_id, reply)

    async def delete_messages(self, memory_id: str) -> None:
        keys = self._keys(memory_id)
        with self._failing("delete the memory", memory_id):
            await self._client.delete(*keys)

    async def history(self, memory_id: str, *, errors: Errors = "raise") -> list[HistoryEntry]:
        """Every message ever added to `memory_id`, oldest first (reads the whole history)."""
        keys = self._keys(memory_id)
        check_errors(errors)
        with self._failing("read the history", memory_id):
            reply = await self._read_history(keys=keys)
        return _history(memory_id, reply, errors, self._read)

    async def memory_ids(self) -> list[str]:
        """The memory ids under this store's prefix, sorted (a SCAN of the whole database)."""
        pattern = _meta_pattern(self._prefix)
        with self._failing("list the memory ids"):
            keys = [key async for key in self._client.scan_iter(match=pattern, count=1000)]
        return _memory_ids(self._prefix, keys)

    async def summaries(self) -> list[MemorySummary]:
        """Per memory id, counted by Redis (HLEN, ZCARD): a SCAN, then one pipelined trip."""
        pattern = _meta_pattern(self._prefix)
        with self._failing("summarize the memories"):
            keys = [key async for key in self._client.scan_iter(match=pattern, count=1000)]
            pipe = self._client.pipeline(transaction=False)
            for key in keys:
                _count(pipe, key)
            counts = await pipe.execute()
        return _summaries(self._prefix, keys, counts)

    async def aclose(self) -> None:
        """Close the connections, unless the client was passed in (its owner closes it).
        Every later call raises `StoreError`."""
        self._closed = True
        await self._direct.aclose()  # back to the pool, which a passed-in client's owner closes
        if self._owns_client:
            await self._client.aclose()
