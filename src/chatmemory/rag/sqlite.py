"""`SqliteEmbeddingStore`: the embedded default, one SQLite file (it may be the chat-memory file).

Vectors are float32 BLOBs; searches run with numpy over a matrix each store object caches and
refreshes only when the table changed: `PRAGMA data_version` tells, at no I/O cost, whether
another connection committed, and new rows are appended to the cache without reading the old
ones again; the store's own writes update the cache directly (the rows it removed go, the rows
it added are taken as given). On a connection the application keeps, writes are a savepoint
of its transaction and changes are told by the row count and top rowid. Text is indexed by
SQLite's built-in FTS5 (BM25), so full-text and hybrid retrieval need nothing more. Only the
standard library's `sqlite3` (no extension such as sqlite-vec, which many Python builds cannot
load) and numpy.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import ConfigurationError, StoreError
from .._frozen import thaw
from .._sqlite import forgetting, scrub
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
from ._hybrid import fused_search
from ._sqlite_text import selective
from ._values import TextSegment
from ._vectors import VectorIndex, check_embeddings, words

__all__ = ["SqliteEmbeddingStore"]

_Added = tuple[list[str], "np.ndarray[Any, np.dtype[np.float32]]", list[TextSegment | None]]
"""Rows a write added: ids, their vectors as one float32 matrix, their segments."""

_SHARED_LOCKS: dict[int, threading.RLock] = {}
_SHARED_LOCKS_GUARD = threading.Lock()


def _lock_for(connection: sqlite3.Connection) -> threading.RLock:
    """One lock per connection given by the application, shared by every store on it: a
    connection has one transaction at a time, so two stores must not write through it at
    once. (Keyed by id: connections take no weak references; a reused id only shares a lock.)"""
    with _SHARED_LOCKS_GUARD:
        return _SHARED_LOCKS.setdefault(id(connection), threading.RLock())


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
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
    the other rows keep working, `unreadable()` lists such rows and `repair()` removes them."""

    def __init__(
        self, path: str | Path | sqlite3.Connection = ":memory:", *, table: str = "embeddings"
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
            forgetting(self._db)
            self._create()
        except sqlite3.Error as error:
            raise StoreError(f"cannot open {self.path!r}: {error}", store=self) from None
        self._lock = _lock_for(self._db) if not self._owned else threading.RLock()
        self._cache = VectorIndex()
        self._rowids: dict[int, str] = {}  # the cache's rows: rowid -> id
        self._rowid_of: dict[str, int] = {}  # and id -> rowid
        self._damaged: dict[str, str] = {}  # rows that cannot be read: id -> why
        self._version: int | None = None  # PRAGMA data_version when the cache was read
        self._shape = (0, 0)  # row count and max rowid the cache holds
        self._term_docs: dict[str, tuple[int, int]] = {}  # see _sqlite_text

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
            f"""CREATE TRIGGER IF NOT EXISTS {t}_ai AFTER INSERT ON {t} WHEN new.text IS NOT NULL
            BEGIN
                INSERT INTO {t}_fts(rowid, text) VALUES (new.rowid, new.text);
            END""",
            f"""CREATE TRIGGER IF NOT EXISTS {t}_ad AFTER DELETE ON {t} WHEN old.text IS NOT NULL
            BEGIN
                INSERT INTO {t}_fts({t}_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
            END""",
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
        """Close the connection this store opened (a connection you gave stays open)."""
        if self._owned:
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
        embeddings: Sequence[Embedding],
        segments: Sequence[TextSegment] | None = None,
        *,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        lined_segments, lined_ids = check_embeddings(embeddings, segments, ids)
        if not embeddings:
            return []
        new_ids = [given or str(uuid.uuid4()) for given in lined_ids]
        rows = []
        for row_id, embedding, segment in zip(new_ids, embeddings, lined_segments, strict=True):
            metadata = None
            if segment is not None:  # JSON-like by construction (TextSegment checks it)
                metadata = json.dumps(thaw(segment.metadata), ensure_ascii=False)
            blob = np.asarray(embedding.vector, dtype=np.float32).tobytes()
            rows.append((row_id, blob, None if segment is None else segment.text, metadata))
        with self._lock, self._errors("add embeddings"):
            self._refresh()
            for embedding in embeddings:
                self._cache.check(embedding)
            if len({e.dimension for e in embeddings}) > 1:
                raise ConfigurationError("add_all() got embeddings of several dimensions")
            last = {r[0]: n for n, r in enumerate(rows)}  # a repeated id: the last one wins
            order = sorted(last.values())
            rows = [rows[n] for n in order]
            added = (
                [new_ids[n] for n in order],
                np.asarray([embeddings[n].vector for n in order], dtype=np.float32),
                [lined_segments[n] for n in order],
            )
            with self._following() as follow, self._writing():
                self._db.executemany(
                    f"DELETE FROM {self.table} WHERE id = ?", [(r[0],) for r in rows]
                )
                self._db.executemany(
                    f"INSERT INTO {self.table} (id, vector, text, metadata) VALUES (?, ?, ?, ?)",
                    rows,
                )
                follow([r[0] for r in rows], added)
        return new_ids

    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
        if not isinstance(request, EmbeddingSearchRequest):
            raise ConfigurationError(f"search() takes an EmbeddingSearchRequest, got {request!r}")
        if request.query is not None:  # hybrid: see _hybrid
            return fused_search(self, request)
        with self._lock, self._errors("search"):
            self._refresh()
            return EmbeddingSearchResult(self._cache.search(request))

    def search_text(
        self, text: str, *, max_results: int = 3, filter: Filter | None = None
    ) -> list[EmbeddingMatch]:
        check_text_search(text, max_results, filter)
        fts = f"{self.table}_fts"
        # Only rowids and scores leave FTS5 (sorting whole rows, vectors included, cost more
        # than the ranking); the segments and vectors come from the cache, which the filter's
        # mask also covers. A filter may drop rows, so then every match is ranked.
        limit = "LIMIT ?" if filter is None else ""
        with self._lock, self._errors("search text"):
            self._refresh()
            terms = selective(  # the words worth ranking by: see _sqlite_text
                self._db, fts, list(dict.fromkeys(words(text))), self._term_docs, len(self._cache)
            )
            if not terms:
                return []
            query = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
            ranked = self._db.execute(
                f"SELECT rowid, -bm25({fts}) FROM {fts} WHERE {fts} MATCH ? "
                f"ORDER BY bm25({fts}), rowid {limit}",
                (query, max_results) if filter is None else (query,),
            )
            return self._cache.matches(
                ((float(score), self._rowids.get(rowid)) for rowid, score in ranked),
                max_results,
                filter,
            )

    def remove_all(
        self, ids: Sequence[str] | Filter | _Unset = UNSET, *, filter: Filter | _Unset = UNSET
    ) -> None:
        chosen = removal(ids, filter)
        with self._lock, self._errors("remove embeddings"):
            self._refresh()
            with self._following() as follow, self._writing():
                if chosen is None:
                    doomed = list(self._cache.ids)
                    self._db.execute(f"DELETE FROM {self.table}")
                else:
                    doomed = chosen if isinstance(chosen, list) else self._cache.matching(chosen)
                    self._db.executemany(
                        f"DELETE FROM {self.table} WHERE id = ?", [(i,) for i in doomed]
                    )
                follow(doomed)

    def select(self, filter: Filter) -> dict[str, TextSegment | None]:
        """Every entry whose metadata passes `filter`: its segment, by id (exact)."""
        check_filter(filter)
        with self._lock, self._errors("select embeddings"):
            self._refresh()
            return self._cache.selected(filter)

    @contextmanager
    def _following(self) -> Iterator[Callable[..., None]]:
        """Keep the cache in step with this store's own write, which the caller makes in the
        block and reports with the ids it deleted (or replaced) and the rows it added (ids,
        vectors, segments, in insertion order). When nothing else committed since the cache was
        read (data_version, read under the write lock, says so), the cache drops those ids and
        takes the added rows as they are, asking the table only for their rowids: no count over
        the table, no reload after a replacement, no JSON decoded again. Otherwise, or on a
        shared connection, `_refresh` decides after the write; after a failed write the cache
        is read again on next use."""
        current = self._owned and self._version is not None

        def follow(deleted: Sequence[str], added: _Added | None = None) -> None:
            nonlocal current
            version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
            current = current and version == self._version
            if not current:
                return
            known_count, known_top = self._shape
            gone = self._cache.remove(deleted)
            for row_id in deleted:
                self._rowids.pop(self._rowid_of.pop(row_id, -1), None)
                if self._damaged.pop(row_id, None) is not None:
                    gone += 1  # a row the cache never held left the table too
            new = self._db.execute(
                f"SELECT rowid, id FROM {self.table} WHERE rowid > ? ORDER BY rowid",
                (int(known_top),),
            ).fetchall()
            if added is not None and [r[1] for r in new] == added[0]:
                self._cache.append(*added)
                self._rowids.update((int(r[0]), r[1]) for r in new)
                self._rowid_of.update((r[1], int(r[0])) for r in new)
            elif new:
                rows = self._rows(f"WHERE rowid > {int(known_top)}")
                self._load(rows, self._cache, self._rowids, self._rowid_of)
            top = max(int(known_top), int(new[-1][0]) if new else 0)
            self._shape = (known_count - gone + len(new), top)

        try:
            yield follow
        except BaseException:
            self._version = None  # the write failed: read the table again on next use
            raise
        if not current:
            self._refresh(wrote=True)

    def _refresh(self, *, wrote: bool = False) -> None:
        """Bring the cache up to the table. Unchanged (no commit by another connection, none
        by this one) costs one PRAGMA; when rows were only added, only they are read."""
        version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
        if version == self._version and not wrote and self._owned:
            return
        count, top = self._db.execute(
            f"SELECT count(*), coalesce(max(rowid), 0) FROM {self.table}"
        ).fetchone()
        known_count, known_top = self._shape
        if not wrote and (count, top) == self._shape and self._version is not None:
            # A shared connection: data_version misses its own commits (another store object on
            # it, or its owner), so the row count and the top rowid (never reused) tell.
            self._version = version
            return
        if self._version is not None and top >= known_top:
            rows = self._rows(f"WHERE rowid > {int(known_top)}")
            replaced = {r[0] for r in rows if r[0] in self._cache}  # upserts: deleted, re-added
            if known_count + len(rows) - len(replaced) == count:
                for row_id in replaced:
                    old = self._rowid_of.pop(row_id, None)
                    if old is not None:
                        self._rowids.pop(old, None)
                self._load(rows, self._cache, self._rowids, self._rowid_of)
                self._version, self._shape = version, (int(count), int(top))
                return
        fresh, rowids, rowid_of = VectorIndex(), dict[int, str](), dict[str, int]()
        self._damaged = {}
        self._load(self._rows(""), fresh, rowids, rowid_of)
        self._cache, self._rowids, self._rowid_of = fresh, rowids, rowid_of
        self._version, self._shape = version, (int(count), int(top))

    def _rows(self, where: str) -> list[tuple[Any, ...]]:
        return self._db.execute(
            f"SELECT id, vector, text, metadata, rowid FROM {self.table} {where} ORDER BY rowid"
        ).fetchall()

    def _load(
        self,
        rows: list[tuple[Any, ...]],
        index: VectorIndex,
        rowids: dict[int, str],
        rowid_of: dict[str, int],
    ) -> None:
        """Add `rows` to `index`; a row that cannot be read (written by another program, or a
        damaged file) is left out, logged once with its id, and listed by `unreadable()`."""
        if not rows:
            return
        dimension = index.dimension or _usual_dimension(rows)
        good: list[tuple[str, Any, TextSegment | None, int]] = []
        for row_id, blob, text, metadata, rowid in rows:
            try:
                vector, segment = _decoded(blob, text, metadata, dimension)
            except ValueError as error:
                if self._damaged.get(row_id) != str(error):
                    log.warning(
                        "the embedding %r in %r cannot be read (%s): it is left out of every "
                        "search; remove it with repair()",
                        row_id,
                        self,
                        error,
                    )
                self._damaged[row_id] = str(error)
                continue
            self._damaged.pop(row_id, None)
            good.append((row_id, vector, segment, int(rowid)))
        if not good:
            return
        index.append([g[0] for g in good], np.stack([g[1] for g in good]), [g[2] for g in good])
        rowids.update((g[3], g[0]) for g in good)
        rowid_of.update((g[0], g[3]) for g in good)

    def unreadable(self) -> dict[str, str]:
        """The stored embeddings that cannot be read, by id, with the reason: left out of every
        search until `repair()` or `remove` takes them away."""
        with self._lock, self._errors("read the embeddings"):
            self._refresh()
            return {i: why for i, why in self._damaged.items() if i in self._stored(self._damaged)}

    def repair(self) -> list[str]:
        """Remove the embeddings that cannot be read; their ids."""
        with self._lock, self._errors("repair the embeddings"):
            self._refresh()
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


def _usual_dimension(rows: list[tuple[Any, ...]]) -> int:
    """The vector length most rows have (in floats), which a damaged row does not."""
    lengths = Counter(len(r[1]) // 4 for r in rows if isinstance(r[1], bytes) and r[1])
    return lengths.most_common(1)[0][0] if lengths else 0


def _decoded(
    blob: object, text: object, metadata: object, dimension: int
) -> tuple[Any, TextSegment | None]:
    """A stored row's vector and segment; ValueError saying what is wrong with it."""
    if not isinstance(blob, bytes) or len(blob) != 4 * dimension or not dimension:
        size = len(blob) if isinstance(blob, bytes) else type(blob).__name__
        raise ValueError(f"its vector is {size} bytes, not {4 * dimension}")
    vector = np.frombuffer(blob, dtype=np.float32)
    if not np.isfinite(vector).all():
        raise ValueError("its vector holds NaN or an infinity")
    if text is None:
        return vector, None
    if not isinstance(text, str):
        raise ValueError(f"its text is {type(text).__name__}, not text")
    try:
        meta = json.loads(metadata) if isinstance(metadata, (str, bytes)) and metadata else {}
    except (ValueError, RecursionError, TypeError):
        raise ValueError("its metadata is not JSON") from None
    if not isinstance(meta, dict):
        raise ValueError(f"its metadata is {type(meta).__name__}, not a JSON object")
    try:
        return vector, TextSegment(text, meta)
    except ConfigurationError as error:
        raise ValueError(f"its metadata cannot be read: {error}") from None
