"""`chatmemory ingest` and `chatmemory ask`, offline on the default SQLite file."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from chatmemory._cli.app import cli


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CHATMEMORY_HOME", str(tmp_path / "home"))
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "home"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "refunds.md").write_text(
        "# Refunds\n\nRefunds take five business days.\n\nCards are refunded first.\n",
        encoding="utf-8",
    )
    (folder / "shipping.html").write_text(
        "<h1>Shipping</h1><p>Parcels leave the warehouse within a day.</p>", encoding="utf-8"
    )
    (folder / "broken.pdf").write_bytes(b"not a pdf")
    return folder


def run(*args: str | Path, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def test_ingest_then_ask_shows_passages_without_a_chat_model(docs: Path, home: Path) -> None:
    first = run("ingest", docs)
    assert "2 file(s) ingested, 0 unchanged, 2 segment(s) stored" in first.output
    assert "HashingEmbeddingModel:hashing-v1/384" in first.output
    assert f"failed {docs / 'broken.pdf'}: " in first.output
    assert (home / "chatmemory.db").exists()
    again = run("ingest", docs)
    assert "0 file(s) ingested, 2 unchanged, 0 segment(s) stored" in again.output

    found = run("ask", "How long do refunds take?", "--max-results", "1").output
    assert found.startswith("no chat model configured: the passages retrieval found are\n")
    assert f"[1] {docs / 'refunds.md'} (score " in found  # the path, not only the file name
    assert "Refunds take five business days." in found
    assert "Parcels" not in found


def test_ask_lists_sources_by_fused_score_with_each_searchs_own(docs: Path) -> None:
    """BM25 and cosine scores are never mixed: the fused score orders the list, and the full
    text and vector scores are shown beside it."""
    (docs / "more").mkdir()
    (docs / "more" / "refunds.md").write_text("Refunds of gift cards take a week.\n")
    run("ingest", docs)
    found = run("ask", "How long do refunds take?", "--max-results", "3").output
    heads = [line for line in found.splitlines() if line.startswith("[")]
    assert len(heads) == 3
    assert {head.split(" (")[0].split("] ")[1] for head in heads} == {
        str(docs / "refunds.md"),
        str(docs / "more" / "refunds.md"),
        str(docs / "shipping.html"),
    }
    scores = [float(head.split("(score ")[1].split(":")[0].rstrip(")")) for head in heads]
    assert scores == sorted(scores, reverse=True)
    assert all(score < 1 / 30 for score in scores)  # reciprocal rank: at most 2/61
    assert "full text " in heads[0]
    assert "vectors " in heads[0]


def test_ask_filter_searches_only_what_passes(docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run("ingest", docs)
    monkeypatch.chdir(docs)  # sources under the working directory are shown relative to it
    only = run("ask", "refunds", "--filter", "file_name = 'shipping.html'").output
    heads = [line for line in only.splitlines() if line.startswith("[")]
    assert [head.split(" (")[0] for head in heads] == ["[1] shipping.html"]
    contains = run("ask", "refunds", "--filter", "source LIKE '%refunds%'").output
    assert "[1] refunds.md (score" in contains
    assert "shipping" not in contains
    nothing = run("ask", "refunds", "--filter", "page > 1").output
    assert "nothing ingested matches the question" in nothing


def test_ask_refuses_a_filter_it_cannot_read_with_the_position() -> None:
    out = run("ask", "refunds", "--filter", "file_name = 'a.md' AND (", code=2).output
    assert "Invalid value for --filter" in out
    assert "at character 24" in out
    assert "file_name LIKE 'a%'" not in out
    assert "only '%text%'" in run("ask", "x", "--filter", "file_name LIKE 'a%'", code=2).output


def test_ingest_fails_when_every_file_failed(tmp_path: Path, home: Path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "a.pdf").write_bytes(b"not a pdf")
    (folder / "b.pdf").write_bytes(b"not one either")
    (folder / "photo.jpg").write_bytes(b"\xff\xd8")
    out = run("ingest", folder, code=1).output
    assert "0 file(s) ingested, 0 unchanged, 0 segment(s) stored, 1 ignored (1 unsupported " in out
    assert f"failed {folder / 'a.pdf'}: " in out
    assert f"failed {folder / 'b.pdf'}: " in out
    assert "nothing was ingested: every file failed" in out
    (folder / "c.md").write_text("Something to read.", encoding="utf-8")
    assert "1 file(s) ingested" in run("ingest", folder).output  # a file ingested: success
    assert "1 unchanged" in run("ingest", folder).output  # unchanged is no failure either


def test_a_changed_file_replaces_its_passages(docs: Path) -> None:
    run("ingest", docs, "--max-size", "60", "--overlap", "0")
    (docs / "refunds.md").write_text("Refunds now take ten days.", encoding="utf-8")
    out = run("ingest", docs, "--max-size", "60", "--overlap", "0").output
    assert "1 file(s) ingested, 1 unchanged, 1 segment(s) stored, 1 file(s) replaced" in out
    found = run("ask", "refunds", "--max-results", "5").output
    assert "ten days" in found
    assert "five business days" not in found


def test_ask_says_when_nothing_was_ingested_and_refuses_bad_input(tmp_path: Path) -> None:
    assert "nothing ingested yet" in run("ask", "anything", code=1).output
    assert "is empty" in run("ask", "  ", code=2).output
    assert (
        "must be smaller than --max-size"
        in run("ingest", tmp_path, "--max-size", "100", "--overlap", "100", code=2).output
    )
    assert (
        "--store postgres needs --postgres-dsn"
        in run("ask", "x", "--store", "postgres", code=2).output
    )
    out = run("ask", "x", "--embedding-model", "openai", code=1).output
    assert "--embedding-model openai needs OPENAI_API_KEY" in out
    old = run("ask", "x", "--model", "openai", code=1).output  # the old spelling still works
    assert "Warning: --model openai is deprecated here: use --embedding-model openai" in old
    assert "needs OPENAI_API_KEY" in old


def test_reads_never_create_and_writes_create_no_directories(docs: Path, tmp_path: Path) -> None:
    typo = tmp_path / "typo" / "typo.db"
    assert f"no such file: {typo}" in run("ask", "x", "--db", typo, code=1).output
    assert not typo.parent.exists()
    out = run("ingest", docs, "--db", typo, code=1).output
    assert f"no such directory: {typo.parent}" in out
    assert not typo.parent.exists()
    beside = tmp_path / "new.db"
    run("ingest", docs, "--db", beside)  # a write creates the file
    assert beside.exists()
    assert "Refunds" in run("ask", "refunds", "--db", beside).output


def test_old_option_spellings_are_deprecated_aliases(docs: Path, tmp_path: Path) -> None:
    out = run("ingest", docs, "--model", "hashing").output
    assert "Warning: --model hashing is deprecated here: use --embedding-model hashing" in out
    assert (
        "Warning: --base-url is deprecated here: use --embedding-base-url"
        in run("ingest", docs, "--base-url", "http://127.0.0.1:9/v1").output
    )
    out = run("ask", "refunds", "--chat-model", "m").output
    assert "Warning: --chat-model is deprecated here: use --model" in out


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None, reason="the local extra is absent"
)
def test_asking_with_another_model_than_the_one_ingested_is_refused(docs: Path) -> None:
    run("ingest", docs)
    out = run("ask", "refunds", "--embedding-model", "local", code=1).output
    assert "the store was filled with HashingEmbeddingModel:hashing-v1/384" in out
    assert "ask with the --embedding-model you ingested with" in out


def test_the_demo_answers_from_its_help_center_offline() -> None:
    for _ in range(2):  # a second run finds the same articles, not twice as many
        out = run("demo", "--turns", "0").output
        scene = out.split("retrieval · a help center, offline")[1]
        assert "Ingested 4 articles with HashingEmbeddingModel(dimension=384)" in scene
        assert "  retrieved refunds.md: Refunds take five business days." in scene
        assert "assistant: From the help center: Refunds take five business days." in scene
        recalled = out.split("recall · a fact from long ago")[1]
        assert "the window holds 6 messages" in recalled
        assert re.search(r"recalled \(score [01]\.\d", recalled)
        assert "My locker number is 217 and the code is 4711." in recalled
        assert "assistant: Your locker code is 4711." in recalled


def test_history_show_recall_shows_what_recall_would_bring_back(home: Path) -> None:
    from chatmemory import MessageWindowChatMemory, SqliteChatMemoryStore, UserMessage

    db = home / "chatmemory.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    with SqliteChatMemoryStore(db) as store:
        memory = MessageWindowChatMemory(id="ann", max_messages=3, store=store)
        for text in [
            "Hello",
            "My locker code is 4711.",
            "Weather?",
            "Cloudy.",
            "Weekend?",
            "Hiking.",
        ]:
            memory.add(UserMessage(text))
    before = db.read_bytes()
    out = run("history", "show", "ann", "--recall", "locker code", "--top-k", "1").output
    assert re.match(
        r"\[1\] score [01]\.\d{3}, messages 0–1\n", out
    )  # a short fact: its turn before
    assert "My locker code is 4711." in out
    assert (
        "nothing out of the window of bob matches 'Hiking'"
        in run("history", "show", "bob", "--recall", "Hiking").output
    )
    assert db.read_bytes() == before  # a read never writes


def test_store_options_are_checked_before_anything_is_read(docs: Path) -> None:
    assert (
        "--postgres-dsn is for --store postgres"
        in run("ingest", docs, "--postgres-dsn", "postgresql://x", code=2).output
    )


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None, reason="the local extra is absent"
)
def test_ingest_and_ask_with_the_local_model(docs: Path) -> None:
    out = run("ingest", docs, "--embedding-model", "local").output
    assert "LocalEmbeddingModel:all-MiniLM-L6-v2/384" in out
    assert "Loading weights" not in out  # no progress bars from the model's libraries
    found = run(
        "ask", "How long do refunds take?", "--embedding-model", "local", "--max-results", "1"
    ).output
    assert "Refunds take five business days." in found


def test_postgres_without_pgvector_fails_at_once_with_a_sentence(
    docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    import psycopg

    class NoVector:
        def __enter__(self) -> NoVector:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def execute(self, query: str) -> NoVector:
            assert "pg_available_extensions" in query
            return self

        def fetchone(self) -> None:
            return None  # the server offers no `vector` extension

    monkeypatch.setattr(psycopg, "connect", lambda *a, **k: NoVector())
    dsn = ["--store", "postgres", "--postgres-dsn", "postgresql://u@127.0.0.1:1/db"]
    started = time.monotonic()
    out = run("ingest", docs, *dsn, code=1).output
    assert "the server has no pgvector: install it" in out
    assert "or use --store sqlite" in out
    monkeypatch.undo()
    out = run("ingest", docs, *dsn, code=1).output  # nothing listens there: said at once
    assert "cannot use PostgreSQL at --postgres-dsn" in out
    assert time.monotonic() - started < 15


def test_ask_prints_the_answer_as_it_streams(docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys
    from collections.abc import Iterator
    from typing import cast

    from chatmemory._cli import chat_model
    from chatmemory.models import ChatRequest, StreamEvent
    from chatmemory.testing import ScriptedChatModel

    printed: list[bytes] = []  # stdout as each piece of the answer leaves the model

    class Watched(ScriptedChatModel):
        def stream(self, request: ChatRequest, /) -> Iterator[StreamEvent]:
            for event in super().stream(request):
                sys.stdout.flush()
                printed.append(cast(io.BytesIO, sys.stdout.buffer).getvalue())
                yield event

    model = Watched(["Refunds take five business days."])
    monkeypatch.setattr(chat_model, "make_model", lambda *_: (model, "openai", "m"))
    run("ingest", docs)
    out = run("ask", "How long do refunds take?", "--base-url", "http://127.0.0.1:9/v1").output
    assert out == "Refunds take five business days.\n"
    answer = out.rstrip("\n").encode()
    assert all(answer.startswith(p) for p in printed)
    streamed = [p for p in printed if 0 < len(p) < len(answer)]
    assert len(streamed) >= 3  # words were out while the model was still making the next ones
    assert "five business days" in model.requests[0].messages[-1].text  # type: ignore[union-attr,operator]


def test_a_source_without_a_path_or_a_second_score_is_still_named() -> None:
    from chatmemory._cli.ask import _scores, _source
    from chatmemory.rag import Content, ContentKey, TextSegment

    bare = Content(TextSegment("x", {"file_name": "a.pdf", "page": 3}), {ContentKey.SCORE: 0.5})
    assert _source(bare) == "a.pdf p.3"
    assert _scores(bare) == "score 0.5"
    elsewhere = Content(TextSegment("x", {"source": "/elsewhere/a.md"}))
    assert _source(elsewhere) == "/elsewhere/a.md"
    words_only = Content(
        TextSegment("x"), {ContentKey.SCORE: 1 / 61, ContentKey.SOURCE_SCORES: (19.9, None)}
    )
    assert _scores(words_only) == "score 0.0164: full text 19.9"
