"""What every SQLite store of the package does alike to make a delete a forget."""

from __future__ import annotations

import sqlite3

__all__ = ["forgetting", "scrub"]


def forgetting(connection: sqlite3.Connection) -> None:
    """Make deletes on `connection` overwrite what they remove in the database file
    (``secure_delete``: freed pages and cells are zeroed, not left for a reader of the bytes)."""
    connection.execute("PRAGMA secure_delete = ON")


def scrub(connection: sqlite3.Connection) -> bool:
    """Copy the write-ahead log into the database and truncate it, so that no old copy of a
    deleted row is left in the ``-wal`` file; False when a reader in another connection kept
    the log from being emptied (try again when it is done)."""
    busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return int(busy) == 0
