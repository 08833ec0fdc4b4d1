"""What the two embedded stores add to the contract: LangChain4j's JSON file and merge for the
in-memory store; a cache that follows other connections, and one file shared with the chat
memory, for SQLite."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from chatmemory import ConfigurationError, SqliteChatMemoryStore, StoreError, UserMessage
from chatmemory.rag import (
    Embedding,
    EmbeddingSearchRequest,
    Filter,
    HashingEmbeddingModel,
    Hnsw,
    InMemoryEmbeddingStore,
    SqliteEmbeddingStore,
    TextSegment,
    key,
)

LANGCHAIN4J_JSON = """{"entries":[{"id":"a1","embedding":{"vector":[1.0,0.0,0.0]},
"embedded":{"text":"hello","metadata":{"metadata":{"page":1,"source":"a.txt"}}}},
{"id":"b2","embedding":{"vector":[0.0,1.0,0.0]}}]}"""


def test_in_memory_reads_and_writes_langchain4j_json(tmp_path: Path) -> None:
    store = InMemoryEmbeddingStore.from_json(LANGCHAIN4J_JSON)
    assert store.count() == 2
    [best] = store.search(
        EmbeddingSearchRequest(query_embedding=Embedding((1.0, 0.1, 0.0)), max_results=1)
    ).matches
    assert (best.embedding_id, best.embedded) == (
        "a1",
        TextSegment("hello", {"page": 1, "source": "a.txt"}),
    )
    assert json.loads(store.to_json()) == json.loads(LANGCHAIN4J_JSON)
    path = tmp_path / "store.json"
    store.save(path)
    assert InMemoryEmbeddingStore.load(path).to_json() == store.to_json()
    with pytest.raises(ConfigurationError, match="not an InMemoryEmbeddingStore JSON"):
        InMemoryEmbeddingStore.from_json('{"items": []}')
    assert repr(store) == "InMemoryEmbeddingStore(2 embeddings)"


def test_in_memory_merge_keeps_order_and_later_ids_win() -> None:
    first, second = InMemoryEmbeddingStore(), InMemoryEmbeddingStore()
    first.add(Embedding((1.0, 0.0)), TextSegment("one"), id="1")
    first.add(Embedding((0.0, 1.0)), TextSegment("two"), id="2")
    second.add(Embedding((1.0, 1.0)), TextSegment("two again"), id="2")
    merged = InMemoryEmbeddingStore.merge(first, second)
    assert [e["embedded"]["text"] for e in json.loads(merged.to_json())["entries"]] == [
        "one",
        "two again",
    ]
    with pytest.raises(ConfigurationError, match="merge"):
        InMemoryEmbeddingStore.merge(first, object())  # type: ignore[arg-type]


def test_one_model_per_store() -> None:
    store = InMemoryEmbeddingStore()
    store.add(Embedding((1.0, 0.0)))
    with pytest.raises(ConfigurationError, match="dimension 2, got one of 3"):
        store.add(Embedding((1.0, 0.0, 0.0)))
    with pytest.raises(ConfigurationError, match="dimensions"):
        InMemoryEmbeddingStore().add_all([Embedding((1.0,)), Embedding((1.0, 2.0))])


def test_sqlite_sees_what_another_connection_added_and_removed(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    model = HashingEmbeddingModel(64)
    reader, writer = SqliteEmbeddingStore(path), SqliteEmbeddingStore(path)
    with reader, writer:
        query = EmbeddingSearchRequest(query_embedding=model.embed_all(["tea"])[0])
        assert reader.search(query).matches == ()
        writer.add_all(
            model.embed_all(["tea", "coffee"]), [TextSegment("tea"), TextSegment("coffee")]
        )
        assert reader.search(query).matches[0].embedded == TextSegment("tea")
        writer.add(model.embed_all(["green tea"])[0], TextSegment("green tea"))  # only appended
        assert {m.embedded.text for m in reader.search(query).matches} == {  # type: ignore[union-attr]
            "tea",
            "coffee",
            "green tea",
        }
        writer.remove_all()
        assert reader.search(query).matches == ()
        assert reader.count() == 0


@pytest.mark.parametrize("kind", [InMemoryEmbeddingStore, SqliteEmbeddingStore])
def test_nested_metadata_survives(kind: type) -> None:
    store = kind()
    metadata = {"tags": ["a", "b"], "author": {"name": "Ann", "ids": [1, 2]}}
    store.add(Embedding((1.0, 0.0)), TextSegment("x", metadata))
    if isinstance(store, InMemoryEmbeddingStore):
        store = InMemoryEmbeddingStore.from_json(store.to_json())
    [match] = store.search(EmbeddingSearchRequest(query_embedding=Embedding((1.0, 0.0)))).matches
    assert match.embedded == TextSegment("x", metadata)


def test_sqlite_shares_the_chat_memory_file(tmp_path: Path) -> None:
    path = tmp_path / "chatmemory.db"
    with SqliteChatMemoryStore(path) as memories, SqliteEmbeddingStore(path) as vectors:
        memories.update_messages("ann", [UserMessage("hi")])
        vectors.add(Embedding((1.0, 0.0)), TextSegment("fact"))
        assert memories.get_messages("ann") == [UserMessage("hi")]
        assert vectors.count() == 1


def test_sqlite_refuses_bad_settings_and_reports_store_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="`table` must be a SQL name"):
        SqliteEmbeddingStore(tmp_path / "x.db", table="drop table; --")
    with pytest.raises(StoreError, match="cannot open"):
        SqliteEmbeddingStore(tmp_path)  # a directory
    store = SqliteEmbeddingStore()
    with pytest.raises(ConfigurationError, match=r"TextSegment\.metadata` holds attribute values"):
        store.add(Embedding((1.0,)), TextSegment("x", {"when": object()}))
    with pytest.raises(ConfigurationError, match=r"with str keys, got \{1: 'x'\}"):
        TextSegment("x", {1: "x"})  # type: ignore[dict-item]
    assert store.count() == 0
    store.close()
    with pytest.raises(StoreError, match="cannot search"):
        store.search(EmbeddingSearchRequest(query_embedding=Embedding((1.0,))))
    assert repr(store) == "SqliteEmbeddingStore(':memory:', table='embeddings')"


def test_hashing_model_is_deterministic_normalised_and_word_sensitive() -> None:
    model = HashingEmbeddingModel()
    tea, tea_again, teas, rocket, blank = model.embed_all(
        ["green tea", "Green TEA!", "green teas", "rocket launch", "  "]
    )
    assert model.dimension == tea.dimension == 384
    assert tea == tea_again
    assert sum(x * x for x in tea.vector) == pytest.approx(1.0)
    from chatmemory.rag import cosine_similarity

    assert cosine_similarity(tea, teas) > 0.6 > cosine_similarity(tea, rocket)
    assert blank.vector[0] == 1.0
    with pytest.raises(ConfigurationError, match="list of texts"):
        model.embed_all("one text")
    with pytest.raises(ConfigurationError, match=">= 8"):
        HashingEmbeddingModel(4)


def test_hashing_model_vectors_never_change() -> None:
    # Stores filled with "hashing-v1" must keep answering: the exact floats are pinned.
    [vector] = HashingEmbeddingModel().embed_all(["Refunds take 5 days, Ünïcödé!"])
    digest = hashlib.sha256(repr(vector.vector).encode()).hexdigest()
    assert digest == "0d233f54bc8cce70d9bceb645c564abfe591beaa910307649e53bf6fff9d2dc3"


def test_sqlite_on_a_connection_you_keep(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    connection = sqlite3.connect(path, check_same_thread=False)
    connection.execute("CREATE TABLE notes (body TEXT)")
    connection.execute("INSERT INTO notes VALUES ('yours, not yet committed')")
    assert connection.in_transaction
    store = SqliteEmbeddingStore(connection, table="facts")
    twin = SqliteEmbeddingStore(connection, table="facts")  # a second object on the same one
    assert store.path == twin.path == str(path)
    store.add(Embedding((1.0, 0.0)), TextSegment("tea"), id="t")
    assert bool(connection.in_transaction)  # a savepoint inside your transaction: you commit it
    assert [m.embedding_id for m in twin.search_text("tea")] == ["t"]
    twin.search(EmbeddingSearchRequest(query_embedding=Embedding((1.0, 0.0))))  # cache filled
    store.add(Embedding((0.0, 1.0)), TextSegment("cake"), id="c")
    store.remove("t")
    seen = twin.search(EmbeddingSearchRequest(query_embedding=Embedding((1.0, 0.0)))).matches
    assert [m.embedding_id for m in seen] == ["c"]  # the twin's cache followed
    connection.commit()
    twin.add(Embedding((0.5, 0.5)), TextSegment("jam"), id="j")  # no transaction open: one of
    assert not bool(connection.in_transaction)  # its own, committed
    twin.remove("j")
    store.close()  # yours stays open
    assert connection.execute("SELECT count(*) FROM notes").fetchone()[0] == 1
    with SqliteEmbeddingStore(path, table="facts") as reopened:
        assert [m.embedding_id for m in reopened.search_text("cake")] == ["c"]
        reopened.add(Embedding((1.0, 1.0)), TextSegment("scones"), id="s")  # autocommit mode
    assert twin.count() == 2
    with pytest.raises(ConfigurationError, match=r"sqlite3\.Connection"):
        SqliteEmbeddingStore(42)  # type: ignore[arg-type]
    connection.close()


def test_sqlite_bulk_writes_leave_your_connection_s_page_cache_as_you_set_it(
    tmp_path: Path,
) -> None:
    connection = sqlite3.connect(tmp_path / "app.db", check_same_thread=False)
    connection.execute("PRAGMA cache_size = -300")
    store = SqliteEmbeddingStore(connection)
    vectors = np.random.default_rng(2).standard_normal((2_000, 64))
    ids = store.add_all(vectors, [TextSegment(f"row {n}") for n in range(2_000)])  # 0.5 MB
    assert connection.execute("PRAGMA cache_size").fetchone()[0] == -300
    connection.execute(  # your own rule, which fails a bulk write inside its transaction
        "CREATE TRIGGER refuse BEFORE INSERT ON embeddings WHEN new.text = 'no' "
        "BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    with pytest.raises(StoreError, match="refused"):
        store.add_all(vectors[:40], [TextSegment("no")] * 40)
    assert connection.execute("PRAGMA cache_size").fetchone()[0] == -300
    connection.commit()
    assert store.count() == 2_000
    assert _nearest(store, Embedding(vectors[7]))[0] == ids[7]
    connection.close()


def test_sqlite_cache_after_writes_interleaved_with_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with SqliteEmbeddingStore(path) as ours, SqliteEmbeddingStore(path) as theirs:

        def everything(store: SqliteEmbeddingStore) -> list[tuple[str, str]]:
            request = EmbeddingSearchRequest(query_embedding=Embedding((1.0, 0.0)), max_results=99)
            return sorted((m.embedding_id, m.embedded.text) for m in store.search(request).matches)  # type: ignore[union-attr]

        ours.add_all([Embedding((1.0, 0.0))] * 3, [TextSegment(t) for t in "abc"], ids=list("abc"))
        everything(ours)  # the cache is read
        theirs.add(Embedding((1.0, 1.0)), TextSegment("d"), id="d")  # not seen yet by ours
        ours.add(Embedding((1.0, 0.5)), TextSegment("b2"), id="b")  # a replacement of ours
        theirs.remove("a")
        ours.add_all(
            [Embedding((0.5, 1.0))] * 2, [TextSegment("e1"), TextSegment("e2")], ids=["e", "e"]
        )
        ours.remove_all(["c"])
        expected = [("b", "b2"), ("d", "d"), ("e", "e2")]
        assert everything(ours) == everything(theirs) == expected
        with SqliteEmbeddingStore(path) as fresh:
            assert everything(fresh) == expected
            words = [(m.embedding_id, m.score) for m in fresh.search_text("b2 d e2", max_results=9)]
        assert sorted(row_id for row_id, _ in words) == ["b", "d", "e"]
        assert [(m.embedding_id, m.score) for m in ours.search_text("b2 d e2", max_results=9)] == (
            words
        )
        ours.remove_all()
        assert everything(theirs) == everything(ours) == []
        ours.add(Embedding((1.0, 0.0)), TextSegment("f"), id="f")
        assert everything(theirs) == everything(ours) == [("f", "f")]


def test_stores_on_one_shared_connection_write_from_threads(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "threads.db"
    connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    stores = [SqliteEmbeddingStore(connection), SqliteEmbeddingStore(connection)]
    errors: list[Exception] = []

    def work(store: SqliteEmbeddingStore, first: int) -> None:
        try:
            for n in range(first, first + 150):
                store.add(Embedding((1.0, n / 300)), TextSegment(f"row {n}"), id=f"r{n}")
                if n % 3 == 0:
                    store.remove(f"r{n}")
        except Exception as error:  # collected: the test asserts there were none
            errors.append(error)

    threads = [threading.Thread(target=work, args=(s, 150 * i)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    expected = sorted(f"r{n}" for n in range(300) if n % 3)
    request = EmbeddingSearchRequest(query_embedding=Embedding((1.0, 0.5)), max_results=300)
    for store in [*stores, SqliteEmbeddingStore(path)]:
        assert sorted(m.embedding_id for m in store.search(request).matches) == expected
    connection.close()


class _Odd(Filter):
    """A filter the stores' metadata index does not know: tested row by row."""

    def test(self, metadata: Mapping[str, Any]) -> bool:
        n = metadata.get("n")
        return isinstance(n, int) and n % 2 == 1


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_filter_of_ones_own_is_tested_row_by_row(kind: str, tmp_path: Path) -> None:
    store: Any = (
        InMemoryEmbeddingStore() if kind == "memory" else SqliteEmbeddingStore(tmp_path / "v.db")
    )
    ids = store.add_all(
        [Embedding((1.0, n / 10)) for n in range(6)],
        [TextSegment(f"t{n}", {"n": n}) for n in range(5)] + [None],
    )
    odd = _Odd() & key("n").lt(5)
    assert set(store.select(odd)) == {ids[1], ids[3]}
    found = store.search(
        EmbeddingSearchRequest(query_embedding=Embedding((1.0, 0.0)), max_results=5, filter=odd)
    )
    assert [m.embedding_id for m in found.matches] == [ids[1], ids[3]]
    store.remove_all(filter=~_Odd())
    assert store.count() == 3  # the row without a segment passes no filter, ~ included


