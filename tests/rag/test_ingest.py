"""Ingestion: files to segments to embeddings in a store; re-ingesting skips what is unchanged and
replaces what changed without ever leaving a file unsearchable."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from chatmemory import ConfigurationError
from chatmemory.rag import (
    Document,
    DocumentKey,
    EmbeddingSearchRequest,
    Ingestor,
    IngestProgress,
    SentenceSplitter,
    key,
)

from .doubles import ListStore, WordsModel
from .pdf_helper import write_pdf


@pytest.fixture
def library(tmp_path: Path) -> Path:
    (tmp_path / "refunds.md").write_text(
        "# Refunds\n\nRefunds take five days.\n\nCards are refunded first.", encoding="utf-8"
    )
    (tmp_path / "shipping.html").write_text(
        "<h1>Shipping</h1><p>Parcels leave within a day.</p>", encoding="utf-8"
    )
    (tmp_path / "nested").mkdir()
    write_pdf(tmp_path / "nested" / "manual.pdf", ["Install the app.", "Open the settings."])
    (tmp_path / "image.png").write_bytes(b"\x89PNG")  # not a supported file: left alone
    return tmp_path


def sources(store: ListStore) -> list[tuple[str, int]]:
    return sorted(
        (Path(s.metadata[DocumentKey.SOURCE]).name, s.metadata.get(DocumentKey.PAGE, 0))
        for _, _, s in store.entries
        if s is not None
    )


def test_a_directory_is_ingested_file_by_file_with_metadata(library: Path) -> None:
    store, model = ListStore(), WordsModel()
    report = Ingestor(model, store, splitter=SentenceSplitter(30)).ingest([library])
    assert (report.files, report.skipped, report.replaced, report.failed) == (3, 0, 0, {})
    assert report.segments == len(store.entries) == 7
    assert sources(store) == [
        ("manual.pdf", 1),
        ("manual.pdf", 2),
        *[("refunds.md", 0)] * 3,
        *[("shipping.html", 0)] * 2,
    ]
    segment = next(s for _, _, s in store.entries if s is not None and "five" in s.text)
    assert segment.metadata[DocumentKey.EMBEDDING_MODEL] == "WordsModel/64"
    assert len(segment.metadata[DocumentKey.FILE_HASH]) == 64
    assert str(report) == "3 file(s) ingested, 0 unchanged, 7 segment(s) stored"


def test_embeddings_are_made_in_batches(library: Path) -> None:
    store, model = ListStore(), WordsModel()
    Ingestor(model, store, splitter=SentenceSplitter(30), batch_size=2).ingest([library])
    assert [len(batch) for batch in model.calls] == [2, 2, 1, 2]  # per file: pdf, md, html


def test_unchanged_files_are_skipped_and_changed_ones_replaced(library: Path) -> None:
    store, model = ListStore(), WordsModel()
    ingestor = Ingestor(model, store, splitter=SentenceSplitter(30))
    ingestor.ingest([library])
    model.calls.clear()
    again = ingestor.ingest([library])
    assert (again.files, again.skipped, again.segments, model.calls) == (0, 3, 0, [])

    (library / "refunds.md").write_text("Refunds take ten days now.", encoding="utf-8")
    changed = ingestor.ingest([library])
    assert (changed.files, changed.skipped, changed.replaced, changed.segments) == (1, 2, 1, 1)
    refunds = [s.text for _, _, s in store.entries if s and "refunds.md" in str(s.metadata)]
    assert refunds == ["Refunds take ten days now."]
    assert len(store.entries) == 5


def test_another_splitter_or_model_re_ingests(library: Path) -> None:
    store = ListStore()
    Ingestor(WordsModel(), store, splitter=SentenceSplitter(30)).ingest([library])
    report = Ingestor(WordsModel(), store, splitter=SentenceSplitter(200)).ingest([library])
    assert (report.files, report.replaced) == (3, 3)
    assert len(store.entries) == 4  # pdf pages 2, refunds 1, shipping 1


def test_documents_are_ingested_as_given() -> None:
    store, model = ListStore(), WordsModel()
    report = Ingestor(model, store).ingest(Document("Opening hours: 9 to 5.", {"team": "front"}))
    assert report.files == report.segments == 1
    match = store.search(
        EmbeddingSearchRequest(
            query_embedding=model.embed_all(["opening hours"])[0], filter=key("team").eq("front")
        )
    ).matches[0]
    assert match.embedded is not None
    assert match.embedded.text == "Opening hours: 9 to 5."


def test_unreadable_files_are_reported_and_the_rest_go_on(library: Path) -> None:
    (library / "bad.pdf").write_bytes(b"garbage")
    store = ListStore()
    report = Ingestor(WordsModel(), store, splitter=SentenceSplitter(30)).ingest([library])
    assert report.files == 3
    assert list(report.failed) == [str(library / "bad.pdf")]
    assert "is not a readable PDF" in report.failed[str(library / "bad.pdf")]
    assert str(report).endswith(", 1 failed")


def test_progress_is_told_after_each_step(library: Path) -> None:
    seen: list[IngestProgress] = []
    Ingestor(WordsModel(), ListStore(), splitter=SentenceSplitter(30)).ingest(
        [library], progress=seen.append
    )
    assert seen[0] == IngestProgress(0, 3, 0, 0, str(library / "nested" / "manual.pdf"))
    assert seen[-1] == IngestProgress(3, 3, 7, 7, None)
    assert [p.segments for p in seen] == sorted(p.segments for p in seen)


def test_async_ingestion_gives_the_same_report(library: Path) -> None:
    store = ListStore()
    ingestor = Ingestor(WordsModel(), store, splitter=SentenceSplitter(30))
    report = asyncio.run(ingestor.aingest([library]))
    assert (report.files, report.segments) == (3, 7)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"embedding_model": object()}, "`embedding_model` must be an EmbeddingModel"),
        ({"store": object()}, "`store` must be an EmbeddingStore"),
        ({"splitter": len}, "`splitter` must have split(document)"),
        ({"batch_size": 0}, "`batch_size` must be a positive int"),
    ],
)
def test_bad_settings_are_refused(arguments: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {"embedding_model": WordsModel(), "store": ListStore()}
    settings.update(arguments)
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Ingestor(**settings)  # type: ignore[arg-type]


def test_missing_paths_and_other_values_are_refused(tmp_path: Path) -> None:
    ingestor = Ingestor(WordsModel(), ListStore())
    with pytest.raises(ConfigurationError, match="does not exist"):
        ingestor.ingest([tmp_path / "nope.md"])
    with pytest.raises(ConfigurationError, match="takes paths and Documents"):
        ingestor.ingest([42])  # type: ignore[list-item]


def test_a_model_that_loses_embeddings_is_an_error(tmp_path: Path) -> None:
    class Lossy(WordsModel):
        def embed_all(self, texts: object) -> list:  # type: ignore[type-arg]
            return []

    (tmp_path / "a.txt").write_text("some text", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="returned 0 embeddings for 1 texts"):
        Ingestor(Lossy(), ListStore()).ingest([tmp_path])
