"""The SQLite embedding store with rows it did not write well-formed (another program, a damaged
file): each such row is named and left out, the others keep working, a repair removes it; and
what is removed leaves no word in the file once scrubbed."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from chatmemory import StoreError
from chatmemory.rag import (
    Embedding,
    EmbeddingSearchRequest,
    Filter,
    SqliteEmbeddingStore,
    TextSegment,
    key,
)


def vec(*values: float) -> Embedding:
    return Embedding(tuple(list(values) + [0.0] * (4 - len(values))))


DAMAGE = {
    "short-vector": "UPDATE embeddings SET vector = x'0000' WHERE id = ?",
    "not-json": "UPDATE embeddings SET metadata = '{not json' WHERE id = ?",
    "json-array": "UPDATE embeddings SET metadata = '[1, 2]' WHERE id = ?",
    "nan-vector": "UPDATE embeddings SET vector = x'0000c07f000000000000000000000000' WHERE id = ?",
}
"""What another program may have written, by the id of the row it damaged (NaN: a float32 NaN,
then three zeros)."""


def test_a_damaged_row_is_named_left_out_and_repaired(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "vectors.db"
    with SqliteEmbeddingStore(path) as store:
        store.add_all(
            [vec(1, n / 10) for n in range(6)],
            [TextSegment(f"tea note {n}", {"user": "ann", "n": n}) for n in range(6)],
            ids=["good-0", "good-1", *DAMAGE],
        )
    with sqlite3.connect(path) as raw:
        for row_id, statement in DAMAGE.items():
            raw.execute(statement, (row_id,))
    with caplog.at_level(logging.WARNING, "chatmemory.rag"), SqliteEmbeddingStore(path) as store:
        request = EmbeddingSearchRequest(query_embedding=vec(1), max_results=10)
        assert {m.embedding_id for m in store.search(request).matches} == {"good-0", "good-1"}
        assert {m.embedding_id for m in store.search_text("tea note", max_results=10)} == {
            "good-0",
            "good-1",
        }
        assert set(store.select(key("user").eq("ann"))) == {"good-0", "good-1"}
        store.add(vec(0, 1), TextSegment("more tea"), id="new")
        assert store.count() == 7  # every stored row, readable or not
        damaged = store.unreadable()
        assert set(damaged) == set(DAMAGE)
        assert "vector is 2 bytes, not 16" in damaged["short-vector"]
        assert "not JSON" in damaged["not-json"]
        assert "not a JSON object" in damaged["json-array"]
        assert "NaN" in damaged["nan-vector"]
        logged = " ".join(r.getMessage() for r in caplog.records)
        assert all(f"'{row_id}'" in logged for row_id in DAMAGE)
        assert "repair()" in logged
        assert caplog.text.count("short-vector") == 1  # named once, not on every search
        assert store.repair() == sorted(DAMAGE)
        assert (store.unreadable(), store.count(), store.repair()) == ({}, 3, [])


def test_a_damaged_row_removed_by_id_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "vectors.db"
    with SqliteEmbeddingStore(path) as store:
        store.add_all([vec(1), vec(0, 1)], [TextSegment("a"), TextSegment("b")], ids=["a", "b"])
    with sqlite3.connect(path) as raw:
        raw.execute(DAMAGE["not-json"], ("b",))
    with SqliteEmbeddingStore(path) as store:
        assert set(store.unreadable()) == {"b"}
        store.remove("b")
        assert (store.unreadable(), store.count()) == ({}, 1)


def test_a_row_damaged_by_another_connection_meanwhile_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "vectors.db"
    with SqliteEmbeddingStore(path) as store:
        store.add(vec(1), TextSegment("a"), id="a")
        assert store.count() == 1
        with sqlite3.connect(path) as raw:
            raw.execute(
                "INSERT INTO embeddings (id, vector, text, metadata) VALUES ('x', x'00', 't', '{}')"
            )
        request = EmbeddingSearchRequest(query_embedding=vec(1), max_results=5)
        assert [m.embedding_id for m in store.search(request).matches] == ["a"]
        assert set(store.unreadable()) == {"x"}


def test_removed_words_leave_the_file_once_scrubbed(tmp_path: Path) -> None:
    path = tmp_path / "vectors.db"
    with SqliteEmbeddingStore(path) as store:
        store.add_all(
            [vec(1, n) for n in range(40)],
            [
                TextSegment(f"note {n} zyxwvu4711", {"user": "ann", "tag": "qq9secret"})
                for n in range(20)
            ]
            + [TextSegment(f"note {n} keepword", {"user": "bob"}) for n in range(20)],
        )
        store.remove_all(filter=key("user").eq("ann"))
        assert store.search_text("zyxwvu4711") == []
        assert store.scrub()
        data = b"".join(p.read_bytes() for p in tmp_path.iterdir())
        assert b"zyxwvu4711" not in data
        assert b"qq9secret" not in data
        assert b"keepword" in data
        assert len(store.search_text("keepword", max_results=50)) == 20


def test_scrub_on_a_connection_of_ones_own_inside_a_transaction(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "app.db", isolation_level=None)
    store = SqliteEmbeddingStore(connection)
    store.add(vec(1), TextSegment("word"), id="w")
    connection.execute("BEGIN")
    store.remove("w")
    assert store.scrub()  # the -wal file is emptied once the owner commits
    connection.execute("COMMIT")
    assert store.count() == 0
    connection.close()


def test_a_failed_write_changes_nothing_and_the_store_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "refusing.db"
    with SqliteEmbeddingStore(path) as store:
        store.add_all([vec(1), vec(0, 1)], [TextSegment("a"), TextSegment("b")], ids=["a", "b"])
        with sqlite3.connect(path) as raw:  # another program refuses some rows
            raw.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON embeddings WHEN new.id = 'no' "
                "BEGIN SELECT RAISE(ABORT, 'refused here'); END"
            )
        with pytest.raises(StoreError, match="refused here"):
            store.add_all([vec(1, 1), vec(0, 0, 1)], ids=["yes", "no"])
        assert _ids(store) == ["a", "b"]
        shared = sqlite3.connect(path, isolation_level=None)
        shared.execute("BEGIN")
        on_it = SqliteEmbeddingStore(shared)
        on_it.add(vec(0, 0, 0, 1), id="kept")
        with pytest.raises(StoreError, match="refused here"):
            on_it.add(vec(0, 0, 1), id="no")  # its savepoint rolled back, the rest kept
        shared.execute("COMMIT")
        shared.close()
        store.add(vec(0, 0, 1), id="yes")
        assert _ids(store) == ["a", "b", "kept", "yes"]


def _ids(store: SqliteEmbeddingStore) -> list[str]:
    request = EmbeddingSearchRequest(query_embedding=vec(1, 1, 1, 1), max_results=10)
    return sorted(m.embedding_id for m in store.search(request).matches)


class _Any(Filter):
    def test(self, metadata: Mapping[str, Any]) -> bool:
        return True


def test_a_filter_of_ones_own_skips_unreadable_rows(tmp_path: Path) -> None:
    path = tmp_path / "own.db"
    with SqliteEmbeddingStore(path) as store:
        store.add_all(
            [vec(1), vec(0, 1), vec(0, 0, 1)], [TextSegment(t) for t in "abc"], ids=list("abc")
        )
    with sqlite3.connect(path) as raw:
        raw.execute(DAMAGE["not-json"], ("b",))
        raw.execute("UPDATE embeddings SET text = x'00' WHERE id = 'c'")
    with SqliteEmbeddingStore(path) as store:
        assert list(store.select(_Any())) == ["a"]
        assert store.unreadable() == {
            "b": "its metadata is not JSON",
            "c": "its text is bytes, not text",
        }
