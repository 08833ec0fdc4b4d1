"""What the embedded stores share: a matrix of vectors searched with numpy, an index of metadata
that turns a filter into candidate rows before any vector is scored, and BM25 over words.

The in-memory store keeps one `VectorIndex` as its data; the SQLite store keeps one per process
as a cache of its table (segments and metadata stay in the table, read for the rows a search
returns). Scores are LangChain4j's relevance, (cos + 1) / 2; ties keep insertion order, so a
search answers the same on every store and every run.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .._errors import ConfigurationError
from ._buffers import enlarged
from ._codes import CODED_AT, Codes, Codes8, coded, contenders
from ._embeddings import NOT_FINITE, Embedding, check_metadata, trusted_rows
from ._filters import And, Compare, Filter, In, Not, Or, _kind
from ._values import TextSegment

if TYPE_CHECKING:
    from ._approximate import Graph

__all__ = [
    "Batch",
    "Bm25",
    "MetadataIndex",
    "Selection",
    "VectorIndex",
    "as_matrix",
    "check_embeddings",
    "words",
]

Matrix = npt.NDArray[np.float32]

_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class Batch(NamedTuple):
    """What `add_all` was given, checked and lined up: one float32 matrix, a segment (or None)
    and an id (or None for a new one) per row."""

    vectors: Matrix
    segments: list[TextSegment | None]
    ids: list[str | None]


def check_embeddings(
    embeddings: Sequence[Embedding] | npt.NDArray[Any],
    segments: Sequence[TextSegment] | None,
    ids: Sequence[str] | None,
) -> Batch:
    """The vectors (a list of Embeddings, or an `(n, d)` array of numbers) as one float32
    matrix with the segments and ids lined up with them, or a clear error."""
    vectors = as_matrix(embeddings)
    count = len(vectors)
    lined_segments: list[TextSegment | None] = (
        list(segments) if segments is not None else [None] * count
    )
    lined_ids: list[str | None] = list(ids) if ids is not None else [None] * count
    if len(lined_segments) != count or len(lined_ids) != count:
        raise ConfigurationError(
            f"add_all() got {count} embeddings, {len(lined_segments)} segments and "
            f"{len(lined_ids)} ids: give one of each per embedding"
        )
    # Types gathered in a set at C speed; the rows are looked at one by one only to name one.
    if not _SEGMENTS.issuperset(map(type, lined_segments)):
        for segment in lined_segments:
            if segment is not None and not isinstance(segment, TextSegment):
                raise ConfigurationError(f"a segment must be a TextSegment, got {segment!r}")
    if not _IDS.issuperset(map(type, lined_ids)) or "" in lined_ids:
        for given in lined_ids:
            if given is not None and (not isinstance(given, str) or not given):
                raise ConfigurationError(f"an id must be a non-empty str, got {given!r}")
    if not np.isfinite(vectors).all():  # float32: a float64 beyond its range is refused too
        raise ConfigurationError(NOT_FINITE)
    check_metadata(lined_segments, lined_ids)
    return Batch(vectors, lined_segments, lined_ids)


_SEGMENTS = frozenset({TextSegment, type(None)})
_IDS = frozenset({str, type(None)})


def as_matrix(embeddings: object) -> Matrix:
    """A list of Embeddings, or an `(n, d)` array of numbers, as one float32 matrix."""
    if isinstance(embeddings, np.ndarray):
        if embeddings.ndim != 2 or embeddings.dtype.kind not in "fiu":
            raise ConfigurationError(
                f"add_all() takes a list of Embeddings or an (n, dimension) array of numbers, "
                f"got an array of shape {embeddings.shape} and dtype {embeddings.dtype}"
            )
        if embeddings.shape[0] and not embeddings.shape[1]:
            raise ConfigurationError("an Embedding needs at least one number")
        with np.errstate(over="ignore"):  # beyond float32: an infinity, refused by the caller
            return np.ascontiguousarray(embeddings, dtype=np.float32)
    if (
        isinstance(embeddings, (Embedding, str, bytes))
        or not isinstance(embeddings, Sequence)
        or not all(isinstance(e, Embedding) for e in embeddings)
    ):
        raise ConfigurationError(
            "add_all() takes a list of Embeddings or an (n, dimension) array of numbers"
        )
    dimensions = {e.dimension for e in embeddings}
    if len(dimensions) > 1:
        raise ConfigurationError(
            f"add_all() got embeddings of dimensions {sorted(dimensions)}: one model per store"
        )
    if not embeddings:
        return np.zeros((0, 0), dtype=np.float32)
    with np.errstate(over="ignore"):
        return np.stack([e.array for e in embeddings]).astype(np.float32)


Keys = npt.NDArray[np.int64]


class VectorIndex:
    """Vectors by row key (an int that only grows: SQLite's rowid, the in-memory store's
    counter), in key order, as one float32 matrix with each row's inverse norm beside it: a
    search is one matrix product over the rows (or only the candidate rows a filter chose); over
    many rows, one over their int8 codes first, then one over the rows that could be the best.
    Ties keep key order, so a search answers the same on every store and every run."""

    def __init__(self, dimension: int | None = None) -> None:
        self.dimension = dimension
        self._key_rows: Keys = np.zeros(0, dtype=np.int64)
        self._raw_rows: Matrix = np.zeros((0, dimension or 0), dtype=np.float32)
        self._scale_rows: Matrix = np.zeros(0, dtype=np.float32)
        """Buffers with room to grow; `keys`, `_raw` and `_scale` are views of their filled
        rows."""
        self.keys: Keys = self._key_rows
        self._raw: Matrix = self._raw_rows
        self._scale: Matrix = self._scale_rows
        self._selections: dict[str, Selection] = {}
        """The rows of each filter asked about (by the filter's repr: its values' types
        included, a filter on True is not one on 1), most recent last, until a row is removed
        (rows appended since are looked at when the filter is next asked about)."""
        self._copied = 0  # bytes of vectors the selections hold copies of
        self._codes: Codes | None = None
        self._scans = 0  # scans of many rows, counted until codes are made
        self.changes = 0  # counts the changes of its rows (an approximate index follows it)
        self.lineage = next(_LINEAGES)
        """Unique to this index until a row is removed from it: while it stays, rows were
        only appended, so the position of every key held then is unchanged."""

    @classmethod
    def adopt(
        cls,
        keys: Keys,
        vectors: Matrix,
        scale: Matrix | None = None,
        codes: tuple[Codes8, Matrix] | None = None,
    ) -> VectorIndex:
        """An index over these arrays as they are (no copy): keys in increasing order, and the
        rows' inverse norms and their int8 codes and steps (see `_codes`) when known."""
        index = cls(int(vectors.shape[1]))
        index._key_rows, index._raw_rows = keys, vectors
        index._scale_rows = _inverse_norms(vectors) if scale is None else scale
        if codes is not None:
            index._codes = Codes.adopt(*codes)
        index._views(len(keys))
        return index

    def parts(self) -> tuple[Keys, Matrix, Matrix]:
        """The keys, the inverse norms and the vectors, as arrays (views)."""
        return self.keys, self._scale, self._raw

    def __len__(self) -> int:
        return len(self.keys)

    def check(self, dimension: int) -> None:
        if self.dimension is not None and dimension != self.dimension:
            raise ConfigurationError(
                f"this store holds embeddings of dimension {self.dimension}, got one of "
                f"{dimension}: use the embedding model the store was filled with"
            )

    def append(self, keys: npt.ArrayLike, vectors: Matrix) -> None:
        """Add rows whose keys are above every key held, in increasing order."""
        added = np.asarray(keys, dtype=np.int64)
        if not len(added):
            return
        if self.dimension is None or not len(self.keys):
            self.dimension = int(vectors.shape[1])
            self._raw_rows = np.zeros((0, self.dimension), dtype=np.float32)
            self._views(0)
        start, end = len(self.keys), len(self.keys) + len(added)
        self._grow(end)
        self._key_rows[start:end] = added
        self._raw_rows[start:end] = vectors
        self._scale_rows[start:end] = _inverse_norms(vectors)
        self._views(end)

    def _views(self, end: int) -> None:
        self.changes += 1
        self.keys = self._key_rows[:end]
        self._raw = self._raw_rows[:end]
        self._scale = self._scale_rows[:end]

    def _grow(self, needed: int) -> None:
        """Room for `needed` rows: capacity at least doubles, so adding one row at a time costs
        amortised O(1) copies instead of the whole matrix each time. The buffers are copied
        into new ones left unfilled (`np.empty`): their room costs no memory until rows fill
        it, where resizing in place zeroes it and, measured, copies a large buffer anyway
        (growing by a quarter to 100,000 rows of 384 float32s copied 5x the matrix: 0.24 s of
        a 1 s ingest; doubling into empty buffers, 0.06 s). A view of the old buffers that
        something holds stays valid."""
        if needed <= len(self._raw_rows):
            return
        capacity = max(needed, 2 * len(self._raw_rows), 64)
        filled = len(self.keys)
        self._raw_rows = enlarged(self._raw_rows, capacity, filled)
        self._key_rows = enlarged(self._key_rows, capacity, filled)
        self._scale_rows = enlarged(self._scale_rows, capacity, filled)
        self.keys = self._key_rows[:filled]
        self._raw = self._raw_rows[:filled]
        self._scale = self._scale_rows[:filled]

    def positions(self, keys: npt.ArrayLike, *, ordered: bool = False) -> npt.NDArray[np.intp]:
        """The positions of those of `keys` this index holds, in increasing order (`ordered`:
        the keys are increasing already, so they are not sorted again)."""
        given = np.asarray(keys, dtype=np.int64)
        wanted = given if ordered else np.unique(given)
        found = np.searchsorted(self.keys, wanted)
        inside = found < len(self.keys)
        found = found[inside]
        held: npt.NDArray[np.intp] = found[self.keys[found] == wanted[inside]]
        return held

    def remove(self, keys: npt.ArrayLike) -> int:
        """Remove rows by key, compacting in place: only the rows after the first removed one
        move, and the buffers keep their room, so an upsert costs no reallocation."""
        gone = self.positions(keys)
        if not len(gone):
            return 0
        first, size = int(gone[0]), len(self.keys)
        self.lineage = next(_LINEAGES)
        self._selections.clear()  # (positions move)
        self._copied = 0
        kept = np.ones(size - first, dtype=np.bool_)
        kept[gone - first] = False
        tail = np.flatnonzero(kept) + first  # the kept rows after the first removed one
        end = first + len(tail)
        for rows in (self._raw_rows, self._key_rows, self._scale_rows):
            rows[first:end] = rows[tail]
        if self._codes is not None:
            self._codes.removed(first, tail)
        self._views(end)
        return len(gone)

    def vector(self, key: int) -> Embedding:
        return self.vector_at(int(self.positions([key])[0]))

    def vector_at(self, position: int) -> Embedding:
        return Embedding.trusted(self._raw[position])

    def embeddings(self, positions: Sequence[int]) -> list[Embedding]:
        """The vectors at `positions`, as Embeddings (read together)."""
        return trusted_rows(self._raw.take(positions, axis=0))

    def block(self, start: int, end: int) -> tuple[Keys, Matrix]:
        """The keys and the vectors of the rows at positions `start` to `end` (views, no copy:
        for a use that ends before the index next changes)."""
        return self.keys[start:end], self._raw[start:end]

    def codes(self, start: int, end: int) -> tuple[Codes8, Matrix]:
        """The int8 codes and steps of the rows at positions `start` to `end` (views; the rows
        not coded yet are coded first)."""
        codes, end = self._coded(), min(end, len(self.keys))
        return codes.rows[start:end], codes.steps[start:end]

    def _coded(self) -> Codes:
        """The codes, of every row."""
        codes = self._codes = self._codes or Codes(self._raw.shape[1])
        codes.follow(self._raw, self._scale)
        return codes

    def cosines(self, positions: Positions, q: Matrix) -> Matrix:
        """The cosines of the rows at `positions` with the unit float32 query `q`."""
        cosines = self._raw[positions] @ q
        cosines *= self._scale[positions]
        return cosines

    def selection(self, name: str, mask: Callable[[int], npt.NDArray[np.bool_]]) -> Selection:
        """The rows the filter named `name` passes: kept from the last time it was asked
        until a row is removed, else `mask(0)`. `mask(start)` is a boolean per position from
        `start` on, whether the row there passes: asked only for the rows appended since
        (a turn's two rows, not the 100,000 before them) when the filter was asked before.
        It may leave rows out of this index first, as a store does with rows it cannot read
        (a removal: then the filter's rows are found again)."""
        found = self._selections.pop(name, None)
        if found is not None and len(found.mask) < len(self.keys):
            lineage, start = self.lineage, len(found.mask)
            tail = mask(start)
            if lineage == self.lineage:
                self._extend(found, start + np.flatnonzero(tail), tail)
            else:  # rows left while it looked: every position may have moved
                found = None
        if found is None:
            found = Selection(mask(0))
            while len(self._selections) >= _SELECTIONS:
                self._copied -= self._selections.pop(next(iter(self._selections))).held
        self._selections[name] = found  # most recent last
        return found

    def _extend(self, rows: Selection, added: Positions, tail: npt.NDArray[np.bool_]) -> None:
        """`rows` followed to the rows appended since it was made: `tail` says which of them
        pass, `added` is their positions; the rows it copied out are copied with them."""
        held = rows.held
        rows.grow("mask", tail)
        rows.everything = rows.everything and len(added) == len(tail)
        if not len(added):
            return
        rows.grow("positions", added)
        if rows.vectors is not None:
            rows.grow("vectors", self._raw[added])
            rows.grow("scale", self._scale[added])
        if rows.codes is not None:
            codes = self._coded()
            rows.grow("codes", codes.rows[added])
            rows.grow("steps", codes.steps[added])
        self._copied += rows.held - held

    def _scored(
        self, q: Matrix, rows: Selection | None, count: int
    ) -> tuple[Matrix, Positions | None]:
        """The cosines of `rows` (every row when None), or of those of them that could be among
        the best `count`, and their positions (None: all)."""
        chosen = None if rows is None or rows.everything else rows.positions
        near = self._contenders(q, rows, chosen, count)
        if near is not None:
            return self.cosines(near, q), near
        if chosen is None or self._most(chosen):
            cosines = self._raw @ q
            cosines *= self._scale
            return (cosines, None) if chosen is None else (cosines[chosen], chosen)
        assert rows is not None
        if rows.vectors is None and self._held(chosen.size * self._raw.shape[1] * 4):
            # Copied together once (within half the matrix's size for all filters), so the
            # next search with this filter reads them in order instead of gathering them.
            rows.vectors, rows.scale = self._raw[chosen], self._scale[chosen]
            self._copied += rows.held
        if rows.vectors is not None and rows.scale is not None:
            cosines = rows.vectors @ q
            cosines *= rows.scale
        else:
            cosines = self.cosines(chosen, q)
        return cosines, chosen

    def _most(self, chosen: Positions) -> bool:
        """Whether most rows pass: scoring (or coding) them all then beats copying them out."""
        return 4 * len(chosen) >= len(self.keys)

    def _held(self, size: int) -> bool:
        """Whether the selections may hold `size` bytes more of copied rows."""
        return self._copied + size <= self._raw.nbytes // 2

    def _contenders(
        self, q: Matrix, rows: Selection | None, chosen: Positions | None, count: int
    ) -> Positions | None:
        """For a scan of many rows, the positions of the rows (of `chosen`, all when None) that
        could be among the best `count`, from their int8 codes (see `_codes`); None when the
        float rows are scanned. The codes are made from the index's second such scan on (the
        first reads the float rows it has to read anyway: a process that opens a store to ask
        once pays no coding, 55 ms at 100,000 rows), unless given with the rows (`adopt`), and
        kept up as rows come."""
        scanned = len(self.keys) if chosen is None else len(chosen)
        if scanned < CODED_AT:
            return None
        self._scans += 1
        if self._codes is None and self._scans < 2:
            return None
        codes = self._coded()
        every, widest = (codes.rows[: len(self.keys)], codes.steps[: len(self.keys)]), codes.widest
        if chosen is None:
            return contenders(*coded(q, *every, widest), count)
        if self._most(chosen):
            scores, bound = coded(q, *every, widest)
            return chosen[contenders(scores[chosen], bound, count)]
        assert rows is not None
        if rows.codes is None and self._held(chosen.size * (self._raw.shape[1] + 4)):
            # Copied together once, as the float rows of a filter passing few rows are.
            rows.codes, rows.steps = every[0][chosen], every[1][chosen]
            self._copied += rows.held
        if rows.codes is not None and rows.steps is not None:
            part = rows.codes, rows.steps
        else:  # gathered at each search
            part = every[0][chosen], every[1][chosen]
        return chosen[contenders(*coded(q, *part, widest), count)]

    def top(
        self,
        query: Embedding,
        count: int,
        min_score: float = 0.0,
        rows: Selection | None = None,
        graph: Graph | None = None,
    ) -> list[tuple[int, float, int]]:
        """(key, relevance score, position) of the `count` best rows (of `rows` when given),
        best first, ties in key order. With a `graph`, among the rows it finds nearest (when it
        does not leave the search to be exact), scored exactly."""
        if not len(self.keys) or (rows is not None and not len(rows.positions)):
            return []
        self.check(query.dimension)
        given = query.array
        q = (given / max(math.sqrt(float(given @ given)), 1e-8)).astype(np.float32)
        near = None if graph is None else graph.near(self, q, count, rows)
        if near is not None:
            # A few candidates, scored exactly and ordered as Python lists: with cold caches
            # each numpy call costs microseconds, more than ordering twenty numbers.
            found = ((self.cosines(near, q) + 1.0) / 2.0).tolist()
            at, keys = near.tolist(), self.keys[near].tolist()
            best = sorted(range(len(at)), key=lambda n: (-found[n], at[n]))[:count]
            low = min_score - 1e-7
            return [(keys[n], min(1.0, found[n]), at[n]) for n in best if found[n] >= low]
        cosines, chosen = self._scored(q, rows, count)
        order = _best(cosines, count)
        positions = order if chosen is None else chosen[order]
        # The relevance score, (cos + 1) / 2, of the rows returned only; `min_score` cuts the
        # best rows, which are the best of the rows scoring at least that.
        scores = (cosines[order] + 1.0) / 2.0
        floor = min_score - 1e-7
        return [
            (k, min(1.0, s), p)
            for k, s, p in zip(
                self.keys[positions].tolist(), scores.tolist(), positions.tolist(), strict=True
            )
            if s >= floor
        ]


