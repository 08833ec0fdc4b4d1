"""Ingestion throughput (issue 10): Markdown files split, embedded and stored in the SQLite
embedding store, in segments per second, with the hashing model and (when the local extra is
installed) all-MiniLM-L6-v2 on the CPU. The floor beside each is the model's `embed_all` alone
on the same segments: what ingestion adds is reading, splitting and storing."""

from __future__ import annotations

import importlib.util
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from chatmemory.rag import (
    Document,
    EmbeddingModel,
    HashingEmbeddingModel,
    Ingestor,
    ParagraphSplitter,
    SqliteEmbeddingStore,
)

from .common import table

PARAGRAPH = (
    "Refunds for card payments take five business days; bank transfers take longer because the "
    "bank confirms each one. Write to support with your order number if a refund is late. "
)


def _files(folder: Path, count: int) -> None:
    for i in range(count):
        paragraphs = [f"## Section {j}\n\n{PARAGRAPH * (1 + j % 3)}" for j in range(20)]
        (folder / f"doc{i}.md").write_text(f"# Document {i}\n\n" + "\n\n".join(paragraphs))


def _row(name: str, model: EmbeddingModel, folder: Path) -> list[object]:
    splitter = ParagraphSplitter(500, 50)
    with SqliteEmbeddingStore(folder / f"{name}.db") as store:
        start = time.perf_counter()
        report = Ingestor(model, store, splitter=splitter).ingest([folder])
        seconds = time.perf_counter() - start
    texts = [
        s.text
        for path in sorted(folder.glob("*.md"))
        for s in splitter.split(Document(path.read_text()))
    ]
    start = time.perf_counter()
    for first in range(0, len(texts), 64):
        model.embed_all(texts[first : first + 64])
    floor = time.perf_counter() - start
    return [
        name,
        f"{report.segments:,}",
        f"{report.segments / seconds:,.0f} segments/s",
        f"{len(texts) / floor:,.0f} segments/s",
        f"{seconds / floor:.2f}×",
    ]


def run(quick: bool = False) -> Iterator[str]:
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        _files(folder, 20 if quick else 100)
        rows.append(_row("hashing", HashingEmbeddingModel(), folder))
        if importlib.util.find_spec("sentence_transformers") is not None:
            from chatmemory.rag import LocalEmbeddingModel

            local = LocalEmbeddingModel()
            local.embed_all(["warm up"])
            rows.append(_row("local all-MiniLM-L6-v2 (CPU)", local, folder))
    yield table(
        "Ingestion into SQLite (Markdown, paragraphs of 500 characters, 50 of overlap; floor: "
        "the model's embed_all alone, batches of 64)",
        ["model", "segments", "ingestion", "floor (embedding only)", "ratio"],
        rows,
    )
