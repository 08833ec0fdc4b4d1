"""The `chatmemory` command: demo, history, tokens, store selection, the missing-extra message.

Every test gets its own `CHATMEMORY_HOME`, so the default SQLite database is private to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import re
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from chatmemory import (
    AiMessage,
    AsyncSqliteChatMemoryStore,
    OpenAiTokenCountEstimator,
    SqliteChatMemoryStore,
    StoreError,
    TokenWindowChatMemory,
    UserMessage,
    message_to_json,
    messages_from_json,
    to_openai,
)
from chatmemory._cli import main
from chatmemory._cli.app import cli
from chatmemory._codec.langchain4j import message_from_dict
from chatmemory.stores import HistoryStore
from tests.conftest import POSTGRES_DSN, REDIS_URL
from tests.stores import backends as _backends  # noqa: F401  (loads the backend modules first)
from tests.stores.backend_postgres import isolated_schema
from tests.stores.backend_redis import isolated_prefix

GPT_4O_MINI = OpenAiTokenCountEstimator("gpt-4o-mini")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("CHATMEMORY_HOME", str(home))
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    return home


@pytest.fixture
def db(home: Path) -> Path:
    return home / "chatmemory.db"


def run(*args: str | Path, input: str | bytes | None = None, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def stored(path: Path) -> dict[str, list[tuple[int, object, bool]]]:
    """Every memory id's history in the SQLite file at `path`: (seq, message, in_window)."""
    with SqliteChatMemoryStore(path) as store:
        return _dump(store)


def _dump(store: HistoryStore) -> dict[str, list[tuple[int, object, bool]]]:
    return {
        memory_id: [(e.seq, e.message, e.in_window) for e in store.history(memory_id)]
        for memory_id in store.memory_ids()
    }


def window_counts(output: str, name: str, budget: int = 300) -> list[int]:
    return [int(n) for n in re.findall(rf"{name}'s window: (\d+) / {budget} tokens", output)]


# -- demo -----------------------------------------------------------------------------------


def test_demo_shows_windows_exact_token_counts_and_evictions(db: Path) -> None:
    output = run("demo").output

    assert "starting alice's conversation (memory id demo:alice)" in output
    assert "starting bob's conversation (memory id demo:bob)" in output
    for n in range(1, 5):
        assert f"alice · turn {n}" in output
        assert f"bob · turn {n}" in output
    assert '→ get_weather({"city": "Lisbon"})' in output
    assert "← calculator: 270" in output
    assert "evicted by this turn: nothing" in output
    assert re.search(r"evicted by this turn \(\d+ messages?, kept in the history\)", output)
    assert "alice's history" in output
    assert "●" in output

    alice = window_counts(output, "alice")
    assert len(alice) == 4
    assert all(count <= 300 for count in alice)
    with SqliteChatMemoryStore(db) as store:
        memory = TokenWindowChatMemory(
            max_tokens=300,
            estimator=OpenAiTokenCountEstimator(),
            store=store,
            id="demo:alice",
            always_keep_system_message_first=True,
        )
        assert alice[-1] == GPT_4O_MINI.count_messages(memory.messages())
        history = store.history("demo:alice")
    assert any(not e.in_window for e in history), "a 300-token window must have evicted"
    assert sum(isinstance(e.message, UserMessage) for e in history) == 4


def test_demo_twice_continues_the_stored_conversations(db: Path) -> None:
    run("demo", "--turns", "2")
    first = stored(db)
    second = run("demo", "--turns", "2").output

    for name in ("alice", "bob"):
        count = len(first[f"demo:{name}"])
        assert f"continuing {name}'s conversation: {count} messages stored" in second
        assert f"{name} · turn 3" in second
        assert f"{name} · turn 1" not in second
    after = stored(db)
    for memory_id, entries in first.items():
        assert len(after[memory_id]) > len(entries)
        assert after[memory_id][: len(entries)] == [
            (seq, message, after[memory_id][seq][2]) for seq, message, _ in entries
        ]
        users = [m.text for _, m, _ in after[memory_id] if isinstance(m, UserMessage)]
        assert len(users) == 4


