"""SQLite's full-text search ranks by the words worth ranking: a word in more rows than a search
may rank (2,000) costs the whole table and weighs nearly nothing in BM25, so it is left out."""

from __future__ import annotations

from pathlib import Path

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
