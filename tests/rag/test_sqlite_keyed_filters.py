"""The SQLite embedding store answers equalities on a metadata key from an index of SQLite's once
a filter named the key and the store wrote since: a new process's first filter then reads no
row's metadata, and its answers stay those of `Filter.test` as rows come and go (its own writes,
another connection's, rows another program wrote oddly)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from chatmemory.rag import (
    Embedding,
    EmbeddingSearchRequest,
    Filter,
    SqliteEmbeddingStore,
    TextSegment,
    key,
)

USERS: list[Any] = ["ann", "bob", "1", 1, True, "ann ", "éva"]


def segment(n: int) -> TextSegment:
    meta: dict[str, Any] = {"n": n, "kind": "note" if n % 3 else "mark"}
    if n % 8:  # some rows have no user
        meta["user"] = USERS[n % len(USERS)]
    return TextSegment(f"note {n}", meta)


def vec(n: int) -> Embedding:
    return Embedding((1.0, n / 100, (n % 7) / 10, 0.5))


FILTERS: list[Filter] = [
    key("user").eq("ann"),
    key("user").eq("1"),
    key("user").eq("nobody"),
    key("user").in_(["bob", "éva"]),
    key("user").eq("ann") & key("kind").eq("note"),
    key("user").eq("bob") | key("kind").eq("mark"),
]
"""Equalities on str values: answered from the keys' indexes."""

OTHERS: list[Filter] = [key("user").eq(1), key("user").ne("ann"), key("n").gte(40)]
"""Filters the keys' indexes do not answer (the full metadata index does)."""


def expected(path: Path, condition: Filter) -> set[str]:
    """The ids of the readable rows of the file whose metadata passes `condition`."""
    with sqlite3.connect(path) as raw:
        rows = raw.execute("SELECT id, text, metadata FROM embeddings").fetchall()
    passing = set()
    for row_id, text, metadata in rows:
        try:
            meta = json.loads(metadata) if metadata else {}
        except ValueError:
            continue
        if isinstance(text, str) and isinstance(meta, dict) and condition.test(meta):
            passing.add(row_id)
    return passing


def test_equalities_are_answered_from_the_keys_indexes_as_rows_come_and_go(
    tmp_path: Path,
) -> None:
    path = tmp_path / "vectors.db"
    with SqliteEmbeddingStore(path) as store:
        store.add_all([vec(n) for n in range(40)], [segment(n) for n in range(40)])
        store.add_all([vec(99)], ids=["no-segment"])
        assert set(store.select(key("user").eq("ann") & key("kind").eq("note")))
        store.add_all([vec(40)], [segment(40)])  # the next write indexes the keys named
    with sqlite3.connect(path) as raw:
        indexes = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert {"embeddings_key_user", "embeddings_key_kind"} <= indexes
        # Another program's rows, odd ones included: the indexes take them without failing.
        blob = np.asarray([1.0, 0.3, 0.2, 0.5], dtype=np.float32).tobytes()
        for row_id, metadata in [
            ("odd-json", "{not json"),
            ("odd-array", '["user", "ann"]'),
            ("odd-number", '{"user": 1, "kind": "note"}'),
            ("odd-nested", '{"user": {"ann": 1}}'),
            ("other-ann", '{"user": "ann", "kind": "note"}'),
            ("other-escaped", '{"user": "\\u00e9va", "kind": "note"}'),
        ]:
            raw.execute(
                "INSERT INTO embeddings (id, vector, text, metadata) VALUES (?, ?, 'odd', ?)",
                (row_id, blob, metadata),
            )
    statements: list[str] = []
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.set_trace_callback(statements.append)
    try:
        store = SqliteEmbeddingStore(connection)
        for condition in FILTERS:
            assert set(store.select(condition)) == expected(path, condition), condition
        assert any("INDEXED BY embeddings_key_user" in s for s in statements)
        assert not any("metadata FROM embeddings ORDER BY" in s for s in statements)
        # Its own writes, another connection's, removals: still exact.
        with SqliteEmbeddingStore(path) as other:
            for write in (
                lambda: store.add_all(
                    [vec(n) for n in range(41, 60)], [segment(n) for n in range(41, 60)]
                ),
                lambda: other.add_all(
                    [vec(n) for n in range(60, 70)], [segment(n) for n in range(60, 70)]
                ),
                lambda: other.remove_all(filter=key("user").eq("bob")),
                lambda: store.remove_all(["other-ann"]),
            ):
                write()
                for condition in FILTERS:
                    assert set(store.select(condition)) == expected(path, condition), condition
                    request = EmbeddingSearchRequest(
                        query_embedding=vec(3), max_results=100, filter=condition
                    )
                    found = {m.embedding_id for m in store.search(request).matches}
                    assert found == expected(path, condition), condition
        for condition in OTHERS:  # the full index, built now, answers these and the others
            assert set(store.select(condition)) == expected(path, condition), condition
        for condition in FILTERS:
            assert set(store.select(condition)) == expected(path, condition), condition
        store.close()
    finally:
        connection.close()


def test_a_read_creates_no_index(tmp_path: Path) -> None:
    path = tmp_path / "vectors.db"
    with SqliteEmbeddingStore(path) as store:
        store.add_all([vec(n) for n in range(10)], [segment(n) for n in range(10)])
        store.select(key("user").eq("ann"))
        store.search(
            EmbeddingSearchRequest(
                query_embedding=vec(1), max_results=3, filter=key("kind").eq("mark")
            )
        )
        with sqlite3.connect(path) as raw:
            assert not raw.execute(
                "SELECT name FROM sqlite_master WHERE name LIKE 'embeddings_key_%'"
            ).fetchall()
