"""Every command with the optional extras missing (their imports blocked in a fresh
interpreter): one `Error:` line naming the `pip install` line, or the command works; never a
traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BLOCKED = (
    "openai",
    "anthropic",
    "redis",
    "psycopg",
    "psycopg_pool",
    "pgvector",
    "pypdf",
    "httpx2",
    "sentence_transformers",
    "mcp",
    "prompt_toolkit",
)
# A fresh interpreter where importing any optional package fails, as when it is not installed.
BLOCKER = (
    "import sys\n"
    f"for name in {BLOCKED!r}:\n"
    "    sys.modules[name] = None\n"
    "from chatmemory._cli import main\n"
    "main(sys.argv[1:])\n"
)


def chatmemory(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(CHATMEMORY_HOME=str(home), COLUMNS="100")
    env.pop("CHATMEMORY_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-c", BLOCKER, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )


COMMANDS: dict[str, tuple[list[str], str | None]] = {
    # (arguments, the extra named in the one error line; None: the command works)
    "chat": (["chat", "--base-url", "http://127.0.0.1:9/v1"], "openai"),
    "chat anthropic": (
        ["chat", "--provider", "anthropic", "--base-url", "http://x:9"],
        "anthropic",
    ),
    "chat redis": (["chat", "--base-url", "http://x:9/v1", "--redis-url", "redis://x"], "openai"),
    "prompt": (["prompt", "--base-url", "http://127.0.0.1:9/v1", "hi"], "openai"),
    "ask": (["ask", "--base-url", "http://127.0.0.1:9/v1", "what?"], "openai"),
    "ask openai embeddings": (
        ["ask", "--embedding-model", "openai", "--embedding-base-url", "http://x:9/v1", "what?"],
        "openai",
    ),
    "ingest openai": (
        ["ingest", "--embedding-model", "openai", "--embedding-base-url", "http://x:9/v1", "."],
        "openai",
    ),
    "ingest local": (["ingest", "--embedding-model", "local", "."], "local"),
    "ingest postgres": (
        ["ingest", "--store", "postgres", "--postgres-dsn", "postgresql://x/y", "."],
        "pgvector",
    ),
    "history redis": (["history", "list", "--redis-url", "redis://127.0.0.1:9"], "redis"),
    "history postgres": (["history", "list", "--postgres-dsn", "postgresql://x/y"], "postgres"),
    "demo": (["demo", "--turns", "1"], None),
    "history list": (["history", "list"], None),
    "history search": (["history", "search", "word"], None),
    "tokens": (["tokens"], None),
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_missing_extra_is_one_error_line(name: str, tmp_path: Path) -> None:
    args, extra = COMMANDS[name]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Ada wrote the first program.\n")
    args = [str(docs) if a == "." else a for a in args]
    result = chatmemory(tmp_path / "home", *args, stdin='[{"type": "USER", "text": "hi"}]')
    assert "Traceback" not in result.stderr, result.stderr
    if extra is None:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert f"pip install 'chatmemory[{extra}]'" in lines[0]
