"""An approximate nearest-neighbour index (HNSW, from faiss) beside an embedded store's matrix:
`Hnsw` is what a store is given to turn it on, `Graph` the index a store keeps.

The graph holds a unit copy of the vectors, each under a label (its order of addition), and the
row key of each label. It follows its `VectorIndex` lazily: rows added since are added, rows
removed are masked out (faiss's HNSW cannot delete) and their vectors erased from it (zeros: a
saved graph holds no removed vector, so it is saved again rather than built again by the next
process, 11 s at 100,000 rows), and it is built again once most of its labels are gone. Its
candidates are scored again exactly from the store's matrix, so scores, `min_score` and the
order of a search are the exact ones of the rows it found. A filter passing fewer rows than
`Hnsw.min_rows`, or fewer than an eighth of the rows, is answered exactly from those rows
(cheap, and complete: a graph searched among few rows loses some); a filter passing more
searches the graph among the rows it passes (faiss's ID selector), as one passing nearly every
row (one conversation's rows in a store of one conversation) does.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._errors import ConfigurationError

if TYPE_CHECKING:
    from ._vectors import Matrix, Positions, Selection, VectorIndex

__all__ = ["Graph", "Hnsw"]

log = logging.getLogger("chatmemory.rag")
_INSTALL = "pip install 'chatmemory[hnsw]'"
_TAIL = 2048
"""Up to this many rows added after a graph read from its file are scored exactly beside it
rather than added to it: adding needs the graph read into memory from its mapping (a copy of it
all, about 300 ms at 100,000 rows), which a new process's first searches should not pay."""
MAGIC = b"CMHNSW\x02\x00"
"""The saved graph: MAGIC, int64 stamp, label count and dimension, the labels' keys (int64) and
whether each is live (uint8), then, from the next multiple of 64 bytes (`_index_at`), faiss's
serialized index."""


