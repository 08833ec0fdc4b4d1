"""`PgVectorEmbeddingStore` on a real PostgreSQL with pgvector (a private server from
`pgserver`): vectors, the filters' one meaning, full text, and its errors."""

from __future__ import annotations

import math
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from chatmemory import ConfigurationError, StoreError
from chatmemory.rag import (
    Embedding,
    EmbeddingSearchRequest,
    Filter,
    TextSegment,
    key,
)
from chatmemory.rag.pgvector import PgVectorEmbeddingStore
from tests.conftest import server_unavailable

from .doubles import DIMENSION
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


@contextmanager
def loaded(
    dsn: str, vectors: np.ndarray, segments: Sequence[TextSegment], *, approximate: bool = False
) -> Iterator[tuple[PgVectorEmbeddingStore, list[str]]]:
    """A store holding these rows (`add_all` in batches) and their ids; its HNSW index is built
    after the load, as a bulk import would (inserting into the index row by row takes minutes
    here): dropped, then made again by opening the store anew. The table goes at the end."""
    table = f"big_{uuid.uuid4().hex[:12]}"
    dimension = int(vectors.shape[1])
    ids: list[str] = []
    with PgVectorEmbeddingStore(dsn, dimension=dimension, table=table) as store:
        with store._pool.connection() as conn:
            conn.execute(f"DROP INDEX {table}_hnsw")
        for first in range(0, len(vectors), 10_000):
            chunk = vectors[first : first + 10_000]
            ids += store.add_all(
                [Embedding(tuple(v.tolist())) for v in chunk], segments[first : first + 10_000]
            )
    with PgVectorEmbeddingStore(
        dsn, dimension=dimension, table=table, approximate_filters=approximate
    ) as store:
        try:
            with store._pool.connection() as conn:
                conn.execute(f"ANALYZE {table}")
            yield store, ids
        finally:
            with store._pool.connection() as conn:
                conn.execute(f"DROP TABLE {table}")


@pytest.mark.slow
def test_a_filtered_search_over_100_000_rows_is_exact(dsn: str) -> None:
    """5 rows pass among 100,000 (the 99,995 others nearer): all 5 come back, in order; and a
    filter passing a tenth of the rows gives numpy's brute-force top 10, in order."""
    rng = np.random.default_rng(11)
    size = 100_000
    near = np.column_stack([np.ones(size - 5), rng.uniform(0, 0.5, size=(size - 5, 3))])
    far = np.array([[1.0, 1 + 0.5 * i, 0.2, 0.0] for i in range(5)])
    vectors = np.vstack([near, far]).astype(np.float32)
    segments = [TextSegment(f"bob {n}", {"user": "bob", "tenth": n % 10}) for n in range(size - 5)]
    segments += [TextSegment(f"ann {i}", {"user": "ann", "tenth": 10}) for i in range(5)]
    with loaded(dsn, vectors, segments) as (store, ids):
        query = Embedding((1.0, 0.0, 0.0, 0.0))
        for top in (5, 10):
            request = EmbeddingSearchRequest(
                query_embedding=query, max_results=top, filter=key("user").eq("ann")
            )
            assert [m.embedding_id for m in store.search(request).matches] == ids[-5:]
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        passing = np.arange(size) % 10 == 3
        passing[-5:] = False
        for probe in rng.normal(size=(3, 4)):
            scores = np.where(passing, unit @ (probe / np.linalg.norm(probe)), -np.inf)
            best = np.argsort(-scores, kind="stable")[:10]
            request = EmbeddingSearchRequest(
                query_embedding=Embedding(tuple(probe.tolist())),
                max_results=10,
                filter=key("tenth").eq(3),
            )
            assert [m.embedding_id for m in store.search(request).matches] == [ids[n] for n in best]


def explain(store: PgVectorEmbeddingStore, statement: object, params: list[object]) -> str:
    """PostgreSQL's plan for one of the store's statements, as text."""
    from psycopg import sql

    with store._pool.connection() as conn:
        rows = conn.execute(sql.SQL("EXPLAIN ") + statement, params).fetchall()  # type: ignore[operator]
    return "\n".join(row[0] for row in rows)


