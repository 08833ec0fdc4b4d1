"""Which of a query's words SQLite's FTS5 ranks by: the rarest, up to `ROWS` matching rows.

FTS5 scores every row that holds any query word before it can sort them, so a word found in
most rows ("what", "my", "about") makes a full-text search cost the whole table (70 ms per
10,000 rows). Such words weigh almost nothing in BM25 (an idf near zero) but cost the most;
`selective` keeps the rarest words whose rows add up to at most `ROWS` (at least one word when
the rarest is rare enough) and drops the rest, read from an `fts5vocab` table of the index
(per connection, in the `temp` schema: nothing is added to the file). A query left with no
word is answered by the vectors alone in a hybrid search.
"""

from __future__ import annotations

import sqlite3

__all__ = ["ROWS", "selective"]

ROWS = 2_000
"""The matching rows a full-text search may rank (about 7 µs each)."""


def selective(
    db: sqlite3.Connection,
    fts: str,
    terms: list[str],
    known: dict[str, tuple[int, int]],
    size: int,
    rows: int = ROWS,
) -> list[str]:
    """The rarest of `terms` (distinct, FTS5 tokens) in the index `fts` whose document counts
    add up to at most `rows`, rarest first. Counting reads a word's whole posting list, so the
    counts are kept in `known` (word: count, and the table's `size` then) and read again once
    the table grew by a quarter (a word absent then is looked up every time: a cheap seek)."""
    vocab = f"{fts}_vocab"
    counts: dict[str, int] = {}
    for term in terms:
        count, then = known.get(term, (-1, -1))
        if count <= 0 or size > then * 1.25 + 100:  # unknown, absent, or the table grew
            db.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{vocab} "
                f"USING fts5vocab(main, {fts}, 'row')"
            )
            found = db.execute(f"SELECT doc FROM temp.{vocab} WHERE term = ?", (term,))
            count = next((int(doc) for (doc,) in found), 0)
            if len(known) > 100_000:
                known.clear()
            known[term] = (count, size)
        if count > 0:
            counts[term] = count
    for term in terms:  # FTS5 folds diacritics ("café" is "cafe"): such a word counts as rare
        if not term.isascii():
            counts.setdefault(term, 0)
    kept: list[str] = []
    total = 0
    for term in sorted((t for t in terms if t in counts), key=counts.__getitem__):
        total += counts[term]
        if total > rows:
            break
        kept.append(term)
    return kept
