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

On a Redis Cluster the same scripts run on the primary serving the id's slot; where each command
goes, on which kept connection, and what happens after MOVED, ASK or a failover is the route's
business (`_redis_routes.py`). `min_replicas_acked` follows each commit with a WAIT on its
connection.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import math
import re
import secrets
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, NoReturn

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
    check_seqs,
    life_of,
)
from .._errors import ConfigurationError, SerializationError, StoreError
from ._basic import AsyncBasicContract, BasicContract
from ._redis_routes import AsyncClusterRoute, AsyncDirect, ClusterRoute, Direct
from ._rows import FIX, MessageReader

try:
    import redis
    import redis.asyncio
    import redis.asyncio.cluster
    import redis.cluster
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.backoff import ExponentialWithJitterBackoff
    from redis.retry import Retry
except ImportError:  # the optional extra is not installed: the stores say so when constructed
    _redis_missing = True
    _FAILURES: tuple[type[Exception], ...] = ()
else:
    _redis_missing = False
    _FAILURES = (redis.RedisError, redis.exceptions.RedisClusterException)

__all__ = ["AsyncRedisChatMemoryStore", "RedisChatMemoryStore"]

DEFAULT_URL = "redis://localhost:6379/0"
DEFAULT_PREFIX = "chatmemory:"

_PARTS = (b"meta", b"log", b"info", b"win")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_GLOB_SPECIAL = frozenset(b"*?[]\\")
_KEYS_CACHED = 1024
"""Memory ids whose keys a store remembers (then it starts over)."""

# --- Lua (KEYS are always meta, log, info, win of one memory id) ----------------------------------

# `command` (HMGET, ZMSCORE) of `key` for `fields`, 1,000 at a time (Lua's unpack has a limit).
_LUA_FIELDS = """
local function fields_of(command, key, fields)
  local out = {}
  for first = 1, #fields, 1000 do
    local part = redis.call(command, key, unpack(fields, first, math.min(first + 999, #fields)))
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
    _LUA_FIELDS
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
return {tonumber(meta[1]), meta[2] or '', seqs, fields_of('HMGET', KEYS[2], fresh),
        fields_of('HMGET', KEYS[3], fresh)}
"""
)

_HISTORY = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
return {redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3]),
        redis.call('ZRANGE', KEYS[4], 0, -1)}
"""

# ARGV: the seqs asked for. Replies {} for an unknown id, else the messages, the infos and the
# window scores of those seqs (nil where there is none), each in ARGV's order: hash and zset
# lookups of those fields alone, whatever the length of the history (ZMSCORE: Redis 6.2).
_SOME_HISTORY = (
    _LUA_FIELDS
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
return {fields_of('HMGET', KEYS[2], ARGV), fields_of('HMGET', KEYS[3], ARGV),
        fields_of('ZMSCORE', KEYS[4], ARGV)}
"""
)

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
    -- written again (unchanged), so a WAIT after this reply waits for this very commit
    redis.call('HSET', KEYS[1], 'commit', ARGV[3])
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


_Row = tuple[bytes | str, Any, Any, bool]
"""A history row as a script returns it: its field, message, info, and whether in the window."""


def _history_request(seqs: object) -> tuple[_Script | None, list[str]]:
    """The script reading the history asked for and its ARGV: the whole-history script and no
    argument, or the partial one and the fields of `seqs` (no script when no row is asked
    for: no round trip). A ConfigurationError for `seqs` that are not sequence numbers."""
    wanted = check_seqs(seqs)
    if wanted is None:
        return _HISTORY_SCRIPT, []
    return (_SOME_HISTORY_SCRIPT if wanted else None), [str(seq) for seq in wanted]


def _history(
    memory_id: str,
    reply: list[Any],
    errors: Literal["raise", "skip"],
    read: MessageReader,
    asked: list[str],
) -> list[HistoryEntry]:
    """The entries in the reply of the whole-history script (`asked` empty), or of the partial
    one for the fields `asked`."""
    if not reply:
        return []
    rows = _some_rows(asked, reply) if asked else _whole_rows(reply)
    entries = []
    for field, payload, info, in_window in rows:
        try:
            seq = _seq(memory_id, field)
            created, _, _ = _info(memory_id, seq, info)
            message = read(memory_id, seq, payload)
        except SerializationError:
            if errors == "raise":
                raise
            continue
        entries.append(HistoryEntry(seq, message, created, in_window))
    return entries