def test_finding_by_metadata_uses_the_metadata_index(dsn: str) -> None:
    """On 20,000 rows, `select`, `remove_all` and a filtered search by a user's id read the GIN
    index on the metadata (a Bitmap Index Scan), not the whole table; `in_` too. Unfiltered
    search reads the HNSW index."""
    size = 20_000
    vectors = np.random.default_rng(5).normal(size=(size, 4)).astype(np.float32)
    users = ["ann" if n % 4_000 == 0 else f"user {n % 997}" for n in range(size)]
    segments = [TextSegment(f"row {n}", {"user_id": u, "n": n}) for n, u in enumerate(users)]
    with loaded(dsn, vectors, segments) as (store, ids):
        ann = key("user_id").eq("ann")
        query = np.asarray([1, 0, 0, 0], dtype=np.float32)
        index = f"Bitmap Index Scan on {store.table}_metadata"
        for statement, params in (
            store._sql.select_where(ann),
            store._sql.delete_where(ann),
            store._sql.nearest(query, ann, 10),
            store._sql.nearest(query, ann & key("n").lt(10_000), 10),
            store._sql.select_where(key("user_id").in_(["ann", "user 3"])),
        ):
            assert index in explain(store, statement, params)
        unfiltered = explain(store, *store._sql.nearest(query, None, 10))
        assert f"Index Scan using {store.table}_hnsw" in unfiltered
        expected = {ids[n] for n in range(0, size, 4_000)}
        assert set(store.select(ann)) == expected
        request = EmbeddingSearchRequest(query_embedding=Embedding((1, 0, 0, 0)), filter=ann)
        assert {m.embedding_id for m in store.search(request).matches} <= expected
        store.remove_all(ann)
        assert store.count() == size - 5


def test_approximate_filters_ask_the_index_and_fall_back_to_exact(dsn: str) -> None:
    """With `approximate_filters`, a filter passing most of 20,000 rows is answered by the HNSW
    index (its plan; the unfiltered search's order when every candidate passes), `min_score`
    cutting its tail; a filter passing 5 rows behind nearer ones still finds all 5, in order
    (the exact query, as fewer than `max_results` came back from the index)."""
    rng = np.random.default_rng(3)
    size = 20_000
    near = np.column_stack([np.ones(size - 5), rng.uniform(0, 0.5, size=(size - 5, 3))])
    far = np.array([[1.0, 1 + 0.5 * i, 0.2, 0.0] for i in range(5)])
    vectors = np.vstack([near, far]).astype(np.float32)
    segments = [TextSegment(f"bob {n}", {"user": "bob"}) for n in range(size - 5)]
    segments += [TextSegment(f"ann {i}", {"user": "ann"}) for i in range(5)]
    with loaded(dsn, vectors, segments, approximate=True) as (store, ids):
        bob, ann = key("user").eq("bob"), key("user").eq("ann")
        query = Embedding((1.0, 0.1, 0.1, 0.0))
        plan_text = explain(store, *store._sql.nearest_indexed(query.array, bob, 10, 40))
        assert f"Index Scan using {store.table}_hnsw" in plan_text
        assert "Bitmap" not in plan_text
        assert "Seq Scan" not in plan_text

        def found(filter: Filter | None, top: int, min_score: float = 0.0) -> list[str]:
            request = EmbeddingSearchRequest(
                query_embedding=query, max_results=top, min_score=min_score, filter=filter
            )
            return [m.embedding_id for m in store.search(request).matches]

        unfiltered = found(None, 10)  # the HNSW index's order; all 10 are bob's
        assert found(bob, 10) == unfiltered
        assert found(ann, 5) == ids[-5:]
        assert found(ann, 10) == ids[-5:]
        scores = [
            m.score
            for m in store.search(
                EmbeddingSearchRequest(query_embedding=query, max_results=10, filter=bob)
            ).matches
        ]
        cut = (scores[4] + scores[5]) / 2
        assert found(bob, 10, min_score=cut) == unfiltered[:5]
        assert found(bob, 3) == unfiltered[:3]


