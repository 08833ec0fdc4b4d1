"""Which store a command works on: the SQLite default, or Redis / PostgreSQL when asked.

The Redis and PostgreSQL stores are optional extras, imported only when their option is given.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit, urlunsplit

import click

from .._contracts import HistoryStore, WindowStore
from ..stores.in_memory import InMemoryChatMemoryStore
from .base import F, db_to_write, default_db

__all__ = ["Access", "Store", "StoreSpec", "db_option", "open_sqlite", "store_options"]

Access = Literal["read", "change", "create"]
"""What a command does to a SQLite file (see `StoreSpec.open`)."""


class Store(WindowStore, HistoryStore, Protocol):
    """What the CLI needs of a store: the window and history contracts."""

    def repair_window(self, memory_id: str) -> list[int]: ...


@dataclass(frozen=True)
class StoreSpec:
    """The store options given on the command line."""

    db: Path | None = None
    redis_url: str | None = None
    redis_cluster: bool | None = None
    prefix: str | None = None
    postgres_dsn: str | None = None
    schema: str | None = None
    table: str | None = None

    def __post_init__(self) -> None:
        chosen = [
            name
            for name, value in (
                ("--db", self.db),
                ("--redis-url", self.redis_url),
                ("--postgres-dsn", self.postgres_dsn),
            )
            if value is not None
        ]
        if len(chosen) > 1:
            raise click.UsageError(f"choose one store: {' and '.join(chosen)} were both given")
        for name, value in (("--prefix", self.prefix), ("--redis-cluster", self.redis_cluster)):
            if value is not None and self.redis_url is None:
                raise click.UsageError(f"{name} is a Redis option: give --redis-url as well")
        for name, value in (("--schema", self.schema), ("--table", self.table)):
            if value is not None and self.postgres_dsn is None:
                raise click.UsageError(
                    f"{name} is a PostgreSQL option: give --postgres-dsn as well"
                )

    @property
    def sqlite_path(self) -> Path:
        return self.db if self.db is not None else default_db()

    def describe(self) -> str:
        """Where the data is, for messages (passwords in URLs are masked)."""
        if self.redis_url is not None:
            prefix = f" (prefix {self.prefix!r})" if self.prefix is not None else ""
            cluster = " (cluster)" if self.redis_cluster else ""
            return f"Redis {_mask(self.redis_url)}{cluster}{prefix}"
        if self.postgres_dsn is not None:
            where = ".".join(n for n in (self.schema, self.table) if n is not None)
            return f"PostgreSQL {_mask(self.postgres_dsn)}" + (f" ({where})" if where else "")
        return f"SQLite {self.sqlite_path}"

    @classmethod
    def take(cls, options: dict[str, Any]) -> StoreSpec:
        """The store options of a command's keyword arguments, removed from them."""
        return cls(**{f.name: options.pop(f.name) for f in dataclasses.fields(cls)})

    def merged(self, other: StoreSpec) -> StoreSpec:
        """These options, with those given after the subcommand (`other`) taking precedence:
        `history list --db X` and `history --db X list` mean the same."""
        if other == StoreSpec():
            return self
        if other.db is not None or other.redis_url is not None or other.postgres_dsn is not None:
            base = StoreSpec()  # another store chosen after the subcommand replaces this one
        else:
            base = self
        values = {}
        for field in dataclasses.fields(self):
            given = getattr(other, field.name)
            values[field.name] = given if given is not None else getattr(base, field.name)
        return StoreSpec(**values)

    @contextlib.contextmanager
    def open(self, access: Access = "create") -> Iterator[Store]:
        """The store, closed on exit.

        A SQLite file is opened as the command needs it: "read" opens it read-only (nothing in
        it changes); "change" writes only to a chatmemory database already there, so another
        application's file is refused as it is; "create" makes the file when missing (and the
        data directory for the default file, never the directory of a --db file). For "read"
        and "change" a missing default file is an empty store and a missing file named with
        --db is an error: neither is created.
        """
        if self.redis_url is not None:
            with _redis(self.redis_url, self.prefix, bool(self.redis_cluster)) as store:
                yield store
        elif self.postgres_dsn is not None:
            with _postgres(self.postgres_dsn, self.schema, self.table) as store:
                yield store
        elif access == "create":
            with open_sqlite(self.db) as store:
                yield store
        elif not self.sqlite_path.exists():
            if self.db is not None:
                raise click.ClickException(f"no such file: {click.format_filename(self.db)}")
            yield InMemoryChatMemoryStore()
        else:
            from ..stores.sqlite import SqliteChatMemoryStore

            read_only = access == "read"
            with SqliteChatMemoryStore(
                self.sqlite_path, read_only=read_only, create=False
            ) as store:
                yield store


def open_sqlite(named: Path | None) -> contextlib.AbstractContextManager[Store]:
    """The SQLite store a command writes to: the `--db` file (`named`), created when missing
    but never its directory, or the default file in the data directory (made when missing)."""
    from ..stores.sqlite import SqliteChatMemoryStore

    return SqliteChatMemoryStore(db_to_write(named))


_REDIS_SCHEMES = ("redis", "rediss", "unix")


def _redis(url: str, prefix: str | None, cluster: bool) -> contextlib.AbstractContextManager[Any]:
    scheme = urlsplit(url).scheme
    if scheme not in _REDIS_SCHEMES:
        raise click.BadParameter(
            f"{_mask(url)!r} is not a Redis URL: write redis://host:6379/0, rediss://... (TLS) "
            f"or unix:///path/to/redis.sock",
            param_hint="--redis-url",
        )
    try:
        from ..stores.redis import RedisChatMemoryStore

        return RedisChatMemoryStore(url, cluster=cluster, **_given(prefix=prefix))
    except ImportError as error:  # the extra is missing: its message says what to install
        raise click.ClickException(str(error)) from None


def _postgres(
    dsn: str, schema: str | None, table: str | None
) -> contextlib.AbstractContextManager[Any]:
    # The pool logs every failed connection attempt; the command reports the failure once.
    logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
    try:
        from ..stores.postgres import PostgresChatMemoryStore

        return PostgresChatMemoryStore(dsn, **_given(schema=schema, table=table))
    except ImportError as error:  # the extra is missing: its message says what to install
        raise click.ClickException(str(error)) from None


def _given(**options: str | None) -> dict[str, Any]:
    """The options that were given (the others keep the store's defaults)."""
    return {name: value for name, value in options.items() if value is not None}


def _mask(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


db_option = click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="SQLite database file [default: chatmemory.db in the data directory].",
)


def store_options(command: F) -> F:
    """Add --db / --redis-url / --postgres-dsn (and their settings) to a command or group."""
    options = [
        db_option,
        click.option(
            "--redis-url", metavar="URL", help="Use Redis, e.g. redis://localhost:6379/0."
        ),
        click.option(
            "--redis-cluster",
            is_flag=True,
            default=None,
            help="The Redis URL is a node of a Redis Cluster (ids are on every primary).",
        ),
        click.option("--prefix", help="Key prefix of the Redis store [default: chatmemory:]."),
        click.option(
            "--postgres-dsn", metavar="DSN", help="Use PostgreSQL, e.g. postgresql://user@host/db."
        ),
        click.option("--schema", help="PostgreSQL schema of the store's tables."),
        click.option("--table", help="PostgreSQL table name of the store."),
    ]
    for option in reversed(options):
        command = option(command)
    return command
