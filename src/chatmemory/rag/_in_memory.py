"""`InMemoryEmbeddingStore`: embeddings in the process, searched with numpy, saved as
LangChain4j's JSON file."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import ConfigurationError
from .._frozen import thaw
from ._embeddings import (
    UNSET,
    Embedding,
    EmbeddingMatch,
    EmbeddingSearchRequest,
    EmbeddingSearchResult,
    SingleWrites,
    _Unset,
    check_filter,
    check_text_search,
    removal,
)
from ._filters import Filter
from ._hybrid import fused_search
from ._values import TextSegment
from ._vectors import VectorIndex, check_embeddings

__all__ = ["InMemoryEmbeddingStore"]


class InMemoryEmbeddingStore(SingleWrites):
    """Embeddings and their segments in memory: cosine search over a numpy matrix, the
    relevance score (cos + 1) / 2, metadata filters, BM25 full-text search for hybrid
    retrieval. `to_json()` / `save(path)` write LangChain4j's `InMemoryEmbeddingStore` JSON
    (``{"entries": [{"id", "embedding": {"vector"}, "embedded": {"text", "metadata":
    {"metadata"}}}]}``), so a store is shared with a Java service both ways. Thread-safe."""

    def __init__(self) -> None:
        self._index = VectorIndex()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"InMemoryEmbeddingStore({len(self._index)} embeddings)"

    def count(self) -> int:
        """How many embeddings the store holds."""
        return len(self)

    def __len__(self) -> int:
        return len(self._index)

    def add_all(
        self,
        embeddings: Sequence[Embedding],
        segments: Sequence[TextSegment] | None = None,
        *,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        lined_segments, lined_ids = check_embeddings(embeddings, segments, ids)
        if not embeddings:
            return []
        dimensions = {e.dimension for e in embeddings}
        if len(dimensions) > 1:
            raise ConfigurationError(
                f"add_all() got embeddings of dimensions {sorted(dimensions)}: one model per store"
            )
        new_ids = [given or str(uuid.uuid4()) for given in lined_ids]
        vectors = np.asarray([e.vector for e in embeddings], dtype=np.float32)
        with self._lock:
            self._index.check(embeddings[0])
            self._index.append(new_ids, vectors, lined_segments)
        return new_ids

    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
        if not isinstance(request, EmbeddingSearchRequest):
            raise ConfigurationError(f"search() takes an EmbeddingSearchRequest, got {request!r}")
        if request.query is not None:  # hybrid: see _hybrid
            return fused_search(self, request)
        with self._lock:
            return EmbeddingSearchResult(self._index.search(request))

    def search_text(
        self, text: str, *, max_results: int = 3, filter: Filter | None = None
    ) -> list[EmbeddingMatch]:
        check_text_search(text, max_results, filter)
        with self._lock:
            return self._index.search_text(text, max_results, filter)

    def remove_all(
        self, ids: Sequence[str] | Filter | _Unset = UNSET, *, filter: Filter | _Unset = UNSET
    ) -> None:
        chosen = removal(ids, filter)
        with self._lock:
            if isinstance(chosen, list):
                self._index.remove(chosen)
            else:
                self._index.remove(self._index.matching(chosen))

    def select(self, filter: Filter) -> dict[str, TextSegment | None]:
        """Every entry whose metadata passes `filter`: its segment, by id (exact)."""
        check_filter(filter)
        with self._lock:
            return self._index.selected(filter)

    # -- LangChain4j's file format

    def to_json(self) -> str:
        with self._lock:
            entries = [
                _entry(row_id, self._index.embedding(row_id), segment)
                for row_id, segment in zip(self._index.ids, self._index.segments, strict=True)
            ]
        return json.dumps({"entries": entries}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> InMemoryEmbeddingStore:
        try:
            data = json.loads(text)
            entries = data["entries"]
            rows = [_read_entry(entry) for entry in entries]
        except (ValueError, KeyError, TypeError) as error:
            raise ConfigurationError(
                f"not an InMemoryEmbeddingStore JSON (LangChain4j's format): {error}"
            ) from None
        store = cls()
        if rows:
            store.add_all(
                [r[1] for r in rows],
                [r[2] for r in rows],  # type: ignore[misc]
                ids=[r[0] for r in rows],
            )
        return store

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> InMemoryEmbeddingStore:
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    @classmethod
    def merge(cls, *stores: InMemoryEmbeddingStore) -> InMemoryEmbeddingStore:
        """One store with the entries of all, in order (a later store's id replaces an
        earlier one's)."""
        merged = cls()
        for store in stores:
            if not isinstance(store, InMemoryEmbeddingStore):
                raise ConfigurationError(f"merge() takes InMemoryEmbeddingStores, got {store!r}")
            with store._lock:
                ids = list(store._index.ids)
                segments = list(store._index.segments)
                embeddings = [store._index.embedding(i) for i in ids]
            if ids:
                merged.add_all(embeddings, segments, ids=ids)  # type: ignore[arg-type]
        return merged


def _entry(row_id: str, embedding: Embedding, segment: TextSegment | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": row_id, "embedding": {"vector": list(embedding.vector)}}
    if segment is not None:
        entry["embedded"] = {"text": segment.text, "metadata": {"metadata": thaw(segment.metadata)}}
    return entry


def _read_entry(entry: dict[str, Any]) -> tuple[str, Embedding, TextSegment | None]:
    embedded = entry.get("embedded")
    segment = None
    if embedded is not None:
        metadata = (embedded.get("metadata") or {}).get("metadata") or {}
        segment = TextSegment(embedded["text"], metadata)
    return str(entry["id"]), Embedding(tuple(entry["embedding"]["vector"])), segment
