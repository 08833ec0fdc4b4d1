"""The SQLite embedding store's memory-mapped copy of its vectors: kept in step by the store that
writes (each committed write's rows appended), so that another process opens without reading
the vectors, even while the writer is still open; never holding a removed vector, nor a row
its transaction did not commit."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from chatmemory.rag import Embedding, EmbeddingSearchRequest, SqliteEmbeddingStore, key
from chatmemory.rag._chunks import Chunks


def _vector_reads(path: Path, query: Embedding) -> tuple[str, list[str]]:
    """The best match of `query` in a store opened anew on `path`, and the statements of that
    open and search that read vectors (from the table or its chunks)."""
    statements: list[str] = []
    connection = sqlite3.connect(path, check_same_thread=False)
    connection.set_trace_callback(statements.append)
    try:
        store = SqliteEmbeddingStore(connection)
        request = EmbeddingSearchRequest(query_embedding=query, max_results=1)
        best = store.search(request).matches[0].embedding_id
    finally:
        connection.close()
    return best, [s for s in statements if "vector," in s or "vectors FROM" in s]


def test_a_new_process_maps_what_a_writer_still_open_wrote(tmp_path: Path) -> None:
    path = tmp_path / "open.db"
    rows = np.random.default_rng(11).standard_normal((9_000, 8))
    mapped = Path(f"{path}-embeddings.vectors")
    rooms = []
    with SqliteEmbeddingStore(path) as writer:
        for first in range(0, len(rows), 1_000):  # 9 commits, each appended to the copy
            ids = [f"r{n}" for n in range(first, first + 1_000)]
            writer.add_all(rows[first : first + 1_000], ids=ids)
            rooms.append(int(np.frombuffer(mapped.read_bytes()[40:48], np.int64)[0]))
        # written whole only when it had no room left, with room for as many rows again
        assert rooms == [4096] * 4 + [10_000] * 5
        writer.add(Embedding(rows[0]), id="last")
        best, read = _vector_reads(path, Embedding(rows[8_999]))
        assert best == "r8999"
        assert read == [
            "SELECT rowid, id, vector, text, metadata FROM embeddings WHERE rowid > 9001 "
            "ORDER BY rowid"
        ]


def test_a_removal_takes_the_copy_away_until_a_write_it_costs_little_against(
    tmp_path: Path,
) -> None:
    path = tmp_path / "removed.db"
    mapped = Path(f"{path}-embeddings.vectors")
    rows = np.random.default_rng(12).standard_normal((5_000, 4)).astype(np.float32)
    secret = rows[7]
    with SqliteEmbeddingStore(path) as store:
        ids = store.add_all(rows)
        assert secret.tobytes() in mapped.read_bytes()
        store.remove(ids[7])
        assert not mapped.exists()  # it held the removed vector
        store.add(Embedding(rows[1]))  # rewriting 5,000 rows for one: left to the close
        assert not mapped.exists()
        store.add_all(rows[1_000:3_000])  # more than a quarter of them: rewritten
        assert mapped.exists()
        assert secret.tobytes() not in mapped.read_bytes()
        store.remove_all(filter=key("missing").eq(1))  # a removal of nothing keeps it
        assert mapped.exists()
    best, read = _vector_reads(path, Embedding(rows[9]))
    assert best == ids[9]
    assert not any("rowid > 0" in s or "rowids, vectors" in s for s in read)


def test_a_small_store_writes_its_copy_again_at_its_next_write(tmp_path: Path) -> None:
    path = tmp_path / "small.db"
    mapped = Path(f"{path}-embeddings.vectors")
    with SqliteEmbeddingStore(path) as store:
        ids = store.add_all(np.eye(3))
        store.remove(ids[0])
        assert not mapped.exists()
        store.add(Embedding((0.0, 0.0, 2.0)))
        assert mapped.exists()
        best, read = _vector_reads(path, Embedding((0.0, 1.0, 0.0)))
        assert best == ids[1]
        assert not any("rowids, vectors" in s for s in read)


def test_rows_of_a_transaction_rolled_back_never_reach_the_copy(tmp_path: Path) -> None:
    """A store on your connection writes inside the transaction you hold open: its rows reach
    the copy only once committed. Rolled back, their rowids go to other rows, whose vectors a
    new process must find (not those of the rows rolled back)."""
    path = tmp_path / "yours.db"
    with SqliteEmbeddingStore(path) as store:
        store.add_all(np.eye(4)[:2], ids=["a", "b"])
    yours = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        store = SqliteEmbeddingStore(yours)
        yours.execute("BEGIN")
        store.add_all(np.eye(4)[2:3], ids=["rolled back"])
        yours.execute("ROLLBACK")
        store.add_all(np.eye(4)[3:], ids=["d"])  # the same rowid, another vector
    finally:
        yours.close()
    best, _ = _vector_reads(path, Embedding((0.0, 0.0, 0.0, 1.0)))
    assert best == "d"
    best, _ = _vector_reads(path, Embedding((0.0, 0.0, 1.0, 0.0)))
    assert best != "rolled back"


def test_a_copy_written_while_another_store_removed_rows_does_not_stay(tmp_path: Path) -> None:
    """Two processes race: one writes the copy from what it read before the other removed a
    row (and removed the copy). Whichever comes last removes the file."""
    path = tmp_path / "race.db"
    mapped = Path(f"{path}-embeddings.vectors")
    secret = np.array([[0.25, 0.5, 0.125]], dtype=np.float32)
    with SqliteEmbeddingStore(path) as store:
        ids = store.add_all(np.vstack([np.eye(3, dtype=np.float32), secret]))
        read = sqlite3.connect(path)
        try:
            chunks = Chunks("embeddings", mapped)
            stale = dict(read.execute("SELECT name, value FROM embeddings_state").fetchall())
            cache = chunks.read(read)
            assert cache is not None
            store.remove(ids[3])  # the other process: commits, then removes the copy
            chunks._save(read, stale, cache)  # the first one's copy, written late
            assert not mapped.exists()
        finally:
            read.close()
    assert secret.tobytes() not in mapped.read_bytes()  # (written at the close, from the cache)


def test_a_database_put_back_from_an_older_copy_does_not_take_the_newer_mapped_file(
    tmp_path: Path,
) -> None:
    """The mapped copy is trusted without counting the table (the triggers count every removal
    and update), but its first and last rows must be there."""
    path = tmp_path / "restored.db"
    rows = np.random.default_rng(5).standard_normal((100, 8))
    with SqliteEmbeddingStore(path) as store:
        store.add_all(rows[:50], ids=[f"r{n}" for n in range(50)])
    backup = path.read_bytes()
    with SqliteEmbeddingStore(path) as store:
        store.add_all(rows[50:], ids=[f"r{n}" for n in range(50, 100)])
    path.write_bytes(backup)  # the database as it was, the mapped copy of all 100 rows
    best, read = _vector_reads(path, Embedding(rows[99]))
    assert best != "r99"
    assert any("rowids, vectors" in s for s in read)  # read from the chunks instead
    with SqliteEmbeddingStore(path) as store:
        assert store.count() == 50
