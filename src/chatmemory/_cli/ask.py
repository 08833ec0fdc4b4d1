"""`chatmemory ask`: answer from the ingested documents, or show what retrieval finds."""

from __future__ import annotations

import os
from typing import Protocol

import click

from ..rag import Content, DocumentKey, EmbeddingModel, HybridContentRetriever, Query
from ..rag._ingest import model_label
from .embeddings import embedding_options, make_embedding_model, open_embedding_store

__all__ = ["ask"]


class _Answerer(Protocol):
    def answer(self, question: str) -> str: ...


def _check_model(found: list[Content], model: EmbeddingModel) -> None:
    """Refuse to compare the query with embeddings another model made."""
    label = model_label(model)
    others = {c.segment.metadata.get(DocumentKey.EMBEDDING_MODEL) for c in found} - {label, None}
    if others:
        raise click.ClickException(
            f"the store was filled with {', '.join(sorted(map(str, others)))}, not {label}: "
            f"ask with the --model you ingested with"
        )


@click.command()
@click.argument("question")
@embedding_options
@click.option("--max-results", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--show-sources", is_flag=True, help="Print the passages the answer stands on.")
@click.option("--chat-model", help="The model that answers [default: gpt-4o-mini].")
def ask(
    question: str,
    model_kind: str,
    embedding_model: str | None,
    base_url: str | None,
    store_kind: str,
    db: str | None,
    postgres_dsn: str | None,
    table: str,
    max_results: int,
    show_sources: bool,
    chat_model: str | None,
) -> None:
    """Answer QUESTION from what `chatmemory ingest` stored (full text and vectors fused). With
    no chat model configured (no OPENAI_API_KEY, no --base-url) it prints the passages it
    found and their scores instead."""
    if not question.strip():
        raise click.BadParameter("is empty", param_hint="QUESTION")
    model = make_embedding_model(model_kind, embedding_model, base_url)
    with open_embedding_store(store_kind, db, postgres_dsn, table, model) as store:
        retriever = HybridContentRetriever(store, model, max_results=max_results)
        found = retriever.retrieve(Query(question))
        _check_model(found, model)
        if not found:
            click.echo("nothing ingested matches the question (try `chatmemory ingest PATH`)")
            return
        answering = os.environ.get("OPENAI_API_KEY") or base_url is not None
        if answering:
            from ..services import ai_service
            from .chat import make_model

            chat, _, _ = make_model("openai", chat_model, base_url)
            answerer: _Answerer = ai_service(
                _Answerer,
                chat_model=chat,
                content_retriever=retriever,
            )
            click.echo(answerer.answer(question))
        if show_sources or not answering:
            if not answering:
                click.echo("no chat model configured: the passages retrieval found are")
            for rank, content in enumerate(found, 1):
                meta = content.segment.metadata
                where = meta.get(DocumentKey.FILE_NAME, "?")
                if DocumentKey.PAGE in meta:
                    where += f" p.{meta[DocumentKey.PAGE]}"
                click.echo(f"[{rank}] {where} (score {content.score or 0:.3g})")
                click.echo(content.text)
