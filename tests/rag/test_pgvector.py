"""`PgVectorEmbeddingStore` on a real PostgreSQL with pgvector (a private server from
`pgserver`): vectors, the filters' one meaning, full text, and its errors."""

from __future__ import annotations

import math
import sys
import uuid
from collections.abc import Iterator

import pytest

from chatmemory import ConfigurationError, StoreError, UserMessage
from chatmemory.rag import (
    Embedding,
    EmbeddingSearchRequest,
    Filter,
    HybridContentRetriever,
    Query,
    QueryMetadata,
    TextSegment,
    cosine_similarity,
    key,
    relevance_score,
)
from chatmemory.rag.pgvector import PgVectorEmbeddingStore
from tests.conftest import server_unavailable

from .doubles import DIMENSION, WordsModel
from .pgvector_server import pgvector_dsn


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    try:
        with pgvector_dsn() as found:
            yield found
    except RuntimeError as error:
        server_unavailable("PostgreSQL with pgvector", str(error))


@pytest.fixture
def store(dsn: str) -> Iterator[PgVectorEmbeddingStore]:
    table = f"emb_{uuid.uuid4().hex[:12]}"
    with PgVectorEmbeddingStore(dsn, dimension=DIMENSION, table=table) as opened:
        yield opened
        opened.remove_all()


def vec(*values: float) -> Embedding:
    padded = list(values) + [0.0] * (DIMENSION - len(values))
    return Embedding(tuple(padded))


def test_search_finds_the_nearest_best_first_with_langchain4j_scores(
    store: PgVectorEmbeddingStore,
) -> None:
    ids = store.add_all(
        [vec(1, 0), vec(1, 1), vec(0, 1), vec(-1, 0)],
        [
            TextSegment("east"),
            TextSegment("north-east", {"n": 1}),
            TextSegment("north"),
            TextSegment("west"),
        ],
    )
    assert store.count() == 4
    query = vec(1, 0.1)
    found = store.search(EmbeddingSearchRequest(query_embedding=query, max_results=3)).matches
    assert [m.embedding_id for m in found] == [ids[0], ids[1], ids[2]]
    for match in found:
        assert match.embedding is not None
        assert match.score == pytest.approx(
            relevance_score(cosine_similarity(query, match.embedding)), abs=1e-6
        )
    assert found[1].embedded == TextSegment("north-east", {"n": 1})
    high = store.search(
        EmbeddingSearchRequest(query_embedding=query, max_results=4, min_score=0.85)
    )
    assert [m.embedding_id for m in high.matches] == [ids[0], ids[1]]


def test_ids_given_replace_and_removal_by_id_filter_or_all(store: PgVectorEmbeddingStore) -> None:
    assert store.add(vec(1), TextSegment("a", {"k": "x"}), id="one") == "one"
    store.add(vec(0, 1), TextSegment("b", {"k": "y"}), id="one")  # replaces
    assert store.count() == 1
    only = store.search(EmbeddingSearchRequest(query_embedding=vec(0, 1))).matches
    assert only[0].embedded == TextSegment("b", {"k": "y"})
    bare = store.add(vec(0, 0, 1))  # an embedding without a segment
    match = store.search(EmbeddingSearchRequest(query_embedding=vec(0, 0, 1))).matches[0]
    assert (match.embedding_id, match.embedded) == (bare, None)
    store.add_all([vec(1, 2), vec(2, 1)], [TextSegment("c", {"k": "z"}), TextSegment("d")])
    store.remove(bare)
    store.remove_all(["one"])
    assert store.count() == 2
    store.remove_all(filter=key("k").eq("z"))
    assert store.count() == 1
    store.remove_all()
    assert store.count() == 0
    assert store.add_all([]) == []


METADATA = [
    {"year": 2020, "lang": "en", "draft": False},
    {"year": 2021.5, "lang": "fr"},
    {"year": "2022", "lang": "en", "draft": True},
    {"lang": "de", "draft": False},
    {"year": 2023, "lang": "en"},
    {"year": True, "lang": "Éa"},
    {},
]

FILTERS: list[Filter] = [
    key("lang").eq("en"),
    key("lang").ne("en"),
    key("year").gt(2020),
    key("year").gte(2020),
    key("year").lt(2022),
    key("year").lte(2021.5),
    key("year").eq(True),
    key("year").gt(True),
    key("lang").gt("en"),
    key("lang").lte("fr"),
    key("lang").in_(["en", "de"]),
    key("lang").not_in(["en", "de"]),
    key("year").in_([2020, "2022"]),
    key("year").eq(2020.0),
    key("draft").eq(False),
    key("draft").ne(True),
    ~key("draft").eq(True),
    key("lang").eq("en") & key("year").gte(2021),
    key("lang").eq("fr") | key("draft").eq(True),
    ~(key("year").lt(2022) | key("lang").eq("de")),
]


@pytest.mark.parametrize("condition", FILTERS, ids=repr)
def test_filters_mean_in_sql_what_they_mean_in_python(
    store: PgVectorEmbeddingStore, condition: Filter
) -> None:
    ids = store.add_all(
        [vec(1, i) for i in range(len(METADATA))],
        [TextSegment(f"segment {i}", m) for i, m in enumerate(METADATA)],
    )
    expected = {i for i, m in zip(ids, METADATA, strict=True) if condition.test(m)}
    request = EmbeddingSearchRequest(query_embedding=vec(1), max_results=50, filter=condition)
    assert {m.embedding_id for m in store.search(request).matches} == expected
    words = store.search_text("segment", max_results=50, filter=condition)
    assert {m.embedding_id for m in words} == expected


