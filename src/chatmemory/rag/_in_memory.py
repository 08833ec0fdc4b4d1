"""`InMemoryEmbeddingStore`: embeddings in the process, searched with numpy, saved as
LangChain4j's JSON file."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import ConfigurationError
from .._frozen import thaw
from ._approximate import Graph, Hnsw, check_hnsw
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
from ._vectors import Bm25, MetadataIndex, Selection, VectorIndex, check_embeddings

__all__ = ["InMemoryEmbeddingStore"]


class InMemoryEmbeddingStore(SingleWrites):
    """Embeddings and their segments in memory: cosine search over a numpy matrix, the
    relevance score (cos + 1) / 2, metadata filters (answered from an index of the metadata,
    so a filter picks the rows to score), BM25 full-text search for hybrid retrieval.
    `add_all` takes a list of Embeddings or an `(n, dimension)` array. Searches are exact
    unless `approximate=Hnsw()` (an HNSW graph, from `min_rows` rows on: see `Hnsw`). `to_json()` /
    `save(path)` write LangChain4j's `InMemoryEmbeddingStore` JSON (``{"entries": [{"id",
    "embedding": {"vector"}, "embedded": {"text", "metadata": {"metadata"}}}]}``), so a store is
    shared with a Java service both ways. Thread-safe."""

    def __init__(self, *, approximate: Hnsw | None = None) -> None:
        self.approximate = check_hnsw(approximate)
        self._graph: Graph | None = None
        self._index = VectorIndex()
        # By key: each row's id and segment (two dicts: no tuple per row for the collector to
        # walk).
        self._ids: dict[int, str] = {}
        self._segments: dict[int, TextSegment | None] = {}
        self._key_of: dict[str, int] = {}
        self._next = 0
        self._metadata: MetadataIndex | None = None  # built on the first filter
        self._bm25: Bm25 | None = None  # built on the first full-text search after a change
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
        embeddings: Sequence[Embedding] | npt.NDArray[Any],
        segments: Sequence[TextSegment] | None = None,
        *,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        """Store several embeddings (a list, or an `(n, dimension)` array) with their segments;
        their ids (new UUIDs unless `ids` are given; an id already stored is replaced)."""
        batch = check_embeddings(embeddings, segments, ids)
        if not len(batch.vectors):
            return []
        new_ids = [given or str(uuid.uuid4()) for given in batch.ids]
        last = dict(zip(new_ids, range(len(new_ids)), strict=True))  # a repeated id: the last wins
        order = sorted(last.values()) if len(last) != len(new_ids) else None
        ids_kept = new_ids if order is None else [new_ids[n] for n in order]
        segments_kept = batch.segments if order is None else [batch.segments[n] for n in order]
        with self._lock:
            self._index.check(batch.vectors.shape[1])
            self._drop([self._key_of[i] for i in self._key_of.keys() & last.keys()])
            keys = range(self._next, self._next + len(ids_kept))
            self._next += len(ids_kept)
            self._index.append(keys, batch.vectors if order is None else batch.vectors[order])
            self._ids.update(zip(keys, ids_kept, strict=True))
            self._segments.update(zip(keys, segments_kept, strict=True))
            self._key_of.update(zip(ids_kept, keys, strict=True))
            if self._metadata is not None:
                self._metadata.add(keys, [_metadata(s) for s in segments_kept])
        return new_ids

    def _drop(self, keys: Sequence[int]) -> None:
        self._bm25 = None
        if not keys:
            return
        self._index.remove(keys)
        for key in keys:
            row_id = self._ids.pop(key)
            del self._segments[key]
            del self._key_of[row_id]
        if self._metadata is not None and len(self._metadata) > 2 * len(self._index) + 1024:
            self._metadata = None  # mostly rows that left: build it again when next needed

    def _selection(self, condition: Filter) -> Selection:
        """The rows `condition` passes (kept by the index until a row is removed)."""

        def mask(start: int) -> npt.NDArray[np.bool_]:
            if self._metadata is None:
                self._metadata = MetadataIndex()
                keys = self._index.keys.tolist()
                self._metadata.add(keys, [_metadata(self._segments[k]) for k in keys])
            return self._metadata.mask(condition, self._index, self._scan, start)

        return self._index.selection(repr(condition), mask)

    def _scan(self, condition: Filter) -> list[int]:
        """The rows a filter the metadata index does not know passes, tested one by one."""
        return [
            key
            for key, segment in self._segments.items()
            if segment is not None and condition.test(segment.metadata)
        ]

    def _chosen(self, condition: Filter) -> list[int]:
        chosen: list[int] = self._index.keys[self._selection(condition).positions].tolist()
        return chosen

    def _matches(self, found: list[tuple[int, float, int]]) -> list[EmbeddingMatch]:
        """The matches of rows found as (key, score, position)."""
        ids, segments = self._ids, self._segments
        vectors = self._index.embeddings([at for _, _, at in found])
        return [
            EmbeddingMatch(score, ids[key], vector, segments[key])
            for (key, score, _), vector in zip(found, vectors, strict=True)
        ]

    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
        if not isinstance(request, EmbeddingSearchRequest):
            raise ConfigurationError(f"search() takes an EmbeddingSearchRequest, got {request!r}")
        if request.query is not None:  # hybrid: see _hybrid
            return fused_search(self, request)
        with self._lock:
            rows = None
            if request.filter is not None and len(self._index):
                rows = self._selection(request.filter)
            self._graph = Graph.kept(self.approximate, self._index, self._graph)
            found = self._index.top(
                request.query_embedding, request.max_results, request.min_score, rows, self._graph
            )
            return EmbeddingSearchResult(tuple(self._matches(found)))

    def search_text(
        self, text: str, *, max_results: int = 3, filter: Filter | None = None
    ) -> list[EmbeddingMatch]:
        """BM25 over the segments' words; only rows that pass `filter` are returned."""
        check_text_search(text, max_results, filter)
        with self._lock:
            keys = self._index.keys.tolist()
            if self._bm25 is None:
                self._bm25 = Bm25([self._segments[k] for k in keys])
            allowed = None if filter is None else self._selection(filter).mask
            ranked = self._bm25.rank(text, max_results, allowed)
            return self._matches([(keys[n], score, n) for score, n in ranked])

    def remove_all(
        self, ids: Sequence[str] | Filter | _Unset = UNSET, *, filter: Filter | _Unset = UNSET
    ) -> None:
        chosen = removal(ids, filter)
        with self._lock:
            if chosen is None:
                self._drop(self._index.keys.tolist())
            elif isinstance(chosen, list):
                self._drop(list({self._key_of[i] for i in chosen if i in self._key_of}))
            else:
                self._drop(self._chosen(chosen))

    def select(self, filter: Filter) -> dict[str, TextSegment | None]:
        """Every entry whose metadata passes `filter`: its segment, by id (exact)."""
        check_filter(filter)
        with self._lock:
            if not len(self._index):
                return {}
            return {self._ids[key]: self._segments[key] for key in self._chosen(filter)}

    def _entries(self) -> list[tuple[str, TextSegment | None, Embedding]]:
        with self._lock:
            return [
                (self._ids[key], self._segments[key], self._index.vector(key))
                for key in self._index.keys.tolist()
            ]

    # -- LangChain4j's file format

    def to_json(self) -> str:
        entries = [
            _entry(row_id, embedding, segment) for row_id, segment, embedding in self._entries()
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
            entries = store._entries()
            if entries:
                merged.add_all(
                    [e[2] for e in entries],
                    [e[1] for e in entries],  # type: ignore[misc]
                    ids=[e[0] for e in entries],
                )
        return merged


def _metadata(segment: TextSegment | None) -> Mapping[str, Any] | None:
    return None if segment is None else segment.metadata


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
    return str(entry["id"]), Embedding(entry["embedding"]["vector"]), segment
