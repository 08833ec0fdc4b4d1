"""What exact filtered search costs on pgvector: `PgVectorEmbeddingStore` on a private
PostgreSQL 16 from `pgserver`, at 10,000 and 100,000 vectors of 384 dimensions (2,000 and
10,000 with `--quick`).

A search with a filter computes the distance of every row that passes (found through the GIN
index on the metadata) and keeps the nearest, so its cost grows with the rows that pass. Per
store size: search latency p50 / p95 (top 10) with filters passing 0.1 %, 1 %, 10 % and 50 % of
the rows (`key(...).eq(0)` on a key cycling through 1,000, 100, 10 and 2 values), next to the
unfiltered search the HNSW index serves; the floor is numpy's exact brute force over the same
vectors in memory (timed in a loop of its own: numpy's threads would slow the server on a
small machine); recall@10 is against that brute force under the same filter. The vectors are
clustered like text embeddings (`common.unit_vectors`); the HNSW index is built after the load,
as a bulk import would, then VACUUM ANALYZE stands for autovacuum (until the GIN index's
pending list of a bulk load is merged, each of its scans reads the whole list).
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
from tests.rag.pgvector_server import pgvector_dsn

from chatmemory.rag import Embedding, EmbeddingSearchRequest, Filter, TextSegment, key
from chatmemory.rag.pgvector import PgVectorEmbeddingStore

from .common import percentile, table, unit_vectors

DIMENSION = 384
TOP = 10
SHARES = (("0.1 %", 1_000), ("1 %", 100), ("10 %", 10), ("50 %", 2))
"""A label and the number of values its key cycles through: one of them passes."""


def _load(store: PgVectorEmbeddingStore, vectors: Any) -> None:
    """Store `vectors`, row n with ``{"in_1000": n % 1000, ...}``; the HNSW index is built after
    the load (in memory), then the table vacuumed and analyzed."""
    table_name = store.table
    with store._pool.connection() as conn:
        conn.execute(f"DROP INDEX IF EXISTS {table_name}_hnsw")
    for first in range(0, len(vectors), 1_000):
        chunk = vectors[first : first + 1_000]
        store.add_all(
            [Embedding(tuple(v.tolist())) for v in chunk],
            [
                TextSegment(f"row {n}", {f"in_{m}": n % m for _, m in SHARES})
                for n in range(first, first + len(chunk))
            ],
        )
    with store._pool.connection() as conn:
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute(
            f"CREATE INDEX {table_name}_hnsw ON {table_name} USING hnsw "
            f"(embedding vector_cosine_ops)"
        )
        conn.execute("RESET maintenance_work_mem")
        conn.execute(f"VACUUM ANALYZE {table_name}")


def _truth(vectors: Any, query: Any, keep: Any) -> tuple[set[int], float]:
    """The exact top rows among those `keep` passes (numpy brute force), and the seconds."""
    start = time.perf_counter()
    scores = np.where(keep, vectors @ query, -np.inf) if keep is not None else vectors @ query
    best = np.argpartition(-scores, TOP)[:TOP]
    seconds = time.perf_counter() - start
    return {int(n) for n in best if keep is None or keep[n]}, seconds


def _row(
    store: PgVectorEmbeddingStore,
    vectors: Any,
    probes: Any,
    label: str,
    condition: Filter | None,
    keep: Any,
) -> list[object]:
    """One table row: our latency over `probes`, the numpy floor, recall and rows returned."""
    requests = [
        EmbeddingSearchRequest(
            query_embedding=Embedding(tuple(q.tolist())), max_results=TOP, filter=condition
        )
        for q in probes
    ]
    for request in requests[:5]:  # warm the cache
        store.search(request)
    ours: list[float] = []
    found: list[set[int]] = []
    for request in requests:
        start = time.perf_counter()
        matches = store.search(request).matches
        ours.append(time.perf_counter() - start)
        found.append({int(m.embedded.text.split()[1]) for m in matches if m.embedded})
    floor: list[float] = []
    recalls: list[float] = []
    for query, ids in zip(probes, found, strict=True):
        truth, seconds = _truth(vectors, query, keep)
        floor.append(seconds)
        recalls.append(len(ids & truth) / len(truth))
    passing = len(vectors) if keep is None else int(keep.sum())
    return [
        f"{len(vectors):,}",
        label,
        f"{passing:,}",
        f"{statistics.median(ours) * 1e3:,.2f} ms",
        f"{percentile(ours, 0.95) * 1e3:,.2f} ms",
        f"{statistics.median(floor) * 1e3:,.2f} ms",
        f"{statistics.median(ours) / statistics.median(floor):.1f}×",
        f"{statistics.mean(recalls):.3f}",
    ]


def run(quick: bool = False) -> Iterator[str]:
    sizes = (2_000, 10_000) if quick else (10_000, 100_000)
    queries = 50 if quick else 200
    probes = unit_vectors(queries, seed=99)
    rows: list[list[object]] = []
    with pgvector_dsn() as dsn:
        for size in sizes:
            vectors = unit_vectors(size, seed=size)
            table_name = f"bench_{uuid.uuid4().hex[:10]}"
            with PgVectorEmbeddingStore(
                dsn, dimension=DIMENSION, table=table_name, max_size=1
            ) as store:
                _load(store, vectors)
                rows.append(_row(store, vectors, probes, "none (HNSW)", None, None))
                for label, values in SHARES:
                    keep = np.arange(size) % values == 0
                    condition = key(f"in_{values}").eq(0)
                    rows.append(_row(store, vectors, probes, label, condition, keep))
                with store._pool.connection() as conn:
                    conn.execute(f"DROP TABLE {table_name}")
    yield table(
        f"pgvector filtered search is exact: top {TOP} of {DIMENSION}-dimension vectors "
        f"({queries} queries; floor: exact numpy brute force in memory, same filter)",
        ["vectors", "filter passes", "rows", "p50", "p95", "floor p50", "ratio", "recall@10"],
        rows,
    )
