"""What the embedded stores share: a matrix of vectors searched with numpy, and BM25 over words.

The in-memory store keeps one `VectorIndex` as its data; the SQLite store keeps one per process
as a cache of its table. Scores are LangChain4j's relevance, (cos + 1) / 2; ties keep insertion
order, so a search answers the same on every store and every run.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from .._errors import ConfigurationError
from ._embeddings import (
    Embedding,
    EmbeddingMatch,
    EmbeddingSearchRequest,
    check_finite,
    check_metadata,
)
from ._filters import Filter
from ._values import TextSegment

__all__ = ["Bm25", "VectorIndex", "check_embeddings", "words"]

Matrix = npt.NDArray[np.float32]

_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def check_embeddings(
    embeddings: Sequence[Embedding],
    segments: Sequence[TextSegment] | None,
    ids: Sequence[str] | None,
) -> tuple[list[TextSegment | None], list[str | None]]:
    """The segments and ids lined up with `embeddings`, or a clear error."""
    if isinstance(embeddings, Embedding) or not all(isinstance(e, Embedding) for e in embeddings):
        raise ConfigurationError("add_all() takes a list of Embeddings")
    lined_segments: list[TextSegment | None] = (
        list(segments) if segments is not None else [None] * len(embeddings)
    )
    lined_ids: list[str | None] = list(ids) if ids is not None else [None] * len(embeddings)
    if len(lined_segments) != len(embeddings) or len(lined_ids) != len(embeddings):
        raise ConfigurationError(
            f"add_all() got {len(embeddings)} embeddings, {len(lined_segments)} segments and "
            f"{len(lined_ids)} ids: give one of each per embedding"
        )
    for segment in lined_segments:
        if segment is not None and not isinstance(segment, TextSegment):
            raise ConfigurationError(f"a segment must be a TextSegment, got {segment!r}")
    for given in lined_ids:
        if given is not None and (not isinstance(given, str) or not given):
            raise ConfigurationError(f"an id must be a non-empty str, got {given!r}")
    check_finite(embeddings)
    check_metadata(lined_segments, lined_ids)
    return lined_segments, lined_ids


class VectorIndex:
    """Rows of (id, vector, segment) in insertion order, and their unit vectors as a matrix."""

    def __init__(self, dimension: int | None = None) -> None:
        self.dimension = dimension
        self.ids: list[str] = []
        self.segments: list[TextSegment | None] = []
        self._raw_rows: Matrix = np.zeros((0, dimension or 0), dtype=np.float32)
        self._unit_rows: Matrix = np.zeros((0, dimension or 0), dtype=np.float32)
        """Row buffers with room to grow; `_raw` and `_unit` are views of their filled rows."""
        self._raw: Matrix = self._raw_rows
        self._unit: Matrix = self._unit_rows
        self._position: dict[str, int] = {}
        self._bm25: Bm25 | None = None  # built on the first full-text search after a change
        self._masks: dict[str, tuple[Filter, npt.NDArray[np.bool_]]] = {}
        """Which rows each filter passes, by the filter's repr (its values' types included: a
        filter on True is not one on 1); segments never change in place, so a mask holds until
        rows are added or removed."""

    def __len__(self) -> int:
        return len(self.ids)

    def check(self, embedding: Embedding) -> None:
        if self.dimension is not None and embedding.dimension != self.dimension:
            raise ConfigurationError(
                f"this store holds embeddings of dimension {self.dimension}, got one of "
                f"{embedding.dimension}: use the embedding model the store was filled with"
            )

    def __contains__(self, row_id: object) -> bool:
        return row_id in self._position

    def append(
        self, ids: Sequence[str], vectors: Matrix, segments: Sequence[TextSegment | None]
    ) -> None:
        """Add rows; an id already present is replaced (its old row goes)."""
        if not ids:
            return
        if self.dimension is None:
            self.dimension = int(vectors.shape[1])
            self._raw_rows = np.zeros((0, self.dimension), dtype=np.float32)
            self._unit_rows = np.zeros((0, self.dimension), dtype=np.float32)
        replaced = [i for i in ids if i in self._position]
        if replaced or len(set(ids)) != len(ids):
            last = {row_id: n for n, row_id in enumerate(ids)}  # the last of repeated ids wins
            keep = sorted(last.values())
            self.remove(replaced)
            ids = [ids[n] for n in keep]
            vectors = vectors[keep]
            segments = [segments[n] for n in keep]
        start = len(self.ids)
        self._bm25 = None
        for name, (condition, mask) in self._masks.items():  # extended, not made again
            self._masks[name] = (condition, np.concatenate([mask, _passing(condition, segments)]))
        self.ids.extend(ids)
        self.segments.extend(segments)
        self._position.update((row_id, start + n) for n, row_id in enumerate(ids))
        self._grow(start + len(ids))
        self._raw_rows[start : start + len(ids)] = vectors
        self._unit_rows[start : start + len(ids)] = _unit(vectors)
        self._raw = self._raw_rows[: len(self.ids)]
        self._unit = self._unit_rows[: len(self.ids)]

    def _grow(self, needed: int) -> None:
        """Room for `needed` rows: capacity doubles, so adding one row at a time costs
        amortised O(1) copies instead of the whole matrix each time."""
        if needed <= len(self._raw_rows):
            return
        capacity = max(needed, 2 * len(self._raw_rows), 64)
        for name in ("_raw_rows", "_unit_rows"):
            old = getattr(self, name)
            grown = np.empty((capacity, self.dimension or 0), dtype=np.float32)
            grown[: len(old)] = old
            setattr(self, name, grown)

    def remove(self, ids: Sequence[str]) -> int:
        """Remove rows, compacting in place: only the rows after the first removed one move,
        and the buffers keep their room, so an upsert costs no reallocation."""
        gone = {self._position[i] for i in ids if i in self._position}
        if not gone:
            return 0
        first, size = min(gone), len(self.ids)
        kept = np.ones(size - first, dtype=np.bool_)
        kept[[n - first for n in gone]] = False
        tail = np.flatnonzero(kept) + first  # the kept rows after the first removed one
        end = first + len(tail)
        for rows in (self._raw_rows, self._unit_rows):
            rows[first:end] = rows[tail]
        self._raw, self._unit = self._raw_rows[:end], self._unit_rows[:end]
        for n in sorted(gone, reverse=True):
            del self._position[self.ids[n]]
            del self.ids[n]
            del self.segments[n]
        for n in range(first, end):
            self._position[self.ids[n]] = n
        every = np.ones(size, dtype=np.bool_)
        every[list(gone)] = False
        self._masks = {name: (f, mask[every]) for name, (f, mask) in self._masks.items()}
        self._bm25 = None
        return len(gone)

    def matching(self, condition: Filter | None) -> list[str]:
        """The ids whose segment passes `condition` (all ids for None)."""
        if condition is None:
            return list(self.ids)
        return [self.ids[n] for n in np.flatnonzero(self._mask(condition)).tolist()]

    def selected(self, condition: Filter) -> dict[str, TextSegment | None]:
        """The segments (by id) that pass `condition` (its mask is not kept: a selection is
        usually one conversation's or one user's, asked once)."""
        passing = _passing(condition, self.segments)
        return {self.ids[n]: self.segments[n] for n in np.flatnonzero(passing).tolist()}

    def _mask(self, condition: Filter) -> npt.NDArray[np.bool_]:
        name = repr(condition)
        found = self._masks.get(name)
        if found is None:
            if len(self._masks) >= 64:
                self._masks.clear()
            found = self._masks[name] = (condition, _passing(condition, self.segments))
        return found[1]

    def search(self, request: EmbeddingSearchRequest) -> tuple[EmbeddingMatch, ...]:
        if not self.ids:
            return ()
        self.check(request.query_embedding)
        query = _unit(np.asarray([request.query_embedding.vector], dtype=np.float32))[0]
        scores = (self._unit @ query + 1.0) / 2.0
        passing = scores >= request.min_score - 1e-7
        if request.filter is not None:
            passing &= self._mask(request.filter)
        candidates = np.flatnonzero(passing)
        top = request.max_results
        if candidates.size > top:
            # Every row scoring at least the top-th score stays, so a tie at the cut goes to the
            # row added first (argpartition alone would pick among equals at random).
            kth = np.partition(scores[candidates], candidates.size - top)[candidates.size - top]
            candidates = candidates[scores[candidates] >= kth]
        # Best first, ties in insertion order (lexsort: the last key is the primary one).
        order = candidates[np.lexsort((candidates, -scores[candidates]))][:top].tolist()
        return tuple(
            EmbeddingMatch(
                min(1.0, float(scores[n])),
                self.ids[n],
                Embedding.trusted(self._raw[n].tolist()),
                self.segments[n],
            )
            for n in order
        )

    def search_text(
        self, text: str, max_results: int, condition: Filter | None
    ) -> list[EmbeddingMatch]:
        """BM25 over the segments' words; only rows that pass `condition` are returned."""
        if self._bm25 is None:
            self._bm25 = Bm25(self.segments)
        allowed = None if condition is None else self._mask(condition)
        return [
            EmbeddingMatch(
                score, self.ids[n], Embedding.trusted(self._raw[n].tolist()), self.segments[n]
            )
            for score, n in self._bm25.rank(text, max_results, allowed)
        ]

    def matches(
        self,
        ranked: Iterable[tuple[float, str | None]],
        max_results: int,
        condition: Filter | None,
    ) -> list[EmbeddingMatch]:
        """The first `max_results` of (score, id), best first, as matches: ids this index does
        not hold (None, or rows added since it was read) and rows `condition` refuses are
        skipped."""
        mask = None if condition is None else self._mask(condition)
        found: list[EmbeddingMatch] = []
        for score, row_id in ranked:
            n = self._position.get(row_id) if row_id is not None else None
            if n is None or self.segments[n] is None or (mask is not None and not mask[n]):
                continue
            found.append(
                EmbeddingMatch(
                    score, self.ids[n], Embedding.trusted(self._raw[n].tolist()), self.segments[n]
                )
            )
            if len(found) == max_results:
                break
        return found

    def embedding(self, row_id: str) -> Embedding:
        return Embedding.trusted(self._raw[self._position[row_id]].tolist())