def test_a_search_for_more_rows_than_ef_search_returns_them_all(dsn: str) -> None:
    """pgvector returns no more rows than its HNSW scan keeps (`hnsw.ef_search`): a search for
    more raises it for that search, on every connection of the pool (unfiltered, and with
    `approximate_filters`), and a smaller search after it is answered as before."""
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(300, 4)).astype(np.float32)
    segments = [TextSegment(f"row {n}", {"user": "bob"}) for n in range(300)]
    for approximate in (False, True):
        with loaded(dsn, vectors, segments, approximate=approximate) as (store, ids):
            query = Embedding(tuple(vectors[0].tolist()))
            for top, filter in ((120, None), (120, key("user").eq("bob")), (5, None)):
                request = EmbeddingSearchRequest(
                    query_embedding=query, max_results=top, filter=filter
                )
                found = [m.embedding_id for m in store.search(request).matches]
                assert len(set(found)) == top, (approximate, top, filter)
                assert found[0] == ids[0]
                cosines = vectors @ vectors[0] / np.linalg.norm(vectors, axis=1)
                cosines /= np.linalg.norm(vectors[0])
                best = {ids[n] for n in np.argsort(-cosines)[:top]}
                assert len(best & set(found)) >= 0.9 * top  # approximate: nearly the best


def test_a_hybrid_search_ranks_on_two_connections_as_on_one(dsn: str) -> None:
    """A hybrid request's two rankings are computed at once on two connections of the pool;
    fused, they are what the vector search and the full-text search give one after the other
    (as every store fuses them, `fused_search`), with or without a filter, on a pool of one
    connection too (then one after the other)."""
    from chatmemory.rag._hybrid import fused_search

    rng = np.random.default_rng(9)
    words = ["tea", "bike", "code", "dentist", "passport", "flight", "garden", "piano"]
    table = f"hyb_{uuid.uuid4().hex[:12]}"
    texts = [f"{words[n % 8]} {words[(n * 3) % 8]} note {n}" for n in range(400)]
    vectors = rng.normal(size=(400, DIMENSION)).astype(np.float32)
    segments = [TextSegment(t, {"user": f"u{n % 2}"}) for n, t in enumerate(texts)]
    for size in (4, 1):
        with PgVectorEmbeddingStore(
            dsn,
            dimension=DIMENSION,
            table=table,
            min_size=min(size, 2),
            max_size=size,
            approximate_filters=size == 1,
        ) as store:
            if size == 4:
                store.add_all(vectors, segments)
            for filter in (None, key("user").eq("u1")):
                request = EmbeddingSearchRequest(
                    query_embedding=Embedding(tuple(vectors[7].tolist())),
                    max_results=12,
                    filter=filter,
                    query="piano code 17",
                )
                ours = [(m.embedding_id, m.score) for m in store.search(request).matches]
                one_by_one = [
                    (m.embedding_id, m.score) for m in fused_search(store, request).matches
                ]
                assert ours == one_by_one
                assert len(ours) == 12
                if filter is not None:
                    kept = [m.embedded for m in store.search(request).matches]
                    assert all(s is not None and s.metadata["user"] == "u1" for s in kept)
            if size == 1:
                store.remove_all()


def test_full_text_ranks_by_the_rare_words_of_a_query(dsn: str) -> None:
    """A word in more rows than a search may rank (2,000) is left out of the ranking (it would
    cost a read of every row holding it); the rare words rank, and a query of common words
    alone finds nothing by its words: a hybrid request is then answered by the vectors."""
    count = 2_100
    texts = [f"common chatter number {i}" for i in range(count)] + ["common words and a zebra"]
    vectors = np.column_stack([np.ones(len(texts)), np.arange(len(texts)) % 7]).astype(np.float32)
    with loaded(dsn, vectors, [TextSegment(t, {"n": n}) for n, t in enumerate(texts)]) as loaded_:
        store, ids = loaded_
        [found] = store.search_text("common zebra", max_results=5)
        assert found.embedding_id == ids[count]  # "common" is in every row: only "zebra" ranks
        assert store.search_text("common", max_results=5) == []
        assert store.search_text("chatter 7", max_results=1)[0].embedding_id == ids[7]
        assert store.search_text("7 absent", max_results=3, filter=key("n").ne(7)) == []
        hybrid = EmbeddingSearchRequest(
            query_embedding=Embedding((1.0, 0.0)), max_results=1, query="common chatter"
        )
        assert len(store.search(hybrid).matches) == 1  # the vectors answer alone