def _chunked(path: Path) -> tuple[int, int]:
    with sqlite3.connect(path) as raw:
        chunks, rows = raw.execute(
            "SELECT count(*), coalesce(sum(size), 0) FROM embeddings_vectors"
        ).fetchone()
    return int(chunks), int(rows)


def _nearest(store: SqliteEmbeddingStore, query: Embedding, **given: Any) -> list[str]:
    request = EmbeddingSearchRequest(query_embedding=query, max_results=10, **given)
    return [m.embedding_id for m in store.search(request).matches]


def test_sqlite_keeps_its_vectors_in_chunks_that_a_new_process_reads(tmp_path: Path) -> None:
    path = tmp_path / "chunks.db"
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((300, 8))
    query = Embedding(rng.standard_normal(8))
    with SqliteEmbeddingStore(path) as store:
        store.add_all(vectors[:200], [TextSegment(f"r{n}", {"n": n}) for n in range(200)])
        for n in range(200, 240):  # one at a time: small chunks at the end are merged
            store.add(Embedding(vectors[n]), TextSegment(f"r{n}", {"n": n}), id=f"one-{n}")
        store.add_all(vectors[240:], ids=[f"bare-{n}" for n in range(240, 300)])
        store.remove_all(filter=key("n").lt(50))  # chunks written again without these rows
        store.remove_all([f"one-{n}" for n in range(200, 240)])  # a whole chunk goes
        store.add(Embedding(vectors[0]), TextSegment("again", {"n": 0}), id="again")
        chunks, rows = _chunked(path)
        assert rows == store.count() == 211
        assert chunks < 10
        before = _nearest(store, query), _nearest(store, query, filter=key("n").gte(100))
        assert len(store.select(key("n").gte(0))) == 151
    assert Path(f"{path}-embeddings.vectors").exists()  # written at close, for the next process
    with SqliteEmbeddingStore(path) as store:
        assert (_nearest(store, query), _nearest(store, query, filter=key("n").gte(100))) == before
        assert store.count() == 211
        assert store.select(key("n").eq(0)) == {"again": TextSegment("again", {"n": 0})}


