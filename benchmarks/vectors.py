"""Embedded vector stores side by side (issue 27): chatmemory's in-memory and SQLite stores beside
numpy brute force and, when they are installed, sqlite-vec (through `apsw`: this Python's
`sqlite3` cannot load extensions), lancedb, chromadb and faiss (flat, and HNSW as the
approximate reference). The peers are benchmark-only: ``pip install 'chatmemory[bench]'``.

100,000 clustered unit vectors of 384 dimensions (10,000 with --quick), three metadata keys
(`one`: the same value on every row, as one conversation's rows in a store of one, which is what
recall's filter passes; `tenth`: 10 % of the rows per value, `thousandth`: 0.1 %). The
chatmemory stores with `approximate=Hnsw()` count the graph's build in their ingest. Per store:
ingest (vectors per second, with the metadata), open an existing store in a new process and
answer one query (ms after the imports: the first process after the writes / the next one, and
the peak RSS), then warm queries p50 (top 10) with no filter and with each filter, each with
recall@10 against exact brute force. numpy and faiss run on one thread. A second table sets
issue 27's goals beside our numbers and the best peer's. To run some rows only (while working on
one store): CHATMEMORY_BENCH_VECTORS=hnsw (comma-separated parts of the rows' names).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .common import table, unit_vectors

DIMENSION = 384
TOP = 10
QUERIES = 100
FILTERS: tuple[tuple[str, str | None, int], ...] = (
    ("none", None, 0),
    ("all", "one", 0),  # what recall sends: the conversation's rows, in a store of one
    ("10 %", "tenth", 3),
    ("0.1 %", "thousandth", 7),
)
ONLY = "CHATMEMORY_BENCH_VECTORS"
"""Parts of the names of the rows to run (comma-separated; all when unset)."""
MODULO = {"one": 1, "tenth": 10, "thousandth": 1000}


def _passing(name: str, value: int, rows: Any) -> Any:
    """Which of `rows` (row numbers) the filter `name == value` passes."""
    return (rows % MODULO[name]) == value


def _metadata(n: int) -> dict[str, int]:
    return {"one": 0, "tenth": n % 10, "thousandth": n % 1000}


Search = Callable[[Any, str | None, int], list[int]]


def _peer(name: str) -> Any:
    """A peer's module (benchmark-only, untyped)."""
    return importlib.import_module(name)


def _chatmemory(kind: str, graph: bool = False) -> tuple[Callable[..., Any], str]:
    def load(vectors: Any, folder: Path) -> Search:
        from chatmemory.rag import (
            Embedding,
            EmbeddingSearchRequest,
            Hnsw,
            InMemoryEmbeddingStore,
            SqliteEmbeddingStore,
            TextSegment,
            key,
        )

        approximate = Hnsw() if graph else None
        store: Any = (
            InMemoryEmbeddingStore(approximate=approximate)
            if kind == "memory"
            else SqliteEmbeddingStore(folder / "cm.db", approximate=approximate)
        )
        for first in range(0, len(vectors), 10_000):
            chunk = vectors[first : first + 10_000]
            store.add_all(
                chunk,
                [TextSegment(str(n), _metadata(n)) for n in range(first, first + len(chunk))],
                ids=[str(n) for n in range(first, first + len(chunk))],
            )
        if graph:  # the graph is built on the first search: counted in the ingest
            store.search(EmbeddingSearchRequest(query_embedding=Embedding(vectors[0])))

        def search(query: Any, name: str | None, value: int) -> list[int]:
            request = EmbeddingSearchRequest(
                query_embedding=Embedding(query),
                max_results=TOP,
                filter=None if name is None else key(name).eq(value),
            )
            return [int(m.embedding_id) for m in store.search(request).matches]

        return search

    reopen = f"""
from chatmemory.rag import Embedding, EmbeddingSearchRequest, Hnsw, SqliteEmbeddingStore
def first(folder, query):
    store = SqliteEmbeddingStore(folder + "/cm.db", approximate={"Hnsw()" if graph else None})
    request = EmbeddingSearchRequest(query_embedding=Embedding(query), max_results=10)
    return [m.embedding_id for m in store.search(request).matches]
"""
    return load, reopen if kind == "sqlite" else ""


def _numpy(vectors: Any, folder: Path) -> Search:
    matrix = np.ascontiguousarray(vectors)
    np.save(folder / "vectors.npy", matrix)
    rows = np.arange(len(matrix))
    chosen = {
        (name, value): np.flatnonzero(_passing(name, value, rows))
        for _, name, value in FILTERS
        if name is not None
    }

    def search(query: Any, name: str | None, value: int) -> list[int]:
        if name is None:
            return [int(n) for n in _best(matrix @ query)]
        ids = chosen[(name, value)]
        return [int(n) for n in ids[_best(matrix[ids] @ query)]]

    return search


