"""`chatmemory ingest` and `chatmemory ask`, offline on the default SQLite file."""

from __future__ import annotations

import importlib.util
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
    assert "[1] refunds.md (score " in found
    assert "Refunds take five business days." in found
    assert "Parcels" not in found


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
    assert "nothing ingested matches" in run("ask", "anything").output
    assert "is empty" in run("ask", "  ", code=2).output
    assert (
        "must be smaller than --max-size"
        in run("ingest", tmp_path, "--max-size", "100", "--overlap", "100", code=2).output
    )
    assert (
        "--store postgres needs --postgres-dsn"
        in run("ask", "x", "--store", "postgres", code=2).output
    )
    assert "needs OPENAI_API_KEY" in run("ask", "x", "--model", "openai", code=1).output


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None, reason="the local extra is absent"
)
def test_asking_with_another_model_than_the_one_ingested_is_refused(docs: Path) -> None:
    run("ingest", docs)
    out = run("ask", "refunds", "--model", "local", code=1).output
    assert "the store was filled with HashingEmbeddingModel:hashing-v1/384" in out
    assert "ask with the --model you ingested with" in out


def test_the_demo_answers_from_its_help_center_offline() -> None:
    for _ in range(2):  # a second run finds the same articles, not twice as many
        out = run("demo", "--turns", "0").output
        scene = out.split("retrieval · a help center, offline")[1]
        assert "Ingested 4 articles with HashingEmbeddingModel(dimension=384)" in scene
        assert "  retrieved refunds.md: Refunds take five business days." in scene
        assert "assistant: From the help center: Refunds take five business days." in scene
        recalled = out.split("recall · a fact from long ago")[1]
        assert "the window holds 6 messages" in recalled
        assert "recalled (score 0." in recalled
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
    assert out.startswith("[1] score 0.")
    assert "messages 0–2" in out
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
    out = run("ingest", docs, "--model", "local").output
    assert "LocalEmbeddingModel:all-MiniLM-L6-v2/384" in out
    assert "Loading weights" not in out  # no progress bars from the model's libraries
    found = run("ask", "How long do refunds take?", "--model", "local", "--max-results", "1").output
    assert "Refunds take five business days." in found