def _whole_rows(reply: list[Any]) -> list[_Row]:
    """The rows of the whole-history script's reply (the hashes and the window), in seq order."""
    flat_log, flat_info, window = reply
    infos = dict(zip(flat_info[::2], flat_info[1::2], strict=True))
    in_window = set(window)
    pairs = sorted(zip(flat_log[::2], flat_log[1::2], strict=True), key=_by_seq)
    return [(field, payload, infos.get(field), field in in_window) for field, payload in pairs]


def _some_rows(asked: list[str], reply: list[Any]) -> list[_Row]:
    """The rows of the partial script's reply that exist, in the (ascending) order asked."""
    payloads, infos, scores = reply
    return [
        (field, payload, info, score is not None)
        for field, payload, info, score in zip(asked, payloads, infos, scores, strict=True)
        if payload is not None
    ]


def _by_seq(pair: tuple[bytes | str, object]) -> tuple[int, int]:
    """Log rows in seq order (any unnumbered field last), so errors come in that order too."""
    text = _text(pair[0])
    return (0, int(text)) if text.isascii() and text.isdigit() else (1, 0)


def _memory_ids(prefix: bytes, keys: Iterable[bytes | str]) -> list[str]:
    found = {_memory_id_of(prefix, key) for key in keys}
    return sorted(memory_id for memory_id in found if memory_id is not None)


def _where(client: object) -> str:
    """Where `client` connects, for messages and reprs (never its password)."""
    nodes = getattr(getattr(client, "nodes_manager", None), "startup_nodes", None)
    if nodes:  # a cluster client: the node it started from
        node = next(iter(nodes.values()))
        return f"redis://{node.host}:{node.port}/0 (cluster)"
    pool = getattr(client, "connection_pool", None)
    kwargs: dict[str, Any] = getattr(pool, "connection_kwargs", None) or {}
    db = kwargs.get("db", 0)
    if "path" in kwargs:
        return f"unix://{kwargs['path']}?db={db}"
    if "host" in kwargs:
        return f"redis://{kwargs['host']}:{kwargs.get('port', 6379)}/{db}"
    return type(client).__name__


def close_client(client: redis.Redis | redis.cluster.RedisCluster) -> None:
    """Close `client` and its sockets: a sync `RedisCluster` leaves its nodes' pools open
    (each node's client was handed its pool), so they are disconnected here."""
    client.close()
    if isinstance(client, redis.cluster.RedisCluster):
        for node in client.get_nodes():  # type: ignore[no-untyped-call]
            if node.redis_connection is not None:
                node.redis_connection.connection_pool.disconnect()


