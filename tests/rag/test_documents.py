"""Loading files: text and Markdown as they are, HTML as its visible text, PDF by page."""

from __future__ import annotations

import codecs
import re
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


@pytest.mark.parametrize(
    ("tag", "encoding", "body"),
    [
        ('<meta charset="ISO-8859-1">', "latin-1", "Crème brûlée"),
        ("<meta charset=iso-8859-1 />", "latin-1", "Crème brûlée"),
        (
            '<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">',
            "latin-1",
            "Crème brûlée",
        ),
        (
            "<META HTTP-EQUIV='content-type' CONTENT='text/html;charset=windows-1252'>",
            "cp1252",
            "Crème brûlée, 5 €",
        ),
        ('<meta charset="koi8-r">', "koi8-r", "Привет"),
        ('<meta charset="utf-8">', "utf-8", "Crème brûlée, 5 €, Привет"),
    ],
)
def test_html_is_read_in_its_declared_charset(
    tmp_path: Path, tag: str, encoding: str, body: str
) -> None:
    path = tmp_path / "page.html"
    path.write_bytes(
        f"<html><head>{tag}<title>Menu</title></head><body><p>{body}</p></body></html>".encode(
            encoding
        )
    )
    [document] = load_document(path)
    assert document.text == f"Menu\n\n{body}"


def test_an_iso_8859_1_page_is_read_as_browsers_read_it_windows_1252(tmp_path: Path) -> None:
    path = tmp_path / "quotes.htm"
    path.write_bytes(b'<meta charset="iso-8859-1"><p>\x93Quoted\x94 \x80 5 \x81</p>')
    assert load_document(path)[0].text == "“Quoted” € 5 \x81"


def test_a_byte_order_mark_outranks_a_declaration(tmp_path: Path) -> None:
    path = tmp_path / "wide.html"
    path.write_bytes("<meta charset='iso-8859-1'><p>Grüße</p>".encode("utf-16"))
    assert load_document(path)[0].text == "Grüße"
    text = tmp_path / "wide.txt"
    text.write_bytes("Grüße".encode("utf-16"))
    assert load_document(text)[0].text == "Grüße"


def test_an_xhtml_page_may_declare_its_charset_in_the_xml_declaration(tmp_path: Path) -> None:
    path = tmp_path / "page.xhtml"
    path.write_bytes(b'<?xml version="1.0" encoding="ISO-8859-1"?><html><p>Caf\xe9</p></html>')
    assert load_document(path)[0].text == "Café"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("<p>Café</p>".encode(), "Café"),  # undeclared UTF-8
        (b"<p>Caf\xe9</p>", "Café"),  # undeclared and not UTF-8: windows-1252, as browsers
        (b'<meta charset="no-such-charset"><p>Caf\xe9</p>', "Café"),  # unknown: undeclared
        ('<meta charset="utf-16"><p>Café</p>'.encode(), "Café"),  # a meta is read as ASCII
    ],
)
def test_html_without_a_usable_declaration_falls_back_sensibly(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "page.html"
    path.write_bytes(content)
    assert load_document(path)[0].text == expected


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("odd.txt", "is not UTF-16 text (byte 6 cannot be read)"),
        ("odd.html", "starts with a utf-16 byte order mark, but byte 6 is not utf-16 text"),
    ],
)
def test_text_whose_bytes_contradict_its_byte_order_mark_is_refused(
    tmp_path: Path, name: str, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(codecs.BOM_UTF16_LE + "ok".encode("utf-16-le") + b"\x00\xd8")
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        load_document(path)


def test_html_whose_bytes_contradict_its_declaration_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "liar.html"
    path.write_bytes(b'<meta charset="utf-8"><p>Caf\xe9 au lait</p>')
    with pytest.raises(ConfigurationError) as info:
        load_document(path)
    assert str(info.value) == (
        f"{str(path)!r} declares its charset 'utf-8', but byte 28 is not utf-8 text; "
        f"correct the declaration (<meta charset=...>) or convert the file"
    )
