"""`chatmemory chat` end to end: a real process on a pseudo-terminal, the real OpenAI and
Anthropic SDKs, and the local fake server; the conversation continues on the next start."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from chatmemory import AiMessage, OpenAiTokenCountEstimator, SystemMessage, UserMessage
from chatmemory._cli.app import cli
from chatmemory.stores import SqliteChatMemoryStore

from .fake_server import FakeServer, Reply
from .test_openai import chunk, sse, usage_chunk


def answer(*pieces: str) -> Reply:
    return sse(
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": p}) for p in pieces),
        chunk({}, finish_reason="stop"),
        usage_chunk(),
    )


def run_chat(arguments: list[str], lines: list[str]) -> tuple[str, str]:
    """Run `chatmemory chat` with its input on a pseudo-terminal (Ctrl-D after the lines);
    its output and errors. No API key reaches it."""
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    command = [sys.executable, "-m", "chatmemory", "chat", *arguments]
    with subprocess.Popen(
        command, stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as process:
        os.close(follower)
        os.write(leader, "".join(line + "\n" for line in lines).encode() + b"\x04")
        out, err = process.communicate(timeout=60)
    os.close(leader)
    assert process.returncode == 0, err
    return out, err


def chat(server: FakeServer, db: Path, lines: list[str], *options: str) -> tuple[str, str]:
    return run_chat(["--base-url", f"{server.url}/v1", "--db", str(db), *options], lines)


def test_answers_stream_and_the_conversation_continues_next_time(
    server: FakeServer, tmp_path: Path
) -> None:
    db = tmp_path / "chat.db"
    server.reply(answer("Hello", ", Ada", "!"))
    out, _ = chat(server, db, ["Hi, I am Ada", "/exit"], "--system", "Be brief.")
    assert "chatting with gpt-4o-mini (openai) as 'chat' in" in out
    assert "Hello, Ada!" in out
    sent = server.requests[-1].body
    assert sent["stream"] is True
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi, I am Ada"},
    ]

    server.reply(answer("You are Ada."))
    out, _ = chat(server, db, ["Who am I?"])  # no /exit: Ctrl-D ends it
    assert "3 message(s) in the window" in out
    assert "You are Ada." in out
    assert [m["content"] for m in server.requests[-1].body["messages"]] == [
        "Be brief.",
        "Hi, I am Ada",
        "Hello, Ada!",
        "Who am I?",
    ]
    with SqliteChatMemoryStore(db) as store:
        assert store.get_messages("chat") == [
            SystemMessage("Be brief."),
            UserMessage("Hi, I am Ada"),
            AiMessage("Hello, Ada!"),
            UserMessage("Who am I?"),
            AiMessage("You are Ada."),
        ]


def test_slash_commands(server: FakeServer, tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    server.reply(answer("Noted."))
    out, _ = chat(
        server,
        db,
        [
            *("/help", "Remember 42", "/window", "/system Answer in French.", "/history"),
            *("/nope", "/system", "/clear", "/history", "/window", "/exit"),
        ],
        "--model",
        "gpt-4o",
        "--max-tokens",
        "500",
    )
    assert "/window         what the model sees next" in out
    assert "2 message(s): 17 of 500 tokens" in out  # exact: 7 + 7 + 3 per request (gpt-4o)
    assert "     7  user    Remember 42" in out
    assert "system message set" in out
    history = out.split("system message set")[1]
    assert "user    Remember 42 ●" in history
    assert "system  Answer in French. ●" in history
    assert "unknown command /nope: /help lists them" in out
    assert "/system needs the text" in out
    assert "conversation cleared" in out
    assert "nothing said yet" in out
    assert "0 message(s): 0 of 500 tokens" in out


def test_a_failed_answer_is_reported_and_nothing_is_kept(
    server: FakeServer, tmp_path: Path
) -> None:
    db = tmp_path / "chat.db"
    error: dict[str, Any] = {"error": {"message": "model overloaded", "type": "server_error"}}
    server.reply(Reply(400, error), answer("Fine now."))
    out, err = chat(server, db, ["first try", "second try", "/exit"])
    assert "model overloaded" in err
    assert "Traceback" not in err
    assert "Fine now." in out
    with SqliteChatMemoryStore(db) as store:
        assert store.get_messages("chat") == [UserMessage("second try"), AiMessage("Fine now.")]


def test_anthropic_is_spoken_when_asked(server: FakeServer, tmp_path: Path) -> None:
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [], "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 0},
        }}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Bonjour"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 2}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    server.reply(Reply(events=events))
    db = str(tmp_path / "c.db")
    out, err = run_chat(
        ["--provider", "anthropic", "--base-url", server.url, "--model", "claude-x", "--db", db],
        ["Salut", "/exit"],
    )
    assert "chatting with claude-x (anthropic)" in out, err
    assert "Bonjour" in out
    assert server.requests[-1].path == "/v1/messages"


def test_with_no_model_configured_it_says_how_to_set_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(cli, ["chat", "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 1
    assert "no chat model configured: set OPENAI_API_KEY" in result.output
    assert "--base-url" in result.output
    assert "http://localhost:11434/v1" in result.output
    assert not (tmp_path / "x.db").exists()


def test_the_same_session_in_process(server: FakeServer, tmp_path: Path) -> None:
    """The pseudo-terminal tests run a child process; this one drives the same command in this
    process (input piped), so every path is measured too."""
    server.reply(answer("Hello", "!"), Reply(500, {"error": {"message": "boom"}}))
    lines = ["/help", "Hi", "again", "/window", "/system Be brief.", "/history", "/nope", "/clear"]
    where = ["--base-url", f"{server.url}/v1", "--db", str(tmp_path / "c.db")]
    result = CliRunner().invoke(
        cli,
        ["chat", *where, "--model", "gpt-4o", "--memory-id", "m"],
        input="\n".join([*lines, "", "/exit"]) + "\n",
        env={"OPENAI_API_KEY": ""},
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "chatting with gpt-4o (openai) as 'm'" in out
    assert "Hello!" in out
    assert "error: " in out  # the 500 (no retry on a local server answer), reported
    assert "2 message(s):" in out
    assert "system message set" in out
    assert "unknown command /nope" in out
    assert "conversation cleared" in out


def prompt(server: FakeServer, db: Path, *args: str, stdin: str | None = None) -> str:
    """`chatmemory prompt` through the installed command, stdin piped when given."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    command = [sys.executable, "-m", "chatmemory", "prompt", "--base-url", f"{server.url}/v1"]
    result = subprocess.run(
        [*command, "--db", str(db), *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def test_prompt_answers_once_stores_it_and_continues_with_c(
    server: FakeServer, tmp_path: Path
) -> None:
    db = tmp_path / "p.db"
    server.reply(answer("Bonjour", "!"), answer("You said hello."), answer("New."))
    assert prompt(server, db, "Say hello in French") == "Bonjour!\n"
    assert prompt(server, db, "-c", "What did I ask?") == "You said hello.\n"
    continued = server.requests[1].body["messages"]
    assert [m["content"] for m in continued] == [
        "Say hello in French",
        "Bonjour!",
        "What did I ask?",
    ]
    assert prompt(server, db, "Hi") == "New.\n"  # without -c: a new conversation
    assert len(server.requests[2].body["messages"]) == 1
    from chatmemory import SqliteChatMemoryStore

    with SqliteChatMemoryStore(db) as store:
        ids = store.memory_ids()
    assert len(ids) == 2
    assert all(i.startswith("prompt:") for i in ids)


def test_prompt_reads_piped_stdin_before_the_text(server: FakeServer, tmp_path: Path) -> None:
    server.reply(answer("A summary."))
    out = prompt(server, tmp_path / "p.db", "summarize", stdin="# Notes\nAda wrote code.\n")
    assert out == "A summary.\n"
    sent = server.requests[0].body["messages"][-1]["content"]
    assert sent == "# Notes\nAda wrote code.\n\nsummarize"


def test_a_slow_server_is_waited_for_timeout_seconds_once(
    server: FakeServer, tmp_path: Path
) -> None:
    import time

    class SlowReply(Reply):
        def encode(self) -> tuple[bytes, str]:
            time.sleep(0.8)
            return super().encode()

    server.reply(SlowReply(body={}))
    url = f"{server.url}/v1"
    result = CliRunner().invoke(
        cli,
        ["prompt", "hi", "--base-url", url, "--db", str(tmp_path / "p.db"), "--timeout", "0.3"],
    )
    assert result.exit_code == 1
    assert "did not answer in time" in result.output
    assert "raise --timeout" in result.output
    assert len(server.requests) == 1  # --max-retries (2) does not send it again


def invoke_chat(server: FakeServer, db: Path, *args: str, input: str = "") -> Any:
    """`chatmemory chat` in this process, stdin piped (not a terminal)."""
    where = ["--base-url", f"{server.url}/v1", "--db", str(db)]
    return CliRunner().invoke(cli, ["chat", *where, *args], input=input)


def test_chat_m_answers_once_and_f_reads_a_file_or_stdin(
    server: FakeServer, tmp_path: Path
) -> None:
    db = tmp_path / "c.db"
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\nAda wrote code.\n", encoding="utf-8")
    server.reply(answer("Hi."), answer("Summary."), answer("From stdin."), answer("Both."))
    first = invoke_chat(server, db, "-m", "hello", "--system", "Be brief.")
    assert (first.exit_code, first.output) == (0, "Hi.\n")  # no banner, no prompt: one answer
    assert server.requests[-1].body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert invoke_chat(server, db, "-f", str(notes), "-m", "summarize").output == "Summary.\n"
    assert server.requests[-1].body["messages"][-1]["content"] == (
        "# Notes\nAda wrote code.\n\nsummarize"
    )
    assert invoke_chat(server, db, "-f", "-", input="piped text\n").output == "From stdin.\n"
    assert server.requests[-1].body["messages"][-1]["content"] == "piped text"
    piped = invoke_chat(server, db, "-m", "and this", input="piped first\n")
    assert piped.output == "Both.\n"
    assert server.requests[-1].body["messages"][-1]["content"] == "piped first\n\nand this"
    with SqliteChatMemoryStore(db) as store:
        assert len(store.get_messages("chat")) == 9  # every exchange stored, one conversation
    empty = invoke_chat(server, db, "-m", "  ")
    assert empty.exit_code == 2
    assert "nothing to send: -m and -f gave no text" in empty.output


def test_a_message_larger_than_the_window_is_refused_before_it_is_sent(
    server: FakeServer, tmp_path: Path
) -> None:
    long = "word " * 200
    size = OpenAiTokenCountEstimator("gpt-4o-mini").count_message(UserMessage(long.strip()))
    assert size > 100
    result = invoke_chat(server, tmp_path / "c.db", "--max-tokens", "100", input=f"{long}\n/exit\n")
    assert result.exit_code == 0
    assert (
        f"error: this message is {size} tokens, more than the window holds (--max-tokens 100): "
        "raise --max-tokens, or send less"
    ) in result.output
    once = invoke_chat(server, tmp_path / "c.db", "--max-tokens", "100", "-m", long)
    assert once.exit_code == 1
    assert f"Error: this message is {size} tokens" in once.output
    assert server.requests == []


def test_edit_sends_nothing_when_nothing_is_written_or_no_editor_starts(
    server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", "true")  # leaves the file as it was
    result = invoke_chat(server, tmp_path / "c.db", input="/edit\n/edit draft\n/exit\n")
    assert result.output.count("nothing written: nothing sent") == 2
    monkeypatch.setenv("EDITOR", str(tmp_path / "no-such-editor"))
    failed = invoke_chat(server, tmp_path / "c.db", input="/edit\n/exit\n")
    assert failed.exit_code == 0
    assert "/edit: " in failed.output
    assert "Editing failed" in failed.output
    assert server.requests == []


def test_an_answer_without_text_is_said(server: FakeServer, tmp_path: Path) -> None:
    server.reply(answer())
    result = invoke_chat(server, tmp_path / "c.db", "-m", "hi")
    assert result.output == "(the model answered with no text)\n"


def test_the_in_process_session_edits_interrupts_and_ends_at_eof(
    server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chatmemory._cli import chat as chat_command
    from chatmemory.testing import ScriptedChatModel

    def model(request: Any) -> str:
        last = request.messages[-1].text
        if last == "interrupt me":
            raise KeyboardInterrupt  # as Ctrl-C during the answer
        return f"echo: {last}"

    scripted = ScriptedChatModel(model)
    monkeypatch.setattr(chat_command, "make_model", lambda *_: (scripted, "openai", "gpt-4o"))
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys\nopen(sys.argv[1], 'w').write('written in the editor\\n')\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.delenv("VISUAL", raising=False)
    db = tmp_path / "c.db"
    lines = ["/history", "/system", "/edit", "interrupt me", "after"]  # then EOF: no /exit
    result = invoke_chat(server, db, input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "nothing said yet" in out
    assert "/system needs the text" in out
    assert "you (from the editor, 21 characters)> written in the editor" in out
    assert "echo: written in the editor" in out
    assert "(interrupted: this exchange is not kept)" in out
    assert "echo: after" in out
    with SqliteChatMemoryStore(db) as store:
        assert [m.text for m in store.get_messages("chat")] == [  # type: ignore[union-attr]
            "written in the editor",
            "echo: written in the editor",
            "after",
            "echo: after",
        ]


def test_prompt_in_process_continues_the_last_prompt_and_sets_a_system_message(
    server: FakeServer, tmp_path: Path
) -> None:
    db = tmp_path / "p.db"
    where = ["--base-url", f"{server.url}/v1", "--db", str(db)]
    server.reply(answer("One."), answer("Two."), answer("Chat."))
    runner = CliRunner()
    first = runner.invoke(cli, ["prompt", *where, "--system", "Be brief.", "first"])
    assert first.output == "One.\n"
    assert runner.invoke(cli, ["prompt", *where, "-c", "second"]).output == "Two.\n"
    assert [m["content"] for m in server.requests[1].body["messages"]] == [
        "Be brief.",
        "first",
        "One.",
        "second",
    ]
    chat_id = runner.invoke(cli, ["prompt", *where, "--memory-id", "chat", "hi"])
    assert chat_id.output == "Chat.\n"
    assert len(server.requests[2].body["messages"]) == 1  # its own conversation, not the last
    empty = runner.invoke(cli, ["prompt", *where, "  "])
    assert empty.exit_code == 2
    assert "nothing to ask: give TEXT, or pipe text on stdin" in empty.output