def _best(cosines: Matrix, count: int) -> Positions:
    """The positions of the `count` highest cosines, best first, ties in position (key) order.
    Every row scoring at least the count-th cosine is kept before the sort, so a tie at the cut
    goes to the row added first (argpartition alone would pick among equals at random); a
    few rows are sorted at once (each numpy call costs more than sorting them)."""
    size = len(cosines)
    if size <= _SORTED_AT_ONCE:
        best: Positions = np.argsort(-cosines, kind="stable")[:count]
        return best
    if size > count:
        kth = np.partition(cosines, size - count)[size - count]
        passing = np.flatnonzero(cosines >= kth)
    else:
        passing = np.arange(size)
    best = passing[np.argsort(-cosines[passing], kind="stable")[:count]]
    return best


_SORTED_AT_ONCE = 256
"""Up to this many candidates, one stable sort of them all picks the best."""


Positions = npt.NDArray[np.intp]


_SELECTIONS = 64
_LINEAGES = itertools.count()
"""Filters whose rows an index keeps."""


class Selection:
    """The rows of a `VectorIndex` a filter passes: a boolean per position, the positions,
    and (for a filter passing few rows, once searched) their vectors copied out together."""

    __slots__ = (
        "_room",
        "bits",
        "codes",
        "everything",
        "mask",
        "positions",
        "scale",
        "steps",
        "vectors",
    )

    def __init__(self, mask: npt.NDArray[np.bool_]) -> None:
        self._room: dict[str, npt.NDArray[Any]] = {}
        """The buffer each grown array is a view of (its room doubles, so that following
        one turn's rows copies none of the rows before them)."""
        self.mask = mask
        self.positions: Positions = np.flatnonzero(mask)
        self.everything = len(self.positions) == len(mask)
        self.vectors: Matrix | None = None
        self.scale: Matrix | None = None
        self.codes: Codes8 | None = None
        self.steps: Matrix | None = None
        """Or, for a scan of many rows once codes are made, their int8 codes copied out."""
        self.bits: tuple[tuple[int, int], Any, Any] | None = None
        """An approximate index's selector of these rows: (whose, bits, selector)."""

    def grow(self, name: str, added: npt.NDArray[Any]) -> None:
        """Append `added` to the array `name` (one of the slots)."""
        rows: npt.NDArray[Any] = getattr(self, name)
        size, end = len(rows), len(rows) + len(added)
        room = self._room.get(name)
        if room is None or end > len(room):
            room = self._room[name] = enlarged(rows, max(end, 2 * size, 64), size)
        room[size:end] = added
        setattr(self, name, room[:end])

    @property
    def held(self) -> int:
        """Bytes of copied vectors (or codes) this selection holds (not counting their room
        to grow)."""
        copies = (self.vectors, self.scale, self.codes, self.steps)
        return sum(int(copy.nbytes) for copy in copies if copy is not None)


