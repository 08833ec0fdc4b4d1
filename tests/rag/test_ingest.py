"""Ingestion: files to segments to embeddings in a store; re-ingesting skips what is unchanged and
replaces what changed without ever leaving a file unsearchable."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from chatmemory import ConfigurationError
from chatmemory.rag import (
    Document,
    DocumentKey,
    Embedding,
    EmbeddingSearchRequest,
    EmbeddingStore,
    HashingEmbeddingModel,
    Ingestor,
    IngestProgress,
    InMemoryEmbeddingStore,
    SentenceSplitter,
    SqliteEmbeddingStore,
    TextSegment,
    key,
)
from tests.conftest import server_unavailable

from .doubles import DIMENSION, ListStore, WordsModel
from .pdf_helper import write_pdf
from .pgvector_server import pgvector_dsn


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
    assert report.ignored == {"unsupported .png": 1}
    assert str(report) == (
        "3 file(s) ingested, 0 unchanged, 7 segment(s) stored, 1 ignored (1 unsupported .png)"
    )


def test_files_left_out_are_counted_by_reason(library: Path) -> None:
    (library / "notes").mkdir()
    (library / "notes" / "empty.md").write_text(" \n\n ", encoding="utf-8")
    (library / "notes" / "Makefile").write_text("all:", encoding="utf-8")
    (library / "notes" / "sheet.xlsx").write_bytes(b"x")
    (library / "notes" / "more.PNG").write_bytes(b"x")
    (library / "bad.pdf").write_bytes(b"garbage")
    report = Ingestor(WordsModel(), ListStore(), splitter=SentenceSplitter(30)).ingest([library])
    assert report.ignored == {
        "no text": 1,
        "unsupported (no suffix)": 1,
        "unsupported .png": 2,
        "unsupported .xlsx": 1,
    }
    assert list(report.failed) == [str(library / "bad.pdf")]
    assert str(report) == (
        "3 file(s) ingested, 0 unchanged, 7 segment(s) stored, 5 ignored (1 no text, "
        "1 unsupported (no suffix), 2 unsupported .png, 1 unsupported .xlsx), 1 failed"
    )
    again = Ingestor(WordsModel(), ListStore(), splitter=SentenceSplitter(30))
    assert asyncio.run(again.aingest([library])).ignored == report.ignored


def test_a_file_emptied_loses_its_segments(library: Path) -> None:
    store = ListStore()
    ingestor = Ingestor(WordsModel(), store, splitter=SentenceSplitter(30))
    ingestor.ingest([library / "refunds.md"])
    (library / "refunds.md").write_text("", encoding="utf-8")
    report = ingestor.ingest([library / "refunds.md"])
    assert (report.files, report.replaced, report.ignored, store.entries) == (
        0,
        1,
        {"no text": 1},
        [],
    )


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


# -- an ingest cut short (Ctrl-C, a model that fails part-way) is completed by the next run


class Flaky(WordsModel):
    """Embeds `batches` batches, then raises `error` (a Ctrl-C, or a model that fails); with no
    `error`, never. One class for every run: the model's name is part of a file's digest."""

    def __init__(self, batches: int = 0, error: BaseException | None = None) -> None:
        super().__init__()
        self.batches, self.error = batches, error

    def embed_all(self, texts: Sequence[str]) -> list[Embedding]:
        if self.error is not None and len(self.calls) == self.batches:
            raise self.error
        return super().embed_all(texts)


def held(store: object) -> dict[str, tuple[str, dict[str, object]]]:
    """Every ingested entry of `store`: its text and metadata, by id."""
    everything = key(DocumentKey.FILE_HASH).ne("")
    return {
        entry_id: (segment.text, dict(segment.metadata))
        for entry_id, segment in store.select(everything).items()  # type: ignore[attr-defined]
        if segment is not None
    }


def shelf(tmp_path: Path) -> Path:
    folder = tmp_path / "shelf"
    folder.mkdir()
    (folder / "a.md").write_text(
        "Alpha comes first, before the others.\n\nIt is short.", encoding="utf-8"
    )
    (folder / "big.md").write_text(
        "\n\n".join(f"Paragraph {i} tells about topic {i % 7}." for i in range(60)),
        encoding="utf-8",
    )
    (folder / "z.md").write_text("Zeta comes last.", encoding="utf-8")
    return folder


def open_store(kind: str, path: Path) -> InMemoryEmbeddingStore | SqliteEmbeddingStore:
    return InMemoryEmbeddingStore() if kind == "memory" else SqliteEmbeddingStore(path)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("error", [KeyboardInterrupt(), RuntimeError("model went away")])
def test_an_ingest_cut_short_is_completed_by_the_next_run(
    tmp_path: Path, kind: str, error: BaseException
) -> None:
    cut_and_complete(
        tmp_path,
        open_store(kind, tmp_path / "whole.db"),
        open_store(kind, tmp_path / "cut.db"),
        error,
    )


@pytest.fixture(scope="module")
def pgvector() -> Iterator[str]:
    try:
        with pgvector_dsn() as found:
            yield found
    except RuntimeError as error:
        server_unavailable("PostgreSQL with pgvector", str(error))


def test_an_ingest_cut_short_on_pgvector_is_completed_by_the_next_run(
    tmp_path: Path, pgvector: str
) -> None:
    from chatmemory.rag.pgvector import PgVectorEmbeddingStore

    tables = [f"ingest_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    stores = [PgVectorEmbeddingStore(pgvector, dimension=DIMENSION, table=t) for t in tables]
    try:
        cut_and_complete(tmp_path, stores[0], stores[1], KeyboardInterrupt())
    finally:
        for store in stores:
            store.remove_all()
            store.close()


def cut_and_complete(
    tmp_path: Path, whole: EmbeddingStore, store: EmbeddingStore, error: BaseException
) -> None:
    """Ingest the shelf whole into `whole`; into `store`, cut short by `error` after 4 batches,
    then again: `store` then holds what `whole` holds, and only what was missing was embedded."""
    folder, splitter = shelf(tmp_path), SentenceSplitter(40)
    Ingestor(Flaky(), whole, splitter=splitter, batch_size=8).ingest([folder])
    expected = held(whole)
    assert len(expected) == 3 + 60  # a.md 2, big.md 60, z.md 1

    with pytest.raises(type(error)):  # a.md (one batch), then 3 of big.md's 8 batches
        Ingestor(Flaky(4, error), store, splitter=splitter, batch_size=8).ingest([folder])
    assert len(held(store)) == 2 + 3 * 8

    model = Flaky()
    again = Ingestor(model, store, splitter=splitter, batch_size=8).ingest([folder])
    assert (again.files, again.skipped, again.resumed, again.replaced) == (2, 1, 1, 0)
    assert held(store) == expected  # the same ids, texts and metadata as one whole run
    assert again.segments == sum(len(batch) for batch in model.calls) == 60 - 24 + 1
    assert str(again) == "2 file(s) ingested (1 resumed), 1 unchanged, 37 segment(s) stored"

    last = Ingestor(model, store, splitter=splitter, batch_size=8).ingest([folder])
    assert (last.files, last.skipped, last.segments) == (0, 3, 0)


def test_a_file_is_ingested_only_once_its_last_segment_is_stored(tmp_path: Path) -> None:
    folder, store = shelf(tmp_path), InMemoryEmbeddingStore()
    with pytest.raises(KeyboardInterrupt):
        Ingestor(
            Flaky(7, KeyboardInterrupt()),
            store,
            batch_size=8,
            splitter=(SentenceSplitter(40)),
        ).ingest([folder / "big.md"])
    assert len(held(store)) == 56  # all but the last batch
    marked = [m for _, m in held(store).values() if DocumentKey.FILE_SEGMENTS in m]
    assert marked == []
    Ingestor(Flaky(), store, splitter=SentenceSplitter(40)).ingest([folder / "big.md"])
    [mark] = [m for _, m in held(store).values() if DocumentKey.FILE_SEGMENTS in m]
    assert (mark[DocumentKey.FILE_SEGMENTS], mark[DocumentKey.INDEX]) == (60, 59)


def test_a_file_changed_after_a_run_cut_short_replaces_the_partial_one(tmp_path: Path) -> None:
    folder, store = shelf(tmp_path), SqliteEmbeddingStore(tmp_path / "cut.db")
    splitter = SentenceSplitter(40)
    cut = Ingestor(Flaky(2, KeyboardInterrupt()), store, splitter=splitter, batch_size=8)
    with pytest.raises(KeyboardInterrupt):
        cut.ingest([folder])
    (folder / "big.md").write_text("Paragraph one, rewritten.", encoding="utf-8")
    report = Ingestor(Flaky(), store, splitter=splitter).ingest([folder])
    assert (report.files, report.skipped, report.replaced) == (2, 1, 1)
    whole = InMemoryEmbeddingStore()
    Ingestor(Flaky(), whole, splitter=splitter).ingest([folder])
    assert held(store) == held(whole)


def test_segments_a_file_no_longer_makes_go_when_it_is_completed(tmp_path: Path) -> None:
    """What a run before this version left (no completion mark, segmented otherwise: the same
    digest) is completed, and the segments the file no longer makes are removed."""
    folder, store = shelf(tmp_path), InMemoryEmbeddingStore()
    ingestor = Ingestor(Flaky(), store, splitter=SentenceSplitter(40))
    ingestor.ingest([folder / "z.md"])
    expected = held(store)
    [(entry_id, (text, metadata))] = expected.items()
    unmarked = {k: v for k, v in metadata.items() if k != DocumentKey.FILE_SEGMENTS}
    embedding = Flaky().embed_all([text])[0]
    store.add(embedding, TextSegment(text, unmarked), id=entry_id)
    store.add(embedding, TextSegment("a stale part", {**unmarked, DocumentKey.INDEX: 1}), id="x")
    report = ingestor.ingest([folder / "z.md"])
    assert (report.files, report.resumed, report.segments) == (1, 1, 1)
    assert held(store) == expected


def test_without_select_a_store_gets_the_whole_file_again(tmp_path: Path) -> None:
    folder, store = shelf(tmp_path), ListStore()
    splitter = SentenceSplitter(40)
    cut = Ingestor(Flaky(3, RuntimeError("down")), store, splitter=splitter, batch_size=8)
    with pytest.raises(RuntimeError):
        cut.ingest([folder])
    model = Flaky()
    report = Ingestor(model, store, splitter=splitter).ingest([folder])
    assert (report.files, report.skipped, report.resumed, report.segments) == (2, 1, 0, 61)
    whole = ListStore()
    Ingestor(Flaky(), whole, splitter=splitter).ingest([folder])
    assert sorted((i, s) for i, _, s in store.entries) == sorted(
        (i, s) for i, _, s in whole.entries
    )


def test_a_large_file_cut_short_ends_with_the_segments_of_a_whole_run(tmp_path: Path) -> None:
    """A few megabytes, cut part-way on SQLite, completed: exactly the segments of one run."""
    path = tmp_path / "large.txt"
    words = ["refund", "card", "bank", "transfer", "parcel", "form", "support", "week", "story"]
    paragraphs = (
        " ".join(words[(i * j) % len(words)] for j in range(40 + i % 90)).capitalize() + "."
        for i in range(12_000)
    )
    path.write_text("\n\n".join(paragraphs), encoding="utf-8")
    assert path.stat().st_size > 3_000_000
    model = FlakyHashing()
    whole = SqliteEmbeddingStore(tmp_path / "whole.db")
    first = Ingestor(model, whole).ingest(path)
    store = SqliteEmbeddingStore(tmp_path / "cut.db")
    cut = Ingestor(FlakyHashing(20, KeyboardInterrupt()), store)
    with pytest.raises(KeyboardInterrupt):
        cut.ingest(path)
    assert len(held(store)) == 20 * 64
    again = Ingestor(model, store).ingest(path)
    assert (again.files, again.resumed, again.segments) == (1, 1, first.segments - 20 * 64)
    assert held(store) == held(whole)


class FlakyHashing(HashingEmbeddingModel):
    def __init__(self, batches: int = 0, error: BaseException | None = None) -> None:
        super().__init__()
        self.batches, self.error = batches, error

    def embed_all(self, texts: Sequence[str]) -> list[Embedding]:
        if self.error is not None and self.batches == 0:
            raise self.error
        self.batches -= 1
        return super().embed_all(texts)
