"""What `ingest` and `ask` share: the embedding model and the embedding store they name."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from ..rag import EmbeddingModel, HashingEmbeddingModel
from .base import default_db

__all__ = ["EMBEDDING_TABLE", "embedding_options", "make_embedding_model", "open_embedding_store"]

F = TypeVar("F", bound=Callable[..., Any])

EMBEDDING_TABLE = "embeddings"


def embedding_options(command: F) -> F:
    options = [
        click.option(
            "--model",
            "model_kind",
            type=click.Choice(["hashing", "local", "openai"]),
            default="hashing",
            show_default=True,
            help="hashing: offline, no weights, matches words; local: all-MiniLM-L6-v2 on this "
            "machine (the local extra); openai: the /embeddings API (OPENAI_API_KEY or "
            "--base-url).",
        ),
        click.option(
            "--embedding-model", help="The openai model [default: text-embedding-3-small]."
        ),
        click.option("--base-url", help="An OpenAI-compatible server for --model openai."),
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


def make_embedding_model(kind: str, name: str | None, base_url: str | None) -> EmbeddingModel:
    if kind == "hashing":
        return HashingEmbeddingModel()
    if kind == "local":
        from ..rag import LocalEmbeddingModel

        return LocalEmbeddingModel()
    import os

    from ..rag import OpenAiEmbeddingModel

    api_key = os.environ.get("OPENAI_API_KEY")
    if not api_key and base_url is None:
        raise click.ClickException(
            "--model openai needs OPENAI_API_KEY, or --base-url pointing at an "
            "OpenAI-compatible server (Ollama: http://localhost:11434/v1 with "
            "--embedding-model nomic-embed-text)"
        )
    return OpenAiEmbeddingModel(
        model=name or "text-embedding-3-small", api_key=api_key or "not-needed", base_url=base_url
    )


@contextlib.contextmanager
def open_embedding_store(
    kind: str, db: str | None, dsn: str | None, table: str, model: EmbeddingModel
) -> Iterator[Any]:
    if kind == "postgres":
        if dsn is None:
            raise click.UsageError("--store postgres needs --postgres-dsn")
        from ..rag.pgvector import PgVectorEmbeddingStore

        with PgVectorEmbeddingStore(dsn, dimension=model.dimension, table=table) as store:
            yield store
        return
    if dsn is not None:
        raise click.UsageError("--postgres-dsn is for --store postgres")
    from ..rag.sqlite import SqliteEmbeddingStore

    with SqliteEmbeddingStore(db or default_db(), table=table) as store:
        yield store
