"""Vector search on PostgreSQL with pgvector (issue 10): `PgVectorEmbeddingStore` on a private
PostgreSQL 16 from `pgserver`, at 10,000 and 100,000 vectors of 384 dimensions.

Per store size: search latency p50 / p95 (top 10, no filter, and with a metadata filter that
keeps half the rows), recall@10 against exact brute force (numpy over the same vectors, which is
also the floor beside our latency), and ingestion throughput (one `add_all` of an array: COPY,
then the HNSW index built after the rows) beside its floor: the same index built again by hand
(``DROP INDEX``, ``CREATE INDEX`` with the same `maintenance_work_mem`), pgvector's own time for
the graph, which no client can go below. The vectors are clustered like text
embeddings (64 Gaussian clusters, unit length), not uniform noise, which no index handles well.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from tests.rag.pgvector_server import pgvector_dsn

from chatmemory.rag import TextSegment
from chatmemory.rag.pgvector import PgVectorEmbeddingStore

from .common import measure_search, table, unit_vectors

DIMENSION = 384
QUERIES = 200
TOP = 10


def _load(store: PgVectorEmbeddingStore, vectors: Any) -> float:
    """Seconds to store `vectors` in one `add_all` (an array): a bulk load, sent with COPY,
    the HNSW index built after the rows."""
    segments = [TextSegment(f"row {n}", {"half": n % 2}) for n in range(len(vectors))]
    start = time.perf_counter()
    store.add_all(vectors, segments)
    return time.perf_counter() - start


def _index_build(store: PgVectorEmbeddingStore) -> float:
    """Seconds pgvector takes to build the table's HNSW index again, by hand, in memory."""
    statements = store._sql
    with store._pool.connection() as conn, conn.transaction():
        count = conn.execute(statements.count).fetchone()
        conn.execute(statements.drop_index)
        conn.execute(statements.build_memory(count[0] if count else 0))
        start = time.perf_counter()
        conn.execute(statements.hnsw)
        return time.perf_counter() - start


def run(quick: bool = False) -> Iterator[str]:
    sizes = (2_000, 10_000) if quick else (10_000, 100_000)
    rows: list[list[object]] = []
    loads: list[list[object]] = []
    with pgvector_dsn() as dsn:
        for size in sizes:
            vectors = unit_vectors(size, seed=size)
            with PgVectorEmbeddingStore(
                dsn, dimension=DIMENSION, table=f"bench_{uuid.uuid4().hex[:10]}", max_size=1
            ) as store:
                seconds = _load(store, vectors)
                build = _index_build(store)
                loads.append(
                    [
                        f"{size:,}",
                        f"{size / seconds:,.0f} vectors/s ({seconds:.1f} s)",
                        f"{build:.1f} s ({size / build:,.0f} vectors/s)",
                        f"{seconds - build:.1f} s",
                    ]
                )
                rows.append(measure_search("pgvector", store, vectors, False, TOP, QUERIES))
                rows.append(measure_search("pgvector", store, vectors, True, TOP, QUERIES))
                with store._pool.connection() as conn:
                    conn.execute(f"DROP TABLE {store.table}")
    yield table(
        f"pgvector search, top {TOP} of {DIMENSION}-dimension vectors ({QUERIES} queries; "
        f"floor: exact numpy brute force in memory)",
        ["store", "vectors", "filter", "p50", "p95", "floor p50", "ratio", "recall@10"],
        rows,
    )
    yield table(
        "pgvector ingestion (one add_all, COPY, the index built after; floor: pgvector building "
        "the same index by hand)",
        ["vectors", "add_all", "floor: CREATE INDEX alone", "add_all beyond the floor"],
        loads,
    )
