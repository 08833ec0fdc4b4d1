"""Which of a query's words a full-text search ranks by: the rarest, up to `ROWS` matching rows.

A full-text search scores every row that holds any query word before it can sort them, so a
word found in most rows ("what", "my", "about") makes it cost the whole table (SQLite's FTS5:
70 ms per 10,000 rows; PostgreSQL's `ts_rank_cd`: a read of every matching row, vectors
included). Such words weigh almost nothing in BM25 (an idf near zero) but cost the most;
`selective` keeps the rarest words whose rows add up to at most `ROWS` (at least one word when
the rarest is rare enough) and drops the rest. A query left with no word is answered by the
vectors alone in a hybrid search. The stores count a word's rows in their own index (SQLite's
`fts5vocab`, PostgreSQL's GIN index); the counts are kept per store, see `selective`.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ROWS", "selective"]

ROWS = 2_000
"""The matching rows a full-text search may rank."""


def selective(
    terms: list[str],
    known: dict[str, tuple[int, int]],
    size: int,
    count: Callable[[list[str]], dict[str, int]],
    rows: int = ROWS,
) -> list[str]:
    """The rarest of `terms` (distinct, as the store's index holds them) whose row counts add up
    to at most `rows`, rarest first. `count(words)` gives the rows holding each of `words` (a
    word it leaves out is absent; a count above `rows` may be cut to `rows + 1`); counting reads
    the index, so the counts are kept in `known` (word: count, and the table's `size` then) and
    read again once the table grew by a quarter (a word absent or counted 0 then is counted
    every time: a cheap seek)."""
    numbers = {term: known.get(term, (-1, -1)) for term in terms}
    stale = [  # unknown, absent, or the table grew since
        term for term, (number, then) in numbers.items() if number <= 0 or size > then * 1.25 + 100
    ]
    if stale:
        found = count(stale)
        if len(known) > 100_000:
            known.clear()
        for term in stale:
            numbers[term] = known[term] = (found.get(term, -1), size)
    counts = {term: number for term, (number, _) in numbers.items() if number >= 0}
    kept: list[str] = []
    total = 0
    for term in sorted(counts, key=counts.__getitem__):
        total += counts[term]
        if total > rows:
            break
        kept.append(term)
    return kept
