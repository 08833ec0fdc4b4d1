"""Reading stored conversations whole: `history show --full` and `--format markdown|json`, and
`history search` across every conversation."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from chatmemory import (
    AiMessage,
    HistoryEntry,
    SqliteChatMemoryStore,
    SystemMessage,
    UserMessage,
)
from chatmemory._cli.app import cli
from chatmemory._cli.render import format_time
from chatmemory._codec.langchain4j import message_to_dict

LONG = "The refund policy, in full: " + "every order may be returned within thirty days. " * 8
"""A message far wider than the 100-column terminal of these tests."""


@pytest.fixture(autouse=True)
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CHATMEMORY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "100")
    path = tmp_path / "chat.db"
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("support", [SystemMessage("Be kind."), UserMessage(LONG)])
        store.update_messages("support", [UserMessage(f"Second line\n{LONG}")])  # evicts 2
        store.update_messages("support", [UserMessage(f"Second line\n{LONG}"), AiMessage("Sure.")])
        store.update_messages("travel", [UserMessage("Refund my train ticket \ud800 please")])
    return path


def run(*args: str | Path, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def history(db: Path, memory_id: str) -> list[HistoryEntry]:
    with SqliteChatMemoryStore(db) as store:
        return store.history(memory_id)


def test_show_cuts_messages_to_the_terminal_unless_full(db: Path) -> None:
    cut = run("history", "show", "support", "--db", db).output
    assert max(len(line) for line in cut.splitlines()) <= 100
    assert "…" in cut
    assert LONG.strip()[-30:] not in cut

    full = run("history", "show", "support", "--db", db, "--full").output
    assert max(len(line) for line in full.splitlines()) <= 100  # wrapped, not cut
    assert re.search(r"Second line *\n +The refund policy", full)  # its own lines kept
    words = " ".join(full.split())
    assert " ".join(LONG.split()) in words
    assert "…" not in full


def test_show_as_markdown_and_as_json(db: Path) -> None:
    entries = history(db, "support")
    markdown = run("history", "show", "support", "--db", db, "--format", "markdown").output
    window = [e for e in entries if e.in_window]
    assert markdown == (
        "# support\n"
        + "".join(
            f"\n## {e.seq}. {role} · {format_time(e.created_at)}\n\n{text}\n"
            for e, role, text in zip(
                window, ["user", "ai"], [f"Second line\n{LONG}", "Sure."], strict=True
            )
        )
    )
    everything = run("history", "show", "support", "--db", db, "--all", "--format", "markdown")
    assert everything.output.count(" · in the window") == 2
    assert everything.output.count("\n## ") == len(entries) == 4

    records = json.loads(run("history", "show", "support", "--db", db, "--format", "json").output)
    assert records == [
        {
            "memory_id": "support",
            "seq": e.seq,
            "created_at": e.created_at.isoformat(),
            "in_window": True,
            "role": role,
            "text": text,
            "message": message_to_dict(e.message),
        }
        for e, role, text in zip(
            window, ["user", "ai"], [f"Second line\n{LONG}", "Sure."], strict=True
        )
    ]


def test_search_finds_every_stored_message_with_its_conversation_and_date(db: Path) -> None:
    out = run("history", "search", "REFUND", "--db", db).output
    support, travel = history(db, "support"), history(db, "travel")
    assert out.startswith("3 message(s) hold 'REFUND'\n")  # out of the window too, any case
    rows = [line.split() for line in out.splitlines()[2:]]
    assert [(r[0], int(r[1])) for r in rows] == [
        ("travel", 0),
        ("support", 2),  # newest first
        ("support", 1),  # out of the window
    ]
    assert rows[0][2:4] == format_time(travel[0].created_at).split()
    assert rows[1][2:4] == format_time(support[2].created_at).split()
    assert "Refund my train ticket \ufffd please" in out  # a lone surrogate printed as U+FFFD
    assert max(len(line) for line in out.splitlines()) <= 100

    middle = run("history", "search", "thirty", "--db", db).output.splitlines()[2:]
    assert len(middle) == 2
    assert all(re.search(r"user +… .*within thirty days.*…$", line.rstrip()) for line in middle)

    phrase = run("history", "search", '"train ticket" refund', "--db", db).output
    assert phrase.startswith("1 message(s) hold")
    assert "travel" in phrase
    assert "1 message(s)" in run("history", "search", "sure", "--db", db).output
    only = run("history", "search", "refund", "--memory-id", "travel", "--db", db).output
    assert only.startswith("1 message(s)")
    limited = run("history", "search", "refund", "--limit", "1", "--db", db).output
    assert limited.startswith("3 message(s) hold 'refund', the newest 1 shown (--limit)")
    assert len(limited.splitlines()) == 3


def test_search_as_json_and_when_nothing_matches(db: Path) -> None:
    records = json.loads(run("history", "search", "ticket", "--db", db, "--format", "json").output)
    [travel] = history(db, "travel")
    assert records == [
        {
            "memory_id": "travel",
            "seq": 0,
            "created_at": travel.created_at.isoformat(),
            "in_window": True,
            "role": "user",
            "text": "Refund my train ticket \ufffd please",
            "message": json.loads(
                json.dumps(message_to_dict(travel.message), ensure_ascii=False).replace(
                    "\ud800", "\ufffd"
                )
            ),
        }
    ]
    none = run("history", "search", "zebra", "--db", db).output
    assert none == f"no stored message holds 'zebra' in SQLite {db}\n"
    assert run("history", "search", "zebra", "--db", db, "--format", "json").output == "[]\n"
    assert "Invalid value for QUERY: is empty" in run("history", "search", " ", code=2).output