def test_full_text_ranks_by_words_and_hybrid_retrieval_uses_both(
    store: PgVectorEmbeddingStore,
) -> None:
    model = WordsModel()
    texts = [
        "PostgreSQL stores vectors with the pgvector extension",
        "Cats and more cats sleep most of the day",
        "Vectors and cats: an unlikely pair",
    ]
    store.add_all(model.embed_all(texts), [TextSegment(t) for t in texts], ids=["a", "b", "c"])
    found = store.search_text("vectors stored in postgresql", max_results=5)
    assert [m.embedded.text for m in found if m.embedded] == [texts[0], texts[2]]
    assert found[0].score > found[1].score
    assert store.search_text("", max_results=5) == []
    assert store.search_text("the of", max_results=5) == []  # only stop words
    retriever = HybridContentRetriever(store, model, max_results=2)
    query = Query("cats and vectors", QueryMetadata(user_message=UserMessage("cats and vectors")))
    assert [c.segment.text for c in retriever.retrieve(query)] == [texts[1], texts[2]]


def test_dimensions_and_settings_are_checked(dsn: str, store: PgVectorEmbeddingStore) -> None:
    with pytest.raises(ConfigurationError, match=f"dimension {DIMENSION}, got one of 3"):
        store.add(Embedding((1.0, 2.0, 3.0)))
    with pytest.raises(ConfigurationError, match="dimension 64, got one of 3: use the"):
        store.search(EmbeddingSearchRequest(query_embedding=Embedding((1.0, 0.0, 0.0))))
    with pytest.raises(
        ConfigurationError, match=f"holds vector\\({DIMENSION}\\), not vector\\(8\\)"
    ):
        PgVectorEmbeddingStore(dsn, dimension=8, table=store.table)
    with pytest.raises(ConfigurationError, match="2 embeddings but 1 segments"):
        store.add_all([vec(1), vec(2)], [TextSegment("x")])
    with pytest.raises(ConfigurationError, match="2 embeddings but 1 ids"):
        store.add_all([vec(1), vec(2)], ids=["x"])
    with pytest.raises(ConfigurationError, match="ids are non-empty str"):
        store.add(vec(1), id="")
    with pytest.raises(ConfigurationError, match="ids or a filter, not both"):
        store.remove_all(["x"], filter=key("a").eq(1))
    with pytest.raises(ConfigurationError, match="a list of ids, got the str"):
        store.remove_all("abc")
    with pytest.raises(ConfigurationError, match="`filter` must be a Filter"):
        store.remove_all(filter="lang = 'en'")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="search_text takes a str"):
        store.search_text(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="expected an Embedding"):
        store.add([1.0])  # type: ignore[arg-type]
    for bad in ({"table": "drop table x; --"}, {"table": "a.b.c"}):
        with pytest.raises(ConfigurationError, match="`table` is a SQL name"):
            PgVectorEmbeddingStore(dsn, dimension=4, **bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="`dimension` must be a positive int"):
        PgVectorEmbeddingStore(dsn, dimension=0)
    with pytest.raises(ConfigurationError, match="text-search configuration"):
        PgVectorEmbeddingStore(dsn, dimension=4, text_search_config="english; drop")
    with pytest.raises(ConfigurationError, match="`ef_search` must be a positive int"):
        PgVectorEmbeddingStore(dsn, dimension=4, ef_search=0)


def test_a_schema_qualified_table_and_a_table_that_must_exist(dsn: str) -> None:
    schema = f"s_{uuid.uuid4().hex[:8]}"
    with PgVectorEmbeddingStore(dsn, dimension=2, table=f"{schema}.items") as store:
        assert repr(store) == f"PgVectorEmbeddingStore(table='{schema}.items', dimension=2)"
        store.add(Embedding((1.0, 0.0)), TextSegment("x"))
        assert store.count() == 1
        with store._pool.connection() as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    with pytest.raises(StoreError, match="does not exist; create it with create=True"):
        PgVectorEmbeddingStore(dsn, dimension=2, table="never_made", create=False)


def test_an_unreachable_server_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="could not open"):
        PgVectorEmbeddingStore("postgresql://nobody@127.0.0.1:1/none", dimension=2, timeout=0.5)


def test_a_failing_statement_is_a_store_error(store: PgVectorEmbeddingStore) -> None:
    store.add(vec(1), TextSegment("x"))
    with store._pool.connection() as conn:
        conn.execute(f"ALTER TABLE {store.table} RENAME TO {store.table}_gone")
    try:
        with pytest.raises(StoreError, match=f"could not count in {store.table}"):
            store.count()
    finally:
        with store._pool.connection() as conn:
            conn.execute(f"ALTER TABLE {store.table}_gone RENAME TO {store.table}")
    assert math.isclose(store.count(), 1)


class Everything(Filter):
    """A filter of the user's own: it can be tested in Python, not translated to SQL."""

    def test(self, metadata: object) -> bool:
        return True


def test_a_filter_the_store_cannot_translate_is_refused(store: PgVectorEmbeddingStore) -> None:
    request = EmbeddingSearchRequest(query_embedding=vec(1), filter=Everything())
    with pytest.raises(ConfigurationError, match="is not a filter this store can translate"):
        store.search(request)


def test_without_the_extra_the_store_names_the_install_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pgvector.psycopg", None)
    with pytest.raises(ImportError, match=r"pip install 'chatmemory\[pgvector\]'"):
        PgVectorEmbeddingStore("postgresql://unused", dimension=2)
