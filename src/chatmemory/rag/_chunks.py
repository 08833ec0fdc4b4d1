"""The vectors of a SQLite embedding table kept again in chunks, so that a new process reads the
whole matrix in a few BLOB reads instead of one row at a time, and in a memory-mapped file
beside the database, so that it reads nothing at all (`SqliteEmbeddingStore`)."""

from __future__ import annotations

import bisect
import contextlib
import logging
import mmap
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
MAGIC = b"CMVEC\x04\x00\x00"
HEADER = 64
"""The mapped file: MAGIC, then int64s: the table's counts of removed and of updated rows when
its rows were written, its row count, the dimension and the room for rows (the rest of the
header zero); then, for `room` rows in rowid order, one record a row: rowid (int64), inverse
norm (float32) and the step of its int8 code (float32) (the first `count` used); then room for
`room` rows' int8 codes (`_codes`: what a scan reads first), `dimension` bytes a row; then, from
the next multiple of 64 bytes, the vectors (float32), one after the other. Rows are only ever
appended (a record and a code in the room left, a vector at the end), so a file stays valid, as
a prefix of the table's rows, until a row is removed or updated, and a new process reads the
rowids and norms (16 bytes a row) without touching the other pages, nor codes the rows
again."""
_COUNT = 8 + 2 * 8
"""Where the header's row count is."""
_ROW = np.dtype([("key", "<i8"), ("scale", "<f4"), ("step", "<f4")])
"""A row's record in the mapped file."""

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
        write, valid while the table's counts of removed and updated rows are those it was
        written at (rows only added since: they are above its rows). A store appends the rows
        of each write it commits; a write that removes rows removes the file (it must not keep
        a removed vector), and a later one writes it again whole when that costs no more than
        a few times the write itself (else the store's close, or the next process, does)."""
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

    def read(self, db: sqlite3.Connection) -> VectorIndex | None:
        """The vectors of the mapped copy, or else of the chunks, as an index, when they are in
        step with the table (the rows above them, few when the copy is used, are the caller's
        to read); else None. A copy read from the chunks is written to the mapped file for the
        next process."""
        self._chunks = None
        state = self._state(db)
        mapped = self._map(state)
        if mapped is not None and 0 <= self._above_mapped(db, mapped) <= SIZE:
            return mapped
        spans = self._spans(db, state)
        if spans is None:
            return None
        total = sum(size for *_, size in spans)
        if not total:
            return None
        index = self._read(db, total)
        if index is None or _covered(index.keys, spans) != total:
            return None
        if self._above(db, index) < 0:  # rows removed (or not in chunks) behind our back
            return None
        self._save(db, state, index)
        return index

    def _rows_above(self, db: sqlite3.Connection, index: VectorIndex) -> int:
        """How many of the table's rows lie above `index`'s last one."""
        (above,) = db.execute(
            f"SELECT count(*) FROM {self.table} WHERE rowid > ?", (int(index.keys[-1]),)
        ).fetchone()
        return int(above)

    def _above(self, db: sqlite3.Connection, index: VectorIndex) -> int:
        """How many of the table's rows lie above `index`'s, or -1 when some row of its range
        is not in it (written or removed by another program)."""
        (count,) = db.execute(f"SELECT count(*) FROM {self.table}").fetchone()
        above = self._rows_above(db, index)
        return above if len(index) + above == int(count) else -1

    def _above_mapped(self, db: sqlite3.Connection, index: VectorIndex) -> int:
        """`_above` for the mapped copy, without counting the table (a read of its whole id
        index, a quarter of a second at 100,000 rows when the disk has not cached it): written
        at the table's counts of removed and updated rows, which triggers keep for any program,
        the copy's rows are all still there. Its first and last rows are looked up all the same
        (a database put back from a copy older than the mapped file)."""
        first, last = int(index.keys[0]), int(index.keys[-1])
        (ends,) = db.execute(
            f"SELECT count(*) FROM {self.table} WHERE rowid IN (?, ?)", (first, last)
        ).fetchone()
        return self._rows_above(db, index) if ends == len({first, last}) else -1

    def _state(self, db: sqlite3.Connection) -> dict[str, int]:
        return dict(db.execute(f"SELECT name, value FROM {self.table}_state").fetchall())

    def follow(self, db: sqlite3.Connection, cache: VectorIndex) -> None:
        """Take the chunks as the table holds them now, after another connection added rows
        (and wrote chunks for them): known again when they hold exactly the cache's rows, in
        order; else written whole at the next write. Without it, this store's next write would
        number its chunks from what it wrote last, overwriting or overlapping the others', and
        a new process would read the table row by row."""
        self._chunks = None
        spans = self._spans(db)
        if spans and _covered(cache.keys, spans) == len(cache):
            self._chunks = _known(spans)

    def _spans(
        self, db: sqlite3.Connection, state: dict[str, int] | None = None
    ) -> list[Any] | None:
        """The chunks' (chunk, low, high, size) in order, when the chunks are in step with the
        rows updated in place (else None)."""
        state = self._state(db) if state is None else state
        if state.get("chunked") != state.get("updates", 0):
            return None
        return db.execute(
            f"SELECT chunk, low, high, size FROM {self.table}_vectors ORDER BY chunk"
        ).fetchall()

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

    def _map(self, state: dict[str, int]) -> VectorIndex | None:
        """The index over the memory-mapped copy, when it was written at the table's counts
        of removed and updated rows `state` holds (copy on write: the store's changes stay in
        its process). The rowids and norms are copied out; the vectors stay mapped, and the
        disk is asked to read them ahead at once (the first exact search reads them all: page
        by page, from a disk that has not cached them, it took seconds)."""
        if self.mapped is None:
            return None
        try:
            with self.mapped.open("rb") as file:
                shape = _shape(file.read(HEADER), state)
                if shape is None:
                    return None
                view = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
            count, dimension, room = shape
            rows = np.frombuffer(view, _ROW, count, HEADER)
            codes = np.frombuffer(view, np.int8, count * dimension, _codes_at(room))
            vectors = np.frombuffer(
                view, np.float32, count * dimension, _vectors_at(room, dimension)
            )
        except (OSError, ValueError):
            return None
        if hasattr(mmap, "MADV_WILLNEED"):  # (not on Windows)
            start = _codes_at(room) // mmap.PAGESIZE * mmap.PAGESIZE
            view.madvise(mmap.MADV_WILLNEED, start, len(view) - start)
        keys = rows["key"].copy()
        if (np.diff(keys) <= 0).any():
            return None
        return VectorIndex.adopt(
            keys,
            vectors.reshape(count, dimension),
            rows["scale"].copy(),
            codes=(codes.reshape(count, dimension), rows["step"].copy()),
        )

    def _save(self, db: sqlite3.Connection, state: dict[str, int], index: VectorIndex) -> None:
        """Write the memory-mapped copy of `index` (the table's rows at the counts `state`
        holds), whole, with room for as many rows again, then put it in place (a reader never
        sees half a file); a failure only costs the next open time."""
        if self.mapped is None or not len(index):
            return
        partial = self.mapped.with_name(f"{self.mapped.name}.{os.getpid()}.partial")
        count, room = len(index), max(2 * len(index), SIZE)
        try:
            with partial.open("wb") as file:
                file.write(_header(state, count, index.dimension or 0, room))
                for start in range(0, count, SIZE):
                    file.write(_rows_of(index, start, start + SIZE).data)
                file.seek(_codes_at(room))  # (the room left: a hole in the file)
                for start in range(0, count, SIZE):  # (a chunk's size at a time)
                    file.write(np.ascontiguousarray(index.codes(start, start + SIZE)[0]).data)
                file.seek(_vectors_at(room, index.dimension or 0))
                for start in range(0, count, SIZE):
                    file.write(np.ascontiguousarray(index.block(start, start + SIZE)[1]).data)
            os.replace(partial, self.mapped)
        except OSError as error:  # pragma: no cover - a read-only folder, a full disk
            log.debug("cannot write %s: %s", self.mapped, error)
            with contextlib.suppress(OSError):
                partial.unlink()
        self._recheck(db, state)

    def _recheck(self, db: sqlite3.Connection, state: dict[str, int]) -> None:
        """Remove the file just written when the table's counts moved on while it was written:
        it may hold a vector another store removed (its own removal of the file may have come
        first). Whichever comes last, that removal or this check, leaves no such file."""
        if _counts(self._state(db)) != _counts(state):
            self.drop_mapped()

    def committed(
        self, db: sqlite3.Connection, cache: VectorIndex, removed: int, added: int
    ) -> None:
        """A write of this store that removed and added these many rows is committed: the
        mapped copy is removed (again: another store may have written it since the write's
        own removal) or its rows appended."""
        if removed:
            self.drop_mapped()
        elif added:
            self.keep(db, cache, added=added)

    def keep(self, db: sqlite3.Connection, cache: VectorIndex, *, added: int | None = None) -> None:
        """Bring the memory-mapped copy to `cache`, which holds the table's rows as committed:
        its newer rows appended to a copy that holds its first ones, or else the copy written
        whole: when it has no room left (amortised: the room doubles), when `added` (rows
        this store's write just committed) is None, or when they are not a small part of the
        whole (at most a quarter, past one chunk's size)."""
        if self.mapped is None or not len(cache):
            return
        state = self._state(db)
        extended = self._extend(state, cache)
        if extended:
            self._recheck(db, state)
        elif extended is False or added is None or len(cache) <= max(SIZE, 4 * added):
            self._save(db, state, cache)

    def _extend(self, state: dict[str, int], cache: VectorIndex) -> bool | None:
        """Append the rows of `cache` above those of the mapped copy, when it holds the first
        ones (written at the counts `state` holds): True, or False when it has no room for
        them; None when it does not hold them, or is missing."""
        assert self.mapped is not None
        try:
            file = os.open(self.mapped, os.O_RDWR)
        except OSError:
            return None
        try:  # (written at explicit offsets: readers map what the header's count covers)
            shape = _shape(os.pread(file, HEADER, 0), state)
            if shape is None or shape[1] != cache.dimension or not 0 < shape[0] <= len(cache):
                return None
            held, dimension, room = shape
            last = os.pread(file, 8, HEADER + (held - 1) * _ROW.itemsize)
            if last != cache.keys[held - 1].tobytes():
                return None
            if len(cache) > room:
                return False
            if held < len(cache):
                rows = _rows_of(cache, held, len(cache)).data
                os.pwrite(file, rows, HEADER + held * _ROW.itemsize)
                codes = np.ascontiguousarray(cache.codes(held, len(cache))[0])
                os.pwrite(file, codes.data, _codes_at(room) + held * dimension)
                vectors = np.ascontiguousarray(cache.block(held, len(cache))[1])
                os.pwrite(file, vectors.data, _vectors_at(room, dimension) + held * 4 * dimension)
                os.pwrite(file, np.int64(len(cache)).tobytes(), _COUNT)
            return True
        except OSError as error:  # pragma: no cover - a full disk
            log.debug("cannot write %s: %s", self.mapped, error)
            return None
        finally:
            os.close(file)

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


def _counts(state: dict[str, int]) -> tuple[int, int]:
    """The table's counts of removed and of updated rows."""
    return int(state.get("deletes", 0)), int(state.get("updates", 0))


def _header(state: dict[str, int], count: int, dimension: int, room: int) -> bytes:
    values = np.array([*_counts(state), count, dimension, room, 0, 0], dtype=np.int64)
    return MAGIC + values.tobytes()


def _shape(head: bytes, state: dict[str, int]) -> tuple[int, int, int] | None:
    """The (rows held, dimension, room for rows) of a mapped file whose header is `head`,
    when it was written at the counts `state` holds; else None."""
    if len(head) != HEADER or head[:8] != MAGIC:
        return None
    deletes, updates, count, dimension, room = np.frombuffer(head[8:48], np.int64).tolist()
    if (deletes, updates) != _counts(state) or not 0 < count <= room or dimension < 1:
        return None
    return int(count), int(dimension), int(room)


def _codes_at(room: int) -> int:
    """Where a mapped file with room for `room` rows holds its first code."""
    return HEADER + room * _ROW.itemsize


def _vectors_at(room: int, dimension: int) -> int:
    """Where a mapped file with room for `room` rows of `dimension` holds its first vector."""
    return -(-(_codes_at(room) + room * dimension) // 64) * 64


def _rows_of(index: VectorIndex, start: int, end: int) -> npt.NDArray[Any]:
    """The mapped file's records of `index`'s rows at positions `start` to `end`."""
    keys, scale, _ = (part[start:end] for part in index.parts())
    rows = np.zeros(len(keys), _ROW)
    rows["key"], rows["scale"], rows["step"] = keys, scale, index.codes(start, end)[1]
    return rows