def test_sqlite_rows_added_to_vectors_read_from_the_mapped_copy_are_found(tmp_path: Path) -> None:
    path = tmp_path / "grown.db"
    vectors = np.random.default_rng(7).standard_normal((400, 8))
    with SqliteEmbeddingStore(path) as store:
        store.add_all(vectors[:100], ids=[f"v{n}" for n in range(100)])
    mapped = Path(f"{path}-embeddings.vectors")
    saved = mapped.read_bytes()
    with SqliteEmbeddingStore(path) as store:
        assert _nearest(store, Embedding(vectors[5]))[0] == "v5"  # read from the mapped copy
        for first in range(100, 400, 50):  # the matrix it gave grows several times
            ids = [f"v{n}" for n in range(first, first + 50)]
            store.add_all(vectors[first : first + 50], ids=ids)
        grown = mapped.read_bytes()  # each write's vectors appended to the copy on disk,
        assert len(grown) == len(saved) + 300 * 8 * 4
        old = 100 * 8 * 4  # the vectors it held left where they were
        assert grown[len(saved) - old : len(saved)] == saved[-old:]
        for n in (0, 5, 99, 100, 250, 399):
            assert _nearest(store, Embedding(vectors[n]))[0] == f"v{n}"
    statements: list[str] = []
    connection = sqlite3.connect(path, check_same_thread=False)
    connection.set_trace_callback(statements.append)
    try:  # the next process maps every row, reading none from the table or the chunks
        store = SqliteEmbeddingStore(connection)
        assert _nearest(store, Embedding(vectors[399]))[0] == "v399"
        vectors_read = [s for s in statements if "vector," in s or "vectors FROM" in s]
        assert vectors_read == [  # only the rows above the copy's, none
            "SELECT rowid, id, vector, text, metadata FROM embeddings WHERE rowid > 400 "
            "ORDER BY rowid"
        ]
    finally:
        connection.close()


