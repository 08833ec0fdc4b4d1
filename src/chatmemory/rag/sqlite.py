"""`SqliteEmbeddingStore`: the embedded default, one SQLite file (it may be the chat-memory file).

Vectors are float32 BLOBs; searches run with numpy over a matrix each store object caches and
refreshes only when the table changed: `PRAGMA data_version` tells, at no I/O cost, whether
another connection committed, and new rows are appended to the cache without reading the old
ones again; the store's own writes update the cache directly. On a connection the application
keeps, writes are a savepoint of its transaction and changes are told by the row count and top
rowid.

Opening is one read of a few large BLOBs: beside the table, the store keeps every vector again
in chunks of up to 4,096 rows (``<table>_vectors``: the rowids and the float32 matrix of each),
written in the same transaction as the rows, so a new process loads the whole matrix without
reading a row. Segments and metadata stay in the table and are read only for the rows a search
returns. A filter of equalities to str values (a recall's ``memory_id == ...``) on keys filters
named before is looked up in SQLite indexes of those keys' values (made at the store's next write,
see `_sqlite_keys`); any other filter reads every row's metadata once, into an index of its
values.
The chunks are a copy the table can always overrule: triggers count, for any program, the rows
updated in place and the rows removed (a removal, an INSERT OR REPLACE of an id held, an insert
below the top rowid), so that those counts and the top rowid tell "rows only added" from any
other change; then the table is read as before, and the chunks are written again at the next
write. The full-text index follows another program's inserts, removals and text updates.
Text is indexed by SQLite's built-in FTS5 (BM25), so full-text and hybrid retrieval need
nothing more. Only the standard library's `sqlite3` (no extension such as sqlite-vec, which
many Python builds cannot load) and numpy.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import sqlite3
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import compress, islice
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import ConfigurationError, StoreError
from .._frozen import held, thaw
from .._sqlite import forgetting, scrub
from ._approximate import Graph, Hnsw, check_hnsw
from ._chunks import Chunks
from ._embeddings import (
    UNSET,
    Embedding,
    EmbeddingMatch,
    EmbeddingSearchRequest,
    EmbeddingSearchResult,
    SingleWrites,
    _Unset,
    check_filter,
    check_text_search,
    removal,
)
from ._filters import Filter
from ._hybrid import fused_order, vector_half
from ._sqlite_keys import KeyedRows
from ._sqlite_text import selective
from ._values import TextSegment
from ._vectors import MetadataIndex, Selection, VectorIndex, check_embeddings, words

__all__ = ["SqliteEmbeddingStore"]

_LIMITED = 0.25
"""From this share of the rows passing a filter, a full-text search asks FTS5 for its best only
(twice the rows wanted over that share; all of them if too few then pass), not for every row
that matches."""

_Added = tuple[int, int, "npt.NDArray[np.float32]", list[TextSegment | None]]
"""Rows a write added: the table's top rowid before it inserted them, the rowid of the first
(the others follow it one by one), their vectors as one float32 matrix, their segments."""

_SHARED_LOCKS: dict[int, threading.RLock] = {}
_SHARED_LOCKS_GUARD = threading.Lock()


def _lock_for(connection: sqlite3.Connection) -> threading.RLock:
    """One lock per connection given by the application, shared by every store on it: a
    connection has one transaction at a time, so two stores must not write through it at
    once. (Keyed by id: connections take no weak references; a reused id only shares a lock.)"""
    with _SHARED_LOCKS_GUARD:
        return _SHARED_LOCKS.setdefault(id(connection), threading.RLock())


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_BULK = "bulk"
"""The state row a bulk write sets inside its transaction: the insert trigger then leaves the
text to the write, which indexes the texts it was given together (not read back from its
rows)."""
_BULK_FROM = 32
"""From this many rows, `add_all` is a bulk write."""
_ROOM, _ROOM_MOST = 3, 256 << 20
"""A bulk write's page cache holds this many times its vectors' bytes (each is written in its
row and in a chunk, with the rows' other columns, the id index and the full-text index), up to
that many bytes (a larger write is spilled to the WAL before its commit, as SQLite does)."""
_KEPT, _KEPT_AT_ONCE = 4_096, 64
"""Rows whose segments a store keeps read (see `_segments`), and the most one read adds."""


def _encoder() -> Callable[[Any], str]:
    """Metadata (the dict a FrozenDict holds, JSON-like by construction: TextSegment checks it;
    a FrozenDict inside is thawed) as the JSON text
    `json.dumps(..., ensure_ascii=False)` writes, from one C encoder made once (`dumps` makes
    one per call, which costs more than the encoding of a small object)."""
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - a Python without the json module's C speedups
        return json.JSONEncoder(ensure_ascii=False, default=thaw).encode
    encode = make(None, thaw, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)
    return lambda value: "".join(encode(value, 0))


_json = _encoder()
log = logging.getLogger("chatmemory.rag")


class SqliteEmbeddingStore(SingleWrites):
    """Embeddings in the table `table` of the SQLite file at `path` (created when missing).

    `path` may also be an open `sqlite3.Connection` (the one your application already keeps
    for the file; open it with ``check_same_thread=False`` to search from several threads): a
    write inside a transaction you left open is a savepoint you commit with yours, and
    `close()` leaves the connection open. Thread-safe; several processes may share the file
    (WAL). Adding an id that exists replaces it. `search_text` ranks segments by FTS5's BM25
    for `FullTextContentRetriever` and `HybridContentRetriever`.

    A removed row is overwritten in the file (``secure_delete``, set on the connection, also on
    one you gave); `scrub()` also merges the full-text index, where FTS5 keeps removed words
    until a merge, and empties the ``-wal`` file (`forget_user` calls it). A stored row that
    cannot be read (a vector of the wrong length, metadata that is not a JSON object: written
    by another program, or a damaged file) is left out of every search and logged with its id;
    the other rows keep working, `unreadable()` lists such rows and `repair()` removes them.

    A metadata key that equality filters name gets, at the store's next write, a SQLite index of
    its str values (``<table>_key_<name>``, at most 8 a table), so that a new process answers
    such a filter without reading every row's metadata.

    Searches are exact unless `approximate=Hnsw()`: then, from `Hnsw.min_rows` rows on, an
    HNSW graph (faiss) finds the candidates, scored exactly; it is saved beside the file
    (``<path>-<table>.hnsw``) once built, as it doubles and at `close()`, followed (new rows
    added) by the next process, built
    again when another program changed a row in place, and removed from the disk as soon as a
    row it holds is removed."""

    def __init__(
        self,
        path: str | Path | sqlite3.Connection = ":memory:",
        *,
        table: str = "embeddings",
        approximate: Hnsw | None = None,
    ) -> None:
        if not isinstance(table, str) or not _NAME.fullmatch(table):
            raise ConfigurationError(
                f"`table` must be a SQL name (letters, digits, _), got {table!r}"
            )
        if not isinstance(path, (str, Path, sqlite3.Connection)):
            raise ConfigurationError(
                f"`path` must be a file path or a sqlite3.Connection, got {path!r}"
            )
        self.table = table
        self.approximate = check_hnsw(approximate)
        self._graph: Graph | None = None
        self._owned = not isinstance(path, sqlite3.Connection)
        self.path = "<connection>" if isinstance(path, sqlite3.Connection) else str(path)
        try:
            if isinstance(path, sqlite3.Connection):
                self._db = path
                row = path.execute("PRAGMA database_list").fetchone()
                self.path = str(row[2]) if row and row[2] else ":memory:"
            else:
                if self.path != ":memory:":
                    Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(
                    self.path, check_same_thread=False, isolation_level=None, timeout=30
                )
                if self.path != ":memory:":
                    self._db.execute("PRAGMA journal_mode=WAL")
                    # The chunks of vectors are read through the page cache's mapping, not
                    # copied one page at a time (several times faster for large BLOBs).
                    self._db.execute(f"PRAGMA mmap_size = {1 << 32}")
                    # As the chat-memory store: a commit survives the process being killed,
                    # and is synced to the disk at the next checkpoint rather than at once.
                    self._db.execute("PRAGMA synchronous = NORMAL")
            forgetting(self._db)
            mapped = None if self.path == ":memory:" else Path(f"{self.path}-{table}.vectors")
            self._chunks = Chunks(table, mapped)
            self._create()
        except sqlite3.Error as error:
            raise StoreError(f"cannot open {self.path!r}: {error}", store=self) from None
        self._lock = _lock_for(self._db) if not self._owned else threading.RLock()
        self._cache = VectorIndex()  # the vectors, by rowid
        self._metadata: MetadataIndex | None = None  # the cached rows' metadata, on first filter
        # that the keys' SQL indexes cannot answer (see _sqlite_keys)
        self._keyed = KeyedRows(table)
        self._damaged: dict[str, str] = {}  # rows that cannot be read: id -> why
        self._version: int | None = None  # PRAGMA data_version when the cache was read
        self._shape = (-1, 0, -1)  # rows removed from the table (its counter), max rowid and
        # rows updated in place (its counter), when the cache was read
        self._term_docs: dict[str, tuple[int, int]] = {}  # see _sqlite_text
        self._segments: dict[int, tuple[str, TextSegment | None]] = {}
        """The id and segment of rows searches returned lately, by rowid (on a connection of
        its own; rowids are never reused, so they hold until a row is removed or updated in
        place, by this store or another program: a commit that only added rows keeps them)."""
        self._graph_path = None if mapped is None else Path(f"{self.path}-{table}.hnsw")

    def __repr__(self) -> str:
        return f"SqliteEmbeddingStore({self.path!r}, table={self.table!r})"

    def _create(self) -> None:
        t = self.table
        # One statement at a time: executescript() would commit a transaction the owner of a
        # shared connection left open.
        for statement in (
            f"""CREATE TABLE IF NOT EXISTS {t} (
                rowid INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: the cache relies on it
                id TEXT NOT NULL UNIQUE,
                vector BLOB NOT NULL,
                text TEXT,
                metadata TEXT
            )""",
            f"""CREATE VIRTUAL TABLE IF NOT EXISTS {t}_fts
                USING fts5(text, content='{t}', content_rowid='rowid')""",
        ):
            self._db.execute(statement)
        self._chunks.create(self._db)  # the state table, which the insert trigger reads
        (made,) = self._db.execute(
            "SELECT coalesce(max(sql), '') FROM sqlite_master WHERE type = 'trigger' AND name = ?",
            (f"{t}_ai",),
        ).fetchone()
        if made and _BULK not in made:  # a file of an earlier version: one insert at a time
            self._db.execute(f"DROP TRIGGER {t}_ai")
        # Outside this store's bulk write (its flag, which no other connection sees).
        alone = f"NOT EXISTS (SELECT 1 FROM {t}_state WHERE name = '{_BULK}')"
        # Rows removed, counted (by any program), so that a refresh tells "only added" from
        # any other change by a counter and the top rowid, without counting the table's rows.
        removed = (
            f"INSERT INTO {t}_state (name, value) VALUES ('deletes', 1) "
            "ON CONFLICT (name) DO UPDATE SET value = value + 1;"
        )
        for statement in (
            # Text is indexed row by row, unless a bulk write (this store's add_all of many
            # rows) flagged its transaction: it then indexes its texts together, several times
            # faster. Every other insert is indexed.
            f"""CREATE TRIGGER IF NOT EXISTS {t}_ai AFTER INSERT ON {t} WHEN new.text IS NOT NULL
                AND {alone}
            BEGIN
                INSERT INTO {t}_fts(rowid, text) VALUES (new.rowid, new.text);
            END""",
            f"""CREATE TRIGGER IF NOT EXISTS {t}_ad AFTER DELETE ON {t} WHEN old.text IS NOT NULL
            BEGIN
                INSERT INTO {t}_fts({t}_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
            END""",
            # Another program's UPDATE of a row's text: the words indexed follow (a 'delete'
            # must give the words indexed, or it damages the index).
            f"""CREATE TRIGGER IF NOT EXISTS {t}_au_text AFTER UPDATE OF text ON {t}
            BEGIN
                INSERT INTO {t}_fts({t}_fts, rowid, text)
                    SELECT 'delete', old.rowid, old.text WHERE old.text IS NOT NULL;
                INSERT INTO {t}_fts(rowid, text)
                    SELECT new.rowid, new.text WHERE new.text IS NOT NULL;
            END""",
            f"CREATE TRIGGER IF NOT EXISTS {t}_deletes AFTER DELETE ON {t} BEGIN {removed} END",
            # Another program's INSERT OR REPLACE of an id held removes the row without firing
            # the delete triggers (SQLite fires them for REPLACE only with recursive triggers):
            # counted as a removal here, so that an open store reads its rows again rather than
            # take the new row for one only added. (An INSERT OR IGNORE of an id held counts
            # too: an open store then reads its rows again for nothing.) This store's bulk
            # writes remove the ids they replace first, and skip the look-up.
            f"""CREATE TRIGGER IF NOT EXISTS {t}_replaced BEFORE INSERT ON {t}
                WHEN {alone} AND EXISTS (SELECT 1 FROM {t} WHERE id = new.id)
            BEGIN {removed} END""",
            # A row another program inserted with a rowid below the top one (in the gap a
            # removed row left) is not above what an open store holds: counted the same way.
            f"""CREATE TRIGGER IF NOT EXISTS {t}_below AFTER INSERT ON {t}
                WHEN {alone} AND new.rowid < (SELECT max(rowid) FROM {t})
            BEGIN {removed} END""",
        ):
            self._db.execute(statement)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One transaction, or a savepoint inside the transaction the connection's owner has
        open (committed by them)."""
        if self._db.in_transaction:
            self._db.execute("SAVEPOINT chatmemory_embeddings")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK TO chatmemory_embeddings")
                self._db.execute("RELEASE chatmemory_embeddings")
                raise
            self._db.execute("RELEASE chatmemory_embeddings")
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        """Close the connection this store opened (a connection you gave stays open). When
        this store's writes left the memory-mapped copy of the vectors behind, it is written
        first from the cache, so that the next process opens without reading the table."""
        if self._owned:
            with self._lock, contextlib.suppress(sqlite3.Error):
                version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
                # Nothing committed to the table since the cache was read (to the file, maybe:
                # a chat memory beside it commits every turn; the table's counts tell).
                if self._version is not None and (
                    version == self._version or self._stamp() == self._shape
                ):
                    self._chunks.keep(self._db, self._cache)
                    if self._graph is not None:  # with the rows written since its last search
                        self._graph.follow(self._cache)
                        self._graph.keep_file(self._cache)
            self._db.close()

    def __enter__(self) -> SqliteEmbeddingStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def count(self) -> int:
        """How many embeddings the store holds."""
        return len(self)

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0])

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as error:
            raise StoreError(f"cannot {doing} in {self.path!r}: {error}", store=self) from None

    def add_all(
        self,
        embeddings: Sequence[Embedding] | npt.NDArray[Any],
        segments: Sequence[TextSegment] | None = None,
        *,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        """Store several embeddings (a list, or an `(n, dimension)` array) with their segments,
        in one transaction; their ids (new UUIDs unless `ids` are given; an id already stored
        is replaced)."""
        batch = check_embeddings(embeddings, segments, ids)
        if not len(batch.vectors):
            return []
        new_ids = [given or str(uuid.uuid4()) for given in batch.ids]
        last = dict(zip(new_ids, range(len(new_ids)), strict=True))  # a repeated id: the last
        order = sorted(last.values())  # wins
        vectors = batch.vectors[order] if len(order) != len(new_ids) else batch.vectors
        kept = [batch.segments[n] for n in order]
        kept_ids = [new_ids[n] for n in order]
        texts = [None if s is None else s.text for s in kept]
        columns = (  # id, vector, text, metadata
            kept_ids,
            list(np.ascontiguousarray(vectors)),  # each row a view: bound as its bytes
            texts,
            [None if s is None else _json(held(s.metadata)) for s in kept],
        )
        bulk = len(kept_ids) >= _BULK_FROM
        t = self.table
        with self._lock, self._errors("add embeddings"):
            self._refresh()
            self._cache.check(vectors.shape[1])
            room = _room(self._db, min(_ROOM * vectors.nbytes, _ROOM_MOST) if bulk else 0)
            with self._following() as follow, room, self._writing():
                self._keyed.create(self._db)
                replaced = self._db.execute(
                    f"DELETE FROM {t} WHERE id IN (SELECT value FROM json_each(?)) "
                    f"RETURNING rowid, id",
                    (json.dumps(kept_ids),),
                ).fetchall()
                (top,) = self._db.execute(f"SELECT coalesce(max(rowid), 0) FROM {t}").fetchone()
                if bulk:
                    self._db.execute(f"INSERT INTO {t}_state (name, value) VALUES ('{_BULK}', 1)")
                # SQLite gives the first row its rowid (AUTOINCREMENT: above every rowid the
                # table ever held), the others follow it: so their rowids are known without
                # reading back the rows just written (65-80 ms per 10,000 rows).
                ((first,),) = self._db.execute(  # (all fetched: the statement is done)
                    f"INSERT INTO {t} (id, vector, text, metadata) VALUES (?, ?, ?, ?) "
                    f"RETURNING rowid",
                    [column[0] for column in columns],
                ).fetchall()
                keys = range(first, first + len(kept_ids))
                if len(keys) > 1:
                    self._db.executemany(
                        f"INSERT INTO {t} (rowid, id, vector, text, metadata) "
                        f"VALUES (?, ?, ?, ?, ?)",
                        zip(keys[1:], *(islice(c, 1, None) for c in columns), strict=True),
                    )
                if bulk:  # the texts as given, not read back from the rows
                    given = [text is not None for text in texts]
                    self._db.executemany(
                        f"INSERT INTO {t}_fts (rowid, text) VALUES (?, ?)",
                        zip(compress(keys, given), compress(texts, given), strict=True),
                    )
                    self._db.execute(f"DELETE FROM {t}_state WHERE name = '{_BULK}'")
                follow(replaced, (int(top), int(first), vectors, kept))
        return new_ids

    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
        if not isinstance(request, EmbeddingSearchRequest):
            raise ConfigurationError(f"search() takes an EmbeddingSearchRequest, got {request!r}")
        with self._lock, self._errors("search"):
            self._refresh()
            while True:  # again only when a row found turned out unreadable (then left out)
                if request.query is None:
                    found = self._ranked(request, request.max_results)
                else:  # hybrid (see _hybrid): both rankings fused, rows read for the best only
                    depth = vector_half(request).max_results
                    vectors = self._ranked(request, depth)
                    texts = self._text_ranked(request.query, depth, request.filter)[:depth]
                    at = {k: a for k, _, a in (*texts, *vectors)}  # the vectors' always known
                    order = fused_order([[k for k, _, _ in vectors], [k for k, _, _ in texts]])
                    found = [(k, score, at[k]) for k, score in order[: request.max_results]]
                rows = self._read([k for k, _, _ in found])
                if all(k in rows for k, _, _ in found):  # then no row left: positions hold
                    embeddings = self._cache.embeddings([at for _, _, at in found])
                    return EmbeddingSearchResult(
                        tuple(
                            EmbeddingMatch(score, rows[k][0], vector, rows[k][1])
                            for (k, score, _), vector in zip(found, embeddings, strict=True)
                        )
                    )

    def _ranked(self, request: EmbeddingSearchRequest, count: int) -> list[tuple[int, float, int]]:
        """(rowid, score, position) of the `count` rows nearest the request's embedding."""
        selected = None
        if request.filter is not None:  # (on no rows too: the keys it names get indexed)
            selected = self._selection(request.filter)
        found = self._cache.top(
            request.query_embedding, count, request.min_score, selected, self._graph_now()
        )
        if self._graph is not None:  # saved once built, then as it doubles
            self._graph.keep_file(self._cache, grown=True)
        return found

    def _graph_now(self) -> Graph | None:
        """The approximate index to search with (see `Hnsw`): the one kept while no program
        updated a row of the table in place (the state table counts such updates; the count
        the cache was last brought up to, read with its other counts, no statement more)."""
        if self.approximate is None or len(self._cache) < self.approximate.min_rows:
            return None
        self._graph = Graph.kept(
            self.approximate, self._cache, self._graph, self._shape[2], self._graph_path
        )
        return self._graph

    def _match(
        self, row: tuple[str, TextSegment | None], score: float, key: int, at: int | None = None
    ) -> EmbeddingMatch:
        """The match of the row `key` (at the position `at` of the cache, when known)."""
        vector = self._cache.vector(key) if at is None else self._cache.vector_at(at)
        return EmbeddingMatch(score, row[0], vector, row[1])

    def _read(self, keys: Sequence[int]) -> dict[int, tuple[str, TextSegment | None]]:
        """The id and segment of each of the rows `keys` (rowids) that can be read; a row that
        cannot is named, logged once and left out of the cache (and so of every search), as is
        one no longer in the table."""
        if not keys:
            return {}
        kept = self._segments
        found = {k: kept[k] for k in keys if k in kept}
        missing = [k for k in keys if k not in found]
        if not missing:
            return found
        rows = self._db.execute(
            f"SELECT rowid, id, text, metadata FROM {self.table} "
            f"WHERE rowid IN (SELECT value FROM json_each(?))",
            (json.dumps(missing),),
        )
        for rowid, row_id, text, metadata in rows:
            try:
                found[rowid] = (row_id, _segment(text, metadata))
            except ValueError as error:
                self._unreadable(row_id, str(error))
        gone = [k for k in missing if k not in found]
        if gone:
            self._forget_rows(gone)
        if self._owned and len(missing) <= _KEPT_AT_ONCE:  # a search's rows, not a select's
            if len(kept) + len(missing) > _KEPT:
                kept.clear()
            kept.update((k, found[k]) for k in missing if k in found)
        return found

    def _forget_rows(self, keys: Sequence[int]) -> None:
        """Leave rows out of the cache (unreadable, or gone from the table)."""
        self._cache.remove(keys)

    def _unreadable(self, row_id: str, why: str) -> None:
        if self._damaged.get(row_id) != why:
            log.warning(
                "the embedding %r in %r cannot be read (%s): it is left out of every search; "
                "remove it with repair()",
                row_id,
                self,
                why,
            )
        self._damaged[row_id] = why

    def _selection(self, condition: Filter) -> Selection:
        """The cache's rows `condition` passes (kept by the cache until a row is removed; the
        rows appended since are looked at alone)."""
        return self._cache.selection(repr(condition), lambda start: self._mask(condition, start))

    def _mask(self, condition: Filter, start: int) -> npt.NDArray[np.bool_]:
        """A boolean per cached row from the position `start` on: whether it passes
        `condition`. Equalities on keys SQLite indexes are looked up there until the full
        metadata index is built (see _sqlite_keys); else that index, built first (reading it
        may leave rows out of the cache)."""
        if self._metadata is None:
            found = self._keyed.mask(self._db, condition, self._cache, start)
            if found is not None:
                return found
        metadata = self._metadata_index()
        return metadata.mask(condition, self._cache, self._scan, start)

    def _metadata_index(self) -> MetadataIndex:
        """The index of every cached row's metadata, read once from the table (rows whose
        metadata cannot be read are named and left out)."""
        if self._metadata is None:
            keys: list[int] = []
            values: list[dict[str, Any] | None] = []
            broken: list[int] = []
            for rowid, row_id, text, metadata in self._db.execute(
                f"SELECT rowid, id, text, metadata FROM {self.table} ORDER BY rowid"
            ):
                try:
                    values.append(None if text is None else _metadata(text, metadata))
                except ValueError as error:
                    self._unreadable(row_id, str(error))
                    broken.append(rowid)
                    continue
                keys.append(rowid)
            if broken:
                self._forget_rows(broken)
            self._keyed.clear()  # the full index answers every filter from now on
            self._metadata = MetadataIndex()
            self._metadata.add(keys, values)
        return self._metadata

    def _scan(self, condition: Filter) -> list[int]:
        """The rows a filter the metadata index does not know passes, tested one by one."""
        passing = []
        for rowid, text, metadata in self._db.execute(
            f"SELECT rowid, text, metadata FROM {self.table} WHERE text IS NOT NULL"
        ):
            try:
                segment = _segment(text, metadata)
            except ValueError:
                continue
            if segment is not None and condition.test(segment.metadata):
                passing.append(rowid)
        return passing

    def _chosen(self, condition: Filter) -> list[int]:
        rows = self._selection(condition)  # first: reading the metadata may leave rows out
        chosen: list[int] = self._cache.keys[rows.positions].tolist()
        return chosen

    def search_text(
        self, text: str, *, max_results: int = 3, filter: Filter | None = None
    ) -> list[EmbeddingMatch]:
        check_text_search(text, max_results, filter)
        with self._lock, self._errors("search text"):
            self._refresh()
            chosen: list[tuple[int, float, int | None]] = []
            chosen += self._text_ranked(text, max_results, filter)
            found: list[EmbeddingMatch] = []
            while chosen and len(found) < max_results:
                part, chosen = (
                    chosen[: max_results - len(found)],
                    chosen[max_results - len(found) :],
                )
                rows = self._read([k for k, _, _ in part])
                if len(rows) < len(part):  # rows left the cache: positions moved
                    found += [self._match(rows[k], score, k) for k, score, _ in part if k in rows]
                    chosen = [(k, score, None) for k, score, _ in chosen]
                else:
                    found += [self._match(rows[k], score, k, at) for k, score, at in part]
            return found

    def _text_ranked(
        self, text: str, count: int, filter: Filter | None
    ) -> list[tuple[int, float, int]]:
        """(rowid, BM25 score, position) of the rows best matching `text`'s words, best first,
        of those `filter` passes: at least the `count` best (and as many as rows are known
        unreadable) when as many match."""
        fts = f"{self.table}_fts"
        terms = selective(  # the words worth ranking by: see _sqlite_text
            self._db, fts, list(dict.fromkeys(words(text))), self._term_docs, len(self._cache)
        )
        if not terms:
            return []
        # Only rowids and scores leave FTS5 (sorting whole rows, vectors included, cost more
        # than the ranking); segments are read for the rows returned.
        query = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        rows = None if filter is None or not len(self._cache) else self._selection(filter)
        wanted: int | None = count + len(self._damaged)
        share = 1.0 if rows is None else len(rows.positions) / len(self._cache)
        if share < 1.0:  # as many more as the filter may drop, by the share it passes
            few = share < _LIMITED
            wanted = None if few else 2 * math.ceil(count / share) + len(self._damaged)
        ranked = self._words_ranked(query, wanted)
        found = self._text_held(ranked, rows)
        if wanted is not None and len(ranked) == wanted and len(found) < count:
            found = self._text_held(self._words_ranked(query, None), rows)  # it dropped more
        return found

    def _words_ranked(self, query: str, limit: int | None) -> list[Any]:
        """(rowid, BM25 score) of the FTS5 rows matching `query`, best first: the `limit` best,
        or all."""
        fts = f"{self.table}_fts"
        return self._db.execute(
            f"SELECT rowid, -bm25({fts}) FROM {fts} WHERE {fts} MATCH ? "
            f"ORDER BY bm25({fts}), rowid {'' if limit is None else 'LIMIT ?'}",
            (query,) if limit is None else (query, limit),
        ).fetchall()

    def _text_held(self, ranked: list[Any], rows: Selection | None) -> list[tuple[int, float, int]]:
        """The rows of `ranked` (rowid, score) the cache holds (and `rows` has), with their
        positions."""
        keys = np.asarray([r[0] for r in ranked], dtype=np.int64)
        held = np.searchsorted(self._cache.keys, keys)
        held[held >= len(self._cache)] = 0
        ok = (self._cache.keys[held] == keys) if len(self._cache) else keys < 0
        if rows is not None:
            ok &= rows.mask[held]
        return [
            (int(r[0]), float(r[1]), at)
            for r, good, at in zip(ranked, ok.tolist(), held.tolist(), strict=True)
            if good
        ]

    def remove_all(
        self, ids: Sequence[str] | Filter | _Unset = UNSET, *, filter: Filter | _Unset = UNSET
    ) -> None:
        chosen = removal(ids, filter)
        with self._lock, self._errors("remove embeddings"):
            self._refresh()
            with self._following() as follow, self._writing():
                self._keyed.create(self._db)
                if chosen is None:
                    statement = f"DELETE FROM {self.table} RETURNING rowid, id"
                    argument: tuple[str, ...] = ()
                elif isinstance(chosen, list):
                    statement = f"DELETE FROM {self.table} WHERE id IN "
                    argument = (json.dumps(chosen),)
                else:
                    statement = f"DELETE FROM {self.table} WHERE rowid IN "
                    argument = (json.dumps(self._chosen(chosen)),)
                if chosen is not None:
                    statement += "(SELECT value FROM json_each(?)) RETURNING rowid, id"
                follow(self._db.execute(statement, argument).fetchall())

    def select(self, filter: Filter) -> dict[str, TextSegment | None]:
        """Every entry whose metadata passes `filter`: its segment, by id (exact)."""
        check_filter(filter)
        with self._lock, self._errors("select embeddings"):
            self._refresh()
            keys = self._chosen(filter)
            rows = self._read(keys)
            return dict(rows[k] for k in keys if k in rows)

    @contextmanager
    def _following(self) -> Iterator[Callable[..., None]]:
        """Keep the cache (and the chunks of vectors) in step with this store's own write,
        which the caller makes in the block and reports with the (rowid, id) it deleted (or
        replaced) and the rows it added (see `_Added`). When nothing else committed since the
        cache was read (data_version, read under the write lock, says so) and no row lay above
        the cache's before the write inserted its rows, the cache drops those rows and takes
        the added ones as they are, reading nothing, and the chunks are written in the same
        transaction.
        Otherwise, or on a shared connection, `_refresh` decides after the write; after a
        failed write the cache is read again on next use."""
        current = self._version is not None
        changed = (0, 0)  # rows the write removed, rows it added

        def follow(deleted: Sequence[tuple[int, str]], added: _Added | None = None) -> None:
            nonlocal current, changed
            version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
            current = current and version == self._version
            if not current:  # pragma: no cover - another process committed between the
                self._segments.clear()  # refresh under our lock and our write: `_refresh`
                return  # reads it after
            for rowid, _ in deleted:
                self._segments.pop(rowid, None)
            known_top = self._shape[1]
            self._cache.remove([r[0] for r in deleted])
            for _, row_id in deleted:
                self._damaged.pop(row_id, None)  # a row the cache never held left the table
            if added is not None and added[0] <= known_top:
                _, first, vectors, segments = added
                keys = range(first, first + len(vectors))
                self._cache.append(keys, vectors)
                metadata = [_plain(s) for s in segments]
                self._keyed.add(keys, metadata)
                if self._metadata is not None:
                    self._metadata.add(keys, metadata)
            else:  # pragma: no cover - rows of another program in our transaction (or none)
                self._load(self._rows(f"WHERE rowid > {int(known_top)}"))
            self._shape = self._stamp()
            changed = (len(deleted), 0 if added is None else len(added[2]))
            self._chunks.write(self._db, self._cache, [r[0] for r in deleted])
            if deleted and self._graph_path is not None:
                with contextlib.suppress(OSError):  # it holds rows that were removed
                    self._graph_path.unlink()

        try:
            yield follow
        except BaseException:
            self._version = None  # the write failed: read the table again on next use
            self._chunks.forget()
            raise
        if not current:  # pragma: no cover - see above
            self._refresh(wrote=True)
        elif not self._db.in_transaction:  # committed: the mapped copy follows
            self._chunks.committed(self._db, self._cache, *changed)

    def _refresh(self, *, wrote: bool = False) -> None:
        """Bring the cache up to the table. Unchanged (no commit by another connection, none
        by this one) costs one PRAGMA; when rows were only added (the table's counts of removed
        rows and of rows updated in place are the same), only they are read; else the cache
        is read again."""
        version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
        if version == self._version and not wrote and self._owned:
            return
        shape = self._stamp()
        known_deletes, known_top, known_updates = self._shape
        if shape[0] != known_deletes or shape[2] != known_updates:
            self._segments.clear()  # (rows only added: the segments read still hold)
        if not wrote and shape == self._shape and self._version is not None:
            # A shared connection: data_version misses its own commits (another store object on
            # it, or its owner), so the count of removed rows and the top rowid (never reused)
            # tell.
            self._version = version
            return
        if (
            self._version is not None
            and shape[0] == known_deletes
            and shape[2] == known_updates
            and shape[1] >= known_top
        ):
            self._load(self._rows(f"WHERE rowid > {int(known_top)}"))  # rows only added
            if shape[1] > known_top and not wrote:  # by another connection, with its chunks
                self._chunks.follow(self._db, self._cache)
            self._version, self._shape = version, shape
            return
        self._damaged = {}
        self._metadata = None
        self._keyed.clear()
        self._segments.clear()
        self._cache = self._chunks.read(self._db) or self._read_table()
        held = int(self._cache.keys[-1]) if len(self._cache) else 0
        self._load(self._rows(f"WHERE rowid > {held}"))
        self._chunks.follow(self._db, self._cache)
        self._version, self._shape = version, shape

    def _stamp(self) -> tuple[int, int, int]:
        """The table's counts of removed rows, its top rowid and its count of rows updated in
        place (three index lookups)."""
        t = self.table
        deletes, top, updates = self._db.execute(
            f"SELECT (SELECT coalesce(max(value), 0) FROM {t}_state WHERE name = 'deletes'), "
            f"(SELECT coalesce(max(rowid), 0) FROM {t}), "
            f"(SELECT coalesce(max(value), 0) FROM {t}_state WHERE name = 'updates')"
        ).fetchone()
        return int(deletes), int(top), int(updates)

    def _read_table(self) -> VectorIndex:
        """Every row's vector read from the table (the chunks were not in step with it)."""
        self._chunks.forget()
        rows = self._db.execute(
            f"SELECT rowid, id, vector FROM {self.table} ORDER BY rowid"
        ).fetchall()
        index = VectorIndex()
        self._add_rows(index, [(rowid, row_id, blob, None) for rowid, row_id, blob in rows])
        return index

    def _rows(self, where: str) -> list[tuple[Any, ...]]:
        return self._db.execute(
            f"SELECT rowid, id, vector, text, metadata FROM {self.table} {where} ORDER BY rowid"
        ).fetchall()

    def _load(self, rows: list[tuple[Any, ...]]) -> None:
        """Add rows read from the table (rowid, id, vector, text, metadata) to the cache and
        to the metadata index when there is one; a row that cannot be read (written by another
        program, or a damaged file) is left out, logged once with its id, and listed by
        `unreadable()`."""
        if not rows:
            return
        good = self._add_rows(self._cache, [(r[0], r[1], r[2], r[3:]) for r in rows])
        if self._metadata is None and not self._keyed.active:
            return
        keys, values = [], []
        for rowid, _, _, text, metadata in rows:
            if rowid in good:
                keys.append(rowid)
                values.append(None if text is None else _metadata(text, metadata))
        self._keyed.add(keys, values)
        if self._metadata is not None:
            self._metadata.add(keys, values)

    def _add_rows(
        self, index: VectorIndex, rows: list[tuple[int, str, object, tuple[Any, ...] | None]]
    ) -> set[int]:
        """Add (rowid, id, vector blob, (text, metadata) or None) to `index`: the rowids added."""
        dimension = index.dimension or _usual_dimension([r[2] for r in rows])
        keys: list[int] = []
        vectors: list[Any] = []
        for rowid, row_id, blob, segment in rows:
            try:
                vector = _vector(blob, dimension)
                if segment is not None:
                    _segment(*segment)
            except ValueError as error:
                self._unreadable(row_id, str(error))
                continue
            self._damaged.pop(row_id, None)
            keys.append(int(rowid))
            vectors.append(vector)
        if keys:
            index.append(keys, np.stack(vectors))
        return set(keys)

    def unreadable(self) -> dict[str, str]:
        """The stored embeddings that cannot be read, by id, with the reason: left out of every
        search until `repair()` or `remove` takes them away."""
        with self._lock, self._errors("read the embeddings"):
            self._refresh()
            self._metadata_index()  # reads every row's metadata: what cannot be read is named
            return {i: why for i, why in self._damaged.items() if i in self._stored(self._damaged)}

    def repair(self) -> list[str]:
        """Remove the embeddings that cannot be read; their ids."""
        with self._lock, self._errors("repair the embeddings"):
            self._refresh()
            self._metadata_index()
            doomed = sorted(self._stored(self._damaged))
            if doomed:
                with self._writing():
                    self._db.executemany(
                        f"DELETE FROM {self.table} WHERE id = ?", [(i,) for i in doomed]
                    )
                self._damaged.clear()
                self._version = None
        return doomed

    def _stored(self, ids: Iterable[str]) -> set[str]:
        """Those of `ids` the table holds (another connection may have removed some)."""
        chosen = list(ids)
        if not chosen:
            return set()
        marks = ",".join("?" * len(chosen))
        rows = self._db.execute(f"SELECT id FROM {self.table} WHERE id IN ({marks})", chosen)
        return {row[0] for row in rows}

    def scrub(self) -> bool:
        """Make what was removed unreadable in the file: the full-text index is merged into one
        segment without the removed words (FTS5 otherwise keeps them until a merge), deleted
        pages are zeroed (``secure_delete``) and the ``-wal`` file is emptied into the database.
        False when another connection's read kept the ``-wal`` file from being emptied.
        `forget_user` calls it."""
        with self._lock, self._errors("scrub the embeddings"):
            with self._writing():
                self._db.execute(
                    f"INSERT INTO {self.table}_fts({self.table}_fts) VALUES ('optimize')"
                )
            if self.path == ":memory:" or self._db.in_transaction:
                return True
            return scrub(self._db)


@contextmanager
def _room(db: sqlite3.Connection, size: int) -> Iterator[None]:
    """Let `db`'s page cache hold `size` bytes during the block (a write's transaction, which
    commits in it), when it holds less: a bulk write whose pages do not fit is spilled to the
    WAL before its commit and read back (100,000 vectors of 384 floats in writes of 10,000:
    370 MB read again and 90,000 more writes, 0.5 s of CPU). The size it had is set again after,
    which gives the memory back."""
    before = page = 0
    if size > 0:  # (a small write asks nothing)
        (before,), (page,) = (
            db.execute(f"PRAGMA {n}").fetchone() for n in ("cache_size", "page_size")
        )
    if size <= (-1024 * before if before < 0 else before * page):
        yield
        return
    db.execute(f"PRAGMA cache_size = {-(size // 1024 + 1)}")
    try:
        yield
    finally:
        db.execute(f"PRAGMA cache_size = {int(before)}")


def _usual_dimension(blobs: Iterable[object]) -> int:
    """The vector length most rows have (in floats), which a damaged row does not."""
    lengths = Counter(len(b) // 4 for b in blobs if isinstance(b, bytes) and b)
    return lengths.most_common(1)[0][0] if lengths else 0


def _vector(blob: object, dimension: int) -> npt.NDArray[np.float32]:
    """A stored row's vector; ValueError saying what is wrong with it."""
    if not isinstance(blob, bytes) or len(blob) != 4 * dimension or not dimension:
        size = len(blob) if isinstance(blob, bytes) else type(blob).__name__
        raise ValueError(f"its vector is {size} bytes, not {4 * dimension}")
    vector = np.frombuffer(blob, dtype=np.float32)
    if not np.isfinite(vector).all():
        raise ValueError("its vector holds NaN or an infinity")
    return vector


def _metadata(text: object, metadata: object) -> dict[str, Any]:
    """A stored row's metadata as JSON gives it; ValueError saying what is wrong with it."""
    if not isinstance(text, str):
        raise ValueError(f"its text is {type(text).__name__}, not text")
    try:
        meta = json.loads(metadata) if isinstance(metadata, (str, bytes)) and metadata else {}
    except (ValueError, RecursionError, TypeError):
        raise ValueError("its metadata is not JSON") from None
    if not isinstance(meta, dict):
        raise ValueError(f"its metadata is {type(meta).__name__}, not a JSON object")
    return meta


def _segment(text: object, metadata: object) -> TextSegment | None:
    """A stored row's segment; ValueError saying what is wrong with it."""
    if text is None:
        return None
    try:
        return TextSegment(text, _metadata(text, metadata))  # type: ignore[arg-type]
    except ConfigurationError as error:
        raise ValueError(f"its metadata cannot be read: {error}") from None


def _plain(segment: TextSegment | None) -> Any:
    return None if segment is None else segment.metadata