def _index_at(count: int) -> int:
    """Where faiss's index starts in a saved graph of `count` labels."""
    return -(-(32 + 9 * count) // 64) * 64


@dataclass(frozen=True, slots=True, kw_only=True)
class Hnsw:
    """An approximate (HNSW) index for `InMemoryEmbeddingStore` and `SqliteEmbeddingStore`
    (``pip install 'chatmemory[hnsw]'``: faiss), used by `search` once the store holds at least
    `min_rows` rows; below that every search is exact. `connections` (HNSW's M) and
    `ef_construction` shape the graph, `ef_search` is how many candidates a search keeps:
    raise it for recall (the defaults: recall@10 0.97-0.98 on clustered 384-dimension vectors
    at 100,000 rows; 64: 0.99). Building the graph costs about 15-25 s per 100,000 such rows on
    two cores (once, on the first search above `min_rows`; the SQLite store saves it beside its
    file then, again each time it doubled and at `close()`; the next process maps that file
    rather than reading it, so opening costs nothing and only the pages searches visit are read,
    and reads it into memory only to add the rows it lacks). `select`, `remove_all(filter)` and
    full-text search stay exact."""

    min_rows: int = 20_000
    connections: int = 32
    ef_construction: int = 40
    ef_search: int = 48

    def __post_init__(self) -> None:
        for name in ("min_rows", "connections", "ef_construction", "ef_search"):
            value = getattr(self, name)
            least = 0 if name == "min_rows" else 2
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigurationError(f"Hnsw `{name}` must be an int >= {least}, got {value!r}")


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as error:
        raise ImportError(
            f"an Hnsw index needs faiss, which is not installed or does not load ({error}); "
            f"install it with: {_INSTALL}"
        ) from error
    return faiss


def check_hnsw(value: object) -> Hnsw | None:
    """A store's `approximate` argument: None, or an `Hnsw` whose library loads."""
    if value is None:
        return None
    if not isinstance(value, Hnsw):
        raise ConfigurationError(f"`approximate` must be an Hnsw(...) or None, got {value!r}")
    _faiss()
    return value


class Graph:
    """The HNSW index of one store (see the module)."""

    @classmethod
    def kept(
        cls,
        settings: Hnsw | None,
        index: VectorIndex,
        graph: Graph | None,
        stamp: int = 0,
        path: Path | None = None,
    ) -> Graph | None:
        """The graph a store should search `index` with: None without `settings` or below
        their `min_rows`, else `graph` when it is of `stamp`, else the one saved at `path`
        when it is, else a new one."""
        if settings is None or not len(index) or len(index) < settings.min_rows:
            return graph
        dimension = int(index.dimension or 1)
        if graph is not None and graph.stamp == stamp:
            return graph
        loaded = None if path is None else cls.load(path, settings, dimension, stamp)
        kept = loaded or cls(settings, dimension, stamp)
        kept.path = path
        return kept

    def __init__(self, settings: Hnsw, dimension: int, stamp: int = 0) -> None:
        self.settings = settings
        self.stamp = stamp
        """What the store says about its rows' vectors: a graph of another stamp is stale
        (the SQLite store: how many updates any program made to its table)."""
        faiss = _faiss()
        self._faiss = faiss
        self._index = faiss.IndexHNSWFlat(
            dimension, settings.connections, faiss.METRIC_INNER_PRODUCT
        )
        self._index.hnsw.efConstruction = settings.ef_construction
        self.keys: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)  # by label, increasing
        self.live: npt.NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self.erased: npt.NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        """The labels whose vectors were erased (every label not live, once followed)."""
        self._at: npt.NDArray[np.intp] = np.zeros(0, dtype=np.intp)  # label -> row position
        self._followed: tuple[int, int] | None = None  # (id of the index, its change count)
        self._lineage: tuple[int, int] | None = None  # (id of the index, its lineage) then
        self._everyone: tuple[Any, Any] | None = None  # the live labels' selector, when some died
        self._plain: tuple[int, Any] | None = None  # search parameters without a filter (ef)
        self.changed = False  # since it was read or saved
        self._mapped: tuple[mmap.mmap, int] | None = None
        """The saved file (and where faiss's part starts) the index is a view of, when read
        from one: faiss cannot add to a view, so the index is read into memory first."""
        self._saved = 0  # labels when it was last read or saved
        self.path: Path | None = None
        """Where it is saved (beside a SQLite file): removed as soon as it holds a row that
        left the store, so that no removed vector stays in a file."""
        self.generation = 0  # counts the syncs that changed labels (a selection's bits follow)
        self.tail = 0
        """The position from which `index`'s rows are not in the graph (scored exactly)."""

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def near(
        self, index: VectorIndex, query: Matrix, count: int, rows: Selection | None
    ) -> Positions | None:
        """The positions of `index`'s rows the graph finds nearest the unit `query` (one
        contiguous float32 row, as `VectorIndex.top` makes it), nearest first by the graph's
        reckoning, among `rows`; None when the search should be exact instead (too few rows)."""
        partial = rows is not None and not rows.everything
        passing = len(rows.positions) if rows is not None and partial else len(index)
        if passing < self.settings.min_rows or (partial and 8 * passing < len(index)):
            return None  # few rows (those a filter passes): exact, complete, and cheap
        self.follow(index)
        wanted = min(max(2 * count, 20), passing)
        if rows is not None and partial:
            ef = min(4096, self.settings.ef_search * len(index) // max(passing, 1))
            params = self._faiss.SearchParametersHNSW(  # fewer pass: look further
                sel=self._selector(rows), efSearch=max(ef, wanted)
            )
        else:
            params = self._params(max(self.settings.ef_search, wanted))
        # faiss's search without its Python wrapper (its checks and copies cost a sixth of a
        # search with cold caches): it reads d float32s from where `query` starts.
        if (
            query.shape != (self._index.d,)
            or query.dtype != np.float32
            or not query.flags.c_contiguous
        ):
            raise ValueError(f"a graph of width {self._index.d} got a query of {query.shape}")
        faiss, distances = self._faiss, np.empty(wanted, dtype=np.float32)
        labels = np.empty(wanted, dtype=np.int64)
        self._index.search_c(
            1,
            faiss.swig_ptr(query),
            wanted,
            faiss.swig_ptr(distances),
            faiss.swig_ptr(labels),
            params,
        )
        found = self._at[labels[labels >= 0]]
        positions: Positions = found[found >= 0]
        if self.tail < len(index):
            positions = np.concatenate((positions, self._tail(index, query, wanted, rows)))
        return positions

    def _tail(
        self, index: VectorIndex, query: Matrix, wanted: int, rows: Selection | None
    ) -> Positions:
        """The positions of the `wanted` rows nearest `query` among those after the graph's
        (`tail`), of `rows`, scored exactly."""
        tail: Positions = np.arange(self.tail, len(index), dtype=np.intp)
        if rows is not None and not rows.everything:
            tail = tail[rows.mask[tail]]
        if len(tail) > wanted:
            cosines = index.cosines(tail, query)
            tail = tail[np.argpartition(-cosines, wanted - 1)[:wanted]]
        return tail

    def _params(self, ef: int) -> Any:
        """The search parameters without a filter (kept: they cost as much as a search's
        bookkeeping to make)."""
        if self._plain is None or self._plain[0] != ef:
            selector = None if self._everyone is None else self._everyone[1]
            self._plain = (ef, self._faiss.SearchParametersHNSW(sel=selector, efSearch=ef))
        return self._plain[1]

    def _selector(self, rows: Selection) -> Any:
        """faiss's selector of the live labels whose rows `rows` holds (kept with `rows`)."""
        if rows.bits is None or rows.bits[0] != (id(self), self.generation):
            passing = self.live & rows.mask[np.maximum(self._at, 0)]
            bits = np.packbits(passing, bitorder="little")
            selector = self._faiss.IDSelectorBitmap(len(passing), self._faiss.swig_ptr(bits))
            rows.bits = ((id(self), self.generation), bits, selector)  # bits outlive the selector
        return rows.bits[2]

    def follow(self, index: VectorIndex) -> None:
        """Bring the graph in step with `index`: rows above every key it holds are added, rows
        no longer in `index` masked out; once most labels are dead it is built again."""
        if self._followed == (id(index), index.changes):
            return
        keys = index.keys
        # Rows only appended since the last follow (the index's lineage is the same): the
        # labels held keep their positions, only the new rows are added below.
        appended = self._lineage == (id(index), index.lineage)
        self._lineage = (id(index), index.lineage)
        labels = (len(self.keys), int(self.live.sum()))
        if len(self.keys) and not appended:
            found = np.searchsorted(keys, self.keys)
            inside = found < len(keys)
            found[~inside] = 0
            held = inside & (keys[found] == self.keys) if len(keys) else inside
            self.live = held
            self._at = np.where(held, found, -1)
        if len(self.live) and 2 * int(self.live.sum()) < len(self.live):
            self._clear(index)
        top = int(self.keys[-1]) if len(self.keys) else -(2**62)
        start = int(np.searchsorted(keys, top, side="right"))
        self.tail = start
        if start < len(keys) and (self._mapped is None or len(keys) - start > _TAIL):
            self.tail = len(keys)
            self._own()
            _, scale, raw = index.parts()
            unit = raw[start:] * scale[start:, None]
            self._index.add(np.ascontiguousarray(unit, dtype=np.float32))
            self.keys = np.concatenate((self.keys, keys[start:]))
            self.live = np.concatenate((self.live, np.ones(len(keys) - start, dtype=np.bool_)))
            self.erased = np.concatenate((self.erased, np.zeros(len(keys) - start, np.bool_)))
            self._at = np.concatenate((self._at, np.arange(start, len(keys), dtype=np.intp)))
            self.changed = True
        if labels == (len(self.keys), int(self.live.sum())) and appended:
            self._followed = (id(index), index.changes)
            return  # rows only appended, scored beside the graph (its tail): labels unchanged
        dead = not bool(self.live.all())
        self._everyone = None
        self._plain = None
        if dead:
            self.forget_file()
            self._erase()
            bits = np.packbits(self.live, bitorder="little")
            self._everyone = (
                bits,
                self._faiss.IDSelectorBitmap(len(self.live), self._faiss.swig_ptr(bits)),
            )
        self.generation += 1
        self._followed = (id(index), index.changes)

    def _erase(self) -> None:
        """Zero the vectors of the labels that died since the last time (the graph read into
        memory first when it is a view of its file): their neighbours' links stay, their
        content goes."""
        dying = np.flatnonzero(~self.live & ~self.erased)
        if not len(dying):
            return
        self._own()
        storage = self._faiss.downcast_index(self._index.storage)
        vectors = self._faiss.rev_swig_ptr(storage.get_xb(), storage.ntotal * storage.d)
        vectors.reshape(storage.ntotal, storage.d)[dying] = 0.0
        self.erased[dying] = True
        self.changed = True

    def _clear(self, index: VectorIndex) -> None:
        """An empty graph, to be filled again from `index`."""
        settings = self.settings
        self._index = self._faiss.IndexHNSWFlat(
            int(index.dimension or 1), settings.connections, self._faiss.METRIC_INNER_PRODUCT
        )
        self._mapped = None  # the view (if any) went with the index it held
        self._index.hnsw.efConstruction = settings.ef_construction
        self.keys = np.zeros(0, dtype=np.int64)
        self.live = np.zeros(0, dtype=np.bool_)
        self.erased = np.zeros(0, dtype=np.bool_)
        self._at = np.zeros(0, dtype=np.intp)
        self.changed = True

    def _own(self) -> None:
        """Read the index into memory when it is a view of its file (copied in steps from the
        mapping, which then goes: the view index goes first, so no search reads it after)."""
        if self._mapped is None:
            return
        mapped, start = self._mapped
        mapped.seek(start)
        index = self._faiss.read_index(self._faiss.PyCallbackIOReader(mapped.read))
        index.hnsw.efConstruction = self.settings.ef_construction
        self._index = index
        self._mapped = None

    # -- beside a file

    def forget_file(self) -> None:
        """Remove the saved graph (it holds vectors of rows that were removed: saved again
        once they are erased)."""
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def keep_file(self, index: VectorIndex, *, grown: bool = False) -> None:
        """Save the graph when it changed and follows `index` as it is now (the vectors of
        its removed rows erased; otherwise the next process builds it from the rows it finds);
        with `grown`, only once it holds twice the rows it held when last saved or read (so a
        new graph is saved as soon as it is built, and the writes stay proportional to the
        rows)."""
        if (
            self.path is not None
            and self.changed
            and (not grown or len(self) >= 2 * self._saved)
            and self._followed == (id(index), index.changes)
        ):
            self.save(self.path)

    def save(self, path: Path) -> None:
        """Write the graph to `path` whole, then put it in place (a failure only costs the
        next process a build)."""
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        try:
            with partial.open("wb") as file:
                head = np.array([self.stamp, len(self.keys), self._index.d], dtype=np.int64)
                file.write(MAGIC + head.tobytes())
                file.write(self.keys.tobytes())
                file.write(self.live.astype(np.uint8).tobytes())
                file.write(bytes(_index_at(len(self.keys)) - file.tell()))
                self._faiss.write_index(self._index, self._faiss.PyCallbackIOWriter(file.write))
            os.replace(partial, path)
            self.changed = False
            self._saved = len(self)
        except OSError as error:  # pragma: no cover - a read-only folder, a full disk
            log.debug("cannot write %s: %s", path, error)
            with contextlib.suppress(OSError):
                partial.unlink()

    @classmethod
    def load(cls, path: Path, settings: Hnsw, dimension: int, stamp: int) -> Graph | None:
        """The graph saved at `path`, when it is one of `stamp` and `dimension` (else None:
        stale, or not there). faiss's part is mapped, not read: its pages are read as searches
        visit them (a view of the file, owned by the graph until it changes)."""
        try:
            with path.open("rb") as file:
                mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # ValueError: an empty file
            return None
        blob = np.frombuffer(mapped, dtype=np.uint8)
        if len(blob) < 32 or bytes(blob[:8]) != MAGIC:
            return None
        saved, count, width = blob[8:32].view(np.int64).tolist()
        if saved != stamp or width != dimension or not 0 <= count <= len(blob) // 9:
            return None
        start = _index_at(count)
        if len(blob) <= start:
            return None
        graph = cls(settings, dimension, stamp)
        faiss = graph._faiss
        data = blob[start:]
        try:
            index = faiss.read_index(faiss.ZeroCopyIOReader(faiss.swig_ptr(data), data.size))
        except RuntimeError:  # a damaged or foreign file: built again
            return None
        if (
            not isinstance(index, faiss.IndexHNSWFlat)
            or index.ntotal != count
            or index.d != dimension
        ):
            return None
        keys = blob[32 : 32 + 8 * count].view(np.int64).copy()
        live = blob[32 + 8 * count : 32 + 9 * count].astype(np.bool_)
        index.hnsw.efConstruction = settings.ef_construction
        graph._index, graph._mapped = index, (mapped, start)
        graph.keys, graph.live, graph.erased = keys, live, ~live  # (erased before saving)
        graph._saved = count
        graph._at = np.full(count, -1, dtype=np.intp)
        return graph