def test_demo_messages_keep_changing_over_cycles(tmp_path: Path) -> None:
    run("demo", "--db", tmp_path / "d.db", "--turns", "8")
    users = [
        m.text for _, m, _ in stored(tmp_path / "d.db")["demo:alice"] if isinstance(m, UserMessage)
    ]
    assert len(users) == 8
    assert len(set(users[:3] + users[4:7])) == 6


def test_demo_budget_model_and_db_options(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "demo.db"
    output = run("demo", "--db", path, "--max-tokens", "150", "--turns", "3").output
    assert path.exists()
    assert not (home / "chatmemory.db").exists()
    counts = window_counts(output, "bob", 150)
    assert len(counts) == 3
    assert max(counts) <= 150
    assert f"--db {path}" in output

    cl100k = run("demo", "--db", tmp_path / "4.db", "--model", "gpt-4", "--turns", "1").output
    assert "counted exactly for gpt-4 (cl100k_base)" in cl100k


def test_demo_rejects_an_unknown_model() -> None:
    result = run("demo", "--model", "no-such-model", code=2)
    assert "Invalid value for --model" in result.output
    assert "Traceback" not in result.output


# -- history --------------------------------------------------------------------------------


def test_history_list(db: Path) -> None:
    run("demo", "--turns", "1")
    output = run("history", "list").output
    lines = {line.split()[0]: line.split() for line in output.splitlines() if "demo:" in line}
    assert lines["demo:alice"][1:3] == ["5", "5"]  # messages, window
    assert lines["demo:bob"][1:3] == ["5", "5"]
    assert re.search(r"demo:alice .* \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", output)


def test_history_list_on_a_new_home_creates_nothing(db: Path, tmp_path: Path) -> None:
    assert "no conversations stored in SQLite" in run("history", "list").output
    assert not db.exists()
    run("history", "--db", tmp_path / "missing.db", "show", "x", code=1)
    assert not (tmp_path / "missing.db").exists()


def test_history_show_window_and_all(db: Path) -> None:
    run("demo", "--turns", "3")
    entries = stored(db)["demo:alice"]
    in_window = [e for e in entries if e[2]]
    assert len(in_window) < len(entries)

    window = run("history", "show", "demo:alice").output
    assert f"{len(in_window)} messages in the window, {len(entries)} in the history" in window
    seqs = [int(line.split()[0]) for line in window.splitlines()[2:] if line.strip()]
    assert seqs == [seq for seq, _, flag in in_window]
    assert "●" not in window

    everything = run("history", "show", "demo:alice", "--all").output
    rows = [line for line in everything.splitlines()[2:] if line.strip()]
    assert len(rows) == len(entries)
    assert [row.rstrip().endswith("●") for row in rows] == [flag for _, _, flag in entries]

    missing = run("history", "show", "nobody", code=1).output
    assert "Error: no conversation 'nobody' in SQLite" in missing


def _demo_with_a_damaged_row(db: Path) -> None:
    """The demo's conversations, with alice's row 1 overwritten by JSON of no message type."""
    run("demo", "--turns", "1")
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            'UPDATE chatmemory_messages SET message = \'{"type":"NOPE"}\' WHERE seq = 1 AND '
            "memory_key = (SELECT memory_key FROM chatmemory_memories WHERE memory_id = ?)",
            ("demo:alice",),
        )


def test_an_unreadable_row_is_a_clear_error_or_skipped(db: Path) -> None:
    _demo_with_a_damaged_row(db)
    failed = run("history", "show", "demo:alice", "--all", code=1).output
    assert failed.startswith("Error: ")
    assert "NOPE" in failed
    assert "Traceback" not in failed
    skipped = run("history", "show", "demo:alice", "--all", "--skip-unreadable").output
    assert "5 in the history (1 unreadable, not shown)" in skipped
    # list counts rows without reading them: the damaged one is still a message of the memory
    assert re.search(r"demo:alice\s+5\s", run("history", "list").output)


def test_history_export_json_is_the_langchain4j_array(db: Path, tmp_path: Path) -> None:
    run("demo", "--turns", "3")
    output = run("history", "export", "demo:alice").output
    assert output.startswith('[{"text":"You are Tripwise')
    assert messages_from_json(output) == [m for _, m, _ in stored(db)["demo:alice"]]

    target = tmp_path / "alice.json"
    assert run("history", "export", "demo:bob", "-o", target).output == ""
    bob = [m for _, m, _ in stored(db)["demo:bob"]]
    assert messages_from_json(target.read_text("utf-8")) == bob


