"""The vectors of a SQLite embedding table kept again in chunks, so that a new process reads the
whole matrix in a few BLOB reads instead of one row at a time, and in a memory-mapped file
beside the database, so that it reads nothing at all (`SqliteEmbeddingStore`)."""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._vectors import VectorIndex

__all__ = ["Chunks"]

log = logging.getLogger("chatmemory.rag")
MAGIC = b"CMVEC\x01\x00\x00"
HEADER = 32
"""The mapped file: MAGIC, then int64 write count, row count and dimension; the rowids (int64),
the rows' inverse norms (float32) and the vectors (float32, row by row)."""

SIZE = 4096
"""Rows in a full chunk (6 MB at 384 dimensions)."""


class Chunks:
    """``<table>_vectors``: chunk number, row count, the rowids (int64) and the float32 vectors of
    up to `SIZE` rows, in rowid order, written from the store's cache in the transaction of the
    write that changed the rows: new rows become a new chunk (small chunks at the end are
    merged, so single adds cost amortised O(log n) rewritten rows), a chunk that lost rows is
    written again without them (its old bytes are zeroed: ``secure_delete``), so a removed
    vector does not stay in the file.

    The table can always overrule them: a trigger counts the updates any program makes to the
    table (``<table>_state``), and the chunks are used only when they were written at the
    current count, every row they hold is still there and every other row lies above them."""

    def __init__(self, table: str, mapped: Path | None = None) -> None:
        self.table = table
        self.mapped = mapped
        """The memory-mapped copy (None for a database in memory): a cache any process may
        write, valid while its write count is the table's (every write by a store counts one),
        removed by a write that removes rows."""
        self._chunks: list[tuple[int, int, int]] | None = None
        """(chunk number, first rowid, last rowid) of each chunk, when they are known to be in
        step with the store's cache; None: written again whole at the next write."""

    def create(self, db: sqlite3.Connection) -> None:
        t = self.table
        for statement in (
            f"""CREATE TABLE IF NOT EXISTS {t}_vectors (
                chunk INTEGER PRIMARY KEY,
                size INTEGER NOT NULL,
                low INTEGER NOT NULL,
                high INTEGER NOT NULL,
                rowids BLOB NOT NULL,
                vectors BLOB NOT NULL
            )""",
            f"CREATE TABLE IF NOT EXISTS {t}_state (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
            f"""CREATE TRIGGER IF NOT EXISTS {t}_au AFTER UPDATE ON {t}
            BEGIN
                INSERT INTO {t}_state (name, value) VALUES ('updates', 1)
                ON CONFLICT (name) DO UPDATE SET value = value + 1;
            END""",
        ):
            db.execute(statement)

    def forget(self) -> None:
        """The chunks are no longer known to match the cache: written whole at the next write."""
        self._chunks = None

    def read(self, db: sqlite3.Connection, count: int) -> VectorIndex | None:
        """The vectors of the chunks as an index, when they are in step with the table (which
        holds `count` rows; rows above the chunks are the caller's to read), else None."""
        self._chunks = None
        found = self._spans(db)
        if found is None:
            return None
        state, spans = found
        total = sum(size for *_, size in spans)
        if not total:
            return None
        writes = int(state.get("writes", 0))
        mapped = self._map(writes, total)
        index = mapped or self._read(db, total)
        if index is None or _covered(index.keys, spans) != total:
            return None
        (above,) = db.execute(
            f"SELECT count(*) FROM {self.table} WHERE rowid > ?", (int(index.keys[-1]),)
        ).fetchone()
        if total + int(above) != count:  # rows removed (or not in chunks) behind our back
            return None
        if mapped is None:
            self._save(writes, index)
        if not above:
            self._chunks = _known(spans)
        return index

    def follow(self, db: sqlite3.Connection, cache: VectorIndex) -> None:
        """Take the chunks as the table holds them now, after another connection added rows
        (and wrote chunks for them): known again when they hold exactly the cache's rows, in
        order; else written whole at the next write. Without it, this store's next write would
        number its chunks from what it wrote last, overwriting or overlapping the others', and
        a new process would read the table row by row."""
        self._chunks = None
        found = self._spans(db)
        if found is not None and found[1] and _covered(cache.keys, found[1]) == len(cache):
            self._chunks = _known(found[1])

    def _spans(self, db: sqlite3.Connection) -> tuple[dict[str, int], list[Any]] | None:
        """The state table's values and the chunks' (chunk, low, high, size) in order, when
        the chunks are in step with the rows updated in place (else None)."""
        state = dict(db.execute(f"SELECT name, value FROM {self.table}_state").fetchall())
        if state.get("chunked") != state.get("updates", 0):
            return None
        spans = db.execute(
            f"SELECT chunk, low, high, size FROM {self.table}_vectors ORDER BY chunk"
        ).fetchall()
        return state, spans

    def _read(self, db: sqlite3.Connection, total: int) -> VectorIndex | None:
        keys = np.empty(total, dtype=np.int64)
        vectors: npt.NDArray[np.float32] | None = None
        at = 0
        for size, rowids, blob in db.execute(
            f"SELECT size, rowids, vectors FROM {self.table}_vectors ORDER BY chunk"
        ):
            if vectors is None:
                vectors = np.empty((total, len(blob) // (4 * max(size, 1))), dtype=np.float32)
            if (
                not 0 < size <= total - at
                or len(rowids) != 8 * size
                or len(blob) != 4 * size * vectors.shape[1]
            ):
                return None
            keys[at : at + size] = np.frombuffer(rowids, dtype=np.int64)
            vectors[at : at + size] = np.frombuffer(blob, dtype=np.float32).reshape(size, -1)
            at += size
        if at != total or vectors is None or (np.diff(keys) <= 0).any():
            return None
        return VectorIndex.adopt(keys, vectors)

    def _map(self, writes: int, total: int) -> VectorIndex | None:
        """The index over the memory-mapped copy, when it is the one of `writes` (copy on
        write: the store's changes stay in its process)."""
        if self.mapped is None:
            return None
        try:
            with self.mapped.open("rb") as file:
                head = file.read(HEADER)
            if len(head) != HEADER or head[:8] != MAGIC:
                return None
            written, count, dimension = np.frombuffer(head[8:], dtype=np.int64).tolist()
            if written != writes or count != total or dimension < 1:
                return None
            keys = np.memmap(self.mapped, np.int64, "c", HEADER, (count,)).view(np.ndarray)
            scale = np.memmap(self.mapped, np.float32, "c", HEADER + 8 * count, (count,)).view(
                np.ndarray
            )
            vectors = np.memmap(
                self.mapped, np.float32, "c", HEADER + 12 * count, (count, dimension)
            ).view(np.ndarray)
        except (OSError, ValueError):
            return None
        return VectorIndex.adopt(keys, vectors, scale)

    def _save(self, writes: int, index: VectorIndex) -> None:
        """Write the memory-mapped copy of `index` (that of `writes`), whole, then put it in
        place (a reader never sees half a file); a failure only costs the next open time."""
        if self.mapped is None:
            return
        partial = self.mapped.with_name(f"{self.mapped.name}.{os.getpid()}.partial")
        try:
            with partial.open("wb") as file:
                head = np.array([writes, len(index), index.dimension or 0], dtype=np.int64)
                file.write(MAGIC + head.tobytes())
                for part in index.parts():
                    np.ascontiguousarray(part).tofile(file)
            os.replace(partial, self.mapped)
        except OSError as error:  # pragma: no cover - a read-only folder, a full disk
            log.debug("cannot write %s: %s", self.mapped, error)
            with contextlib.suppress(OSError):
                partial.unlink()

    def keep(self, db: sqlite3.Connection, cache: VectorIndex) -> None:
        """Write the memory-mapped copy from `cache` when the chunks hold exactly its rows
        and the copy on disk is not the current one."""
        if self.mapped is None or not self._chunks or not len(cache):
            return
        state = dict(db.execute(f"SELECT name, value FROM {self.table}_state").fetchall())
        low, high, total = db.execute(
            f"SELECT min(low), max(high), sum(size) FROM {self.table}_vectors"
        ).fetchone()
        held = (int(cache.keys[0]), int(cache.keys[-1]), len(cache))
        writes = int(state.get("writes", 0))
        if (
            state.get("chunked") == state.get("updates", 0)
            and (low, high, total) == held
            and self._map(writes, total) is None
        ):
            self._save(writes, cache)

    def drop_mapped(self) -> None:
        """Remove the memory-mapped copy (it holds rows that were removed)."""
        if self.mapped is not None:
            with contextlib.suppress(OSError):
                self.mapped.unlink()

    def write(self, db: sqlite3.Connection, cache: VectorIndex, deleted: Sequence[int]) -> None:
        """Bring the chunks to the cache, which now holds the rows after a write that removed
        the rowids `deleted` and added rows above every chunk (inside that write's
        transaction)."""
        t = self.table
        if self._chunks is None:
            db.execute(f"DELETE FROM {t}_vectors")
            self._chunks = []
            self._append(db, cache, 0)
        else:
            firsts = [first for _, first, _ in self._chunks]
            touched = sorted({bisect.bisect_right(firsts, rowid) - 1 for rowid in deleted} - {-1})
            for n in reversed(touched):
                chunk, first, last = self._chunks[n]
                if not self._put(db, cache, chunk, first, last):
                    del self._chunks[n]
            self._append(db, cache, self._chunks[-1][2] if self._chunks else 0)
        if deleted:
            self.drop_mapped()
        db.execute(
            f"INSERT INTO {t}_state (name, value) VALUES ('writes', 1) "
            f"ON CONFLICT (name) DO UPDATE SET value = value + 1"
        )
        db.execute(
            f"INSERT INTO {t}_state (name, value) VALUES ('chunked', "
            f"(SELECT coalesce(max(value), 0) FROM {t}_state WHERE name = 'updates')) "
            f"ON CONFLICT (name) DO UPDATE SET value = excluded.value"
        )

    def _append(self, db: sqlite3.Connection, cache: VectorIndex, after: int) -> None:
        """Chunks for the cache's rows above the rowid `after`, then small chunks at the end
        merged while the one before is at most twice as large."""
        assert self._chunks is not None
        start = int(np.searchsorted(cache.keys, after, side="right"))
        for first in range(start, len(cache), SIZE):
            end = min(first + SIZE, len(cache))
            chunk = (self._chunks[-1][0] + 1) if self._chunks else 1
            low, high = int(cache.keys[first]), int(cache.keys[end - 1])
            self._put(db, cache, chunk, low, high)
            self._chunks.append((chunk, low, high))
        while len(self._chunks) >= 2:
            (a, a_low, a_high), (b, b_low, b_high) = self._chunks[-2:]
            a_size, b_size = (
                self._size(cache, x, y) for x, y in ((a_low, a_high), (b_low, b_high))
            )
            if a_size + b_size > SIZE or a_size > 2 * b_size:
                break
            db.execute(f"DELETE FROM {self.table}_vectors WHERE chunk = ?", (b,))
            self._put(db, cache, a, a_low, b_high)
            self._chunks[-2:] = [(a, a_low, b_high)]

    @staticmethod
    def _size(cache: VectorIndex, low: int, high: int) -> int:
        return int(
            np.searchsorted(cache.keys, high, side="right") - np.searchsorted(cache.keys, low)
        )

    def _put(
        self, db: sqlite3.Connection, cache: VectorIndex, chunk: int, low: int, high: int
    ) -> bool:
        """Write chunk `chunk` with the cache's rows of rowids `low`..`high`; False (and the
        chunk removed) when there are none."""
        start = int(np.searchsorted(cache.keys, low))
        end = int(np.searchsorted(cache.keys, high, side="right"))
        if start == end:
            db.execute(f"DELETE FROM {self.table}_vectors WHERE chunk = ?", (chunk,))
            return False
        # Bound as they are (contiguous: no copy but the one SQLite makes).
        keys, vectors = map(np.ascontiguousarray, cache.block(start, end))
        db.execute(
            f"INSERT OR REPLACE INTO {self.table}_vectors "
            f"(chunk, size, low, high, rowids, vectors) VALUES (?, ?, ?, ?, ?, ?)",
            (chunk, end - start, int(keys[0]), int(keys[-1]), keys, vectors),
        )
        return True


def _covered(keys: npt.NDArray[np.int64], spans: list[Any]) -> int | None:
    """How many of `keys`, from the first, the chunks `spans` hold in order (each chunk's low
    and high key where they should be); None when one does not fit."""
    at = 0
    for _, low, high, size in spans:
        if not 0 < size <= len(keys) - at or keys[at] != low or keys[at + size - 1] != high:
            return None
        at += size
    return at


def _known(spans: list[Any]) -> list[tuple[int, int, int]]:
    """The chunks as this store keeps them: (chunk, low, high)."""
    return [(int(c), int(low), int(high)) for c, low, high, _ in spans]
