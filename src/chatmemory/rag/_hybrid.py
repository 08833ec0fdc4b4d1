"""One search request, both rankings: when an `EmbeddingSearchRequest` carries its query text,
a store that also searches words (`FullTextSearch`) answers with its vector ranking and its
full-text ranking fused by reciprocal rank (RRF, k = 60), as LangChain4j's hybrid stores do.

The fused score is the RRF total divided by the best total possible (first in both lists), so it
stays on the 0..1 scale of relevance scores: 1.0 for a segment ranked first by both. `min_score`
applies to the vector ranking (a cosine relevance) before fusing; each list is read `DEPTH`
deep (at least `max_results`), since fusion lifts what one list ranks low.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from typing import Protocol, TypeVar

from ._embeddings import EmbeddingMatch, EmbeddingSearchRequest, EmbeddingSearchResult
from ._filters import Filter

__all__ = ["DEPTH", "RRF_K", "fused_order", "fused_result", "fused_search", "vector_half"]

K = TypeVar("K", bound=Hashable)

RRF_K = 60
DEPTH = 50


class _Both(Protocol):
    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult: ...

    def search_text(
        self, text: str, *, max_results: int = 3, filter: Filter | None = None
    ) -> list[EmbeddingMatch]: ...


def fused_search(store: _Both, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
    """`request` answered by `store`'s vector and full-text rankings fused (the store's `search`
    calls this when `request.query` is set)."""
    assert request.query is not None
    vectors = vector_half(request)
    texts = store.search_text(request.query, max_results=vectors.max_results, filter=request.filter)
    return fused_result(request, store.search(vectors).matches, texts)


def vector_half(request: EmbeddingSearchRequest) -> EmbeddingSearchRequest:
    """The vector ranking a hybrid `request` fuses: without its text, `DEPTH` deep (at least
    `max_results`); the full-text ranking is read as deep."""
    return dataclasses.replace(request, query=None, max_results=max(DEPTH, request.max_results))


def fused_result(
    request: EmbeddingSearchRequest,
    vectors: Sequence[EmbeddingMatch],
    texts: Sequence[EmbeddingMatch],
) -> EmbeddingSearchResult:
    """The answer to a hybrid `request`: its two rankings fused, the best `max_results`."""
    return EmbeddingSearchResult(tuple(fuse([vectors, texts])[: request.max_results]))


def fuse(rankings: Sequence[Sequence[EmbeddingMatch]]) -> list[EmbeddingMatch]:
    """Matches of several rankings by descending RRF total (ties in first-seen order), each
    with its fused score on the 0..1 scale."""
    first: dict[str, EmbeddingMatch] = {}
    for ranking in rankings:
        for match in ranking:
            first.setdefault(match.embedding_id, match)
    order = fused_order([[m.embedding_id for m in ranking] for ranking in rankings])
    return [dataclasses.replace(first[i], score=score) for i, score in order]


def fused_order(rankings: Sequence[Sequence[K]]) -> list[tuple[K, float]]:
    """The keys of several rankings (best first) by descending RRF total (ties in first-seen
    order), each with its fused score on the 0..1 scale: 1.0 for first in every ranking."""
    totals: dict[K, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            totals[key] = totals.get(key, 0.0) + 1 / (RRF_K + rank)
    best = len(rankings) / (RRF_K + 1)
    order = sorted(totals, key=totals.__getitem__, reverse=True)
    return [(key, min(1.0, totals[key] / best)) for key in order]
