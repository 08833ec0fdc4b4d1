"""Retrieval on the embedded stores (issue 10): `InMemoryEmbeddingStore` and
`SqliteEmbeddingStore` at 10,000 and 100,000 vectors of 384 dimensions, and the augmentor's own
cost per call. (pgvector has its own part, `pgvector`.)

Per store size: search latency p50 / p95 (top 10, no filter, and a metadata filter that keeps
half the rows) and recall@10 against exact brute force (numpy over the same vectors in one
matrix: the floor beside our latency). Full text (BM25, as full-text and hybrid retrieval call
it) on both stores at the largest size. Then `DefaultRetrievalAugmentor.augment` around an
embedding-store retriever, next to the retriever called alone.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from chatmemory import UserMessage
from chatmemory.rag import (
    AugmentationRequest,
    DefaultRetrievalAugmentor,
    Embedding,
    EmbeddingSearchRequest,
    EmbeddingStoreContentRetriever,
    HashingEmbeddingModel,
    InMemoryEmbeddingStore,
    Query,
    QueryMetadata,
    SqliteEmbeddingStore,
    TextSegment,
    key,
)

from .common import measure_search, percentile, table, unit_vectors

DIMENSION = 384
QUERIES = 200
TOP = 10


def _fill(store: Any, vectors: Any) -> float:
    start = time.perf_counter()
    for first in range(0, len(vectors), 5_000):
        chunk = vectors[first : first + 5_000]
        store.add_all(
            [Embedding(tuple(v.tolist())) for v in chunk],
            [TextSegment(f"row {first + i}", {"half": (first + i) % 2}) for i in range(len(chunk))],
        )
    return time.perf_counter() - start


def _full_text(store: Any, size: int) -> list[list[object]]:
    """BM25 (`search_text`, what full-text and hybrid retrieval call) over `size` segments of
    12 words drawn from a 2,000-word vocabulary (Zipf-like, as text is), 3-word queries."""
    rng = np.random.default_rng(7)
    vocabulary = np.array([f"w{n}" for n in range(2_000)])
    weights = 1.0 / np.arange(1, 2_001)
    weights /= weights.sum()
    texts = [" ".join(rng.choice(vocabulary, 12, p=weights)) for _ in range(size)]
    vectors = unit_vectors(size, seed=3)
    store.add_all(
        [Embedding(tuple(v.tolist())) for v in vectors],
        [TextSegment(t, {"half": n % 2}) for n, t in enumerate(texts)],
    )
    queries = [" ".join(rng.choice(vocabulary[:500], 3)) for _ in range(QUERIES)]
    rows: list[list[object]] = []
    for condition in (None, key("half").eq(0)):
        store.search_text(queries[0], max_results=TOP, filter=condition)  # builds what it keeps
        samples = []
        for query in queries:
            start = time.perf_counter()
            store.search_text(query, max_results=TOP, filter=condition)
            samples.append(time.perf_counter() - start)
        rows.append(
            [
                type(store).__name__.removesuffix("EmbeddingStore"),
                f"{size:,}",
                "half the rows" if condition else "none",
                f"{statistics.median(samples) * 1e3:,.2f} ms",
                f"{percentile(samples, 0.95) * 1e3:,.2f} ms",
            ]
        )
    return rows


def _augmentor_overhead() -> list[list[object]]:
    model = HashingEmbeddingModel()
    store = InMemoryEmbeddingStore()
    texts = [f"article {i} about topic {i % 50} and refunds" for i in range(2_000)]
    store.add_all(model.embed_all(texts), [TextSegment(t) for t in texts])
    retriever = EmbeddingStoreContentRetriever(store, model, max_results=5)
    augmentor = DefaultRetrievalAugmentor(content_retriever=retriever)
    user = UserMessage("How do refunds work for topic 7?")
    request = AugmentationRequest(user, QueryMetadata(user_message=user))
    query = Query(user.text)
    rows: list[list[object]] = []
    for label, call in (
        ("retriever alone", lambda: retriever.retrieve(query)),
        ("augment (transform, route, retrieve, fuse, inject)", lambda: augmentor.augment(request)),
    ):
        call()
        samples = []
        for _ in range(300):
            start = time.perf_counter()
            call()
            samples.append(time.perf_counter() - start)
        rows.append([label, f"{statistics.median(samples) * 1e6:,.0f} µs"])
    return rows


def run(quick: bool = False) -> Iterator[str]:
    sizes = (2_000, 10_000) if quick else (10_000, 100_000)
    rows: list[list[object]] = []
    loads: list[list[object]] = []
    with tempfile.TemporaryDirectory() as directory:
        for size in sizes:
            vectors = unit_vectors(size, seed=size)
            memory = InMemoryEmbeddingStore()
            with SqliteEmbeddingStore(Path(directory) / f"bench{size}.db") as sqlite:
                for name, store in (("in-memory", memory), ("SQLite", sqlite)):
                    seconds = _fill(store, vectors)
                    loads.append([name, f"{size:,}", f"{size / seconds:,.0f} vectors/s"])
                    rows.append(measure_search(name, store, vectors, filtered=False))
                    rows.append(measure_search(name, store, vectors, filtered=True))
                fresh = SqliteEmbeddingStore(Path(directory) / f"bench{size}.db")
                start = time.perf_counter()
                fresh.search(EmbeddingSearchRequest(query_embedding=Embedding((1.0,) * DIMENSION)))
                loads.append(
                    ["SQLite, first search of a new process", f"{size:,}",
                     f"{(time.perf_counter() - start) * 1e3:,.0f} ms (reads the matrix)"]
                )  # fmt: skip
                fresh.close()
    yield table(
        f"Embedded stores: search, top {TOP} of {DIMENSION}-dimension vectors ({QUERIES} "
        f"queries; floor: exact numpy brute force over one matrix)",
        ["store", "vectors", "filter", "p50", "p95", "floor p50", "ratio", "recall@10"],
        rows,
    )
    yield table(
        "Embedded stores: loading (add_all, batches of 5,000)", ["store", "vectors", "rate"], loads
    )
    words: list[list[object]] = []
    with tempfile.TemporaryDirectory() as directory:
        size = sizes[-1]
        words += _full_text(InMemoryEmbeddingStore(), size)
        with SqliteEmbeddingStore(Path(directory) / "words.db") as sqlite:
            words += _full_text(sqlite, size)
    yield table(
        f"Embedded stores: full text (BM25, top {TOP}, 3-word queries over 12-word segments)",
        ["store", "segments", "filter", "p50", "p95"],
        words,
    )
    yield table(
        "Retrieval augmentor overhead (in-memory store, 2,000 segments, hashing model)",
        ["call", "p50"],
        _augmentor_overhead(),
    )