@pytest.mark.parametrize(
    "change",
    [
        "UPDATE embeddings SET vector = ? WHERE rowid = (SELECT min(rowid) FROM embeddings)",
        "DELETE FROM embeddings WHERE rowid = (SELECT min(rowid) FROM embeddings)",
        "INSERT INTO embeddings (id, vector, text) VALUES ('theirs', ?, 'theirs')",
        "DELETE FROM embeddings_vectors",
    ],
)
def test_sqlite_chunks_give_way_to_what_another_program_wrote(tmp_path: Path, change: str) -> None:
    path = tmp_path / "theirs.db"
    with SqliteEmbeddingStore(path) as store:
        ids = store.add_all([Embedding((1.0, n, 0.0)) for n in range(5)])
    theirs = np.array([0.0, 0.0, 1.0], dtype=np.float32).tobytes()
    with sqlite3.connect(path) as raw:
        raw.execute(change, (theirs,) if "?" in change else ())
        expected = {r[0]: r[1] for r in raw.execute("SELECT id, vector FROM embeddings")}
    query = Embedding((0.0, 0.0, 1.0))
    with SqliteEmbeddingStore(path) as store:
        found = store.search(EmbeddingSearchRequest(query_embedding=query, max_results=10))
        held = {m.embedding_id: m.embedding for m in found.matches}
        assert {i: e.array.astype(np.float32).tobytes() for i, e in held.items() if e} == expected
        store.remove(ids[-1])  # the next write puts the chunks in step again
        assert _chunked(path)[1] == store.count() == len(expected) - 1
    with SqliteEmbeddingStore(path) as store:
        assert len(_nearest(store, query)) == len(expected) - 1


