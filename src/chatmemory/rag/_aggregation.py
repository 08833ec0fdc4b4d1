"""Merging what several retrievers found for several queries: reciprocal rank fusion, and
re-ranking with a scoring model."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from .._errors import ConfigurationError
from .._threads import in_thread
from ._values import Content, ContentKey, Query, TextSegment

__all__ = [
    "DefaultContentAggregator",
    "ReRankingContentAggregator",
    "ReciprocalRankFuser",
    "ScoringModel",
]


class ReciprocalRankFuser:
    """Each content scores ``1 / (k + rank)`` (rank from 1) in each list it is in; the fused list
    is by descending total, ties in the order first seen.

    Fusing several lists puts every content on one scale: its `ContentKey.SCORE` becomes that
    total, and `ContentKey.SOURCE_SCORES` keeps the score it had in each list, in the order of
    the lists (None where it was not found), so a BM25 score of 19.9 and a cosine of 0.755 are
    never compared. One list is nothing to fuse: its contents keep their own scores."""

    def __init__(self, k: int = 60) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigurationError(f"k must be at least 1, got {k!r}")
        self.k = k

    def fuse(self, lists: Sequence[Sequence[Content]]) -> list[Content]:
        scores: dict[Content, float] = {}
        own: dict[Content, list[float | None]] = {}
        for index, contents in enumerate(lists):
            for rank, content in enumerate(contents, start=1):
                scores[content] = scores.get(content, 0.0) + 1.0 / (self.k + rank)
                found = own.setdefault(content, [None] * len(lists))
                if found[index] is None:
                    found[index] = content.score
        # dicts keep first-seen order (and the first-seen content as the key) and `sorted` is
        # stable: ties stay in that order
        fused = sorted(scores, key=scores.__getitem__, reverse=True)
        if len(lists) == 1:
            return fused
        return [
            Content(
                content.segment,
                {
                    **content.metadata,
                    ContentKey.SCORE: scores[content],
                    ContentKey.SOURCE_SCORES: tuple(own[content]),
                },
            )
            for content in fused
        ]


class DefaultContentAggregator:
    """Fuses each query's lists (one per retriever), then the queries' results, by reciprocal
    rank (k=60). With several queries, `ContentKey.SOURCE_SCORES` holds each query's fused
    score."""

    def __init__(self, k: int = 60) -> None:
        self.fuser = ReciprocalRankFuser(k)

    def aggregate(self, found: Mapping[Query, Sequence[list[Content]]]) -> list[Content]:
        return self.fuser.fuse([self.fuser.fuse(lists) for lists in found.values()])


@runtime_checkable
class ScoringModel(Protocol):
    """Scores how relevant each segment is to a query (a re-ranker, a cross-encoder)."""

    def score_all(self, segments: Sequence[TextSegment], query: str) -> list[float]: ...


class ReRankingContentAggregator:
    """Fuses like `DefaultContentAggregator`, then orders by a scoring model's scores, keeping
    those at or above `min_score` and at most `max_results`. Each content then carries only its
    `RERANKED_SCORE`.

    The query to score against is the only query, or what `query_selector` picks when a query
    transformer made several.
    """

    def __init__(
        self,
        scoring_model: ScoringModel,
        *,
        query_selector: Callable[[Mapping[Query, Sequence[list[Content]]]], Query] | None = None,
        min_score: float | None = None,
        max_results: int | None = None,
    ) -> None:
        if not callable(getattr(scoring_model, "score_all", None)):
            raise ConfigurationError(f"{scoring_model!r} is not a scoring model (score_all)")
        if max_results is not None and (
            isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1
        ):
            raise ConfigurationError(f"`max_results` must be a positive int, got {max_results!r}")
        self.scoring_model = scoring_model
        self.query_selector = query_selector
        self.min_score = min_score
        self.max_results = max_results
        self.fuser = DefaultContentAggregator()

    def _query(self, found: Mapping[Query, Sequence[list[Content]]]) -> Query:
        if self.query_selector is not None:
            return self.query_selector(found)
        if len(found) != 1:
            raise ConfigurationError(
                f"{len(found)} queries were retrieved for, so it is unclear which one to re-rank "
                f"against: give ReRankingContentAggregator a query_selector"
            )
        return next(iter(found))

    def _rank(self, contents: list[Content], scores: Sequence[float]) -> list[Content]:
        if len(scores) != len(contents):
            raise ConfigurationError(
                f"the scoring model gave {len(scores)} scores for {len(contents)} segments"
            )
        best: dict[TextSegment, float] = {}
        for content, score in zip(contents, scores, strict=True):
            if content.segment not in best:
                best[content.segment] = float(score)
        kept = [
            (segment, score)
            for segment, score in best.items()
            if self.min_score is None or score >= self.min_score
        ]
        kept.sort(key=lambda pair: pair[1], reverse=True)
        if self.max_results is not None:
            kept = kept[: self.max_results]
        return [Content(segment, {ContentKey.RERANKED_SCORE: score}) for segment, score in kept]

    def _prepare(
        self, found: Mapping[Query, Sequence[list[Content]]]
    ) -> tuple[str, list[Content]] | None:
        """The query to score against and the fused contents; None when there is nothing."""
        if not found:
            return None
        query = self._query(found)
        contents = self.fuser.aggregate(found)
        return (query.text, contents) if contents else None

    def aggregate(self, found: Mapping[Query, Sequence[list[Content]]]) -> list[Content]:
        prepared = self._prepare(found)
        if prepared is None:
            return []
        query, contents = prepared
        return self._rank(
            contents, self.scoring_model.score_all([c.segment for c in contents], query)
        )

    async def aaggregate(self, found: Mapping[Query, Sequence[list[Content]]]) -> list[Content]:
        prepared = self._prepare(found)
        if prepared is None:
            return []
        query, contents = prepared
        segments = [c.segment for c in contents]
        ascore = getattr(self.scoring_model, "ascore_all", None)
        if ascore is not None:
            scores = await ascore(segments, query)
        else:
            scores = await in_thread(self.scoring_model.score_all, segments, query)
        return self._rank(contents, scores)