def test_history_export_jsonl(db: Path) -> None:
    run("demo", "--turns", "3")
    lines = run("history", "export", "demo:bob", "--format", "jsonl").output.splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["seq"], message_from_dict(r["message"]), r["in_window"]) for r in records] == (
        stored(db)["demo:bob"]
    )
    assert {r["memory_id"] for r in records} == {"demo:bob"}
    assert all(re.match(r"\d{4}-\d\d-\d\dT.*\+00:00$", r["created_at"]) for r in records)


def test_import_jsonl_round_trips_history_and_window(db: Path, tmp_path: Path) -> None:
    run("demo", "--turns", "3")
    exported = tmp_path / "alice.jsonl"
    run("history", "export", "demo:alice", "--format", "jsonl", "-o", exported)
    fresh = tmp_path / "fresh.db"

    output = run("history", "--db", fresh, "import", exported).output
    assert "imported 14 messages into demo:alice" in output
    assert stored(fresh) == {"demo:alice": stored(db)["demo:alice"]}

    run("history", "--db", fresh, "import", exported, "--id", "copy")
    assert stored(fresh)["copy"] == stored(db)["demo:alice"]


def test_import_json_array_needs_an_id_and_joins_the_window(db: Path, tmp_path: Path) -> None:
    run("demo", "--turns", "2")
    array = run("history", "export", "demo:alice").output
    fresh = tmp_path / "fresh.db"

    result = run("history", "--db", fresh, "import", "-", input=array, code=2)
    assert "pass --id" in result.output
    run("history", "--db", fresh, "import", "-", "--id", "a", input=array)
    assert stored(fresh)["a"] == [(i, m, True) for i, m in enumerate(messages_from_json(array))]


def test_import_into_a_used_id_needs_append(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    one = '[{"contents":[{"text":"one","type":"TEXT"}],"type":"USER"}]'
    two = '[{"contents":[{"text":"two","type":"TEXT"}],"type":"USER"}]'
    run("history", "--db", path, "import", "-", "--id", "a", input=one)

    refused = run("history", "--db", path, "import", "-", "--id", "a", input=two, code=1)
    assert "already has messages" in refused.output
    assert "--append" in refused.output
    assert len(stored(path)["a"]) == 1

    run("history", "--db", path, "import", "-", "--id", "a", "--append", input=two)
    assert [m.text for _, m, _ in stored(path)["a"]] == ["one", "two"]  # type: ignore[attr-defined]


def test_import_jsonl_lines_may_be_bare_messages(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    lines = (
        '{"text":"Be brief.","type":"SYSTEM"}\n\n'
        '{"memory_id":"m","in_window":false,"message":{"contents":[{"text":"hi","type":"TEXT"}],'
        '"type":"USER"}}\n'
    )
    run("history", "--db", path, "import", "-", "--id", "m", input=lines)
    assert [flag for _, _, flag in stored(path)["m"]] == [True, False]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "is empty"),
        ("[]", "holds no messages"),
        ('{"memory_id":"a","message":{"text":"x","type":"SYSTEM"}}\n{oops', "line 2: not JSON"),
        ('{"message":' + "[" * 100_000 + "]" * 100_000 + "}", "line 1: JSON nested too deeply"),
        ("[" * 100_000 + "]" * 100_000, "too deeply"),
        ('{"memory_id":"demo:alice","message":{"type":"NOPE"}}', "line 1:"),
        ('{"memory_id":"demo:alice","in_window":"yes","message":{"type":"AI"}}', "in_window"),
        ('{"message":{"type":"AI"}}', "names no memory id"),
        ("[1, 2]", "bad.txt"),
        ("42", "expected a JSON object"),
        (b"\xff\xfe\xfa", "not UTF-8"),
    ],
)
def test_bad_import_exits_2_and_writes_nothing(
    db: Path, tmp_path: Path, content: str | bytes, expected: str
) -> None:
    run("demo", "--turns", "1")
    before = stored(db)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content.encode() if isinstance(content, str) else content)
    extra = ["--id", "x"] if content.startswith(b"[" if isinstance(content, bytes) else "[") else []  # type: ignore[arg-type]
    result = run("history", "import", bad, *extra, code=2)
    assert expected in result.output
    assert "Traceback" not in result.output
    assert stored(db) == before