def test_sqlite_a_removed_vector_leaves_the_file(tmp_path: Path) -> None:
    path = tmp_path / "forget.db"
    secret = np.array([0.123456789, 9.87654321, 5.5555551, 7.7777771], dtype=np.float32)
    with SqliteEmbeddingStore(path) as store:
        store.add_all(np.ones((20, 4)), [TextSegment("keep", {"user": "bob"})] * 20)
        store.add_all(secret[None, :], [TextSegment("secret", {"user": "ann"})])
    with SqliteEmbeddingStore(path) as store:  # opened: the vectors are mapped from a file
        assert list(store.select(key("user").eq("ann")).values()) == [
            TextSegment("secret", {"user": "ann"})
        ]
        mapped = Path(f"{path}-embeddings.vectors")
        assert secret.tobytes() in mapped.read_bytes()
        store.remove_all(filter=key("user").eq("ann"))
        assert store.scrub()
    assert all(secret.tobytes() not in file.read_bytes() for file in tmp_path.iterdir())


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_filters_follow_rows_added_and_removed_after_the_first(kind: str, tmp_path: Path) -> None:
    def opened() -> Any:
        if kind == "memory":
            return InMemoryEmbeddingStore()
        return SqliteEmbeddingStore(tmp_path / "f.db")

    store, other = opened(), None
    assert store.select(key("n").eq(1)) == {}
    store.add_all(np.eye(4), [TextSegment(f"t{n}", {"n": n}) for n in range(4)], ids=list("abcd"))
    for n in range(70):  # more filters than the store keeps masks for
        assert set(store.select(key("n").gte(n % 4))) == set("abcd"[n % 4 :])
    if kind == "sqlite":  # rows another connection adds join the metadata index
        other = opened()
        other.add_all(
            np.ones((2, 4)), [TextSegment("e", {"n": 9}), TextSegment("f")], ids=["e", "f"]
        )
    else:
        store.add_all(
            np.ones((2, 4)), [TextSegment("e", {"n": 9}), TextSegment("f")], ids=["e", "f"]
        )
    assert set(store.select(key("n").gte(3))) == {"d", "e"}
    store.remove_all(filter=key("n").lt(9))
    store.add_all(np.ones((3, 4)), [TextSegment("g", {"n": 9})] * 3)
    assert len(store.select(key("n").eq(9))) == 4
    assert set(store.select(key("n").ne(9))) == {"f"}