def _best(scores: Any) -> Any:
    """The positions of the `TOP` highest scores, best first."""
    best = np.argpartition(-scores, TOP)[:TOP] if len(scores) > TOP else np.arange(len(scores))
    return best[np.argsort(-scores[best])]


NUMPY_REOPEN = """
import numpy as np
def first(folder, query):
    matrix = np.load(folder + "/vectors.npy", mmap_mode="r")
    scores = matrix @ query
    return np.argpartition(-scores, 10)[:10].tolist()
"""


def _sqlite_vec(vectors: Any, folder: Path) -> Search:
    apsw, sqlite_vec = _peer("apsw"), _peer("sqlite_vec")

    db = apsw.Connection(str(folder / "vec.db"))
    db.enable_load_extension(True)
    db.load_extension(sqlite_vec.loadable_path())
    db.execute(
        f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIMENSION}] "
        f"distance_metric=cosine, one integer, tenth integer, thousandth integer)"
    )
    with db:
        db.executemany(
            "INSERT INTO v (rowid, embedding, one, tenth, thousandth) VALUES (?, ?, 0, ?, ?)",
            ((n, v.tobytes(), n % 10, n % 1000) for n, v in enumerate(vectors)),
        )

    def search(query: Any, name: str | None, value: int) -> list[int]:
        where = "" if name is None else f" AND {name} = {int(value)}"
        sql = f"SELECT rowid FROM v WHERE embedding MATCH ? AND k = {TOP}{where} ORDER BY distance"
        return [int(r[0]) for r in db.execute(sql, (query.tobytes(),))]

    return search


SQLITE_VEC_REOPEN = """
import apsw, sqlite_vec
def first(folder, query):
    db = apsw.Connection(folder + "/vec.db")
    db.enable_load_extension(True)
    db.load_extension(sqlite_vec.loadable_path())
    sql = "SELECT rowid FROM v WHERE embedding MATCH ? AND k = 10 ORDER BY distance"
    return [r[0] for r in db.execute(sql, (query.tobytes(),))]
"""


def _lancedb(vectors: Any, folder: Path) -> Search:
    lancedb, pa = _peer("lancedb"), _peer("pyarrow")

    rows = np.arange(len(vectors))
    data = pa.table(
        {
            "id": rows,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIMENSION),
            "one": rows % 1,
            "tenth": rows % 10,
            "thousandth": rows % 1000,
        }
    )
    tbl = lancedb.connect(str(folder / "lance")).create_table("v", data=data)

    def search(query: Any, name: str | None, value: int) -> list[int]:
        found = tbl.search(query).distance_type("cosine").limit(TOP)
        if name is not None:
            found = found.where(f"{name} = {int(value)}", prefilter=True)
        return [int(x) for x in found.to_arrow()["id"].to_pylist()]

    return search


LANCEDB_REOPEN = """
import lancedb
def first(folder, query):
    tbl = lancedb.connect(folder + "/lance").open_table("v")
    found = tbl.search(query).distance_type("cosine").limit(10).to_arrow()
    return found["id"].to_pylist()
"""


def _chromadb(vectors: Any, folder: Path) -> Search:
    chromadb = _peer("chromadb")

    client = chromadb.PersistentClient(path=str(folder / "chroma"))
    collection = client.create_collection("vectors", metadata={"hnsw:space": "cosine"})
    step = 5_000
    for first in range(0, len(vectors), step):
        chunk = vectors[first : first + step]
        numbers = range(first, first + len(chunk))
        collection.add(
            ids=[str(n) for n in numbers],
            embeddings=chunk,
            metadatas=[_metadata(n) for n in numbers],
        )

    def search(query: Any, name: str | None, value: int) -> list[int]:
        where = None if name is None else {name: value}
        found = collection.query(query_embeddings=[query], n_results=TOP, where=where)
        return [int(x) for x in found["ids"][0]]

    return search


CHROMADB_REOPEN = """
import chromadb
def first(folder, query):
    collection = chromadb.PersistentClient(path=folder + "/chroma").get_collection("vectors")
    return collection.query(query_embeddings=[query], n_results=10)["ids"][0]
"""