def test_word_counts_are_read_again_once_the_table_grew(store: PgVectorEmbeddingStore) -> None:
    """A word's rows are counted once per store and counted again when the statistics say the
    table grew by a quarter; a word absent is looked up every time."""
    assert store.search_text("zebra", max_results=1) == []  # absent
    store.add(vec(1), TextSegment("a zebra"))
    assert len(store.search_text("zebra", max_results=1)) == 1  # rare: ranked by
    more = [TextSegment(f"zebra crossing {i}") for i in range(2_100)]
    store.add_all([vec(1, i) for i in range(len(more))], more)
    with store._pool.connection() as conn:
        conn.execute(f"ANALYZE {store.table}")
    assert store.search_text("zebra", max_results=1) == []  # common now: counted again
    assert len(store.search_text("zebra crossing 7", max_results=1)) == 1


def test_searches_are_planned_for_their_parameters(store: PgVectorEmbeddingStore) -> None:
    """A filtered search and a full-text search run unprepared, so that PostgreSQL plans each for
    its filter and words (a prepared statement may get one plan for any of them)."""
    store.add_all([vec(1, i) for i in range(3)], [TextSegment(f"row {i}") for i in range(3)])
    request = EmbeddingSearchRequest(query_embedding=vec(1), filter=key("n").eq(1))
    for n in range(8):  # psycopg prepares a statement from its fifth run
        store.search(request)
        store.search_text(f"row {n + 10}", filter=key("n").eq(1))  # a new word counted each time
        store.select(key("n").eq(1))
    with store._pool.connection() as conn:
        prepared = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
    assert not [
        s for (s,) in prepared if s.startswith("SELECT") and ("metadata" in s or "tsv" in s)
    ]


def test_a_table_made_before_the_metadata_index_gains_it(dsn: str) -> None:
    table = f"old_{uuid.uuid4().hex[:12]}"
    with (
        PgVectorEmbeddingStore(dsn, dimension=2, table=table) as store,
        store._pool.connection() as conn,
    ):
        conn.execute(f"DROP INDEX {table}_metadata")
    with (
        PgVectorEmbeddingStore(dsn, dimension=2, table=table) as store,
        store._pool.connection() as conn,
    ):
        found = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", [f"{table}_metadata"]
        ).fetchone()
        conn.execute(f"DROP TABLE {table}")
    assert found is not None
    assert "USING gin (metadata jsonb_path_ops)" in found[0]


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
    # Empty ids, remove_all's and search_text's arguments: the contract suite, on every store.
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
    with pytest.raises(ConfigurationError, match="`rebuild_index_from` must be a positive int"):
        PgVectorEmbeddingStore(dsn, dimension=4, rebuild_index_from=0)
    for flag in ("yes", 1, None):
        with pytest.raises(ConfigurationError, match="`approximate_filters` is True"):
            PgVectorEmbeddingStore(dsn, dimension=4, approximate_filters=flag)  # type: ignore[arg-type]