def _passing(condition: Filter, segments: Sequence[TextSegment | None]) -> npt.NDArray[np.bool_]:
    return np.fromiter(
        (s is not None and condition.test(s.metadata) for s in segments),
        dtype=np.bool_,
        count=len(segments),
    )


def _unit(vectors: npt.ArrayLike) -> Matrix:
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: Matrix = (matrix / np.maximum(norms, 1e-8)).astype(np.float32, copy=False)
    return unit


class Bm25:
    """Okapi BM25 (k1 = 1.2, b = 0.75, Lucene's idf) over the words of an index's segments, for
    the in-memory store. Built once from the segments (an inverted index: word -> rows and
    counts) and rebuilt only after rows change, so a query reads the postings of its own words
    rather than every segment. Statistics cover every segment, as FTS5's do on SQLite; a filter
    only decides which rows may be returned."""

    k1, b = 1.2, 0.75

    def __init__(self, segments: Sequence[TextSegment | None]) -> None:
        self.postings: dict[str, list[tuple[int, int]]] = {}
        lengths = np.zeros(len(segments), dtype=np.float64)
        for n, segment in enumerate(segments):
            if segment is None:
                continue
            counts = Counter(words(segment.text))
            lengths[n] = sum(counts.values())
            for term, tf in counts.items():
                self.postings.setdefault(term, []).append((n, tf))
        self.total = sum(1 for s in segments if s is not None)
        average = float(lengths.sum()) / self.total if self.total else 1.0
        self.norms = self.k1 * (1 - self.b + self.b * lengths / (average or 1.0))

    def rank(
        self, query: str, max_results: int, allowed: npt.NDArray[np.bool_] | None = None
    ) -> list[tuple[float, int]]:
        """(score, row position) of the best rows, best first, ties in insertion order."""
        scores: dict[int, float] = {}
        for term in dict.fromkeys(words(query)):
            posting = self.postings.get(term)
            if not posting:
                continue
            df = len(posting)
            idf = math.log(1 + (self.total - df + 0.5) / (df + 0.5))
            for n, tf in posting:
                if allowed is None or allowed[n]:
                    gain = idf * tf * (self.k1 + 1) / (tf + self.norms[n])
                    scores[n] = scores.get(n, 0.0) + float(gain)
        best = heapq.nsmallest(max_results, scores.items(), key=lambda item: (-item[1], item[0]))
        return [(score, n) for n, score in best if score > 0]
