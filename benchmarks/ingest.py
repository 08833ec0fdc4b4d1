"""Ingestion throughput (issue 10): Markdown files split, embedded and stored in the SQLite
embedding store, in segments per second, with the hashing model and (when the local extra is
installed) all-MiniLM-L6-v2 on the CPU. The floor beside each is the model's `embed_all` alone
on the same segments: what ingestion adds is reading, splitting and storing.

An ingest cut short: a 50 MB text file (5 MB with --quick) ingested whole, then again into
another store with a Ctrl-C after 131 batches (8,384 segments, as in the report of the bug; 40
with --quick),
then completed by a second run: its time, what it embedded, and whether the store then holds
exactly the segments (ids, texts, metadata) of the whole run."""

from __future__ import annotations

import contextlib
import importlib.util
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from chatmemory.rag import (
    Document,
    DocumentKey,
    Embedding,
    EmbeddingModel,
    HashingEmbeddingModel,
    Ingestor,
    ParagraphSplitter,
    SqliteEmbeddingStore,
    key,
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
    yield cut_short(quick)


class _CutShort(HashingEmbeddingModel):
    """The hashing model, with a Ctrl-C after `batches` batches (none when None)."""

    def __init__(self, batches: int | None = None) -> None:
        super().__init__()
        self.batches = batches
        self.embedded = 0

    def embed_all(self, texts: Sequence[str]) -> list[Embedding]:
        if self.batches is not None:
            if self.batches == 0:
                raise KeyboardInterrupt
            self.batches -= 1
        self.embedded += len(texts)
        return super().embed_all(texts)


def _large_file(path: Path, megabytes: int) -> None:
    words = PARAGRAPH.split()
    with path.open("w", encoding="utf-8") as out:
        written, i = 0, 0
        while written < megabytes * 1_000_000:
            paragraph = " ".join(words[(i * j) % len(words)] for j in range(40 + i % 120))
            written += out.write(paragraph.capitalize() + ".\n\n")
            i += 1


def _held(store: SqliteEmbeddingStore) -> dict[str, tuple[str, dict[str, object]]]:
    everything = store.select(key(DocumentKey.FILE_HASH).ne(""))
    return {i: (s.text, dict(s.metadata)) for i, s in everything.items() if s is not None}


def cut_short(quick: bool = False) -> str:
    """The table of an ingest cut short and completed (see the module's docstring)."""
    megabytes, batches = (5, 40) if quick else (50, 131)
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        path = folder / "large.txt"
        _large_file(path, megabytes)
        with SqliteEmbeddingStore(folder / "whole.db") as whole:
            start = time.perf_counter()
            first = Ingestor(_CutShort(), whole).ingest(path)
            whole_seconds = time.perf_counter() - start
            expected = _held(whole)
        with SqliteEmbeddingStore(folder / "cut.db") as store:
            with contextlib.suppress(KeyboardInterrupt):
                Ingestor(_CutShort(batches), store).ingest(path)
            kept = len(store)
            model = _CutShort()
            start = time.perf_counter()
            again = Ingestor(model, store).ingest(path)
            again_seconds = time.perf_counter() - start
            same = _held(store) == expected
            last = Ingestor(model, store).ingest(path)
    rows = [
        ["whole run", f"{first.segments:,}", f"{whole_seconds:.1f} s", "", ""],
        [f"cut after {batches} batches", f"{kept:,}", "", "", ""],
        [
            "next run",
            f"{again.segments:,} ({model.embedded:,} embedded)",
            f"{again_seconds:.1f} s",
            "yes" if same else "NO",
            "unchanged" if last.skipped == 1 else "NOT unchanged",
        ],
    ]
    return table(
        f"An ingest of a {megabytes} MB file cut short (Ctrl-C), then completed: SQLite, the "
        f"hashing model, the default splitter (paragraphs, 1,000 characters, 100 of overlap), "
        f"batches of 64",
        ["run", "segments stored", "time", "same segments as the whole run", "a third run"],
        rows,
    )
