"""`chatmemory ingest`: files into the embedding store, with progress and a summary."""

from __future__ import annotations

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..rag import Ingestor, IngestProgress, ParagraphSplitter
from .base import console
from .embeddings import (
    EMBEDDING_KINDS,
    deprecated,
    embedding_choice,
    embedding_options,
    make_embedding_model,
    open_embedding_store,
)

__all__ = ["ingest"]


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@embedding_options
@click.option("--max-size", type=click.IntRange(min=50), default=1000, show_default=True,
              help="Largest segment, in characters.")  # fmt: skip
@click.option("--overlap", type=click.IntRange(min=0), default=100, show_default=True,
              help="Characters repeated from the previous segment.")  # fmt: skip
@click.option("--model", "old_kind", type=click.Choice(EMBEDDING_KINDS), hidden=True)
@click.option("--base-url", "old_base_url", hidden=True)
def ingest(
    paths: tuple[str, ...],
    embedding_model: str | None,
    embedding_base_url: str | None,
    store_kind: str,
    db: str | None,
    postgres_dsn: str | None,
    table: str,
    max_size: int,
    overlap: int,
    old_kind: str | None,
    old_base_url: str | None,
) -> None:
    """Read text, Markdown, HTML and PDF files (directories recursively), split them, embed
    them and store them for `chatmemory ask`. Unchanged files are skipped; a changed file
    replaces its old segments; a file an interrupted run left half-stored is completed."""
    if overlap >= max_size:
        raise click.BadParameter("must be smaller than --max-size", param_hint="--overlap")
    if old_base_url is not None:
        deprecated("--base-url", "--embedding-base-url")
        embedding_base_url = embedding_base_url or old_base_url
    choice = embedding_choice(embedding_model, old_kind)
    model = make_embedding_model(choice, embedding_base_url)
    splitter = ParagraphSplitter(max_size, overlap)
    with open_embedding_store(store_kind, db, postgres_dsn, table, model, "create") as store:
        ingestor = Ingestor(model, store, splitter=splitter)
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            console=console(stderr=True),
            transient=True,
        ) as progress:
            task = progress.add_task("files", total=None, counts="")

            def tell(step: IngestProgress) -> None:
                progress.update(
                    task,
                    total=step.files_total,
                    completed=step.files_done,
                    counts=f"{step.segments} segments, {step.embeddings} embeddings",
                )

            report = ingestor.ingest(list(paths), progress=tell)
    click.echo(f"{report}, into {store!r} with {ingestor.label}")
    for path, reason in report.failed.items():
        click.echo(f"failed {path}: {reason}", err=True)
    if report.failed and not report.files and not report.skipped:
        raise click.ClickException("nothing was ingested: every file failed")
