"""Small stand-ins for the RAG tests: a bag-of-words embedding model and a list-backed store
that implement the public contracts exactly as documented (brute-force cosine, relevance
(cos+1)/2, filters by `Filter.test`), plus retrievers that return what they are told."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Sequence

from chatmemory.rag import (
    Content,
    Embedding,
    EmbeddingMatch,
    EmbeddingSearchRequest,
    EmbeddingSearchResult,
    Filter,
    Query,
    TextSegment,
    cosine_similarity,
    relevance_score,
)

DIMENSION = 64


class WordsModel:
    """Each word adds 1 at a position its hash picks: texts sharing words are near."""

    dimension = DIMENSION

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed_all(self, texts: Sequence[str]) -> list[Embedding]:
        self.calls.append(list(texts))
        result = []
        for text in texts:
            vector = [0.0] * DIMENSION
            for word in re.findall(r"\w+", text.lower()):
                vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIMENSION] += 1.0
            if not any(vector):
                vector[0] = 1e-3
            result.append(Embedding(tuple(vector)))
        return result


class ListStore:
    def __init__(self) -> None:
        self.entries: list[tuple[str, Embedding, TextSegment | None]] = []

    def add(
        self, embedding: Embedding, segment: TextSegment | None = None, *, id: str | None = None
    ) -> str:
        new_id = id or str(uuid.uuid4())
        self.entries = [e for e in self.entries if e[0] != new_id]  # an id that exists: replaced
        self.entries.append((new_id, embedding, segment))
        return new_id

    def add_all(
        self,
        embeddings: Sequence[Embedding],
        segments: Sequence[TextSegment] | None = None,
        *,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        segs = list(segments) if segments is not None else [None] * len(embeddings)
        keys = list(ids) if ids is not None else [None] * len(embeddings)
        return [self.add(e, s, id=i) for e, s, i in zip(embeddings, segs, keys, strict=True)]

    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
        matches = []
        for entry_id, embedding, segment in self.entries:
            if request.filter is not None and (
                segment is None or not request.filter.test(segment.metadata)
            ):
                continue
            score = relevance_score(cosine_similarity(request.query_embedding, embedding))
            if score >= request.min_score:
                matches.append(EmbeddingMatch(score, entry_id, embedding, segment))
        matches.sort(key=lambda m: m.score, reverse=True)
        return EmbeddingSearchResult(tuple(matches[: request.max_results]))

    def remove(self, id: str) -> None:
        self.entries = [e for e in self.entries if e[0] != id]

    def remove_all(self, ids: Sequence[str] | None = None, *, filter: Filter | None = None) -> None:
        if ids is None and filter is None:
            self.entries = []
        elif ids is not None:
            self.entries = [e for e in self.entries if e[0] not in set(ids)]
        else:
            assert filter is not None
            self.entries = [
                e for e in self.entries if e[2] is None or not filter.test(e[2].metadata)
            ]

    def search_text(
        self, text: str, *, max_results: int = 3, filter: Filter | None = None
    ) -> list[EmbeddingMatch]:
        words = set(re.findall(r"\w+", text.lower()))
        scored = []
        for entry_id, embedding, segment in self.entries:
            if segment is None or (filter is not None and not filter.test(segment.metadata)):
                continue
            hits = len(words & set(re.findall(r"\w+", segment.text.lower())))
            if hits:
                scored.append(EmbeddingMatch(float(hits), entry_id, embedding, segment))
        scored.sort(key=lambda m: m.score, reverse=True)
        return scored[:max_results]


class Fixed:
    """A retriever that returns the same contents for every query, and counts queries."""

    def __init__(self, *texts: str) -> None:
        self.contents = [Content(TextSegment(t)) for t in texts]
        self.queries: list[Query] = []

    def retrieve(self, query: Query) -> list[Content]:
        self.queries.append(query)
        return list(self.contents)


def filled(texts: Sequence[tuple[str, dict[str, object]]]) -> tuple[ListStore, WordsModel]:
    store, model = ListStore(), WordsModel()
    segments = [TextSegment(t, m) for t, m in texts]
    store.add_all(model.embed_all([s.text for s in segments]), segments)
    model.calls.clear()
    return store, model
