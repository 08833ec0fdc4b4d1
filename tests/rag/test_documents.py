"""Loading files: text and Markdown as they are, HTML as its visible text, PDF by page."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatmemory import ConfigurationError
from chatmemory.rag import Document, DocumentKey, load_document

from .pdf_helper import write_pdf


def test_text_and_markdown_load_whole_with_their_source(tmp_path: Path) -> None:
    for name in ("notes.txt", "guide.md"):
        path = tmp_path / name
        path.write_text("# Title\n\nFirst paragraph.\n", encoding="utf-8")
        [document] = load_document(path)
        assert document.text == "# Title\n\nFirst paragraph.\n"
        assert document.metadata == {
            DocumentKey.SOURCE: str(path.resolve()),
            DocumentKey.FILE_NAME: name,
        }


def test_a_byte_order_mark_is_not_text(tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffhello".encode())
    assert load_document(path)[0].text == "hello"


def test_html_keeps_visible_text_and_block_breaks(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(
        "<html><head><title>Refunds</title><style>p{color:red}</style>"
        "<script>var secret = 1;</script></head><body><h1>Refund  policy</h1>"
        "<p>Refunds take <b>5 days</b>.</p><ul><li>Card</li><li>Bank &amp; wire</li></ul>"
        "</body></html>",
        encoding="utf-8",
    )
    [document] = load_document(path)
    assert document.text == (
        "Refunds\n\nRefund policy\n\nRefunds take 5 days.\n\nCard\n\nBank & wire"
    )


def test_pdf_gives_one_document_per_non_empty_page(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "manual.pdf", ["Install (first)", "", "Configure"])
    documents = load_document(path)
    assert [(d.text, d.metadata[DocumentKey.PAGE]) for d in documents] == [
        ("Install (first)", 1),
        ("Configure", 3),
    ]
    assert all(d.metadata[DocumentKey.FILE_NAME] == "manual.pdf" for d in documents)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("data.xlsx", b"x", "chatmemory loads .htm, .html, .markdown, .md, .pdf"),
        ("latin.txt", "café".encode("latin-1"), "is not UTF-8 text (byte 3 cannot be read)"),
        ("broken.pdf", b"not a pdf at all", "is not a readable PDF"),
    ],
)
def test_unreadable_files_say_what_to_do(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ConfigurationError) as info:
        load_document(path)
    assert message in str(info.value)


def test_a_directory_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "folder.md").mkdir()
    with pytest.raises(ConfigurationError, match="is not a file"):
        load_document(tmp_path / "folder.md")


def test_documents_check_their_values() -> None:
    with pytest.raises(ConfigurationError, match="must be a str"):
        Document(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="str keys"):
        Document("text", {1: "x"})  # type: ignore[dict-item]
    assert Document("t", {"a": 1}).to_segment().metadata == {"a": 1}