def _mask(url: str) -> str:
    """`url` without its password."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


# --- the stores ----------------------------------------------------------------------------------


class _RedisStore:
    """What the sync and async stores share: configuration, keys, errors, repr."""

    def __init__(
        self,
        prefix: str,
        ttl: object,
        client: object,
        min_replicas_acked: object,
        replica_ack_timeout: object,
        failover_timeout: object,
    ) -> None:
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
        self._replicas = _count_of("min_replicas_acked", min_replicas_acked)
        self._wait: tuple[tuple[Any, ...], ...] = ()
        """The WAIT sent after each commit on its connection (none when `_replicas` is 0)."""
        if self._replicas:
            timeout_ms = _seconds_of("replica_ack_timeout", replica_ack_timeout) * 1000
            self._wait = (("WAIT", self._replicas, max(1, math.ceil(timeout_ms))),)
        self._patience = _seconds_of("failover_timeout", failover_timeout)
        self._cluster = False

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

    def _after_commit(self, memory_id: str, replies: list[Any]) -> Committed | None:
        """The commit script's reply (and WAIT's, when asked: fewer replicas than
        `min_replicas_acked` raise `StoreError`, the commit stays on the primary)."""
        committed = _committed(replies[0])
        if committed is None:  # lost a race: the retry's read will find a change
            self._moving.add(memory_id)
        elif self._wait and replies[1] < self._replicas:
            raise StoreError(
                f"the commit is stored on the primary, but {replies[1]} of the "
                f"{self._replicas} replicas asked for (min_replicas_acked) acknowledged it "
                f"within {self._wait[0][2]} ms: until one does, a failover could lose it. "
                f"Check the replicas (INFO replication), or raise replica_ack_timeout",
                store=self,
                memory_id=memory_id,
            )
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
        hint = "check that the server is running and reachable"
        if isinstance(error, redis.exceptions.MovedError) and not self._cluster:
            hint = (
                "this server is a Redis Cluster node: pass cluster=True "
                "(or a redis.cluster.RedisCluster client)"
            )
        elif self._cluster:
            hint = (
                f"check that the cluster's nodes are running and reachable (a failover is "
                f"waited out for failover_timeout={self._patience:g} s)"
            )
        return StoreError(
            f"Redis at {self._where} failed to {action} ({type(error).__name__}: "
            f"{str(error).rstrip('.')}); {hint}. A write is applied whole or not at all",
            store=self,
            memory_id=memory_id,
        )

    @contextlib.contextmanager
    def _failing(self, action: str, memory_id: str | None = None) -> Iterator[None]:
        if self._closed:
            raise self._closed_error(action, memory_id)
        try:
            yield
        except _FAILURES as error:
            raise self._failure(action, memory_id, error) from error

    def __repr__(self) -> str:
        ttl = "" if self._ttl is None else f", ttl={self._ttl!r}"
        prefix = self._prefix.decode()
        return f"{type(self).__name__}({self._where!r}, prefix={prefix!r}{ttl})"


def _count_of(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"`{name}` must be an int of 0 or more, got {value!r}")
    return value


def _seconds_of(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value > 0 and math.isfinite(value))
    ):
        raise ConfigurationError(f"`{name}` must be a positive number of seconds, got {value!r}")
    return float(value)


class _Script:
    """A Lua script and its SHA1, for EVALSHA (EVAL when the server does not know it yet)."""

    __slots__ = ("sha", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def evalsha(self, keys: list[bytes], args: Sequence[Any]) -> tuple[Any, ...]:
        return ("EVALSHA", self.sha, len(keys), *keys, *args)

    def eval(self, keys: list[bytes], args: Sequence[Any]) -> tuple[Any, ...]:
        return ("EVAL", self.source, len(keys), *keys, *args)


_LOAD_SCRIPT = _Script(_LOAD)
_COMMIT_SCRIPT = _Script(_COMMIT)
_HISTORY_SCRIPT = _Script(_HISTORY)
_SOME_HISTORY_SCRIPT = _Script(_SOME_HISTORY)


def _wrong_client(store: str, client: object) -> str | None:
    """Why `client` does not fit `store` (None when it does)."""
    sync = store == "RedisChatMemoryStore"
    fits = (redis.Redis, redis.cluster.RedisCluster)
    other = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
    if isinstance(client, other if sync else fits):
        twin = "AsyncRedisChatMemoryStore" if sync else "RedisChatMemoryStore"
        name = f"{type(client).__module__}.{type(client).__name__}"
        return f"`client` is a {name}; use {twin} with it"
    return None


class RedisChatMemoryStore(_RedisStore, BasicContract, WindowStore, HistoryStore):
    """Memories in Redis, shared by every process that uses the same server and `prefix`.

    Every message is kept as history (until `delete_messages` or the `ttl`); the window is the
    part not yet evicted. Writes are atomic per memory id and checked against a version, so
    concurrent writers on many machines never lose each other's messages.

    `url` is any redis-py URL (`redis://`, `rediss://`, `unix://`); or pass `client`, a
    `redis.Redis` you configured yourself: the store then neither owns nor closes it. `ttl`
    (seconds or a timedelta) makes every key of a memory id expire that long after its last
    write; each write starts the countdown again, reads do not.

    On a Redis Cluster, pass `cluster=True` with the URL of any node (as
    `redis.cluster.RedisCluster.from_url` takes it), or a `RedisCluster` as `client`. Each
    memory id's keys share one slot; its commands go to that slot's primary, follow MOVED and
    ASK, and wait out a failover for up to `failover_timeout` seconds. `memory_ids` and
    `summaries` scan every primary.

    `min_replicas_acked=n` makes each commit wait (Redis `WAIT`, up to `replica_ack_timeout`
    seconds) until n replicas have it, and raise `StoreError` when fewer did: replication is
    asynchronous, so without it a commit acknowledged just before its primary dies can be lost.

    Redis failures raise `StoreError` naming the memory id. A store made from `url` retries a
    command up to 3 times after a connection error (a client passed in retries as configured);
    a commit whose reply was lost and that is retried is recognized and not applied twice.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        client: redis.Redis | redis.cluster.RedisCluster | None = None,
        cluster: bool = False,
        prefix: str = DEFAULT_PREFIX,
        ttl: float | timedelta | None = None,
        min_replicas_acked: int = 0,
        replica_ack_timeout: float = 1.0,
        failover_timeout: float = 10.0,
    ) -> None:
        _require_redis(type(self).__name__)
        wrong = _wrong_client(type(self).__name__, client)
        if wrong is not None:
            raise ConfigurationError(wrong)
        super().__init__(
            prefix, ttl, client, min_replicas_acked, replica_ack_timeout, failover_timeout
        )
        if client is None:
            client = self._connect(url, cluster)
        self._client: redis.Redis | redis.cluster.RedisCluster = client
        self._where = _where(client)
        self._route: Direct | ClusterRoute
        if isinstance(client, redis.cluster.RedisCluster):
            self._cluster = True
            self._route = ClusterRoute(client, self._patience)
        elif cluster:
            raise ConfigurationError(
                "cluster=True needs a redis.cluster.RedisCluster as `client` (or a url)"
            )
        else:
            self._route = Direct(client.connection_pool)

    def _connect(self, url: str, cluster: bool) -> redis.Redis | redis.cluster.RedisCluster:
        if not cluster:
            return redis.Redis.from_url(url, retry=Retry(*_retry_policy()))
        try:  # a cluster client learns the slot map now
            return redis.cluster.RedisCluster.from_url(url, retry=Retry(*_retry_policy()))
        except _FAILURES as error:
            self._where = _mask(url)
            raise self._failure("join the cluster", None, error) from error

    def _run(self, script: _Script, keys: list[bytes], args: list[Any], wait: bool = False) -> Any:
        """`script` on the four `keys`, on the route's kept connection (see `Direct`), and
        the WAIT of `min_replicas_acked` after a commit: the replies. EVALSHA, or EVAL when
        the server lost the script."""
        extra = self._wait if wait else ()
        try:
            return self._route.send(keys[0], (script.evalsha(keys, args), *extra))
        except redis.exceptions.NoScriptError:
            return self._route.send(keys[0], (script.eval(keys, args), *extra))

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
                and self._unchanged(
                    memory_id, since, self._route.send(keys[0], _version_of(keys))[0]
                )
            ):
                return since
            reply = self._run(_LOAD_SCRIPT, keys, _load_args(since))[0]
        except _FAILURES as error:
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
            replies = self._run(_COMMIT_SCRIPT, keys, args, wait=True)
        except _FAILURES as error:
            raise self._failure("commit the window", memory_id, error) from error
        return self._after_commit(memory_id, replies)

    def delete_messages(self, memory_id: str) -> None:
        keys = self._keys(memory_id)
        with self._failing("delete the memory", memory_id):
            self._route.send(keys[0], (("DEL", *keys),))

    def history(
        self, memory_id: str, *, errors: Errors = "raise", seqs: Iterable[int] | None = None
    ) -> list[HistoryEntry]:
        """Every message ever added to `memory_id`, oldest first (reads the whole history);
        with `seqs`, only the messages numbered so, in one script reading just those fields
        (it needs Redis 6.2 or later)."""
        keys = self._keys(memory_id)
        check_errors(errors)
        script, args = _history_request(seqs)
        with self._failing("read the history", memory_id):
            reply = self._run(script, keys, args)[0] if script else []
        return _history(memory_id, reply, errors, self._read, args)

    def memory_ids(self) -> list[str]:
        """The memory ids under this store's prefix, sorted.

        This SCANs the whole database (on a cluster, every primary; the cost grows with every
        key there, not only ours) without blocking the server; ids written or deleted
        meanwhile may or may not be listed.
        """
        with self._failing("list the memory ids"):
            keys = list(self._client.scan_iter(match=_meta_pattern(self._prefix), count=1000))
        return _memory_ids(self._prefix, keys)

    def summaries(self) -> list[MemorySummary]:
        """Per memory id, counted by Redis (HLEN, ZCARD): a SCAN (of every primary, on a
        cluster), then one pipelined trip (per primary)."""
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
        self._route.close()  # back to the pool, which a passed-in client's owner closes
        if self._owns_client:
            close_client(self._client)


