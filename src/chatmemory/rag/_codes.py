"""Int8 codes of an index's unit vectors: a first pass that reads a quarter of the bytes, with an
error bound that says which rows could still be among the best, so that only those are scored
exactly. The answer is the exact search's answer, not an approximation of it.

A search over many rows is bound by memory: 100,000 rows of 384 float32s are 154 MB, read at
every query (8-16 ms on the machines we measure on). Each row is coded as int8 with its own step
(the largest coordinate maps to 127), so a coordinate of the unit vector `u` is known to within
half a step: `|u_j - step * code_j| <= step / 2`. The query `q` is coded the same way. For every
row, the coded product then differs from the cosine by at most

    max_step / 2 * ||q||_1  +  ||q - q_step * q_code||_2 * (1 + max_step / 2 * sqrt(d))

(the first term over the row's coordinates, the second, by Cauchy-Schwarz, over the query's), so
once the `count`-th best coded score is known, no row scoring below it by more than twice the
bound can reach the best `count`: the rows left are scored from the float vectors, ties in
position order as everywhere else.
"""

from __future__ import annotations

import math
import os

import numpy as np
import numpy.typing as npt
import simsimd

from ._buffers import enlarged

Matrix = npt.NDArray[np.float32]
Positions = npt.NDArray[np.intp]
Codes8 = npt.NDArray[np.int8]

CODED_AT = 4_096
"""Rows scanned at once from which codes pay (below, the float rows are a few MB)."""
_STEP = 512
"""Rows coded at a time: their float copy stays in the processor's cache between the passes."""
_SPLIT_AT = 16_384
"""Rows from which the coded scan runs on two threads (when the process may use two cores):
bound by memory, it reads about 1.4 times as fast with two cores' reads in flight (1.8-2.0 ms
against 1.3-1.5 at 100,000 rows of 384 dimensions, cold)."""
_THREADS = min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
_MARGIN = 1e-5
"""For the float rounding of the products and of the exact scores themselves."""


class Codes:
    """The int8 codes of the first `filled` rows of an index (it codes new rows when asked,
    and moves them when rows are removed, as the index does)."""

    __slots__ = ("filled", "rows", "steps", "widest")

    def __init__(self, dimension: int) -> None:
        self.rows: Codes8 = np.empty((0, dimension), dtype=np.int8)
        self.steps: Matrix = np.empty(0, dtype=np.float32)
        """Per row: the unit vector's coordinate per unit of code."""
        self.filled = 0
        self.widest = 0.0
        """The largest step of any row coded so far (kept when rows go: still a bound)."""

    @classmethod
    def adopt(cls, rows: Codes8, steps: Matrix) -> Codes:
        """The codes of rows coded before (a store's file), as they are (no copy)."""
        codes = cls(rows.shape[1])
        codes.rows, codes.steps, codes.filled = rows, steps, len(rows)
        codes.widest = float(steps.max()) if len(steps) else 0.0
        return codes

    def follow(self, vectors: Matrix, scale: Matrix) -> None:
        """Code the rows of `vectors` (with their inverse norms `scale`) past those coded."""
        end = len(vectors)
        if end <= self.filled:
            return
        if end > len(self.rows):
            capacity = max(end, 2 * len(self.rows))
            self.rows = enlarged(self.rows, capacity, self.filled)
            self.steps = enlarged(self.steps, capacity, self.filled)
        scratch = np.empty((_STEP, vectors.shape[1]), dtype=np.float32)
        for start in range(self.filled, end, _STEP):
            block = vectors[start : start + _STEP]
            size = len(block)
            work = scratch[:size]
            top = np.maximum(np.maximum(block.max(axis=1), -block.min(axis=1)), 1e-30)
            np.multiply(block, (127.0 / top)[:, None], out=work)
            np.rint(work, out=work)
            self.rows[start : start + size] = work
            steps = scale[start : start + size] * top / np.float32(127.0)
            self.steps[start : start + size] = steps
            self.widest = max(self.widest, float(steps.max()))
        self.filled = end

    def removed(self, first: int, tail: Positions) -> None:
        """Rows were removed from the index: the kept rows at the (increasing) positions `tail`,
        all past `first`, now follow on from `first`."""
        if self.filled <= first:
            return
        coded = int(np.searchsorted(tail, self.filled))
        moved = tail[:coded]
        self.rows[first : first + coded] = self.rows[moved]
        self.steps[first : first + coded] = self.steps[moved]
        self.filled = first + coded


def coded(
    q: Matrix, rows: Codes8, steps: Matrix, widest: float
) -> tuple[npt.NDArray[np.float64], float]:
    """The coded scores of `rows` with the unit query `q`, and the bound on their error."""
    q_step = max(float(np.abs(q).max()), 1e-30) / 127.0
    q_code = np.rint(q / q_step).astype(np.int8)
    q_error = float(np.linalg.norm(q - q_code.astype(np.float64) * q_step))
    threads = _THREADS if len(rows) >= _SPLIT_AT else 1
    products = simsimd.cdist(q_code[None, :], rows, metric="dot", threads=threads)
    scores = np.asarray(products, np.float64)[0]
    scores *= steps
    scores *= q_step
    half = widest / 2.0
    bound = half * float(np.abs(q).sum()) + q_error * (1.0 + half * math.sqrt(q.shape[0]))
    return scores, bound + _MARGIN


def contenders(scores: npt.NDArray[np.float64], bound: float, count: int) -> Positions:
    """The positions (increasing) of the rows whose cosine could be among the best `count`,
    from their coded scores and the bound on those scores' error."""
    size = len(scores)
    if size <= count:
        return np.arange(size)
    near: Positions | None = None
    if size >= _SAMPLED * count:
        # The count-th best of every sixteenth row is at most the count-th best of all: the rows
        # within reach of it are a superset found without ordering them all (0.35 ms at 100k).
        sample = scores[::16]
        floor = float(np.partition(sample, len(sample) - count)[len(sample) - count])
        near = np.flatnonzero(scores >= floor - 2.0 * bound)
        scores = scores[near]
    kth = float(np.partition(scores, len(scores) - count)[len(scores) - count])
    found: Positions = np.flatnonzero(scores >= kth - 2.0 * bound)
    return found if near is None else near[found]


_SAMPLED = 64
"""From this many rows per row asked for, the count-th best is looked for among a sample first."""
