"""The embedded stores' optional HNSW graph (`Hnsw`, faiss): off below `min_rows`, its
candidates scored exactly, filters passing few rows answered exactly, removed rows never
found, and beside a SQLite file a saved graph that is used while in step and built again when
not."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from chatmemory import ConfigurationError
from chatmemory.rag import (
    Embedding,
    EmbeddingSearchRequest,
    Hnsw,
    InMemoryEmbeddingStore,
    SqliteEmbeddingStore,
    TextSegment,
    key,
)

pytest.importorskip("faiss", reason="the hnsw extra (faiss) is not installed")

ROWS = 3_000
DIMENSION = 32


def clustered(count: int, seed: int) -> Any:
    centers = np.random.default_rng(0).normal(size=(16, DIMENSION))
    rng = np.random.default_rng(seed)
    points = centers[rng.integers(0, 16, size=count)] + 0.3 * rng.normal(size=(count, DIMENSION))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


VECTORS = clustered(ROWS, seed=1)
QUERIES = clustered(20, seed=2)
SEGMENTS = [TextSegment(f"row {n}", {"n": n, "third": n % 3, "rare": n % 500}) for n in range(ROWS)]
IDS = [str(n) for n in range(ROWS)]


def search(store: Any, query: Any, top: int = 10, filter: Any = None) -> list[tuple[str, float]]:
    request = EmbeddingSearchRequest(
        query_embedding=Embedding(query), max_results=top, filter=filter
    )
    return [(m.embedding_id, m.score) for m in store.search(request).matches]


@pytest.fixture(params=["memory", "sqlite"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make(kind: str, folder: Path, approximate: Hnsw | None) -> Any:
    if kind == "memory":
        return InMemoryEmbeddingStore(approximate=approximate)
    return SqliteEmbeddingStore(folder / "v.db", approximate=approximate)


def test_settings_are_checked_with_a_sentence() -> None:
    with pytest.raises(ConfigurationError, match="`min_rows` must be an int >= 0"):
        Hnsw(min_rows=-1)
    with pytest.raises(ConfigurationError, match="`ef_search` must be an int >= 2"):
        Hnsw(ef_search=True)
    with pytest.raises(ConfigurationError, match="must be an Hnsw"):
        InMemoryEmbeddingStore(approximate="yes")  # type: ignore[arg-type]


def test_without_faiss_the_store_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(ImportError, match=r"pip install 'chatmemory\[hnsw\]'"):
        InMemoryEmbeddingStore(approximate=Hnsw())


def test_the_graph_finds_nearly_all_of_the_exact_top_with_exact_scores(
    kind: str, tmp_path: Path
) -> None:
    exact = InMemoryEmbeddingStore()
    exact.add_all(VECTORS, SEGMENTS, ids=IDS)
    store = make(kind, tmp_path, Hnsw(min_rows=1_000))
    store.add_all(VECTORS, SEGMENTS, ids=IDS)
    found = 0
    for query in QUERIES:
        truth = dict(search(exact, query))
        near = search(store, query)
        assert [score for _, score in near] == sorted((s for _, s in near), reverse=True)
        for row_id, score in near:  # the exact score of each row it found
            assert score == pytest.approx(float(VECTORS[int(row_id)] @ query + 1) / 2, abs=1e-6)
        found += len(truth.keys() & dict(near).keys())
    assert found >= 0.95 * 10 * len(QUERIES)


def test_below_min_rows_and_for_filters_passing_few_rows_the_search_is_exact(
    kind: str, tmp_path: Path
) -> None:
    exact = InMemoryEmbeddingStore()
    exact.add_all(VECTORS, SEGMENTS, ids=IDS)
    small = make(kind, tmp_path, Hnsw(min_rows=ROWS + 1))  # too few rows: exact
    small.add_all(VECTORS, SEGMENTS, ids=IDS)
    store = make(kind, tmp_path / "big", Hnsw(min_rows=200))
    store.add_all(VECTORS, SEGMENTS, ids=IDS)
    rare = key("rare").eq(7)  # 6 rows pass: fewer than min_rows, so exact
    tenth = key("n").lt(300)  # 300 rows: more than min_rows, but a tenth of the rows
    for query in QUERIES[:5]:
        assert search(small, query) == search(exact, query)
        assert search(store, query, filter=rare) == search(exact, query, filter=rare)
        assert search(store, query, filter=tenth) == search(exact, query, filter=tenth)


def test_a_filter_passing_many_rows_searches_the_graph_among_them(
    kind: str, tmp_path: Path
) -> None:
    store = make(kind, tmp_path, Hnsw(min_rows=500))
    store.add_all(VECTORS, SEGMENTS, ids=IDS)
    exact = InMemoryEmbeddingStore()
    exact.add_all(VECTORS, SEGMENTS, ids=IDS)
    third, everyone = key("third").eq(1), key("n").gte(0)  # a third of the rows, all of them
    hits = 0
    for query in QUERIES:
        near = search(store, query, filter=third)
        assert all(int(row_id) % 3 == 1 for row_id, _ in near)
        hits += len(dict(near).keys() & dict(search(exact, query, filter=third)).keys())
        assert search(store, query, filter=everyone) == search(store, query)
    assert hits >= 0.9 * 10 * len(QUERIES)


def test_removed_rows_are_never_found_and_the_graph_is_rebuilt_once_most_are_gone(
    kind: str, tmp_path: Path
) -> None:
    store = make(kind, tmp_path, Hnsw(min_rows=500))
    store.add_all(VECTORS, SEGMENTS, ids=IDS)
    query = QUERIES[0]
    first = [row_id for row_id, _ in search(store, query)]
    store.remove_all(first[:3])
    after = [row_id for row_id, _ in search(store, query)]
    assert not set(first[:3]) & set(after)
    assert after[: len(first) - 3] == first[3:]  # the rest keep their order
    store.remove_all(filter=key("n").lt(2_000))  # two thirds gone: built again from the rest
    left = search(store, query)
    assert len(left) == 10
    assert all(int(row_id) >= 2_000 for row_id, _ in left)
    store.add_all(VECTORS[:10], SEGMENTS[:10], ids=IDS[:10])  # added back after the rebuild
    assert {row_id for row_id, _ in search(store, VECTORS[3], top=1)} == {"3"}


def test_rows_appended_between_searches_are_found_and_a_removal_after_them_is_not(
    kind: str, tmp_path: Path
) -> None:
    store = make(kind, tmp_path, Hnsw(min_rows=500))
    store.add_all(VECTORS[:1_000], SEGMENTS[:1_000], ids=IDS[:1_000])
    search(store, QUERIES[0])  # the graph made, then followed write by write
    for start in range(1_000, 1_300, 100):
        store.add_all(VECTORS[start : start + 100], SEGMENTS[start : start + 100],
                      ids=IDS[start : start + 100])  # fmt: skip
        assert search(store, VECTORS[start + 7], top=1)[0][0] == str(start + 7)
    store.remove_all(["5", "1205"])
    for gone in (5, 1205):
        assert str(gone) not in [row_id for row_id, _ in search(store, VECTORS[gone])]
    assert search(store, VECTORS[1206], top=1)[0][0] == "1206"  # moved up a place, still found
    assert search(store, VECTORS[6], top=1)[0][0] == "6"


def test_the_sqlite_store_keeps_its_graph_beside_the_file_while_in_step(tmp_path: Path) -> None:
    path, settings = tmp_path / "v.db", Hnsw(min_rows=500)
    graph = Path(f"{path}-embeddings.hnsw")
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        store.add_all(VECTORS[:1_000], SEGMENTS[:1_000], ids=IDS[:1_000])
        search(store, QUERIES[0])
        assert graph.exists()  # saved as soon as it was built
        saved = graph.stat().st_mtime_ns
        store.add_all(VECTORS[1_000:1_500], SEGMENTS[1_000:1_500], ids=IDS[1_000:1_500])
        search(store, QUERIES[0])
        assert graph.stat().st_mtime_ns == saved  # not yet twice as large: kept for close()
        store.add_all(VECTORS[1_500:], SEGMENTS[1_500:], ids=IDS[1_500:])
        before = search(store, QUERIES[0])
        assert graph.stat().st_mtime_ns != saved  # doubled: saved again
    assert graph.exists()
    assert VECTORS[0].tobytes() in graph.read_bytes()
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        assert search(store, QUERIES[0]) == before  # the saved graph, read back
        store.remove("0")  # a saved graph must not keep a removed vector
        assert not graph.exists()
        after = search(store, VECTORS[0])
        assert "0" not in [found for found, _ in after]
    # Saved again at close with the removed row's vector erased (not built again next time).
    assert graph.exists()
    assert VECTORS[0].tobytes() not in graph.read_bytes()
    assert VECTORS[1].tobytes() in graph.read_bytes()
    saved = graph.stat().st_mtime_ns
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        assert search(store, VECTORS[0]) == after  # the saved graph, read back
        store.remove("1")  # erased in a graph read back from its file
        assert "1" not in [found for found, _ in search(store, VECTORS[1])]
    assert VECTORS[1].tobytes() not in graph.read_bytes()
    assert graph.stat().st_mtime_ns != saved
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        assert "1" not in [found for found, _ in search(store, VECTORS[1])]
    # Another program moves a row's vector in place: the saved graph is stale, built again.
    target = QUERIES[1]
    with sqlite3.connect(path) as other:
        other.execute("UPDATE embeddings SET vector = ? WHERE id = '5'", (target.tobytes(),))
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        assert search(store, target, top=1)[0][0] == "5"
    graph.write_bytes(b"CMHNSW\x01\x00" + b"\x00" * 40)  # damaged: built again
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        assert search(store, target, top=1)[0][0] == "5"


def test_a_saved_graph_read_back_follows_the_rows_the_next_process_adds(tmp_path: Path) -> None:
    path, settings = tmp_path / "v.db", Hnsw(min_rows=500)
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        store.add_all(VECTORS[:2_000], SEGMENTS[:2_000], ids=IDS[:2_000])
        search(store, QUERIES[0])  # built and saved
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        search(store, QUERIES[0])  # the saved graph, read back (a view of the file)
        store.add_all(VECTORS[2_000:], SEGMENTS[2_000:], ids=IDS[2_000:])
        assert search(store, VECTORS[2_500], top=1)[0][0] == "2500"
        expected = search(store, QUERIES[1])
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        assert search(store, QUERIES[1]) == expected  # saved at close with the new rows
        assert search(store, VECTORS[2_999], top=1)[0][0] == "2999"


def test_a_saved_graph_scores_a_few_added_rows_beside_it_and_takes_in_many(
    tmp_path: Path,
) -> None:
    path, settings = tmp_path / "v.db", Hnsw(min_rows=400)
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        store.add_all(VECTORS[:400], SEGMENTS[:400], ids=IDS[:400])
        search(store, QUERIES[0])  # built and saved
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        search(store, QUERIES[0])  # read back, a view of the file
        for start in (400, 410):  # a few rows: scored exactly beside the graph
            store.add_all(VECTORS[start : start + 10], SEGMENTS[start : start + 10],
                          ids=IDS[start : start + 10])  # fmt: skip
            assert search(store, VECTORS[start + 3], top=1)[0][0] == str(start + 3)
            assert search(store, VECTORS[5], top=1, filter=key("third").eq(2))[0][0] == "5"
        store.add_all(VECTORS[420:], SEGMENTS[420:], ids=IDS[420:])  # many: taken in
        assert search(store, VECTORS[2_900], top=1)[0][0] == "2900"
        assert search(store, VECTORS[415], top=1, filter=key("third").eq(1))[0][0] == "415"
        expected = search(store, QUERIES[1])
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        assert search(store, QUERIES[1]) == expected


def test_a_saved_graph_of_another_shape_or_damaged_is_built_again(tmp_path: Path) -> None:
    path, settings = tmp_path / "v.db", Hnsw(min_rows=500)
    graph = Path(f"{path}-embeddings.hnsw")
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        store.add_all(VECTORS, SEGMENTS, ids=IDS)
        expected = search(store, QUERIES[0])
    saved = graph.read_bytes()
    head = np.frombuffer(saved[8:32], dtype=np.int64).copy()
    head[1] = 0  # says no labels, but the index holds every row
    miscounted = saved[:8] + head.tobytes() + saved[32 + 9 * ROWS :]
    for damaged in (b"not a graph", saved[:4_000], saved[:32] + saved[-2_000:], miscounted):
        graph.write_bytes(damaged)
        with SqliteEmbeddingStore(path, approximate=settings) as store:
            assert search(store, QUERIES[0]) == expected


def test_an_empty_store_searched_then_filled_gets_a_graph_of_its_vectors(
    kind: str, tmp_path: Path
) -> None:
    store = make(kind, tmp_path, Hnsw(min_rows=0))
    assert search(store, QUERIES[0]) == []
    store.add_all(VECTORS[:50], SEGMENTS[:50], ids=IDS[:50])
    assert search(store, VECTORS[4], top=1)[0][0] == "4"


def test_a_graph_changed_after_its_last_search_is_saved_at_close_beside_a_busy_file(
    tmp_path: Path,
) -> None:
    """A removal drops the saved graph; close saves it again, with the rows written since the
    last search, even when another connection committed to the file meanwhile (a chat memory
    beside the store commits every turn)."""
    path, settings = tmp_path / "v.db", Hnsw(min_rows=500)
    graph = Path(f"{path}-embeddings.hnsw")
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        store.add_all(VECTORS[:1_000], SEGMENTS[:1_000], ids=IDS[:1_000])
        search(store, QUERIES[0])
        store.remove("0")
        store.add_all(VECTORS[1_000:1_010], SEGMENTS[1_000:1_010], ids=IDS[1_000:1_010])
        assert not graph.exists()
        with sqlite3.connect(path) as other:
            other.execute("CREATE TABLE elsewhere (x)")
    assert graph.exists()
    assert VECTORS[0].tobytes() not in graph.read_bytes()
    assert VECTORS[1_005].tobytes() in graph.read_bytes()
    with SqliteEmbeddingStore(path, approximate=settings) as store:
        assert search(store, VECTORS[1_005], top=1)[0][0] == "1005"
        assert "0" not in [found for found, _ in search(store, VECTORS[0])]
