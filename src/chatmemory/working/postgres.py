"""`PostgresRecordStore`: working memory in PostgreSQL (``pip install 'chatmemory[postgres]'``).

One table (``chatmemory_working_memory`` by default) of key, text and version; a save is one
statement that checks the version, so concurrent updates serialize.
"""

from __future__ import annotations

import re
from typing import Any

from .._errors import ConfigurationError, StoreError
from ._records import Record, check_key, conflict, failures

__all__ = ["PostgresRecordStore"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class PostgresRecordStore:
    """Records in a PostgreSQL table: ``PostgresRecordStore("postgresql://localhost/app")``.
    `schema` and `table` are plain SQL names; both are created when missing."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "public",
        table: str = "chatmemory_working_memory",
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 30.0,
    ) -> None:
        try:
            import psycopg
            import psycopg_pool
            from psycopg import sql
        except ImportError as error:
            raise ImportError(
                f"PostgresRecordStore needs psycopg 3 and psycopg_pool: "
                f"pip install 'chatmemory[postgres]' ({error})"
            ) from error
        for setting, value in (("schema", schema), ("table", table)):
            if not isinstance(value, str) or not _NAME.fullmatch(value):
                raise ConfigurationError(
                    f"`{setting}` is a SQL name of letters, digits and underscores, got {value!r}"
                )
        self._errors: tuple[type[Exception], ...] = (psycopg.Error, psycopg_pool.PoolTimeout)
        name: Any = sql.Identifier(schema, table)
        self._load = sql.SQL("SELECT text, version FROM {} WHERE key = %s").format(name)
        self._insert = sql.SQL(
            "INSERT INTO {} (key, text, version) VALUES (%s, %s, 1) ON CONFLICT (key) DO NOTHING"
        ).format(name)
        self._update = sql.SQL(
            "UPDATE {} SET text = %s, version = version + 1, updated_at = now() "
            "WHERE key = %s AND version = %s"
        ).format(name)
        self._delete = sql.SQL("DELETE FROM {} WHERE key = %s").format(name)
        self.table = f"{schema}.{table}"
        self._pool: Any = psycopg_pool.ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            kwargs={"autocommit": True},
            name=f"chatmemory-{self.table}",
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
            with self._pool.connection() as conn:
                conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                )
                conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} (key text PRIMARY KEY, text text NOT NULL, "
                        "version bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())"
                    ).format(name)
                )
        except self._errors as error:
            self._pool.close()
            raise StoreError(f"cannot open {self.table}: {error}", store=self) from error

    def __repr__(self) -> str:
        return f"PostgresRecordStore(table={self.table!r})"

    def load(self, key: str) -> Record | None:
        with failures(self, self._errors, "read", key), self._pool.connection() as conn:
            row = conn.execute(self._load, (check_key(key),)).fetchone()
        return Record(row[0], int(row[1])) if row else None

    def save(self, key: str, text: str, *, expected: int) -> int:
        check_key(key)
        with failures(self, self._errors, "save", key), self._pool.connection() as conn:
            if expected == 0:
                cursor = conn.execute(self._insert, (key, text))
            else:
                cursor = conn.execute(self._update, (text, key, expected))
        if cursor.rowcount != 1:
            raise conflict(self, key, expected)
        return expected + 1

    def delete(self, key: str) -> bool:
        with failures(self, self._errors, "delete", key), self._pool.connection() as conn:
            return bool(conn.execute(self._delete, (check_key(key),)).rowcount)

    def close(self) -> None:
        self._pool.close()
