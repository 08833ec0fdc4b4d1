"""What a `SemanticRecall` keeps in this process: per conversation (for one life of its id) how
far it is indexed, and the embeddings of recent queries; bounded, under one
lock."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .._lru import LruCache
from ..rag import Embedding

KEPT = 1_000
"""Conversations whose history and mark a process keeps (the least recently used go first)."""
QUERIES = 256
"""Query embeddings kept (the same words are embedded once)."""


@dataclass(slots=True)
class Kept:
    """What this process keeps of one conversation, valid for one life of it only."""

    life: str
    mark: int | None = None
    """The last seq indexed (None: not read from the index yet)."""
    saved: int = -1
    """The last seq the stored mark records."""


class Keeping:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._kept: LruCache[str, Kept] = LruCache(KEPT)
        self._queries: LruCache[str, Embedding] = LruCache(QUERIES)

    def of(self, memory_id: str, life: str | None) -> Kept:
        """What is kept of `memory_id` for `life` (None: a store that does not tell lives, whose
        history is then never kept); anything kept for another life is dropped."""
        with self.lock:
            kept = self._kept.get(memory_id)
            if kept is not None and life is not None and kept.life == life:
                return kept
            kept = Kept(life or "")
            if life is not None:
                self._kept.put(memory_id, kept)
            else:
                self._kept.pop(memory_id)
            return kept

    def drop(self, memory_ids: set[str]) -> None:
        for memory_id in memory_ids:
            self._kept.pop(memory_id)

    def query(self, text: str) -> Embedding | None:
        return self._queries.get(text)

    def remember_query(self, text: str, embedding: Embedding) -> None:
        self._queries.put(text, embedding)
