"""The rows of a SQLite embedding table whose metadata key holds a given str, found from an
index of SQLite's rather than by reading every row's metadata.

A process's first filter otherwise builds the whole `MetadataIndex` from every row's JSON (1-2 s
at 100,000 rows), though a recall's filter names two keys (``kind`` and ``memory_id``). For a
key that equality filters name, the store creates, at its next write (a read never writes), a
partial expression index on the key's str value, ``<table>_key_<name>``, which SQLite keeps in
step with every program's writes. A filter made only of equalities to str values (`eq`, `in_`,
combined by ``&`` and ``|``) on such keys is then answered by one index lookup per value, and the
rows found are kept and extended with the rows the store loads later; any other filter (and a
key with no index yet) builds the full `MetadataIndex`, as before.

A row's value is SQLite's reading of its JSON: text where Python reads a str, so the rows found
are those `Filter.test` passes (a row whose metadata is not a JSON object has none; a row that
cannot be read is left out when the search reads it, as with the full index).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ._filters import And, Compare, Filter, In, Or
from ._vectors import MetadataIndex, VectorIndex

__all__ = ["KeyedRows"]

MAX_KEYS = 8
"""The most keys of a table indexed so (each index costs every insert a little)."""
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}")
"""Keys whose index is made: a SQL name, and a JSON path without quoting."""


def _value(name: str) -> str:
    """The SQL expression of a row's str value of `name` (NULL for another kind, and for
    metadata that is not JSON: the index must not fail another program's insert)."""
    return (
        f"CASE WHEN json_valid(metadata) THEN CASE json_type(metadata, '$.{name}') "
        f"WHEN 'text' THEN json_extract(metadata, '$.{name}') END END"
    )


def _leaves(condition: Filter) -> list[tuple[str, str]] | None:
    """The (key, str value) equalities `condition` is made of, or None when it holds anything
    else."""
    if isinstance(condition, (And, Or)):
        left, right = _leaves(condition.left), _leaves(condition.right)
        return None if left is None or right is None else left + right
    if isinstance(condition, In) and not condition.negated:
        name, values = condition.key, list(condition.values)
    elif isinstance(condition, Compare) and condition.op == "eq":
        name, values = condition.key, [condition.value]
    else:
        return None
    texts = [value for value in values if isinstance(value, str) and _encodable(value)]
    if len(texts) < len(values) or not _KEY.fullmatch(name):
        return None
    return [(name, text) for text in texts]


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no row holds one, the full index says so
        return False
    return True


def _never(condition: Filter) -> list[int]:  # pragma: no cover - only equalities reach it
    raise AssertionError(f"{condition!r} is not an equality")


class KeyedRows:
    """The rows of each (key, str value) a filter of this process named, read from the table's
    index of the key the first time, then extended with the rows the store loads."""

    def __init__(self, table: str) -> None:
        self.table = table
        self._held = MetadataIndex()
        self._seeded: set[tuple[str, str]] = set()
        self.wanted: set[str] = set()
        """Keys filters named that have no index yet: made at the store's next write."""

    @property
    def active(self) -> bool:
        """Whether it holds rows (and so must be told of the rows loaded)."""
        return bool(self._seeded)

    def clear(self) -> None:
        """Forget the rows found (the store reads its table again)."""
        self._held = MetadataIndex()
        self._seeded.clear()

    def mask(
        self, db: sqlite3.Connection, condition: Filter, index: VectorIndex, start: int = 0
    ) -> npt.NDArray[np.bool_] | None:
        """Which of `index`'s rows from the position `start` on pass `condition` (a boolean per
        position), or None when it is not made of equalities on indexed keys."""
        leaves = _leaves(condition)
        if leaves is None:
            return None
        unindexed = {name for name, _ in leaves if name in self.wanted}
        for name, value in leaves:
            known = name in unindexed or (name, value) in self._seeded
            if not known and not self._seed(db, name, value):
                unindexed.add(name)  # (and wanted: each key named is indexed at once)
        return None if unindexed else self._held.mask(condition, index, _never, start)

    def _seed(self, db: sqlite3.Connection, name: str, value: str) -> bool:
        """Read the rows whose `name` is `value` from the key's index; False when it has none."""
        t = self.table
        try:
            (found,) = db.execute(
                f"SELECT group_concat(rowid) FROM {t} INDEXED BY {t}_key_{name} "
                f"WHERE ({_value(name)}) = ? AND text IS NOT NULL",
                (value,),
            ).fetchone()
        except sqlite3.OperationalError as error:
            if "no such index" not in str(error):
                raise
            if len(self.wanted) < MAX_KEYS:
                self.wanted.add(name)
            return False
        rows: list[int] = []
        if found:  # rowids in the index's order, which is theirs; sorted to be sure
            rows = np.sort(np.fromstring(found, dtype=np.int64, sep=",")).tolist()
        self._held.seed(name, value, rows)
        self._seeded.add((name, value))
        return True

    def add(self, keys: Sequence[int], metadata: Sequence[Mapping[str, Any] | None]) -> None:
        """Rows the store loaded (above every row held), with their metadata."""
        if not self._seeded:
            return
        names = {name for name, _ in self._seeded}
        kept_keys: list[int] = []
        kept: list[Mapping[str, Any] | None] = []
        for row, meta in zip(keys, metadata, strict=True):
            if meta is None:
                continue
            found = {
                name: value
                for name in names
                if isinstance(value := meta.get(name), str) and (name, value) in self._seeded
            }
            if found:
                kept_keys.append(row)
                kept.append(found)
        self._held.add(kept_keys, kept)

    def create(self, db: sqlite3.Connection) -> None:
        """Index the keys filters named (inside the store's write), up to `MAX_KEYS` a table."""
        if not self.wanted:
            return
        t = self.table
        (held,) = db.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = ? "
            "AND name LIKE ? ESCAPE '\\'",
            (t, t.replace("_", "\\_") + "\\_key\\_%"),
        ).fetchone()
        for name in sorted(self.wanted)[: max(0, MAX_KEYS - int(held))]:
            db.execute(
                f"CREATE INDEX IF NOT EXISTS {t}_key_{name} ON {t} (({_value(name)})) "
                f"WHERE text IS NOT NULL"
            )
        self.wanted.clear()
