"""Ingestion: files (or documents) to segments to embeddings in a store, in batches.

Re-ingesting is cheap and safe. A file counts as ingested only once all its segments are stored:
its last segment carries `file_segments` and is stored last, in the last batch (one transaction
on the built-in stores). A file whose bytes, splitter and embedding model are unchanged and whose
last segment is stored is skipped. Otherwise its segments are stored: an ingest cut short (Ctrl-C,
a model failing part-way) is completed, embedding only the segments missing when the store can
`select`; a changed file gets its new segments stored first and only then loses its old ones, so
a crash in between leaves the old version searchable, never nothing. Segment ids are derived from
the file, its hash and the segment's index: ingesting twice stores nothing twice.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import ConfigurationError
from .._threads import in_thread
from ._documents import Document, DocumentKey, file_digest, load_document, supported_suffixes
from ._embeddings import (
    Embedding,
    EmbeddingModel,
    EmbeddingSearchRequest,
    EmbeddingStore,
    MetadataSelect,
)
from ._filters import Filter, key
from ._input_types import embed
from ._splitters import DocumentSplitter, ParagraphSplitter
from ._values import TextSegment

__all__ = ["IngestProgress", "IngestReport", "Ingestor", "model_label"]

Sources = Iterable[str | Path | Document] | str | Path | Document
"""Files, directories, documents, or one of them."""

_NAMESPACE = uuid.UUID("6f1c3f5e-1d6b-4c55-9a44-5c3c7e0f2a91")

Segments = list[tuple[str | None, TextSegment]]
"""Segments to store, each with its id (None: a new one)."""


@dataclass(frozen=True, slots=True)
class IngestProgress:
    """Where an ingestion stands, given to the `progress` callback after each step."""

    files_done: int
    files_total: int
    segments: int
    embeddings: int
    current: str | None = None


@dataclass(slots=True)
class IngestReport:
    """What an ingestion did: files ingested (`resumed` of them completed what a run cut short
    had begun), files skipped as unchanged, segments stored, files whose old version was
    replaced, files left out counted by reason (`ignored`: "unsupported .png" for a file of a
    directory that chatmemory does not read, "no text" for a file with nothing to embed), and
    files that could not be read with the reason."""

    files: int = 0
    skipped: int = 0
    segments: int = 0
    replaced: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    resumed: int = 0
    ignored: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        resumed = f" ({self.resumed} resumed)" if self.resumed else ""
        text = (
            f"{self.files} file(s) ingested{resumed}, {self.skipped} unchanged, "
            f"{self.segments} segment(s) stored"
        )
        if self.replaced:
            text += f", {self.replaced} file(s) replaced"
        if self.ignored:
            reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(self.ignored.items()))
            text += f", {sum(self.ignored.values())} ignored ({reasons})"
        if self.failed:
            text += f", {len(self.failed)} failed"
        return text


def model_label(model: object) -> str:
    """How segments name the model that embedded them: class, model name and dimension."""
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    dimension = getattr(model, "dimension", "?")
    label = type(model).__name__ + (f":{name}" if isinstance(name, str) else "")
    return f"{label}/{dimension}"


class Ingestor:
    """Reads files (text, Markdown, HTML, PDF) or documents, splits them with `splitter`
    (default: paragraphs of at most 1,000 characters with 100 of overlap), embeds the segments
    `batch_size` at a time with `embedding_model` and adds them to `store`."""

    def __init__(
        self,
        embedding_model: EmbeddingModel,
        store: EmbeddingStore,
        *,
        splitter: DocumentSplitter | None = None,
        batch_size: int = 64,
    ) -> None:
        if not isinstance(embedding_model, EmbeddingModel):
            raise ConfigurationError(
                f"`embedding_model` must be an EmbeddingModel (dimension, embed_all), "
                f"got {embedding_model!r}"
            )
        if not isinstance(store, EmbeddingStore):
            raise ConfigurationError(f"`store` must be an EmbeddingStore, got {store!r}")
        if splitter is not None and not isinstance(splitter, DocumentSplitter):
            raise ConfigurationError(f"`splitter` must have split(document), got {splitter!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"`batch_size` must be a positive int, got {batch_size!r}")
        self.embedding_model = embedding_model
        self.store = store
        self.splitter = splitter if splitter is not None else ParagraphSplitter(1000, 100)
        self.batch_size = batch_size
        self.label = model_label(embedding_model)

    def ingest(
        self,
        sources: Sources,
        *,
        progress: Callable[[IngestProgress], None] | None = None,
    ) -> IngestReport:
        """Ingest files, directories (their supported files, recursively, in name order) and
        documents. A file that cannot be read is reported in `failed`, the others go on; the
        other files of a directory, and files without text, are counted in `ignored`."""
        return self._ingest(*_expand(sources), progress)

    async def aingest(
        self,
        sources: Sources,
        *,
        progress: Callable[[IngestProgress], None] | None = None,
    ) -> IngestReport:
        """`ingest` on a worker thread: reading, splitting and embedding never block the loop."""
        return await in_thread(self._ingest, *_expand(sources), progress)

    def _ingest(
        self,
        items: list[Path | Document],
        ignored: dict[str, int],
        progress: Callable[[IngestProgress], None] | None,
    ) -> IngestReport:
        report = IngestReport(ignored=ignored)
        counts = [0, 0]  # segments, embeddings

        def tell(done: int, current: str | None) -> None:
            if progress is not None:
                progress(IngestProgress(done, len(items), counts[0], counts[1], current))

        for done, item in enumerate(items):
            tell(done, str(item) if isinstance(item, Path) else None)
            told = functools.partial(tell, done, None)
            if isinstance(item, Document):
                self._store(self._segments([item], None), counts, told)
                report.files += 1
            else:
                self._ingest_file(item, report, counts, told)
        report.segments = counts[0]
        tell(len(items), None)
        return report

    def _ingest_file(
        self, path: Path, report: IngestReport, counts: list[int], told: Callable[[], None]
    ) -> None:
        """Skip the file if all its segments are stored, else store those missing; then remove
        what another version of it left."""
        source = str(path.resolve())
        digest = file_digest(path, repr(self.splitter), self.label)
        complete, older = self._versions(source, digest)
        if complete:
            report.skipped += 1
        else:
            try:
                documents = load_document(path)
            except ConfigurationError as exc:  # this file only: the others go on
                report.failed[str(path)] = str(exc)
                return
            segments = self._segments(documents, digest)
            resumed = self._complete(source, digest, segments, counts, told)
            if segments:
                report.files += 1
                report.resumed += resumed
            else:
                _count(report.ignored, "no text")
        if older:  # removed only once the new version is stored
            self.store.remove_all(filter=_older(source, digest))
            report.replaced += 1

    def _complete(
        self,
        source: str,
        digest: str,
        segments: Segments,
        counts: list[int],
        told: Callable[[], None],
    ) -> bool:
        """Store the segments of this version of the file that are not stored yet, the marked
        last one last, after removing the stored ones of this version that the file no longer
        makes (left by a version of chatmemory that split otherwise). Whether a run cut short
        had begun the file."""
        stored = self._stored(source, digest)
        leftover = stored.keys() - {i for i, _ in segments}
        if leftover:
            self.store.remove_all(sorted(leftover))
        # the last one always: it may be stored without its mark (by a version before marks)
        missing = [(i, s) for i, s in segments[:-1] if i not in stored] + segments[-1:]
        self._store(missing, counts, told)
        return bool(stored) and bool(segments)

    def _versions(self, source: str, digest: str) -> tuple[bool, bool]:
        """Whether every segment of this version of the file is stored (its marked last one
        is), and whether segments of another version are."""
        this = key(DocumentKey.SOURCE).eq(source) & key(DocumentKey.FILE_HASH).eq(digest)
        marked = this & key(DocumentKey.FILE_SEGMENTS).gte(1)
        if not isinstance(self.store, MetadataSelect):
            return self._has(marked), self._has(_older(source, digest))
        # one exact select: this version's marked segment and every segment of another version
        found = self.store.select(marked | _older(source, digest)).values()
        hashes = {None if s is None else s.metadata.get(DocumentKey.FILE_HASH) for s in found}
        return digest in hashes, bool(hashes - {digest})

    def _stored(self, source: str, digest: str) -> dict[str, TextSegment | None]:
        """The segments of this version of the file already stored, by id: what a run cut short
        stored (none known when the store cannot `select`: every segment is stored again, over
        itself)."""
        if not isinstance(self.store, MetadataSelect):
            return {}
        this = key(DocumentKey.SOURCE).eq(source) & key(DocumentKey.FILE_HASH).eq(digest)
        return self.store.select(this)

    def _has(self, condition: Filter) -> bool:
        probe = Embedding((1.0,) + (0.0,) * (self.embedding_model.dimension - 1))
        request = EmbeddingSearchRequest(query_embedding=probe, max_results=1, filter=condition)
        return bool(self.store.search(request).matches)

    def _segments(self, documents: Sequence[Document], digest: str | None) -> Segments:
        """The segments of `documents`, blank ones left out, with their ids: derived from the
        file's digest for a file, whose last segment carries `file_segments`."""
        out: Segments = []
        for document in documents:
            extra: dict[str, object] = {DocumentKey.EMBEDDING_MODEL: self.label}
            if digest is not None:
                extra[DocumentKey.FILE_HASH] = digest
            stamped = Document(document.text, {**document.metadata, **extra})
            for segment in self.splitter.split(stamped):
                if not segment.text.strip():
                    continue
                segment_id = None
                if digest is not None:
                    page = segment.metadata.get(DocumentKey.PAGE, "")
                    name = f"{digest}\0{page}\0{segment.metadata.get(DocumentKey.INDEX)}"
                    segment_id = str(uuid.uuid5(_NAMESPACE, name))
                out.append((segment_id, segment))
        if digest is not None and out:
            last_id, last = out[-1]
            mark = {**last.metadata, DocumentKey.FILE_SEGMENTS: len(out)}
            out[-1] = (last_id, TextSegment(last.text, mark))
        return out

    def _store(self, segments: Segments, counts: list[int], told: Callable[[], None]) -> None:
        """Embed and add `segments`, `batch_size` at a time, in order."""
        for start in range(0, len(segments), self.batch_size):
            batch = segments[start : start + self.batch_size]
            texts = [segment.text for _, segment in batch]
            embeddings = embed(self.embedding_model, texts, "document")
            if len(embeddings) != len(texts):
                raise ConfigurationError(
                    f"the embedding model returned {len(embeddings)} embeddings for "
                    f"{len(texts)} texts"
                )
            counts[1] += len(embeddings)
            ids = [segment_id or str(uuid.uuid4()) for segment_id, _ in batch]
            self.store.add_all(embeddings, [segment for _, segment in batch], ids=ids)
            counts[0] += len(batch)
            told()