def _inverse_norms(vectors: Matrix) -> Matrix:
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64))
    scale: Matrix = (1.0 / np.maximum(norms, 1e-8)).astype(np.float32)
    return scale


Metadata = Mapping[str, Any]


class MetadataIndex:
    """Which rows (by key) a filter passes, found without testing every row: each top-level
    metadata value is indexed (key and value -> rows), ranges are answered from the values of
    a key in order, and `&`, `|`, `~` combine boolean masks over an index's rows. The meaning
    is `Filter.test`'s exactly (kinds, absent keys, big ints); a filter it does not know is
    tested row by row on the metadata the store passes in (`scan`). Rows are only added:
    a key that left its `VectorIndex` is simply not found there."""

    def __init__(self) -> None:
        self._equal: dict[tuple[str, str, Any], list[int]] = {}
        self._sorted: dict[tuple[str, str], tuple[list[Any], Keys]] = {}
        self._segmented: list[int] = []  # rows that have a segment (and so metadata)
        self._known = 0
        self._arrays: dict[int, Keys] = {}
        """Each row list as an array (by the list's id), extended as the list grows."""
        self._unordered: set[int] = set()
        """The row lists (by id) a row was appended to below their last one. Any other list
        increases: a filter's mask then costs no sort of its rows, and the rows added past a
        position are a tail of it, found by bisection."""
        self._placed: dict[int, tuple[int, int, Positions]] = {}
        """Where an increasing row list's rows are in a `VectorIndex` (by the list's id): the
        index's lineage and top key then, and the positions, extended by the rows appended
        since (a filter passing most rows costs a look-up of the new rows only)."""

    def add(self, keys: Sequence[int], metadata: Sequence[Metadata | None]) -> None:
        self._sorted.clear()
        unordered = self._unordered
        for row, meta in zip(keys, metadata, strict=True):
            if meta is None:
                continue
            if self._segmented and self._segmented[-1] >= row:
                unordered.add(id(self._segmented))
            self._segmented.append(row)
            for name, value in meta.items():
                kind = _kind(value)
                if kind is not None:
                    rows = self._equal.setdefault((name, kind, value), [])
                    if rows and rows[-1] >= row:
                        unordered.add(id(rows))
                    rows.append(row)
        self._known += len(keys)

    def __len__(self) -> int:
        return self._known

    def seed(self, name: str, value: Any, rows: list[int]) -> None:
        """Take `rows` (increasing keys) as every row whose `name` is `value`, found elsewhere
        (a store's SQL index); rows added later are indexed by `add` as usual. An index only
        ever seeded answers for the entries seeded only."""
        self._equal[_entry(name, value)] = rows
        self._unordered.discard(id(rows))

    def mask(
        self,
        condition: Filter,
        index: VectorIndex,
        scan: Callable[[Filter], Iterable[int]],
        start: int = 0,
    ) -> npt.NDArray[np.bool_]:
        """Which of `index`'s rows from the position `start` on pass `condition`: a boolean
        per position."""
        if isinstance(condition, And):
            left = self.mask(condition.left, index, scan, start)
            return left & self.mask(condition.right, index, scan, start)
        if isinstance(condition, Or):
            left = self.mask(condition.left, index, scan, start)
            return left | self.mask(condition.right, index, scan, start)
        if isinstance(condition, Not):
            inner = self.mask(condition.inner, index, scan, start)
            return self._rows(self._segmented, index, start) & ~inner
        if isinstance(condition, In):
            found = np.zeros(len(index) - start, dtype=np.bool_)
            for value in condition.values:
                found |= self._rows(self._equal.get(_entry(condition.key, value), ()), index, start)
            if condition.negated:
                return self._rows(self._segmented, index, start) & ~found
            return found
        if isinstance(condition, Compare):
            return self._compare(condition, index, start)
        return self._rows(np.fromiter(scan(condition), dtype=np.int64), index, start)

    def _compare(self, condition: Compare, index: VectorIndex, start: int) -> npt.NDArray[np.bool_]:
        if condition.op in ("eq", "ne"):
            entry = _entry(condition.key, condition.value)
            equal = self._rows(self._equal.get(entry, ()), index, start)
            if condition.op == "eq":
                return equal
            return self._rows(self._segmented, index, start) & ~equal
        kind = _kind(condition.value)
        if kind not in ("number", "str"):
            return np.zeros(len(index) - start, dtype=np.bool_)
        values, keys = self._ordered(condition.key, kind)
        low, high = 0, len(values)
        if condition.op == "gt":
            low = bisect.bisect_right(values, condition.value)
        elif condition.op == "gte":
            low = bisect.bisect_left(values, condition.value)
        elif condition.op == "lt":
            high = bisect.bisect_left(values, condition.value)
        else:
            high = bisect.bisect_right(values, condition.value)
        return self._rows(keys[low:high], index, start)

    def _ordered(self, name: str, kind: str) -> tuple[list[Any], Keys]:
        """The values of `name` of one kind in increasing order, and their rows."""
        found = self._sorted.get((name, kind))
        if found is None:
            pairs = sorted(
                (value, row)
                for (key, value_kind, value), rows in self._equal.items()
                if key == name and value_kind == kind
                for row in rows
            )
            found = self._sorted[(name, kind)] = (
                [p[0] for p in pairs],
                np.fromiter((p[1] for p in pairs), dtype=np.int64, count=len(pairs)),
            )
        return found

    def _rows(
        self, keys: Sequence[int] | Keys, index: VectorIndex, start: int
    ) -> npt.NDArray[np.bool_]:
        """A boolean per position of `index` from `start` on: whether its row is of `keys`."""
        mask = np.zeros(len(index) - start, dtype=np.bool_)
        if not len(keys):
            return mask
        if isinstance(keys, list) and start and id(keys) not in self._unordered:
            # The rows past `start` only (a turn's two): the list's rows above the key there.
            tail = keys[bisect.bisect_right(keys, int(index.keys[start - 1])) :]
            mask[index.positions(tail, ordered=True) - start] = True
            return mask
        # One of this index's own lists (never a temporary), or an array of keys.
        found = self._positions(keys, index) if isinstance(keys, list) else index.positions(keys)
        mask[found[int(np.searchsorted(found, start)) :] - start] = True
        return mask

    def _positions(self, rows: list[int], index: VectorIndex) -> Positions:
        """The positions in `index` of the rows of `rows` it holds."""
        array = self._array(rows)
        if id(rows) in self._unordered:
            return index.positions(array)
        kept = self._placed.get(id(rows))
        if kept is not None and kept[0] == index.lineage:
            # Only rows above the top key then were appended since: only they are looked up.
            start = int(np.searchsorted(array, kept[1], side="right"))
            tail = index.positions(array[start:], ordered=True)
            found = np.concatenate((kept[2], tail)) if len(tail) else kept[2]
        else:
            found = index.positions(array, ordered=True)
        top = int(index.keys[-1]) if len(index) else -1
        self._placed[id(rows)] = (index.lineage, top, found)
        return found

    def _array(self, rows: list[int]) -> Keys:
        """`rows` (a list this index appends to) as an array, extended as the list grows."""
        kept = self._arrays.get(id(rows))
        if kept is not None and len(kept) == len(rows):
            return kept
        tail = np.asarray(rows[len(kept) if kept is not None else 0 :], dtype=np.int64)
        array = tail if kept is None else np.concatenate((kept, tail))
        self._arrays[id(rows)] = array
        return array


def _entry(name: str, value: Any) -> tuple[str, str, Any]:
    return (name, _kind(value) or "", value)


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
