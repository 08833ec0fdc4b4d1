"""What `ingest` and `ask` share: the embedding model and the embedding store they name."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

import click

from ..rag import EmbeddingModel, HashingEmbeddingModel
from .base import db_to_write, default_db

__all__ = [
    "EMBEDDING_KINDS",
    "EMBEDDING_TABLE",
    "check_pgvector",
    "deprecated",
    "embedding_choice",
    "embedding_options",
    "make_embedding_model",
    "open_embedding_store",
]

F = TypeVar("F", bound=Callable[..., Any])

EMBEDDING_TABLE = "embeddings"


EMBEDDING_KINDS = ("hashing", "local", "openai")


def embedding_options(command: F) -> F:
    """--embedding-model, --embedding-base-url and the store options of `ingest` and `ask`
    (plus --embedding-model-name, the old spelling of the OpenAI model's name, hidden)."""
    options = [
        click.option(
            "--embedding-model",
            metavar="MODEL",
            help="hashing (the default: offline, no weights, matches words); local: "
            "all-MiniLM-L6-v2 on this machine (the local extra); openai, or any other name: "
            "that model on the /embeddings API (OPENAI_API_KEY or --embedding-base-url), "
            "openai meaning text-embedding-3-small.",
        ),
        click.option(
            "--embedding-base-url",
            metavar="URL",
            help="An OpenAI-compatible server for the embeddings (Ollama, vLLM, llama.cpp...).",
        ),
        click.option(
            "--store",
            "store_kind",
            type=click.Choice(["sqlite", "postgres"]),
            default="sqlite",
            show_default=True,
            help="sqlite: the default file (or --db); postgres: pgvector at --postgres-dsn.",
        ),
        click.option("--db", type=click.Path(dir_okay=False), help="The SQLite file."),
        click.option("--postgres-dsn", help="PostgreSQL with the pgvector extension."),
        click.option("--table", default=EMBEDDING_TABLE, show_default=True, help="The table."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def deprecated(old: str, new: str) -> None:
    """Warn on stderr that the option spelled `old` is now `new`."""
    click.echo(f"Warning: {old} is deprecated here: use {new}", err=True)


def embedding_choice(model: str | None, old_kind: str | None) -> str:
    """The --embedding-model value, from it or from the old spellings (`--model KIND` with
    `--embedding-model NAME`), which are warned about."""
    if old_kind is not None:
        deprecated(f"--model {old_kind}", f"--embedding-model {old_kind}")
        if old_kind == "openai" and model is not None:
            return model  # the old --embedding-model was the OpenAI model's name
        return old_kind
    return model or "hashing"


def make_embedding_model(choice: str, base_url: str | None) -> EmbeddingModel:
    """The embedding model --embedding-model names (see `embedding_options`)."""
    if choice == "hashing":
        return HashingEmbeddingModel()
    if choice == "local":
        from ..rag import LocalEmbeddingModel

        return LocalEmbeddingModel()
    import os

    from ..rag import OpenAiEmbeddingModel

    api_key = os.environ.get("OPENAI_API_KEY")
    if not api_key and base_url is None:
        raise click.ClickException(
            f"--embedding-model {choice} needs OPENAI_API_KEY, or --embedding-base-url "
            "pointing at an OpenAI-compatible server (Ollama: http://localhost:11434/v1 with "
            "--embedding-model nomic-embed-text)"
        )
    name = "text-embedding-3-small" if choice == "openai" else choice
    return OpenAiEmbeddingModel(model=name, api_key=api_key or "not-needed", base_url=base_url)


@contextlib.contextmanager
def open_embedding_store(
    kind: str,
    db: str | None,
    dsn: str | None,
    table: str,
    model: EmbeddingModel,
    access: Literal["read", "create"],
) -> Iterator[Any]:
    """The store the options name. A SQLite file is created only to write ("create"), and
    never its directory; reading a file that is not there is an error (or, for the default
    file, a store with nothing in it)."""
    if kind == "postgres":
        if dsn is None:
            raise click.UsageError("--store postgres needs --postgres-dsn")
        with _pgvector(dsn, table, model) as store:
            yield store
        return
    if dsn is not None:
        raise click.UsageError("--postgres-dsn is for --store postgres")
    from ..rag.sqlite import SqliteEmbeddingStore

    path = Path(db) if db is not None else default_db()
    if access == "read" and not path.exists():
        if db is not None:
            raise click.ClickException(f"no such file: {click.format_filename(path)}")
        raise click.ClickException(
            "nothing ingested yet (no database at "
            f"{click.format_filename(path)}): run `chatmemory ingest PATH` first"
        )
    if access == "create":
        path = db_to_write(Path(db) if db is not None else None)
    with SqliteEmbeddingStore(path, table=table) as store:
        yield store


@contextlib.contextmanager
def _pgvector(dsn: str, table: str, model: EmbeddingModel) -> Iterator[Any]:
    """The pgvector store, or at once a sentence when the server cannot hold one."""
    logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
    from ..rag.pgvector import PgVectorEmbeddingStore

    check_pgvector(dsn)
    with PgVectorEmbeddingStore(dsn, dimension=model.dimension, table=table) as store:
        yield store


def check_pgvector(dsn: str) -> None:
    """A `ClickException` at once when the server at `dsn` cannot be reached or has no pgvector
    extension to create (rather than the pool retrying for half a minute)."""
    try:
        import psycopg
    except ImportError:
        raise click.ClickException(
            "--store postgres needs psycopg and pgvector, an optional extra: "
            "pip install 'chatmemory[pgvector]'"
        ) from None
    try:
        with psycopg.connect(dsn, connect_timeout=10) as connection:
            row = connection.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
    except psycopg.Error as error:
        said = " ".join(str(error).split())
        raise click.ClickException(f"cannot use PostgreSQL at --postgres-dsn: {said}") from None
    if row is None:
        raise click.ClickException(
            "the server has no pgvector: install it (e.g. the postgresql-16-pgvector package; "
            "https://github.com/pgvector/pgvector#installation) or use --store sqlite"
        )
