"""`PgVectorEmbeddingStore` on a real PostgreSQL with pgvector (a private server from
`pgserver`): vectors, the filters' one meaning, full text, and its errors."""

from __future__ import annotations

import math
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatmemory import ConfigurationError, StoreError
from chatmemory.rag import (
    Embedding,
    EmbeddingSearchRequest,
    Filter,
    TextSegment,
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
