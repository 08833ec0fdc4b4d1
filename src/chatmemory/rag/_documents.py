"""Documents and the loaders that read them from files: plain text and Markdown as they are, HTML
as its visible text, PDF one document per page (with `pypdf`, the `ingest` extra)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from .._errors import ConfigurationError
from .._frozen import FrozenDict
from ._values import TextSegment

__all__ = ["Document", "DocumentKey", "load_document", "supported_suffixes"]


class DocumentKey:
    """Metadata keys the loaders and the ingestor set."""

    SOURCE = "source"
    """The file a document was read from (its absolute path)."""
    FILE_NAME = "file_name"
    PAGE = "page"
    """1-based page number, for PDF."""
    INDEX = "index"
    """A segment's position among its document's segments, from 0."""
    START = "start"
    """Where a segment starts in its document's text (a character offset)."""
    FILE_HASH = "file_hash"
    """SHA-256 of the file and of how it was embedded: a changed file (or model) re-ingests."""
    EMBEDDING_MODEL = "embedding_model"
    """Which model made the segment's embedding (a query must use the same one)."""
    FILE_SEGMENTS = "file_segments"
    """How many segments a file has, on its last segment only. The ingestor stores that one
    last, in the last batch: a file counts as ingested only once it is there, so an ingest cut
    short is completed by the next run."""


@dataclass(frozen=True, slots=True)
class Document:
    """Text to split into segments, with metadata every segment inherits."""

    text: str
    metadata: Mapping[str, Any] = field(default_factory=FrozenDict)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise ConfigurationError(f"`Document.text` must be a str, got {self.text!r}")
        segment = TextSegment("", self.metadata)  # the one metadata check
        object.__setattr__(self, "metadata", segment.metadata)

    def to_segment(self) -> TextSegment:
        return TextSegment(self.text, self.metadata)


_TEXT = frozenset({".txt", ".text", ".md", ".markdown", ".rst"})
_HTML = frozenset({".html", ".htm", ".xhtml"})
_PDF = frozenset({".pdf"})


def supported_suffixes() -> tuple[str, ...]:
    return tuple(sorted(_TEXT | _HTML | _PDF))


def load_document(path: str | Path) -> list[Document]:
    """The documents in a file: one for text, Markdown and HTML, one per non-empty page of a
    PDF. Metadata: `source` (absolute path), `file_name`, and `page` for PDF."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in _TEXT | _HTML | _PDF:
        raise ConfigurationError(
            f"cannot read {str(file)!r}: chatmemory loads {', '.join(supported_suffixes())} "
            f"files; convert it to one of them, or build a Document from its text"
        )
    if not file.is_file():
        raise ConfigurationError(f"{str(file)!r} is not a file")
    base = {DocumentKey.SOURCE: str(file.resolve()), DocumentKey.FILE_NAME: file.name}
    if suffix in _PDF:
        return [
            Document(text, {**base, DocumentKey.PAGE: page})
            for page, text in _pdf_pages(file)
            if text.strip()
        ]
    text = _decode(file)
    if suffix in _HTML:
        text = html_text(text)
    return [Document(text, base)]


def file_digest(path: Path, *salt: str) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            digest.update(chunk)
    for part in salt:
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()


def _decode(file: Path) -> str:
    data = file.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"{str(file)!r} is not UTF-8 text (byte {exc.start} cannot be read); "
            f"convert it to UTF-8 first"
        ) from None


def _pdf_pages(file: Path) -> list[tuple[int, str]]:
    try:
        import pypdf
    except ImportError:  # pragma: no cover - the test extra installs it
        raise ConfigurationError(
            "reading PDF needs pypdf: pip install 'chatmemory[ingest]'"
        ) from None
    try:
        reader = pypdf.PdfReader(file)
        return [(number, page.extract_text() or "") for number, page in enumerate(reader.pages, 1)]
    except (pypdf.errors.PyPdfError, ValueError, KeyError) as exc:  # malformed files vary
        raise ConfigurationError(f"{str(file)!r} is not a readable PDF: {exc}") from None


_BLOCKS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "br",
        "dd",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "td",
        "th",
        "tr",
        "ul",
        "title",
    }
)
_HIDDEN = frozenset({"script", "style", "template", "noscript", "head"})


class _TextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = 0
        self.keep_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.keep_title = True
        elif tag in _HIDDEN:
            self.hidden += 1
        if tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.keep_title = False
        elif tag in _HIDDEN and self.hidden:
            self.hidden -= 1
        if tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden or self.keep_title:
            self.parts.append(data)


def html_text(html: str) -> str:
    """The visible text of an HTML page (the title included), a blank line between blocks."""
    parser = _TextParser()
    parser.feed(html)
    parser.close()
    blocks = "".join(parser.parts).split("\n\n")
    lines = (" ".join(block.split()) for block in blocks)
    return "\n\n".join(line for line in lines if line)
