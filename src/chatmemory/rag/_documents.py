"""Documents and the loaders that read them from files: plain text and Markdown as they are, HTML
as its visible text, PDF one document per page (with `pypdf`, the `ingest` extra).

Text is UTF-8, or what its byte order mark says. HTML is read as a browser reads it: the byte
order mark, else the charset its head declares (``<meta charset>``, ``<meta http-equiv=
"Content-Type" content="...; charset=...">``, an XML declaration's encoding), else UTF-8 when
the bytes are UTF-8, else windows-1252; ISO-8859-1 and ASCII labels mean windows-1252 there, as
in browsers (the HTML standard's table)."""

from __future__ import annotations

import codecs
import hashlib
import re
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
    text = html_text(_decode_html(file)) if suffix in _HTML else _decode(file)
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
    bom = _bom(data)
    try:
        return data.decode(bom or "utf-8")
    except UnicodeDecodeError as exc:
        encoding = "UTF-16" if bom == "utf-16" else "UTF-8"
        raise ConfigurationError(
            f"{str(file)!r} is not {encoding} text (byte {exc.start} cannot be read); "
            f"convert it to UTF-8 first"
        ) from None


_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_PRESCAN = 1024
"""How far into a page its charset declaration is looked for (the HTML standard's prescan)."""
_META_CHARSET = re.compile(rb"<meta\b[^>]*?charset\s*=\s*[\"']?\s*([\w.:-]+)", re.I)
_XML_ENCODING = re.compile(rb"^<\?xml\b[^>]*?encoding\s*=\s*[\"']([\w.:-]+)")
_AS_WINDOWS_1252 = frozenset({"ascii", "iso8859-1", "cp1252"})
_WINDOWS_1252 = {
    byte: bytes([byte]).decode("cp1252", errors="ignore") or chr(byte) for byte in range(0x80, 0xA0)
}
"""windows-1252 over latin-1's C1 controls; the five bytes it leaves undefined stay controls."""


def _bom(data: bytes) -> str | None:
    """The codec a byte order mark at the start of `data` names."""
    return next((codec for bom, codec in _BOMS if data.startswith(bom)), None)


def _decode_html(file: Path) -> str:
    """The page's text in its charset (see the module's docstring)."""
    data = file.read_bytes()
    bom = _bom(data)
    label, codec = (bom, bom) if bom is not None else _declared(data)
    if codec is None:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return _windows_1252(data)
    if codec in _AS_WINDOWS_1252:
        return _windows_1252(data)
    try:
        return data.decode(codec)
    except UnicodeDecodeError as exc:
        said = (
            f"starts with a {label} byte order mark" if bom else f"declares its charset {label!r}"
        )
        raise ConfigurationError(
            f"{str(file)!r} {said}, but byte {exc.start} is not {label} text; correct the "
            f"declaration (<meta charset=...>) or convert the file"
        ) from None


def _declared(data: bytes) -> tuple[str | None, str | None]:
    """The charset label the page declares and Python's codec for it (None for a label
    Python does not know: the page is then read as undeclared)."""
    head = data[:_PRESCAN]
    found = _XML_ENCODING.search(head) or _META_CHARSET.search(head)
    if found is None:
        return None, None
    label = found.group(1).decode("ascii").lower()
    try:
        codec = codecs.lookup(label).name
    except LookupError:
        return label, None
    # a declaration read as ASCII is no UTF-16 page (the HTML standard reads it as UTF-8)
    return label, "utf-8" if codec.startswith("utf-16") else codec


def _windows_1252(data: bytes) -> str:
    return data.decode("latin-1").translate(_WINDOWS_1252)


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