def test_clear_asks_unless_yes(db: Path) -> None:
    run("demo", "--turns", "1")
    declined = run("history", "clear", "demo:alice", input="n\n", code=1)
    assert "Delete 'demo:alice': its window and its whole history (5 messages)?" in declined.output
    assert "demo:alice" in stored(db)

    run("history", "clear", "demo:alice", input="y\n")
    assert "demo:alice" not in stored(db)
    assert "deleted demo:bob (5 messages)" in run("history", "clear", "demo:bob", "--yes").output
    assert stored(db) == {}
    assert "nothing stored for 'demo:bob'" in run("history", "clear", "demo:bob", "-y").output


def test_store_options_are_checked() -> None:
    both = run("history", "--db", "a.db", "--redis-url", "redis://x", "list", code=2)
    assert "choose one store" in both.output
    assert "--prefix is a Redis option" in run("history", "--prefix", "p:", "list", code=2).output
    schema = run("history", "--schema", "s", "list", code=2).output
    assert "--schema is a PostgreSQL option" in schema


# -- tokens ---------------------------------------------------------------------------------


def test_tokens_of_plain_text(tmp_path: Path) -> None:
    assert run("tokens", input="hello world").output == "2\n"
    assert run("tokens", "-", input="hello world\n").output == "2\n"
    assert run("tokens", "--encoding", "cl100k_base", input="hello world").output == "2\n"
    text = tmp_path / "t.txt"
    text.write_text("How much is 2+2?", "utf-8")
    assert run("tokens", text).output == f"{GPT_4O_MINI.count_text('How much is 2+2?')}\n"
    assert run("tokens", "--text", input='{"text":"x","type":"SYSTEM"}').output == "9\n"


def test_tokens_of_a_langchain4j_message_list() -> None:
    messages = [
        {"contents": [{"text": "How much is 2+2?", "type": "TEXT"}], "type": "USER"},
        {
            "toolExecutionRequests": [
                {"id": "1", "name": "calculator", "arguments": '{ "a": 2, "b": 2 }'}
            ],
            "attributes": {},
            "type": "AI",
        },
        {"id": "1", "toolName": "calculator", "text": "4", "type": "TOOL_EXECUTION_RESULT"},
        {"text": "Use calculator for math questions", "type": "SYSTEM"},
    ]
    output = run("tokens", input=json.dumps(messages)).output
    rows = [line.split() for line in output.splitlines()[1:5]]
    assert [(row[0], row[1], row[2]) for row in rows] == [
        ("0", "user", "12"),
        ("1", "ai", "24"),
        ("2", "tool", "5"),
        ("3", "system", "9"),
    ]
    assert "request total: 53 tokens (3 per request + 4 messages; gpt-4o-mini, o200k_base)" in (
        output
    )

    single = run("tokens", input=json.dumps(messages[0])).output
    assert "request total: 15 tokens (3 per request + 1 message;" in single


def test_tokens_errors() -> None:
    bad = run("tokens", input='[{"type":"NOPE"}]', code=2).output
    assert "Error: <stdin>:" in bad
    assert "NOPE" in bad
    model = run("tokens", "--model", "nope", input="x", code=2).output
    assert "Invalid value for --model" in model
    custom = run("tokens", input='{"attributes":{"a":1},"type":"CUSTOM"}', code=1).output
    assert custom.startswith("Error: OpenAiTokenCountEstimator cannot count a CustomMessage")


# -- the command itself ---------------------------------------------------------------------


def test_help_version_and_dash_h() -> None:
    assert "Usage: " in run("-h").output
    assert "demo" in run("--help").output
    assert "history" in run("--help").output
    assert "--redis-url" in run("history", "-h").output
    assert re.match(r"chatmemory, version \d", run("--version").output)