@pytest.mark.parametrize("schema", [False, True])
def test_a_bulk_load_is_copied_and_the_index_built_after_it(dsn: str, schema: bool) -> None:
    table = f"emb_{uuid.uuid4().hex[:12]}"
    if schema:
        table = f"s_{uuid.uuid4().hex[:8]}.{table}"
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(300, 4))
    with PgVectorEmbeddingStore(dsn, dimension=4, table=table, rebuild_index_from=200) as store:
        ids = [f"r{n}" for n in range(300)]
        segments = [TextSegment(f"row {n}", {"n": n, "big": 2**60 + n}) for n in range(300)]
        store.add_all(vectors[:100], segments[:100], ids=ids[:100])  # copied, index kept
        with store._pool.connection() as conn:
            (memory,) = conn.execute("SHOW maintenance_work_mem").fetchone()
        store.add_all(vectors, segments, ids=ids)  # 300 >= 200 and >= 100 held: rebuilt
        with store._pool.connection() as conn:  # raised for the build's transaction alone
            assert conn.execute("SHOW maintenance_work_mem").fetchone() == (memory,)
        store.add_all(vectors[:80], segments[:80], ids=["r0"] * 79 + ["r1"])  # the last r0 wins
        assert store.count() == 300
        assert store.select(key("n").eq(78)) == {"r0": segments[78], "r78": segments[78]}
        assert store.select(key("big").eq(2**60 + 299)) == {"r299": segments[299]}
        request = EmbeddingSearchRequest(query_embedding=Embedding(vectors[150]), max_results=1)
        assert [m.embedding_id for m in store.search(request).matches] == ["r150"]
        with store._pool.connection() as conn:
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT indexname FROM pg_indexes WHERE indexname LIKE %s",
                    [f"%{table.split('.')[-1]}_hnsw"],
                )
            ]
        assert len(names) == 1
        store.remove_all()


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


def test_the_cli_ingests_into_and_asks_pgvector(dsn: str, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from chatmemory._cli.app import cli

    (tmp_path / "refunds.md").write_text("Refunds take five business days.", encoding="utf-8")
    table = f"cli_{uuid.uuid4().hex[:10]}"
    options = ["--store", "postgres", "--postgres-dsn", dsn, "--table", table]
    runner = CliRunner(env={"OPENAI_API_KEY": ""})
    ingested = runner.invoke(cli, ["ingest", str(tmp_path), *options])
    assert ingested.exit_code == 0, ingested.output
    assert "1 file(s) ingested" in ingested.output
    asked = runner.invoke(cli, ["ask", "refunds", *options])
    assert "Refunds take five business days." in asked.output
    with PgVectorEmbeddingStore(dsn, dimension=384, table=table) as store:
        store.remove_all()


def test_forgetting_a_user_leaves_no_row_of_theirs_in_the_recall_table(
    store: PgVectorEmbeddingStore, dsn: str
) -> None:
    """The recall index on pgvector after `forget_user`: every row of the user is deleted
    (found by an exact metadata lookup, however many users share the table), the other user's
    rows are all there."""
    import psycopg

    from chatmemory import InMemoryChatMemoryStore, MessageWindowChatMemory, UserMessage
    from chatmemory.forget import forget_user
    from chatmemory.rag import HashingEmbeddingModel
    from chatmemory.recall import SemanticRecall

    chats = InMemoryChatMemoryStore()
    recall = SemanticRecall(HashingEmbeddingModel(DIMENSION), store, scope="user")
    for n in range(30):
        for user in ("ann", "bob"):
            memory_id = f"{user}-chat-{n}"
            memory = MessageWindowChatMemory(id=memory_id, max_messages=1, store=chats)
            secret = "zebra4711" if user == "ann" else "walrus"
            memory.add(UserMessage(f"{user} secret {n}: {secret}"))
            memory.add(UserMessage("and more"))
            recall.index(chats, memory_id, user_id=user)
    report = forget_user("ann", store=chats, recall=recall)
    assert (len(report.conversations), report.recall_entries) == (30, 90)
    from psycopg import sql

    with psycopg.connect(dsn) as conn:
        statement = sql.SQL("SELECT t::text FROM {} t").format(sql.Identifier(store.table))
        rows = [r[0] for r in conn.execute(statement)]
    assert not [row for row in rows if "zebra4711" in row or "ann-chat" in row]
    assert sum("walrus" in row for row in rows) == 30
    assert not forget_user("ann", store=chats, recall=recall)