def test_sqlite_a_damaged_chunk_gives_way_to_the_table(tmp_path: Path) -> None:
    path = tmp_path / "chunk.db"
    with SqliteEmbeddingStore(path) as store:
        store.add_all(np.eye(3), ids=list("abc"))
        store.add_all(np.eye(3)[:1], ids=["d"])
    for damage in ("vectors = x'00'", "rowids = x'00'", "vectors = vectors || x'00000000'"):
        with sqlite3.connect(path) as raw:
            raw.execute(f"UPDATE embeddings_vectors SET {damage} WHERE chunk = 1")
        with SqliteEmbeddingStore(path) as store:
            assert _nearest(store, Embedding((1.0, 0.0, 0.0)))[:2] == ["a", "d"]


@pytest.mark.parametrize(
    ("at", "damage"),
    [
        (0, b"not ours"),
        (0, b"CMVEC\x04\x00\x00\xff"),
        (64, np.int64(99).tobytes()),  # the first row's rowid above the next ones'
        (0, None),  # cut short
    ],
)
def test_sqlite_a_damaged_mapped_file_gives_way_to_the_chunks(
    tmp_path: Path, at: int, damage: bytes | None
) -> None:
    path = tmp_path / "mapped.db"
    with SqliteEmbeddingStore(path) as store:
        store.add_all(np.eye(4), ids=list("abcd"))
    mapped = Path(f"{path}-embeddings.vectors")
    whole = mapped.read_bytes()
    if damage is None:
        mapped.write_bytes(whole[:-4])
    else:
        mapped.write_bytes(whole[:at] + damage + whole[at + len(damage) :])
    with SqliteEmbeddingStore(path) as store:
        assert _nearest(store, Embedding((0.0, 0.0, 1.0, 0.0)))[0] == "c"
    assert mapped.read_bytes() == whole  # written again whole, at close


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_many_filters_are_each_answered_exactly_however_many_are_kept(
    kind: str, tmp_path: Path
) -> None:
    vectors = np.random.default_rng(3).normal(size=(400, 8))
    segments = [TextSegment(str(n), {"n": n, "fifth": n % 5}) for n in range(400)]
    store: Any = (
        InMemoryEmbeddingStore() if kind == "memory" else SqliteEmbeddingStore(tmp_path / "f.db")
    )
    ids = store.add_all(vectors, segments)
    query = Embedding(vectors[7])
    # 70 filters (more than an index keeps), each passing a fifth of the rows or fewer: their
    # rows copied out, until half the matrix's size is spent, then gathered at each search.
    for rest in range(70):
        condition = key("fifth").eq(rest % 5) & key("n").gte(rest)
        found = store.search(
            EmbeddingSearchRequest(query_embedding=query, max_results=3, filter=condition)
        )
        exact = sorted(
            (n for n in range(400) if n % 5 == rest % 5 and n >= rest),
            key=lambda n: -float(vectors[n] @ vectors[7] / np.linalg.norm(vectors[n])),
        )[:3]
        assert [m.embedding_id for m in found.matches] == [ids[n] for n in exact]


def test_sqlite_segments_read_by_a_search_are_read_again_once_a_commit_changed_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kept.db"
    with SqliteEmbeddingStore(path) as store:
        store.add_all(
            np.eye(3), [TextSegment(f"row {n}", {"n": n}) for n in range(3)], ids=["a", "b", "c"]
        )
        request = EmbeddingSearchRequest(query_embedding=Embedding((1.0, 0.0, 0.0)), max_results=1)
        assert store.search(request).matches[0].embedded == TextSegment("row 0", {"n": 0})
        with sqlite3.connect(path) as other:  # another program edits the row in place
            other.execute("UPDATE embeddings SET text = 'edited' WHERE id = 'a'")
        assert store.search(request).matches[0].embedded == TextSegment("edited", {"n": 0})
        store.add(Embedding((1.0, 0.0, 0.0)), TextSegment("mine"), id="a")  # this store's write
        assert store.search(request).matches[0].embedded == TextSegment("mine")


