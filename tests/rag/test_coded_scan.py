"""Searches over many rows read int8 codes of the vectors first, then score exactly the rows that
could be among the best: the answers must be those of an exact search, whatever the filter,
after rows come and go, and where rows differ by far less than a code's step."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from chatmemory.rag import (
    Embedding,
    EmbeddingSearchRequest,
    Filter,
    InMemoryEmbeddingStore,
    SqliteEmbeddingStore,
    TextSegment,
    key,
)

ROWS = 6_000  # above the rows from which a scan reads codes
DIMENSION = 16


def _store(kind: str, tmp_path: Path) -> Any:
    return InMemoryEmbeddingStore() if kind == "memory" else SqliteEmbeddingStore(tmp_path / "c.db")


def _close_rows(rng: np.random.Generator, size: int = ROWS) -> npt.NDArray[np.float64]:
    """Rows around a few centres, moved from them by a hundredth of their length: the best
    cosines with a query near a row differ by about 1e-5, far less than the error of int8 codes
    (a coordinate to within 1/254 of the largest), so only exact scores can order them. Every
    tenth row repeats an earlier one (ties)."""
    centres = rng.normal(size=(4, DIMENSION))
    rows = centres[rng.integers(0, 4, size=size)] + 0.03 * rng.normal(size=(size, DIMENSION))
    rows[9::10] = rows[: len(rows[9::10])]
    return rows


def _exact(
    rows: npt.NDArray[np.float64], alive: list[int], query: npt.NDArray[np.float64], count: int
) -> list[int]:
    """The `count` best of the rows `alive` (in the order they were added), ties to the first."""
    unit = rows[alive] / np.linalg.norm(rows[alive], axis=1, keepdims=True)
    scores = unit @ (query / np.linalg.norm(query))
    order = sorted(range(len(alive)), key=lambda n: (-round(float(scores[n]), 7), n))
    return [alive[n] for n in order[:count]]


def _found(
    store: Any, query: npt.NDArray[np.float64], count: int, where: Filter | None
) -> list[int]:
    request = EmbeddingSearchRequest(
        query_embedding=Embedding(query), max_results=count, filter=where
    )
    return [int(match.embedding_id) for match in store.search(request).matches]


@pytest.mark.parametrize("kind", ["memory", "sqlite", "sqlite reopened"])
def test_searches_over_many_close_rows_answer_as_an_exact_search(kind: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    rows = _close_rows(rng)
    store = _store(kind, tmp_path)
    store.add_all(
        rows,
        [TextSegment(str(n), {"third": n % 3, "fiftieth": n % 50}) for n in range(ROWS)],
        ids=[str(n) for n in range(ROWS)],
    )
    if kind == "sqlite reopened":  # the codes read with the vectors from the file beside it
        store.close()
        store = SqliteEmbeddingStore(tmp_path / "c.db")
    alive = list(range(ROWS))
    passing: dict[str | None, Callable[[int], bool]] = {
        None: lambda n: True,
        "third": lambda n: n % 3 == 1,  # a third of the rows: scanned with the rest
        "fiftieth": lambda n: n % 50 == 4,  # too few rows for codes: floats
        "not fiftieth": lambda n: n % 50 != 4,  # most rows
    }
    filters: dict[str | None, Filter | None] = {
        None: None,
        "third": key("third").eq(1),
        "fiftieth": key("fiftieth").eq(4),
        "not fiftieth": key("fiftieth").ne(4),
    }

    def check(round_: int) -> None:
        for name, condition in filters.items():
            for n in range(3):  # the first scan reads floats, the next ones codes
                query = rows[(97 * n + round_) % ROWS] + 0.003 * rng.normal(size=DIMENSION)
                chosen = [a for a in alive if passing[name](a)]
                assert _found(store, query, 7, condition) == _exact(rows, chosen, query, 7), (
                    name,
                    n,
                )

    check(0)
    # Many rows asked for (the count-th best looked for among all rows, not a sample first).
    query = rows[5] + 0.003 * rng.normal(size=DIMENSION)
    for _ in range(2):
        chosen = [n for n in alive if n % 50 != 4]
        assert _found(store, query, 100, filters["not fiftieth"]) == _exact(
            rows, chosen, query, 100
        )
    # Asking for more rows than pass: every one, best first.
    for _ in range(2):
        request = EmbeddingSearchRequest(
            query_embedding=Embedding(rows[3]), max_results=ROWS, filter=filters["not fiftieth"]
        )
        matches = store.search(request).matches
        assert sorted(int(m.embedding_id) for m in matches) == [n for n in alive if n % 50 != 4]
        scores = [m.score for m in matches]
        assert scores == sorted(scores, reverse=True)
    # Rows removed (codes moved with them) and added (coded at the next scan).
    gone = [int(n) for n in rng.choice(ROWS, size=900, replace=False)]
    store.remove_all([str(n) for n in gone])
    alive = sorted(set(alive) - set(gone))
    check(1)
    more = rows[:500] + 0.03 * rng.normal(size=(500, DIMENSION))
    rows = np.vstack([rows, more])
    store.add_all(
        more,
        [
            TextSegment(str(n), {"third": n % 3, "fiftieth": n % 50})
            for n in range(ROWS, ROWS + 500)
        ],
        ids=[str(n) for n in range(ROWS, ROWS + 500)],
    )
    store.remove_all([str(ROWS + 499)])  # a row not coded yet
    alive += list(range(ROWS, ROWS + 499))
    check(2)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_many_filters_each_passing_many_rows_are_answered_exactly(
    kind: str, tmp_path: Path
) -> None:
    """More filters than an index keeps copies for: their codes are copied until the budget is
    spent, then gathered at each search."""
    rng = np.random.default_rng(5)
    rows = rng.normal(size=(5 * ROWS, DIMENSION))
    store = _store(kind, tmp_path)
    store.add_all(
        rows,
        [TextSegment(str(n), {"n": n, "fifth": n % 5}) for n in range(len(rows))],
        ids=[str(n) for n in range(len(rows))],
    )
    for rest in range(40):
        condition = key("fifth").eq(rest % 5) & key("n").gte(rest)
        chosen = [n for n in range(len(rows)) if n % 5 == rest % 5 and n >= rest]
        for _ in range(2):
            query = rng.normal(size=DIMENSION)
            assert _found(store, query, 5, condition) == _exact(rows, chosen, query, 5)


def test_a_scan_on_two_threads_answers_as_an_exact_search() -> None:
    """From 16,384 rows the coded scan runs on two threads: the same answers."""
    rng = np.random.default_rng(11)
    rows = _close_rows(rng, 20_000)
    store = InMemoryEmbeddingStore()
    store.add_all(rows.astype(np.float32), ids=[str(n) for n in range(len(rows))])
    alive = list(range(len(rows)))
    for n in range(4):  # (codes are made from the second scan on)
        query = rows[n * 997] + 0.001 * rng.normal(size=DIMENSION)
        assert _found(store, query, 10, None) == _exact(rows, alive, query, 10)
