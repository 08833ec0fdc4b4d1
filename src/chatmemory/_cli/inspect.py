"""`chatmemory inspect`: the stored conversations on a local web page (the `inspect` extra)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import click

from .base import estimator_options, make_estimator, missing_extra
from .stores import StoreSpec, store_options

__all__ = ["inspect", "sqlite_lookups"]

_TITLES = "SELECT substr(key, 7), text FROM chatmemory_working_memory WHERE key LIKE 'title:%'"
"""`ConversationTitles` keeps a title as the record ``title:<memory id>``..."""
_USERS = (
    "SELECT json_extract(metadata, '$.memory_id'), json_extract(metadata, '$.user_id') "
    "FROM embeddings WHERE json_extract(metadata, '$.kind') = 'chatmemory_recall_mark'"
)
"""...and semantic recall's index mark of a conversation names its user."""


@click.command()
@store_options
@estimator_options
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port on 127.0.0.1 (0: any free port).",
)
def inspect(port: int, model: str, encoding: str | None, **options: Any) -> None:
    """Look at stored conversations in a browser, on http://127.0.0.1:PORT.

    Lists the conversations (with their titles and users where the SQLite file keeps them);
    for one, shows the window the model is sent beside the whole history, each message's
    token count, evicted messages greyed, tool calls folded with their results; searches all
    history; and shows what semantic recall would bring back for a query. The store is only
    read, and the page is served on the loopback interface alone.
    """
    spec = StoreSpec.take(options)
    estimator = make_estimator(model, encoding)
    try:
        import uvicorn

        from ..inspector import create_app
    except ImportError as error:
        raise click.ClickException(missing_extra(error)) from None
    sqlite = spec.redis_url is None and spec.postgres_dsn is None
    with (
        spec.open("read") as store,
        sqlite_lookups(spec.sqlite_path if sqlite else None) as (
            titles,
            users,
        ),
    ):
        app = create_app(
            store, estimator=estimator, titles=titles, users=users, source=spec.describe()
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        server = uvicorn.Server(config)
        click.echo(f"inspecting {spec.describe()} on http://127.0.0.1:{port}/ (Ctrl-C stops)")
        server.run()


Lookup = Callable[[], Mapping[str, str]]


@contextlib.contextmanager
def sqlite_lookups(path: Path | None) -> Iterator[tuple[Lookup | None, Lookup | None]]:
    """Titles and users of the conversations in the SQLite file at `path`, when the file holds
    `ConversationTitles`' records and semantic recall's index: read through a read-only
    connection, so nothing in the file changes (and no file is created)."""
    if path is None or not path.is_file():
        yield None, None
        return
    uri = f"{path.resolve().as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, check_same_thread=False)) as db:
        yield _readers(db)


def _readers(connection: sqlite3.Connection) -> tuple[Lookup | None, Lookup | None]:
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    lock = threading.Lock()

    def reader(query: str) -> Lookup:
        def read() -> dict[str, str]:
            with lock:
                return {key: value for key, value in connection.execute(query) if key and value}

        return read

    return (
        reader(_TITLES) if "chatmemory_working_memory" in tables else None,
        reader(_USERS) if "embeddings" in tables else None,
    )