def test_missing_cli_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [m for m in sys.modules if m.startswith("chatmemory._cli.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "click", None)
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 1
    expected = "chatmemory's command line needs: pip install 'chatmemory[cli]'\n"
    assert capsys.readouterr().err == expected


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "100"}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, check=False
    )


def test_python_dash_m_and_import_stays_light() -> None:
    result = _python("-m", "chatmemory", "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage: python -m chatmemory" in result.stdout

    probe = (
        "import sys, chatmemory, chatmemory._cli; "
        "print(sorted({'click', 'rich', 'platformdirs'} & set(sys.modules)))"
    )
    assert _python("-c", probe).stdout == "[]\n"


# -- Redis and PostgreSQL -------------------------------------------------------------------


@pytest.fixture
def alice_jsonl(db: Path, tmp_path: Path) -> Path:
    run("demo", "--turns", "3")
    path = tmp_path / "alice.jsonl"
    run("history", "export", "demo:alice", "--format", "jsonl", "-o", path)
    return path


def _round_trip(store_args: list[str], alice_jsonl: Path, db: Path) -> None:
    run("history", *store_args, "import", alice_jsonl)
    listed = run("history", *store_args, "list").output
    assert re.search(r"demo:alice\s+14\s+11\s", listed), listed
    exported = run("history", *store_args, "export", "demo:alice").output
    assert messages_from_json(exported) == [m for _, m, _ in stored(db)["demo:alice"]]
    window = run("history", *store_args, "show", "demo:alice").output
    assert "11 messages in the window, 14 in the history" in window
    found = run("history", *store_args, "search", "hotel").output
    assert found.startswith("1 message(s) hold 'hotel'")
    assert re.search(r"\ndemo:alice +5 .* user +My hotel is 90 euros a night", found)
    run("history", *store_args, "clear", "demo:alice", "--yes")
    assert "no conversations stored" in run("history", *store_args, "list").output


@pytest.mark.redis
def test_history_on_redis(alice_jsonl: Path, db: Path) -> None:
    with isolated_prefix(uuid.uuid4().hex) as prefix:
        _round_trip(["--redis-url", REDIS_URL, "--prefix", prefix], alice_jsonl, db)


@pytest.mark.redis
def test_history_on_a_redis_cluster(alice_jsonl: Path, db: Path) -> None:
    from tests.redis_cluster import cluster_url
    from tests.stores.backend_redis_cluster import isolated_prefix as cluster_prefix

    with cluster_prefix(uuid.uuid4().hex) as prefix:
        store_args = ["--redis-url", cluster_url(), "--redis-cluster", "--prefix", prefix]
        _round_trip(store_args, alice_jsonl, db)
    result = run("history", "list", "--redis-cluster", code=2)
    assert "--redis-cluster is a Redis option: give --redis-url as well" in result.output


@pytest.mark.postgres
def test_history_on_postgres(alice_jsonl: Path, db: Path) -> None:
    with isolated_schema(uuid.uuid4().hex) as schema:
        _round_trip(["--postgres-dsn", POSTGRES_DSN, "--schema", schema], alice_jsonl, db)


# --- what a new user hit with the README in hand (issue 6, items 9 to 12) ------------------------


def _other_apps_file(tmp_path: Path) -> Path:
    path = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
    return path


def test_reading_another_apps_file_changes_nothing(tmp_path: Path) -> None:
    path = _other_apps_file(tmp_path)
    before = path.read_bytes()
    for order in (["history", "--db", path, "list"], ["history", "list", "--db", path]):
        result = run(*order, code=1)  # type: ignore[arg-type]
        assert f"no chatmemory data in '{path}'" in result.output
        assert "Traceback" not in result.output
    assert path.read_bytes() == before
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        assert [name for (name,) in conn.execute("SELECT name FROM sqlite_master")] == ["notes"]
    assert not Path(f"{path}-wal").exists()


def test_a_named_file_that_does_not_exist_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    assert "no such file" in run("history", "list", "--db", missing, code=1).output
    assert not missing.exists()


def test_read_only_store_refuses_writes_and_reads_what_is_there(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("m", [UserMessage("hi")])
    with SqliteChatMemoryStore(path, read_only=True) as reader:
        assert reader.get_messages("m") == [UserMessage("hi")]
        assert [s.memory_id for s in reader.summaries()] == ["m"]
        with pytest.raises(Exception, match="opened read-only"):
            reader.update_messages("m", [UserMessage("no")])
        with pytest.raises(Exception, match="opened read-only"):
            reader.delete_messages("m")
        assert "read_only=True" in repr(reader)


def test_options_before_and_after_the_subcommand_mean_the_same(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("abc", [UserMessage("hi"), AiMessage("hello")])
    first = run("history", "--db", path, "list").output
    second = run("history", "list", "--db", path).output
    assert "abc" in first
    assert first == second
    assert "hello" in run("history", "show", "abc", "--db", path).output


def test_a_url_that_is_not_redis_is_one_clear_sentence() -> None:
    for order in (["--redis-url", "http://x", "list"], ["list", "--redis-url", "http://x"]):
        result = run("history", *order, code=2)
        assert "is not a Redis URL" in result.output
        assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("option", "value", "blocked", "extra"),
    [
        ("--redis-url", "redis://127.0.0.1:1/0", "redis", "chatmemory[redis]"),
        ("--postgres-dsn", "postgresql://u@127.0.0.1:1/x", "psycopg", "chatmemory[postgres]"),
    ],
)
def test_a_store_option_without_its_extra_prints_the_install_line(
    option: str, value: str, blocked: str, extra: str
) -> None:
    code = (
        "import sys\n"
        f"sys.modules[{blocked!r}] = None\n"
        "from chatmemory._cli import main\n"
        f"main(['history', {option!r}, {value!r}, 'list'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 1
    assert f"pip install '{extra}'" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_list_counts_rows_and_repair_frees_a_window_with_a_damaged_row(db: Path) -> None:
    _demo_with_a_damaged_row(db)
    failed = run("history", "show", "demo:alice", code=1).output
    assert "chatmemory history repair demo:alice" in failed
    assert "--skip-unreadable" in failed
    assert "errors='skip'" not in failed
    repaired = run("history", "repair", "demo:alice").output
    assert "took 1 message out of the window of demo:alice: row 1" in repaired
    assert "nothing to repair" in run("history", "repair", "demo:alice").output
    shown = run("history", "show", "demo:alice").output
    assert "4 messages in the window, 5 in the history (1 unreadable, not shown)" in shown
    assert "no conversation 'nobody'" in run("history", "repair", "nobody", code=1).output


def test_clear_counts_without_reading(db: Path) -> None:
    run("demo", "--turns", "1")
    out = run("history", "clear", "demo:bob", "--yes").output
    assert "deleted demo:bob (5 messages)" in out
    assert "nothing stored" in run("history", "clear", "demo:bob", "--yes").output


def test_tokens_says_what_it_cannot_read_instead_of_a_traceback(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    result = run("tokens", deep, code=2)
    assert "nested too deeply" in result.output
    assert "--text" in result.output


def test_tokens_reads_openai_dicts_and_json_lines(tmp_path: Path) -> None:
    messages = [UserMessage("What is 2+2?"), AiMessage("4")]
    as_openai = tmp_path / "openai.json"
    as_openai.write_text(json.dumps(to_openai(messages)))  # type: ignore[arg-type]
    lines = tmp_path / "messages.jsonl"
    lines.write_text("\n".join(message_to_json(m) for m in messages) + "\n")  # type: ignore[arg-type]
    plain = run("tokens", "--text", as_openai).output
    for path in (as_openai, lines):
        out = run("tokens", path).output
        assert "request total:" in out, path
        assert re.search(r"\+ 2 messages", out)
    assert "request total" not in plain


def test_tokens_at_a_terminal_says_it_reads_standard_input() -> None:
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "chatmemory", "tokens"],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        os.close(follower)
        os.write(leader, b"hello world\n\x04")
        out, err = process.communicate(timeout=60)
    os.close(leader)
    assert "reading from standard input" in err
    assert "Ctrl-D" in err
    assert out.strip() == "2"


def test_the_demo_totals_add_up(db: Path) -> None:
    out = run("demo", "--turns", "4").output
    turns = re.findall(
        r"─ \w+ · turn \d+ ─+\n(.*?)\n\w+'s window: (\d+) / \d+ tokens "
        r"\((\d+) in its messages \+ (\d+) per request\)",
        out,
        re.DOTALL,
    )
    assert len(turns) == 8
    for table, total, in_messages, per_request in turns:
        rows = table.splitlines()[1:]  # under the header: the window's rows, one per line
        shown = sum(int(re.split(r"\s+", row.lstrip("+ "))[2]) for row in rows)
        assert shown == int(in_messages), table
        assert int(total) == shown + int(per_request)
        assert int(per_request) == 3


def test_a_long_history_streams_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "long.db"
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("long", [UserMessage(f"message {i}") for i in range(2_500)])
    out = run("history", "show", "long", "--db", path).output.splitlines()
    assert out[0] == "long: 2500 messages in the window, 2500 in the history"
    assert len(out) == 2_501
    assert out[1].split()[0] == "0"
    assert out[-1].endswith("message 2499")


# --- commands that write only change chatmemory databases that are already there ---------------


@pytest.mark.parametrize("command", [["clear", "x", "--yes"], ["repair", "x"]])
def test_clear_and_repair_leave_another_apps_file_as_it_was(
    command: list[str], tmp_path: Path
) -> None:
    path = _other_apps_file(tmp_path)
    before = path.read_bytes()
    result = run("history", *command, "--db", path, code=1)
    assert f"no chatmemory data in '{path}'" in result.output
    assert path.read_bytes() == before
    assert not Path(f"{path}-wal").exists()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)


@pytest.mark.parametrize("command", [["clear", "x", "--yes"], ["repair", "x"]])
def test_clear_and_repair_create_no_database(command: list[str], db: Path, tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    assert "no such file: " in run("history", *command, "--db", missing, code=1).output
    assert not missing.exists()
    run("history", *command, code=0 if command[0] == "clear" else 1)
    assert not db.parent.exists()


def test_a_store_that_may_not_create_writes_to_existing_databases_only(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(StoreError, match="no such database file"):
        SqliteChatMemoryStore(missing, create=False)
    assert not missing.exists()
    with pytest.raises(StoreError, match="no chatmemory data"):
        SqliteChatMemoryStore(_other_apps_file(tmp_path), create=False)
    path = tmp_path / "chat.db"
    SqliteChatMemoryStore(path).close()
    with SqliteChatMemoryStore(path, create=False) as store:
        store.update_messages("m", [UserMessage("hi")])
    assert stored(path)["m"] == [(0, UserMessage("hi"), True)]


def test_a_read_only_store_takes_any_file_name(tmp_path: Path) -> None:
    folder = tmp_path / "a?b #c%20"
    folder.mkdir()
    path = folder / "chat 100%.db"
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("m", [UserMessage("hi")])
    with SqliteChatMemoryStore(path, read_only=True) as reader:
        assert reader.get_messages("m") == [UserMessage("hi")]
    assert "hi" in run("history", "show", "m", "--db", path).output


def test_the_async_read_only_store_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("m", [UserMessage("hi")])

    async def use() -> None:
        async with AsyncSqliteChatMemoryStore(path, read_only=True) as reader:
            assert "read_only=True" in repr(reader)
            assert [s.messages for s in await reader.summaries()] == [1]
            with pytest.raises(StoreError, match="opened read-only"):
                await reader.delete_messages("m")

    asyncio.run(use())
    assert stored(path)["m"] == [(0, UserMessage("hi"), True)]


def test_an_older_file_is_read_only_until_a_command_upgrades_it(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with SqliteChatMemoryStore(path) as store:
        store.update_messages("m", [UserMessage("hi")])
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM chatmemory_migrations")  # as if migration 1 were new
    before = path.read_bytes()
    result = run("history", "list", "--db", path, code=1)
    assert "written by an older chatmemory" in result.output
    assert "read_only" not in result.output  # the Python argument means nothing here
    assert "history repair" in result.output
    assert path.read_bytes() == before


def test_tokens_does_not_count_almost_messages_as_text() -> None:
    typo = json.dumps([{"role": "user", "content": "hi"}, {"rol": "assistant", "content": "x"}])
    result = run("tokens", input=typo, code=2)
    assert "item 1 is not an OpenAI message (it has no `role`)" in result.output
    assert "--text" in result.output
    mixed = [json.loads(message_to_json(UserMessage("hi"))), {"role": "user", "content": "x"}]
    assert (
        "item 1 is not a LangChain4j message"
        in run("tokens", input=json.dumps(mixed), code=2).output
    )
    data = CliRunner().invoke(cli, ["tokens"], input='[{"name": "a"}]\n')
    as_text = run("tokens", "--text", input='[{"name": "a"}]\n').output
    assert (data.exit_code, data.stdout) == (0, as_text)
    assert "not chat messages" in data.stderr
    assert "plain text" in data.stderr
    assert "not chat messages" not in as_text


def test_a_lone_surrogate_is_printed_as_a_replacement_character(home: Path, tmp_path: Path) -> None:
    """LangChain4j can store text with a lone surrogate; the viewer, `tokens` and the chat's
    /history print it as U+FFFD instead of failing to encode it."""
    messages = tmp_path / "lone.json"
    messages.write_text(
        '[{"type": "USER", "contents": [{"type": "TEXT", "text": "hi \\ud800 lone"}]}]'
    )
    env = {
        **os.environ,
        "CHATMEMORY_HOME": str(home),
        "COLUMNS": "100",
        "PYTHONIOENCODING": "utf-8",
    }

    def chatmemory(*args: str, stdin: str = "") -> str:
        result = subprocess.run(
            [sys.executable, "-m", "chatmemory", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        return result.stdout

    chatmemory("history", "import", "--id", "lone", str(messages))
    assert "hi \ufffd lone" in chatmemory("history", "show", "lone")
    assert "hi \ufffd lone" in chatmemory("tokens", str(messages))
    out = chatmemory(
        "chat",
        "--memory-id",
        "lone",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        stdin="/history\n",
    )
    assert "hi \ufffd lone" in out


# --- a typo in --db creates nothing: reads never create, writes create no directory -------------

_OFFLINE_MODEL = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--max-retries", "0"]
_READS = {
    "history list": ["history", "list"],
    "history show": ["history", "show", "x"],
    "history show --all": ["history", "show", "x", "--all"],
    "history export": ["history", "export", "x"],
    "history search": ["history", "search", "word"],
    "history clear": ["history", "clear", "x", "--yes"],
    "history repair": ["history", "repair", "x"],
    "ask": ["ask", "what?"],
}
_WRITES = {
    "chat": ["chat", *_OFFLINE_MODEL],
    "chat -m": ["chat", *_OFFLINE_MODEL, "-m", "hi"],
    "prompt": ["prompt", *_OFFLINE_MODEL, "hi"],
    "history import": ["history", "import", "-", "--id", "x"],
    "demo": ["demo", "--turns", "1"],
    "ingest": ["ingest", "."],
}


@pytest.mark.parametrize("name", _READS)
def test_a_read_creates_no_file_and_no_directory(name: str, tmp_path: Path, home: Path) -> None:
    typo = tmp_path / "typo" / "typo.db"
    result = run(*_READS[name], "--db", typo, code=1)
    assert f"no such file: {typo}" in result.output
    assert not typo.parent.exists()
    beside = tmp_path / "typo.db"
    run(*_READS[name], "--db", beside, code=1)
    assert not beside.exists()
    assert not home.exists()


@pytest.mark.parametrize("name", _WRITES)
def test_a_write_creates_the_file_but_no_directory(name: str, tmp_path: Path, home: Path) -> None:
    typo = tmp_path / "typo" / "typo.db"
    message = '[{"type": "USER", "contents": [{"type": "TEXT", "text": "hi"}]}]'
    result = run(*_WRITES[name], "--db", typo, input=message, code=1)
    assert f"no such directory: {tmp_path / 'typo'} (for --db {typo})" in result.output
    assert not typo.parent.exists()
    assert not home.exists()


def test_a_data_directory_that_cannot_be_made_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv("CHATMEMORY_HOME", str(blocker / "home"))
    message = '[{"type": "USER", "contents": [{"type": "TEXT", "text": "hi"}]}]'
    result = run("history", "import", "-", "--id", "x", input=message, code=1)
    assert f"cannot create the data directory {blocker / 'home'}: " in result.output
    assert "set $CHATMEMORY_HOME to a directory you can write" in result.output