def test_sqlite_stores_writing_in_turn_leave_chunks_a_new_process_reads_whole(
    tmp_path: Path,
) -> None:
    """Two store objects (two processes) adding rows to one table in turn: each takes the
    other's chunks of vectors as they are, so a new store opens from them, without reading the
    table row by row."""
    path = tmp_path / "shared.db"
    rows = np.random.default_rng(3).normal(size=(11_020, 4))
    added = 0
    with SqliteEmbeddingStore(path) as one, SqliteEmbeddingStore(path) as two:
        for bulk in (1_000, 10_000):  # a few chunks, then small writes by each in turn
            for store, count in [(one, bulk)] + [(one, 1), (two, 1)] * 5:
                ids = [f"r{k}" for k in range(added, added + count)]
                store.add_all(rows[added : added + count], ids=ids)
                added += count
                store.search(
                    EmbeddingSearchRequest(query_embedding=Embedding(rows[0]), max_results=1)
                )
    statements: list[str] = []
    connection = sqlite3.connect(path, check_same_thread=False)
    connection.set_trace_callback(statements.append)
    try:
        store = SqliteEmbeddingStore(connection)
        request = EmbeddingSearchRequest(query_embedding=Embedding(rows[1_007]), max_results=3)
        assert store.search(request).matches[0].embedding_id == "r1007"
        assert store.count() == added
        assert not any("vector FROM embeddings ORDER BY" in s for s in statements)
    finally:
        connection.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_filters_asked_before_follow_each_row_appended_after_them(
    kind: str, tmp_path: Path
) -> None:
    """A filter's rows are kept between searches and followed to the rows appended since (a
    turn's two rows): with its rows copied out (few rows), their codes copied out (many), or
    nearly every row passing, each search stays the exact one over every row."""
    rng = np.random.default_rng(11)
    vectors = rng.normal(size=(20_000, 16)).astype(np.float32)
    metadata: list[dict[str, Any] | None] = [
        {"n": n, "user": f"u{n % 40}", "tenth": n % 10} for n in range(len(vectors))
    ]

    def opened() -> Any:
        if kind == "memory":
            return InMemoryEmbeddingStore()
        return SqliteEmbeddingStore(tmp_path / "follow.db")

    def add(store: Any, rows: np.ndarray, metas: list[dict[str, Any] | None]) -> None:
        segments = [TextSegment("x", meta) if meta is not None else None for meta in metas]
        ids = store.add_all(rows, segments, ids=[str(len(held) + n) for n in range(len(rows))])
        assert ids == [str(len(held) + n) for n in range(len(rows))]
        held.extend(zip(rows, metas, strict=True))

    filters = [
        key("user").eq("u3"),  # 500 rows: their vectors copied out
        key("tenth").lt(2) | key("user").eq("u5"),  # 4,500: their codes copied out
        key("n").gte(0),  # every row
        ~key("user").in_(["u1", "u2"]),  # most rows
        key("n").gte(10) & _Odd(),  # tested row by row
    ]

    def check(store: Any, query: np.ndarray) -> None:
        for condition in filters:
            passing = [
                n for n, (_, meta) in enumerate(held) if meta is not None and condition.test(meta)
            ]
            rows = np.stack([held[n][0] for n in passing])
            cosines = rows @ query / np.linalg.norm(rows, axis=1) / np.linalg.norm(query)
            exact = [str(passing[n]) for n in np.argsort(-cosines, kind="stable")[:5]]
            request = EmbeddingSearchRequest(
                query_embedding=Embedding(query), max_results=5, filter=condition
            )
            assert [m.embedding_id for m in store.search(request).matches] == exact, condition

    held: list[tuple[np.ndarray, dict[str, Any] | None]] = []
    store = opened()
    add(store, vectors, metadata)
    for turn in range(6):
        if turn == 3 and kind == "sqlite":  # a new process: `user` looked up in its SQL index
            store.close()
            store = opened()
            filters[0] = key("user").eq("u7")
        new = rng.normal(size=(3, 16)).astype(np.float32)
        # A row each filter passes, one only the last two pass, and one passing none (for
        # the store, a row without metadata).
        passing = {"n": 3 + 2 * turn, "user": "u3", "tenth": 1}
        add(store, new, [passing, {"n": 21, "user": "u7"}, None])
        for query in (new[0], new[1], new[2], vectors[turn]):
            check(store, query)
            check(store, query)  # (a second scan: the codes are made)
    store.remove_all(["0", "3"])
    held[0] = held[3] = (held[0][0], None)
    check(store, vectors[9])


