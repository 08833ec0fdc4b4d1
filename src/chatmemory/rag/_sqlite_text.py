"""How SQLite's FTS5 counts a word's rows, for `_selective` (which words a full-text search ranks
by): from an `fts5vocab` table of the index (per connection, in the `temp` schema: nothing is
added to the file)."""

from __future__ import annotations

import sqlite3

from ._selective import ROWS
from ._selective import selective as _selective

__all__ = ["ROWS", "selective"]


def selective(
    db: sqlite3.Connection,
    fts: str,
    terms: list[str],
    known: dict[str, tuple[int, int]],
    size: int,
    rows: int = ROWS,
) -> list[str]:
    """The rarest of `terms` (distinct, FTS5 tokens) in the index `fts` whose document counts
    add up to at most `rows`, rarest first (see `_selective.selective`; counting reads a word's
    whole posting list, one seek per word)."""

    def count(words: list[str]) -> dict[str, int]:
        vocab = f"{fts}_vocab"
        db.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{vocab} USING fts5vocab(main, {fts}, 'row')"
        )
        found: dict[str, int] = {}
        for word in words:
            docs = db.execute(f"SELECT doc FROM temp.{vocab} WHERE term = ?", (word,))
            number = next((int(doc) for (doc,) in docs), 0)
            # FTS5 folds diacritics ("café" is "cafe"): such a word counts as rare
            if number > 0 or not word.isascii():
                found[word] = number
        return found

    return _selective(terms, known, size, count, rows)
