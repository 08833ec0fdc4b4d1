"""Ingestion: files (or documents) to segments to embeddings in a store, in batches.

Re-ingesting is cheap and safe. A file whose bytes, splitter and embedding model are unchanged is
skipped; a changed one gets its new segments stored first and only then loses its old ones, so a
crash in between leaves the old version searchable, never nothing. Segment ids are derived from
the file, its hash and the segment's index: ingesting twice stores nothing twice.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import ConfigurationError
from ._documents import Document, DocumentKey, file_digest, load_document, supported_suffixes
from ._embeddings import Embedding, EmbeddingModel, EmbeddingSearchRequest, EmbeddingStore
from ._filters import Filter, key
from ._splitters import DocumentSplitter, ParagraphSplitter
from ._values import TextSegment

__all__ = ["IngestProgress", "IngestReport", "Ingestor", "model_label"]

Sources = Iterable[str | Path | Document] | str | Path | Document
"""Files, directories, documents, or one of them."""

_NAMESPACE = uuid.UUID("6f1c3f5e-1d6b-4c55-9a44-5c3c7e0f2a91")


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
    """What an ingestion did: files read and skipped (unchanged), segments stored, old segments
    replaced, and files that could not be read with the reason."""

    files: int = 0
    skipped: int = 0
    segments: int = 0
    replaced: int = 0
    failed: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        text = (
            f"{self.files} file(s) ingested, {self.skipped} unchanged, "
            f"{self.segments} segment(s) stored"
        )
        if self.replaced:
            text += f", {self.replaced} file(s) replaced"
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
        documents. A file that cannot be read is reported in `failed`, the others go on."""
        items = _expand(sources)
        report = IngestReport()
        counts = [0, 0]  # segments, embeddings

        def tell(done: int, current: str | None) -> None:
            if progress is not None:
                progress(IngestProgress(done, len(items), counts[0], counts[1], current))

        for done, item in enumerate(items):
            tell(done, str(item) if isinstance(item, Path) else None)
            if isinstance(item, Document):
                self._store(self._segments([item], None), counts, tell, done)
                report.files += 1
                continue
            source = str(item.resolve())
            digest = file_digest(item, repr(self.splitter), self.label)
            same_file = key(DocumentKey.SOURCE).eq(source)
            if self._has(same_file & key(DocumentKey.FILE_HASH).eq(digest)):
                report.skipped += 1
                continue
            try:
                documents = load_document(item)
            except ConfigurationError as exc:  # this file only: the others go on
                report.failed[str(item)] = str(exc)
                continue
            self._store(self._segments(documents, digest), counts, tell, done)
            older = same_file & key(DocumentKey.FILE_HASH).ne(digest)
            if self._has(older):  # removed only once the new version is stored
                self.store.remove_all(filter=older)
                report.replaced += 1
            report.files += 1
        report.segments = counts[0]
        tell(len(items), None)
        return report

    async def aingest(
        self,
        sources: Sources,
        *,
        progress: Callable[[IngestProgress], None] | None = None,
    ) -> IngestReport:
        """`ingest` on a worker thread: reading, splitting and embedding never block the loop."""
        return await asyncio.to_thread(self.ingest, _expand(sources), progress=progress)

    def _has(self, condition: Filter) -> bool:
        probe = Embedding((1.0,) + (0.0,) * (self.embedding_model.dimension - 1))
        request = EmbeddingSearchRequest(query_embedding=probe, max_results=1, filter=condition)
        return bool(self.store.search(request).matches)

    def _segments(
        self, documents: Sequence[Document], digest: str | None
    ) -> list[tuple[str | None, TextSegment]]:
        out: list[tuple[str | None, TextSegment]] = []
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
        return out

    def _store(
        self,
        segments: list[tuple[str | None, TextSegment]],
        counts: list[int],
        tell: Callable[[int, str | None], None],
        done: int,
    ) -> None:
        for start in range(0, len(segments), self.batch_size):
            batch = segments[start : start + self.batch_size]
            texts = [segment.text for _, segment in batch]
            embeddings = self.embedding_model.embed_all(texts)
            if len(embeddings) != len(texts):
                raise ConfigurationError(
                    f"the embedding model returned {len(embeddings)} embeddings for "
                    f"{len(texts)} texts"
                )
            counts[1] += len(embeddings)
            ids = [segment_id or str(uuid.uuid4()) for segment_id, _ in batch]
            self.store.add_all(embeddings, [segment for _, segment in batch], ids=ids)
            counts[0] += len(batch)
            tell(done, None)


def _expand(sources: Sources | list[Path | Document]) -> list[Path | Document]:
    if isinstance(sources, (str, Path, Document)):
        sources = [sources]
    suffixes = set(supported_suffixes())
    out: list[Path | Document] = []
    for source in sources:
        if isinstance(source, Document):
            out.append(source)
            continue
        if not isinstance(source, (str, Path)):
            raise ConfigurationError(f"ingest() takes paths and Documents, got {source!r}")
        path = Path(source)
        if path.is_dir():
            out.extend(
                sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in suffixes)
            )
        elif path.exists():
            out.append(path)
        else:
            raise ConfigurationError(f"{str(path)!r} does not exist")
    return out
