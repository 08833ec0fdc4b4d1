"""A bounded mapping that forgets the least recently used entry first: the one such cache of
the library (a service's memories, recall's kept histories and query embeddings), safe to share
between threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["LruCache"]

K = TypeVar("K")
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """At most `limit` entries; `get` and `put` make an entry the most recently used."""

    __slots__ = ("_entries", "_lock", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._entries.pop(key, None)