def _older(source: str, digest: str) -> Filter:
    """The segments of another version of the file `source`."""
    return key(DocumentKey.SOURCE).eq(source) & key(DocumentKey.FILE_HASH).ne(digest)


def _expand(sources: Sources) -> tuple[list[Path | Document], dict[str, int]]:
    """The files and documents to ingest, in order, and the files of the directories left out
    (not of a kind chatmemory reads), counted by reason."""
    if isinstance(sources, (str, Path, Document)):
        sources = [sources]
    suffixes = set(supported_suffixes())
    out: list[Path | Document] = []
    ignored: dict[str, int] = {}
    for source in sources:
        if isinstance(source, Document):
            out.append(source)
            continue
        if not isinstance(source, (str, Path)):
            raise ConfigurationError(f"ingest() takes paths and Documents, got {source!r}")
        path = Path(source)
        if path.is_dir():
            for found in sorted(p for p in path.rglob("*") if p.is_file()):
                if found.suffix.lower() in suffixes:
                    out.append(found)
                else:
                    _count(ignored, f"unsupported {found.suffix.lower() or '(no suffix)'}")
        elif path.exists():
            out.append(path)
        else:
            raise ConfigurationError(f"{str(path)!r} does not exist")
    return out, ignored


def _count(counts: dict[str, int], reason: str) -> None:
    counts[reason] = counts.get(reason, 0) + 1