def _faiss(kind: str) -> Callable[..., Search]:
    def load(vectors: Any, folder: Path) -> Search:
        faiss = _peer("faiss")

        faiss.omp_set_num_threads(1)
        if kind == "flat":
            index = faiss.IndexFlatIP(DIMENSION)
        else:
            index = faiss.IndexHNSWFlat(DIMENSION, 32, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efSearch = 64
        index.add(vectors)  # unit vectors: inner product is the cosine
        rows = np.arange(len(vectors))
        selectors = {
            (name, value): faiss.IDSelectorBatch(
                np.flatnonzero(_passing(name, value, rows)).astype("int64")
            )
            for _, name, value in FILTERS
            if name is not None
        }

        def search(query: Any, name: str | None, value: int) -> list[int]:
            params = None
            if name is not None:
                selector = selectors[(name, value)]
                params = (
                    faiss.SearchParameters(sel=selector)
                    if kind == "flat"
                    else faiss.SearchParametersHNSW(sel=selector, efSearch=64)
                )
            _, found = index.search(query[None, :], TOP, params=params)
            return [int(x) for x in found[0] if x >= 0]

        return search

    return load


PEERS: list[tuple[str, Callable[..., Search], str, str | None]] = [
    ("numpy brute force", _numpy, NUMPY_REOPEN, None),
    ("chatmemory in-memory", _chatmemory("memory")[0], "", None),
    ("chatmemory SQLite", *_chatmemory("sqlite"), None),
    ("chatmemory in-memory + HNSW", _chatmemory("memory", graph=True)[0], "", "faiss"),
    ("chatmemory SQLite + HNSW", *_chatmemory("sqlite", graph=True), "faiss"),
    ("sqlite-vec (apsw)", _sqlite_vec, SQLITE_VEC_REOPEN, "sqlite_vec"),
    ("lancedb (no index)", _lancedb, LANCEDB_REOPEN, "lancedb"),
    ("chromadb (HNSW)", _chromadb, CHROMADB_REOPEN, "chromadb"),
    ("faiss flat", _faiss("flat"), "", "faiss"),
    ("faiss HNSW", _faiss("hnsw"), "", "faiss"),
]

OPEN_DRIVER = """
import json, sys, time
import numpy as np
exec(sys.argv[1])
query = np.load(sys.argv[3])
start = time.perf_counter()
found = first(sys.argv[2], query)
seconds = time.perf_counter() - start
status = open("/proc/self/status").read().split("VmHWM:")[1]  # this program's own peak
rss = int(status.split()[0]) / 1024
print(json.dumps([seconds, rss, len(found)]))
"""


def _reopened(script: str, folder: Path, query: Any) -> tuple[float, float]:
    """Seconds to open the store in a new process and answer one query (after the imports),
    and that process's peak RSS in MB."""
    np.save(folder / "query.npy", query)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", OPEN_DRIVER, script, str(folder), str(folder / "query.npy")],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    seconds, rss, _ = json.loads(done.stdout.strip().splitlines()[-1])
    return float(seconds), float(rss)


def _truth(vectors: Any, query: Any, name: str | None, value: int) -> set[int]:
    scores = vectors @ query
    if name is not None:
        rows = np.arange(len(vectors))
        scores = np.where(_passing(name, value, rows), scores, -np.inf)
    return {int(i) for i in _best(scores) if np.isfinite(scores[i])}


def _row(name: str, load: Callable[..., Search], reopen: str, vectors: Any) -> list[object]:
    probes = unit_vectors(QUERIES, seed=99)
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        search = load(vectors, Path(folder))
        ingest = len(vectors) / (time.perf_counter() - start)
        opened = "-"
        if reopen:  # twice: what the first process after the writes does may differ
            first, _ = _reopened(reopen, Path(folder), probes[0])
            seconds, rss = _reopened(reopen, Path(folder), probes[0])
            opened = f"{first * 1e3:,.0f} / {seconds * 1e3:,.0f} ms, {rss:,.0f} MB"
        cells: list[object] = [name, f"{ingest:,.0f}/s", opened]
        for _, key_name, value in FILTERS:
            search(probes[0], key_name, value)  # what a store builds on first use
            samples, recalls = [], []
            for query in probes:
                begin = time.perf_counter()
                found = search(query, key_name, value)
                samples.append(time.perf_counter() - begin)
                truth = _truth(vectors, query, key_name, value)
                recalls.append(len(set(found) & truth) / len(truth))
            cells.append(
                f"{statistics.median(samples) * 1e3:,.2f} ms ({statistics.mean(recalls):.2f})"
            )
        return cells


COLUMNS = {"ingest": 1, "open": 2, "none": 3, "all": 4, "10 %": 5, "0.1 %": 6}
GOALS: list[tuple[str, str, str, str, float, bool]] = [
    # (what, store, column, goal as written, goal, higher is better)
    ("ingest, in-memory", "chatmemory in-memory", "ingest", ">= 150,000/s", 150_000, True),
    ("ingest, SQLite", "chatmemory SQLite", "ingest", ">= 50,000/s", 50_000, True),
    ("filter 10 %, in-memory", "chatmemory in-memory", "10 %", "<= 1.5 ms", 1.5, False),
    ("filter 10 %, SQLite", "chatmemory SQLite", "10 %", "<= 1.5 ms", 1.5, False),
    ("filter 0.1 %, in-memory", "chatmemory in-memory", "0.1 %", "<= 0.3 ms", 0.3, False),
    ("filter 0.1 %, SQLite", "chatmemory SQLite", "0.1 %", "<= 0.3 ms", 0.3, False),
    ("open + first query, SQLite", "chatmemory SQLite", "open", "<= 150 ms", 150, False),
    ("open + first query, HNSW", "chatmemory SQLite + HNSW", "open", "<= 150 ms", 150, False),
    ("HNSW query, in-memory", "chatmemory in-memory + HNSW", "none", "<= 0.5 ms", 0.5, False),
    ("HNSW query, SQLite", "chatmemory SQLite + HNSW", "none", "<= 0.5 ms", 0.5, False),
]


def _number(cell: str) -> tuple[float, float] | None:
    """A cell's number (vectors/s or ms; of an open cell, "first / next ms, RSS", the slower
    process) and its recall (1.0 when it shows none)."""
    try:
        if " / " in cell:  # an open cell: the first process after the writes, then the next
            return max(float(n.replace(",", "")) for n in cell.split(" ms")[0].split(" / ")), 1.0
        head = cell.split("/s")[0].split(" ms")[0].replace(",", "")
        recall = float(cell.split("(")[1].rstrip(")")) if "(" in cell else 1.0
        return float(head), recall
    except (ValueError, IndexError):
        return None


def _goals(rows: list[list[str]]) -> list[list[str]]:
    """Each goal of issue 27 beside our number and the best peer's (recall@10 >= 0.95)."""
    by_name = {row[0]: row for row in rows}
    peers = [r for r in rows if not r[0].startswith(("chatmemory", "numpy"))]
    lines = []
    for what, store, column, written, goal, higher in GOALS:
        at = COLUMNS[column]
        ours = by_name.get(store)
        if ours is None:  # not run (CHATMEMORY_BENCH_VECTORS)
            continue
        mine = _number(ours[at])
        found = [(n, r[0]) for r in peers if (n := _number(r[at])) and n[1] >= 0.95]
        best = (max if higher else min)(found, default=None, key=lambda f: f[0][0])
        met = (
            mine is not None
            and mine[1] >= 0.95
            and (mine[0] >= goal if higher else mine[0] <= goal)
        )
        lines.append(
            [
                what,
                ours[at],
                written,
                "✓" if met else "✗" if ours else "-",  # "-": that store did not run
                f"{best[1]}: {best[0][0]:,.2f}" if best else "-",
            ]
        )
    return lines


def run(quick: bool = False) -> Iterator[str]:
    size = 10_000 if quick else 100_000
    vectors = unit_vectors(size, seed=1)
    with contextlib.suppress(ImportError):
        _peer("threadpoolctl").threadpool_limits(1)
    only = [part.strip().lower() for part in os.environ.get(ONLY, "").split(",") if part.strip()]
    rows = []
    for name, load, reopen, module in PEERS:
        if only and not any(part in name.lower() for part in only):
            continue
        if module is not None:
            try:
                _peer(module)
            except ImportError:
                rows.append([name, "not installed", "-", *["-"] * len(FILTERS)])
                continue
        rows.append([str(cell) for cell in _row(name, load, reopen, vectors)])
    yield table(
        f"Vector stores at {size:,} vectors of {DIMENSION} dimensions (p50, recall@10 in brackets)",
        [
            "store",
            "ingest",
            "open + first query (1st / 2nd process), RSS",
            "query",
            "filter passing all",
            "filter 10 %",
            "filter 0.1 %",
        ],
        rows,
    )
    yield table(
        "Issue 27's goals at this size (goals are for 100,000 vectors; best peer: recall >= 0.95)",
        ["goal", "chatmemory", "goal", "met", "best peer"],
        _goals(rows),
    )