@pytest.mark.parametrize("graph", [False, True])
def test_sqlite_an_open_store_sees_rows_another_program_updated_in_place(
    tmp_path: Path, graph: bool
) -> None:
    """A row whose vector, text or metadata another program changed in place (an UPDATE), or
    replaced (INSERT OR REPLACE, which SQLite runs without the delete triggers), is searched,
    filtered, read and found by its words as it is now by a store that was open before: its
    cache, its metadata index, its graph and the full-text index follow."""
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(600, 16)).astype(np.float32)
    path = tmp_path / "updated.db"
    store = SqliteEmbeddingStore(path, approximate=Hnsw(min_rows=500) if graph else None)
    segments = [TextSegment(f"word{n}", {"user": "ann"}) for n in range(600)]
    store.add_all(vectors, segments, ids=[str(n) for n in range(600)])
    ann = key("user").eq("ann")

    def nearest(query: np.ndarray, **given: Any) -> list[str]:
        request = EmbeddingSearchRequest(query_embedding=Embedding(query), max_results=1, **given)
        return [m.embedding_id for m in store.search(request).matches]

    def words(text: str) -> list[str]:
        return [m.embedding_id for m in store.search_text(text, max_results=3)]

    moved, replaced = rng.normal(size=(2, 16)).astype(np.float32)
    before = nearest(moved)
    assert before != ["5"]
    assert nearest(moved, filter=ann) == before
    assert nearest(vectors[7]) == ["7"]
    assert words("word5") == ["5"]
    with sqlite3.connect(path) as other:
        other.execute(
            "UPDATE embeddings SET vector = ?, text = 'moved', metadata = ? WHERE id = '5'",
            (moved.tobytes(), json.dumps({"user": "bob"})),
        )
    assert nearest(moved) == ["5"]
    assert nearest(moved, filter=key("user").eq("bob")) == ["5"]
    assert nearest(moved, filter=ann) == before
    found = store.search(EmbeddingSearchRequest(query_embedding=Embedding(moved), max_results=1))
    assert found.matches[0].embedded == TextSegment("moved", {"user": "bob"})
    assert words("moved") == ["5"]
    assert words("word5") == []
    with sqlite3.connect(path) as other:
        other.execute(
            "INSERT OR REPLACE INTO embeddings (id, vector, text, metadata) VALUES (?, ?, ?, ?)",
            ("7", replaced.tobytes(), "replaced", json.dumps({"user": "cy"})),
        )
    assert nearest(replaced) == ["7"]
    assert nearest(vectors[7]) != ["7"]
    assert "7" not in store.select(ann)
    assert store.select(key("user").eq("cy")) == {"7": TextSegment("replaced", {"user": "cy"})}
    assert words("replaced") == ["7"]
    assert words("word7") == []
    assert store.count() == 600
    store.close()
    store = SqliteEmbeddingStore(path, approximate=Hnsw(min_rows=500) if graph else None)
    assert nearest(replaced) == ["7"]  # a new process: the vectors it maps are not the old ones
    assert nearest(vectors[7]) != ["7"]
    assert nearest(moved) == ["5"]
    assert len(store.select(ann)) == 598
    store.close()


def test_sqlite_an_open_store_sees_a_row_another_program_inserted_below_the_top(
    tmp_path: Path,
) -> None:
    """A row inserted with a rowid below the table's top one (in the gap a removed row left)
    is not "added above" what an open store holds: it is found all the same."""
    path = tmp_path / "gap.db"
    store = SqliteEmbeddingStore(path)
    store.add_all(np.eye(4), [TextSegment(f"t{n}", {"n": n}) for n in range(4)], ids=list("abcd"))
    store.remove("b")
    assert store.select(key("n").gte(0)).keys() == {"a", "c", "d"}
    with contextlib.closing(sqlite3.connect(path)) as other, other:
        (gap,) = other.execute("SELECT max(rowid) - 2 FROM embeddings").fetchone()  # b's
        other.execute(
            "INSERT INTO embeddings (rowid, id, vector, text, metadata) VALUES (?, ?, ?, ?, ?)",
            (gap, "x", np.eye(4, dtype=np.float32)[1].tobytes(), "gap", json.dumps({"n": 9})),
        )
    assert _nearest(store, Embedding((0.0, 1.0, 0.0, 0.0)))[0] == "x"
    assert store.select(key("n").gte(0)).keys() == {"a", "c", "d", "x"}
    assert [m.embedding_id for m in store.search_text("gap")] == ["x"]
    store.close()
