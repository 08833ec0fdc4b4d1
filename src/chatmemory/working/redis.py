"""`RedisRecordStore`: working memory in Redis (``pip install 'chatmemory[redis]'``).

Each record is one HASH (`text`, `version`) under ``{prefix}{key}``; a save is one Lua script
that checks the version and writes, so concurrent updates serialize. A record is one key, so on
a Redis Cluster each lives whole in one slot and its script declares it.
"""

from __future__ import annotations

from typing import Any

from .._errors import ConfigurationError
from ._records import Record, check_key, conflict, failures

__all__ = ["RedisRecordStore"]

_SAVE = """
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if current ~= tonumber(ARGV[1]) then return -1 end
redis.call('HSET', KEYS[1], 'text', ARGV[2], 'version', current + 1)
return current + 1
"""


class RedisRecordStore:
    """Records in Redis: ``RedisRecordStore("redis://localhost:6379/0")`` or a `client`
    (a ``redis.Redis`` or ``redis.cluster.RedisCluster``). `prefix` namespaces the keys.
    On a Redis Cluster, pass ``cluster=True`` with the URL of any node."""

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        prefix: str = "chatmemory:working:",
        cluster: bool = False,
    ) -> None:
        try:
            import redis
            import redis.cluster
        except ImportError as error:
            raise ImportError(
                f"RedisRecordStore needs the redis package: pip install 'chatmemory[redis]' "
                f"({error})"
            ) from error
        if (url is None) == (client is None):
            raise ConfigurationError("RedisRecordStore takes a url or a client (one)")
        self._errors: tuple[type[Exception], ...] = (
            redis.RedisError,
            redis.exceptions.RedisClusterException,
        )
        self._owns = client is None
        if client is None:
            with failures(self, self._errors, "reach", prefix):  # a cluster is asked its map now
                made = redis.cluster.RedisCluster if cluster else redis.Redis
                client = made.from_url(str(url))
        self._redis = client
        self.prefix = prefix
        self._save = self._redis.register_script(_SAVE)

    def __repr__(self) -> str:
        return f"RedisRecordStore(prefix={self.prefix!r})"

    def load(self, key: str) -> Record | None:
        with failures(self, self._errors, "read", key):
            text, version = self._redis.hmget(self.prefix + check_key(key), "text", "version")
        if version is None:
            return None
        return Record(text.decode() if isinstance(text, bytes) else str(text), int(version))

    def save(self, key: str, text: str, *, expected: int) -> int:
        with failures(self, self._errors, "save", key):
            version = int(self._save(keys=[self.prefix + check_key(key)], args=[expected, text]))
        if version < 0:
            raise conflict(self, key, expected)
        return version

    def delete(self, key: str) -> bool:
        with failures(self, self._errors, "delete", key):
            return bool(self._redis.delete(self.prefix + check_key(key)))

    def close(self) -> None:
        if self._owns:
            from ..stores.redis import close_client

            close_client(self._redis)