class AsyncRedisChatMemoryStore(
    _RedisStore, AsyncBasicContract, AsyncWindowStore, AsyncHistoryStore
):
    """`RedisChatMemoryStore` for asyncio, on `redis.asyncio`; same keys, so both can share data.

    Pass `client`, a `redis.asyncio.Redis` (or `redis.asyncio.cluster.RedisCluster`), to
    configure the connection yourself; the store then neither owns nor closes it. `cluster`,
    `min_replicas_acked`, `replica_ack_timeout` and `failover_timeout` as in
    `RedisChatMemoryStore`. Close the store with `await store.aclose()` or `async with`.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster | None = None,
        cluster: bool = False,
        prefix: str = DEFAULT_PREFIX,
        ttl: float | timedelta | None = None,
        min_replicas_acked: int = 0,
        replica_ack_timeout: float = 1.0,
        failover_timeout: float = 10.0,
    ) -> None:
        _require_redis(type(self).__name__)
        wrong = _wrong_client(type(self).__name__, client)
        if wrong is not None:
            raise ConfigurationError(wrong)
        super().__init__(
            prefix, ttl, client, min_replicas_acked, replica_ack_timeout, failover_timeout
        )
        if client is None and cluster:  # it learns the slot map when first used
            client = redis.asyncio.cluster.RedisCluster.from_url(
                url, retry=AsyncRetry(*_retry_policy())
            )
        elif client is None:
            client = redis.asyncio.Redis.from_url(url, retry=AsyncRetry(*_retry_policy()))
        self._client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster = client
        self._where = _where(client)
        self._route: AsyncDirect | AsyncClusterRoute
        if isinstance(client, redis.asyncio.cluster.RedisCluster):
            self._cluster = True
            self._route = AsyncClusterRoute(client, self._patience)
        elif cluster:
            raise ConfigurationError(
                "cluster=True needs a redis.asyncio.cluster.RedisCluster as `client` (or a url)"
            )
        else:
            self._route = AsyncDirect(client.connection_pool)

    async def _run(
        self, script: _Script, keys: list[bytes], args: list[Any], wait: bool = False
    ) -> Any:
        """`RedisChatMemoryStore._run`, awaited."""
        extra = self._wait if wait else ()
        try:
            return await self._route.send(keys[0], (script.evalsha(keys, args), *extra))
        except redis.exceptions.NoScriptError:
            return await self._route.send(keys[0], (script.eval(keys, args), *extra))

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
                    memory_id, since, (await self._route.send(keys[0], _version_of(keys)))[0]
                )
            ):
                return since
            reply = (await self._run(_LOAD_SCRIPT, keys, _load_args(since)))[0]
        except _FAILURES as error:
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
            replies = await self._run(_COMMIT_SCRIPT, keys, args, wait=True)
        except _FAILURES as error:
            raise self._failure("commit the window", memory_id, error) from error
        return self._after_commit(memory_id, replies)

    async def delete_messages(self, memory_id: str) -> None:
        keys = self._keys(memory_id)
        with self._failing("delete the memory", memory_id):
            await self._route.send(keys[0], (("DEL", *keys),))

    async def history(
        self, memory_id: str, *, errors: Errors = "raise", seqs: Iterable[int] | None = None
    ) -> list[HistoryEntry]:
        """Every message ever added to `memory_id`, oldest first; with `seqs`, only those
        numbered so (see the sync store)."""
        keys = self._keys(memory_id)
        check_errors(errors)
        script, args = _history_request(seqs)
        with self._failing("read the history", memory_id):
            reply = (await self._run(script, keys, args))[0] if script else []
        return _history(memory_id, reply, errors, self._read, args)

    async def memory_ids(self) -> list[str]:
        """The memory ids under this store's prefix, sorted (a SCAN of the whole database; on
        a cluster, of every primary)."""
        pattern = _meta_pattern(self._prefix)
        with self._failing("list the memory ids"):
            keys = [key async for key in self._client.scan_iter(match=pattern, count=1000)]
        return _memory_ids(self._prefix, keys)

    async def summaries(self) -> list[MemorySummary]:
        """Per memory id, counted by Redis (HLEN, ZCARD): a SCAN (of every primary, on a
        cluster), then one pipelined trip (per primary)."""
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
        await self._route.close()  # back to the pool, which a passed-in client's owner closes
        if self._owns_client:
            await self._client.aclose()


def _version_of(keys: list[bytes]) -> tuple[tuple[Any, ...]]:
    """The one command that reads the version of the memory id whose `keys` these are."""
    return (("HGET", keys[0], "version"),)
