"""SQLite's full-text search ranks by the words worth ranking: a word in more rows than a search
may rank (2,000) costs the whole table and weighs nearly nothing in BM25, so it is left out."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from chatmemory.rag import Embedding, EmbeddingSearchRequest, SqliteEmbeddingStore, TextSegment


def test_words_found_everywhere_are_not_ranked_by_and_rare_ones_are(tmp_path: Path) -> None:
    with SqliteEmbeddingStore(tmp_path / "v.db") as store:
        count = 2_100
        texts = [f"common chatter number {i}" for i in range(count)]
        texts += ["common words and a zebra", "un café au lait"]
        vectors = [Embedding((1.0, float(i % 7), 0.5)) for i in range(len(texts))]
        ids = store.add_all(vectors, [TextSegment(t) for t in texts])
        [found] = store.search_text("common zebra", max_results=5)
        assert found.embedding_id == ids[count]  # "common" is in every row: only "zebra" ranks
        assert store.search_text("common", max_results=5) == []  # nothing worth ranking by
        assert store.search_text("chatter 7", max_results=1)[0].embedding_id == ids[7]
        assert store.search_text("café", max_results=1)[0].embedding_id == ids[-1]  # folded
        assert store.search_text("absent", max_results=1) == []
        hybrid = EmbeddingSearchRequest(
            query_embedding=Embedding((1.0, 0.0, 0.5)), max_results=1, query="common"
        )
        assert len(store.search(hybrid).matches) == 1  # the vectors answer alone


def test_word_counts_are_read_again_once_the_table_grew(tmp_path: Path) -> None:
    with SqliteEmbeddingStore(tmp_path / "v.db") as store:
        store.add_all([Embedding((1.0, 0.0))], [TextSegment("a zebra")])
        assert len(store.search_text("zebra", max_results=1)) == 1  # rare: ranked by
        more = [TextSegment(f"zebra crossing {i}") for i in range(2_100)]
        store.add_all([Embedding((1.0, float(i))) for i in range(len(more))], more)
        assert store.search_text("zebra", max_results=1) == []  # common now: counted again


def test_a_bulk_write_indexes_its_text_and_other_writers_still_index_theirs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v.db"
    with SqliteEmbeddingStore(path) as store:
        texts = [f"note {i}" for i in range(40)] + ["a quokka", None]  # bulk: 32 rows or more
        segments = [None if t is None else TextSegment(t) for t in texts]
        vectors = np.ones((len(texts), 3))
        ids = store.add_all(vectors[:-1], segments[:-1])  # type: ignore[arg-type]
        store.add_all(vectors[-1:], ids=["bare"])  # no segment: nothing to index
        [found] = store.search_text("quokka", max_results=3)
        assert found.embedding_id == ids[40]
        assert store.search_text("note 7", max_results=1)[0].embedding_id == ids[7]
        # Another program's insert, while no bulk write is under way, is indexed by the trigger.
        with sqlite3.connect(path) as other:
            other.execute(
                "INSERT INTO embeddings (id, vector, text) VALUES ('x', ?, 'a wombat')",
                (np.ones(3, dtype=np.float32).tobytes(),),
            )
        assert [m.embedding_id for m in store.search_text("wombat")] == ["x"]


def test_a_file_of_an_earlier_version_gets_the_bulk_aware_trigger(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    SqliteEmbeddingStore(path).close()
    with sqlite3.connect(path) as old:  # the trigger as earlier versions made it
        old.execute("DROP TRIGGER embeddings_ai")
        old.execute(
            "CREATE TRIGGER embeddings_ai AFTER INSERT ON embeddings WHEN new.text IS NOT NULL "
            "BEGIN INSERT INTO embeddings_fts(rowid, text) VALUES (new.rowid, new.text); END"
        )
    with SqliteEmbeddingStore(path) as store:
        ids = store.add_all(np.ones((40, 2)), [TextSegment(f"row {i}") for i in range(40)])
        assert [m.embedding_id for m in store.search_text("row 3", max_results=1)] == [ids[3]]
    with sqlite3.connect(path) as check:
        query = "SELECT sql FROM sqlite_master WHERE name = 'embeddings_ai'"
        (sql,) = check.execute(query).fetchone()
        assert "bulk" in sql
