"""What a `SemanticRecall` keeps in this process: per conversation (for one life of its id) how
far it is indexed and its history, and the embeddings of recent queries; bounded, under one
lock."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from ..rag import Embedding
from ._io import Rows

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
    history: Rows | None = None
    """The history as (seq, message), read once and extended by later windows."""
    dates: dict[int, str] = field(default_factory=dict)
    """The day (UTC, ISO) each message of the history was stored, by seq."""


class Keeping:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._kept: OrderedDict[str, Kept] = OrderedDict()
        self._queries: OrderedDict[str, Embedding] = OrderedDict()

    def of(self, memory_id: str, life: str | None) -> Kept:
        """What is kept of `memory_id` for `life` (None: a store that does not tell lives, whose
        history is then never kept); anything kept for another life is dropped."""
        with self.lock:
            kept = self._kept.get(memory_id)
            if kept is None or life is None or kept.life != life:
                kept = Kept(life or "")
                if life is not None:
                    self._kept[memory_id] = kept
                    while len(self._kept) > KEPT:
                        self._kept.popitem(last=False)
                else:
                    self._kept.pop(memory_id, None)
            else:
                self._kept.move_to_end(memory_id)
            return kept

    def drop(self, memory_ids: set[str]) -> None:
        with self.lock:
            for memory_id in memory_ids:
                self._kept.pop(memory_id, None)

    def query(self, text: str) -> Embedding | None:
        with self.lock:
            found = self._queries.get(text)
            if found is not None:
                self._queries.move_to_end(text)
            return found

    def remember_query(self, text: str, embedding: Embedding) -> None:
        with self.lock:
            self._queries[text] = embedding
            while len(self._queries) > QUERIES:
                self._queries.popitem(last=False)
