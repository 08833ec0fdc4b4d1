"""`chatmemory ask` with a chat model: the real OpenAI SDK against the local server answers
from the passages retrieval injected into the question."""

from __future__ import annotations

import time
from pathlib import Path

from click.testing import CliRunner

from chatmemory._cli.app import cli

from .fake_server import FakeServer, Reply
from .test_chat_cli import answer


def test_ask_answers_from_the_ingested_passages(server: FakeServer, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "refunds.md").write_text("Refunds take five business days.", encoding="utf-8")
    db = str(tmp_path / "rag.db")
    runner = CliRunner()
    assert runner.invoke(cli, ["ingest", str(docs), "--db", db]).exit_code == 0
    server.reply(answer("Five business", " days."))
    url = f"{server.url}/v1"
    question = ["ask", "How long do refunds take?", "--db", db, "--show-sources"]
    result = runner.invoke(cli, [*question, "--base-url", url, "--model", "gpt-4o-mini"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Five business days.\n[1] {docs / 'refunds.md'} (score ")
    [request] = server.requests
    sent = request.body["messages"][-1]["content"]
    assert sent.startswith("How long do refunds take?")
    assert "Refunds take five business days." in sent


def test_a_slow_chat_server_is_waited_for_timeout_seconds_once(
    server: FakeServer, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "refunds.md").write_text("Refunds take five business days.", encoding="utf-8")
    db = str(tmp_path / "rag.db")
    runner = CliRunner()
    assert runner.invoke(cli, ["ingest", str(docs), "--db", db]).exit_code == 0

    class Slow(Reply):
        def encode(self) -> tuple[bytes, str]:
            time.sleep(0.8)
            return super().encode()

    server.reply(Slow(body={}))
    options = ["--db", db, "--base-url", f"{server.url}/v1", "--timeout", "0.3"]
    result = runner.invoke(cli, ["ask", "How long do refunds take?", *options])
    assert result.exit_code == 1
    assert "did not answer in time" in result.output
    assert "raise --timeout" in result.output
    assert len(server.requests) == 1  # --max-retries (2) does not send it again
