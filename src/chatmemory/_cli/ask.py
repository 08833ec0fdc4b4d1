"""`chatmemory ask`: answer from the ingested documents, or show what retrieval finds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

import click

from .._errors import ConfigurationError
from ..models import StreamingChatModel
from ..rag import (
    Content,
    ContentKey,
    DocumentKey,
    EmbeddingModel,
    Filter,
    HybridContentRetriever,
    Query,
    parse_filter,
)
from ..rag._ingest import model_label
from ..services import TokenStream
from .base import console
from .chat_model import model_call_options
from .embeddings import (
    EMBEDDING_KINDS,
    deprecated,
    embedding_choice,
    embedding_options,
    make_embedding_model,
    open_embedding_store,
)

__all__ = ["ask"]


class _Answerer(Protocol):
    def answer(self, question: str) -> TokenStream: ...


def _check_model(found: list[Content], model: EmbeddingModel) -> None:
    """Refuse to compare the query with embeddings another model made."""
    label = model_label(model)
    others = {c.segment.metadata.get(DocumentKey.EMBEDDING_MODEL) for c in found} - {label, None}
    if others:
        raise click.ClickException(
            f"the store was filled with {', '.join(sorted(map(str, others)))}, not {label}: "
            f"ask with the --embedding-model you ingested with"
        )


@click.command()
@click.argument("question")
@click.option("--model", help="The chat model that answers [default: gpt-4o-mini].")
@click.option("--base-url", help="An OpenAI-compatible server for the chat model.")
@model_call_options
@embedding_options
@click.option("--max-results", type=click.IntRange(min=1), default=3, show_default=True)
@click.option(
    "--filter",
    "where",
    metavar="CONDITION",
    help="Search only the passages whose metadata passes this SQL WHERE condition, e.g. "
    "\"source LIKE '%/manual/%' AND page <= 10\" (keys: source, file_name, page, index).",
)
@click.option("--show-sources", is_flag=True, help="Print the passages the answer stands on.")
@click.option("--chat-model", "old_chat_model", hidden=True)
def ask(
    question: str,
    model: str | None,
    base_url: str | None,
    timeout: float,
    max_retries: int,
    embedding_model: str | None,
    embedding_base_url: str | None,
    store_kind: str,
    db: str | None,
    postgres_dsn: str | None,
    table: str,
    max_results: int,
    where: str | None,
    show_sources: bool,
    old_chat_model: str | None,
) -> None:
    """Answer QUESTION from what `chatmemory ingest` stored (full text and vectors fused). With
    no chat model configured (no OPENAI_API_KEY, no --base-url) it prints the passages it
    found and their scores instead."""
    if not question.strip():
        raise click.BadParameter("is empty", param_hint="QUESTION")
    condition = _condition(where)
    model, embedder = _models(model, base_url, embedding_model, embedding_base_url, old_chat_model)
    answering = bool(os.environ.get("OPENAI_API_KEY")) or base_url is not None
    chat = None
    if answering:
        from .chat_model import make_model

        chat, _, _ = make_model("openai", model, base_url, timeout, max_retries)
    with open_embedding_store(store_kind, db, postgres_dsn, table, embedder, "read") as store:
        retriever = HybridContentRetriever(
            store, embedder, max_results=max_results, filter=condition
        )
        with console(stderr=True).status("retrieving…"):
            found = retriever.retrieve(Query(question))
        _check_model(found, embedder)
        if not found:
            click.echo("nothing ingested matches the question (try `chatmemory ingest PATH`)")
            return
        if chat is not None:
            _answer(chat, _Found(found), question)
        if show_sources or chat is None:
            if chat is None:
                click.echo("no chat model configured: the passages retrieval found are")
            for rank, content in enumerate(found, 1):
                click.echo(f"[{rank}] {_source(content)} ({_scores(content)})")
                click.echo(content.text)


def _condition(where: str | None) -> Filter | None:
    """The --filter text as a Filter; what cannot be read is a usage error with its position."""
    if where is None:
        return None
    try:
        return parse_filter(where)
    except ConfigurationError as error:
        raise click.BadParameter(str(error), param_hint="--filter") from None


def _source(content: Content) -> str:
    """Where a passage comes from: its file's path (relative to here when under it), page."""
    meta = content.segment.metadata
    source = meta.get(DocumentKey.SOURCE)
    if isinstance(source, str):
        path = Path(source)
        where = str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else source
    else:
        where = str(meta.get(DocumentKey.FILE_NAME, "?"))
    if DocumentKey.PAGE in meta:
        where += f" p.{meta[DocumentKey.PAGE]}"
    return where


def _scores(content: Content) -> str:
    """The fused score, then each search's own (they are on different scales)."""
    text = f"score {content.score or 0:.3g}"
    words, meaning = (*content.metadata.get(ContentKey.SOURCE_SCORES, ()), None, None)[:2]
    details = [
        f"{name} {score:.3g}"
        for name, score in (("full text", words), ("vectors", meaning))
        if isinstance(score, (int, float))
    ]
    return f"{text}: {', '.join(details)}" if details else text


def _models(
    model: str | None,
    base_url: str | None,
    embedding_model: str | None,
    embedding_base_url: str | None,
    old_chat_model: str | None,
) -> tuple[str | None, EmbeddingModel]:
    """The chat model's name and the embedding model, with the old spellings warned about:
    `--model KIND` (now --embedding-model), `--chat-model` (now --model), and --base-url
    serving the embeddings too (now --embedding-base-url)."""
    old_kind = None
    if model in EMBEDDING_KINDS:
        old_kind, model = model, None
    if old_chat_model is not None:
        deprecated("--chat-model", "--model")
        model = model or old_chat_model
    choice = embedding_choice(embedding_model, old_kind)
    if embedding_base_url is None and base_url is not None and choice not in ("hashing", "local"):
        deprecated("--base-url for the embeddings", "--embedding-base-url")
        embedding_base_url = base_url
    return model, make_embedding_model(choice, embedding_base_url)


class _Found:
    """A content retriever that gives what was already found: the passages retrieval found
    (under the "retrieving…" spinner) are the ones the model is given, retrieved once."""

    def __init__(self, found: list[Content]) -> None:
        self._found = found

    def retrieve(self, query: Query) -> list[Content]:
        return self._found


def _answer(chat: StreamingChatModel, found: _Found, question: str) -> None:
    """The answer, printed as it streams; a spinner until its first words."""
    from ..services import ai_service

    answerer: _Answerer = ai_service(_Answerer, streaming_chat_model=chat, content_retriever=found)
    with console(stderr=True).status("asking the model…") as status:
        stream = answerer.answer(question).text()
        first = next(stream, "")
        status.stop()
    click.echo(first, nl=False)
    for piece in stream:
        click.echo(piece, nl=False)
    click.echo("")
