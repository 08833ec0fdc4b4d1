"""`chatmemory chat` at a terminal: the installed command on a real pseudo-terminal (pexpect),
typing as a person does: arrow keys edit the line, a long paste arrives whole, Alt-Enter starts
a new line, earlier sessions' lines come back with ↑, Ctrl-C clears a line or interrupts an
answer, /edit opens $EDITOR."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from chatmemory import AiMessage, SqliteChatMemoryStore, UserMessage

from .fake_server import FakeServer, Reply
from .test_chat_cli import answer

pexpect = pytest.importorskip("pexpect")

COMMAND = shutil.which("chatmemory", path=str(Path(sys.executable).parent))
pytestmark = pytest.mark.skipif(COMMAND is None, reason="the chatmemory command is not installed")

LEFT, UP, ENTER, ALT_ENTER, CTRL_C, CTRL_D = "\x1b[D", "\x1b[A", "\r", "\x1b\r", "\x03", "\x04"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


class Terminal:
    """`chatmemory chat` on a pseudo-terminal, talking to `server`, storing in `db`."""

    def __init__(self, server: FakeServer, home: Path, db: Path, *options: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(CHATMEMORY_HOME=str(home), TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1")
        assert COMMAND is not None
        arguments = ["chat", "--base-url", f"{server.url}/v1", "--db", str(db), *options]
        self.child = pexpect.spawn(
            COMMAND, arguments, env=env, encoding="utf-8", timeout=30, dimensions=(40, 200)
        )
        self.child.expect("/help for commands")
        self.prompt()

    def prompt(self) -> None:
        self.child.expect_exact("you>")

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def answered(self, text: str) -> None:
        self.child.expect_exact(text)
        self.prompt()

    def leave(self) -> None:
        self.send(CTRL_D)
        self.child.expect(pexpect.EOF)
        self.child.close()
        assert self.child.exitstatus == 0


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def sent(server: FakeServer) -> str:
    """The user's text in the last request the server received."""
    content = server.requests[-1].body["messages"][-1]["content"]
    assert isinstance(content, str)
    return content


def test_arrow_keys_edit_the_line_and_lines_of_earlier_sessions_come_back(
    server: FakeServer, home: Path, tmp_path: Path
) -> None:
    db = tmp_path / "chat.db"
    server.reply(answer("One."), answer("Two."))
    chat = Terminal(server, home, db)
    chat.send("wrd" + LEFT + LEFT + "o" + ENTER)  # "wrd", two steps left, "o": "word"
    chat.answered("One.")
    assert sent(server) == "word"
    chat.leave()

    again = Terminal(server, home, db)  # a new process: the line comes from the history file
    again.send(UP + " again" + ENTER)
    again.answered("Two.")
    assert sent(server) == "word again"
    again.leave()
    with SqliteChatMemoryStore(db) as store:
        assert store.get_messages("chat")[-2:] == [UserMessage("word again"), AiMessage("Two.")]


def test_a_long_paste_arrives_whole_and_alt_enter_starts_a_new_line(
    server: FakeServer, home: Path, tmp_path: Path
) -> None:
    server.reply(answer("Read it."), answer("Two lines."))
    chat = Terminal(server, home, tmp_path / "chat.db", "--max-tokens", "20000")
    pasted = "\n".join(f"line {n:05d} " + "x" * 88 for n in range(324))  # 32,399 characters
    pasted += "!"
    assert len(pasted) == 32_400
    chat.send(PASTE_START + pasted + PASTE_END)
    chat.send(ENTER)
    chat.answered("Read it.")
    assert sent(server) == pasted  # not cut at the terminal's 4,095, newlines kept, one message
    chat.send("first" + ALT_ENTER + "second" + ENTER)
    chat.answered("Two lines.")
    assert sent(server) == "first\nsecond"
    chat.leave()


def test_ctrl_c_clears_the_line_interrupts_an_answer_and_leaves_on_an_empty_line(
    server: FakeServer, home: Path, tmp_path: Path
) -> None:
    class Slow(Reply):
        def encode(self) -> tuple[bytes, str]:
            time.sleep(3)
            return super().encode()

    db = tmp_path / "chat.db"
    slow = answer("Too late.")
    server.reply(Slow(events=slow.events), answer("Kept."))
    chat = Terminal(server, home, db)
    chat.send("never sent" + CTRL_C)  # clears the line: still at the prompt, nothing sent
    chat.send("slow question" + ENTER)
    while not server.requests or server.requests[-1].method != "POST":
        time.sleep(0.05)
    chat.send(CTRL_C)
    chat.child.expect_exact("(interrupted: this exchange is not kept)")
    chat.prompt()
    chat.send("quick question" + ENTER)
    chat.answered("Kept.")
    chat.send(CTRL_C)  # on an empty line: leaves
    chat.child.expect(pexpect.EOF)
    chat.child.close()
    assert chat.child.exitstatus == 0
    assert [sent.body["messages"][-1]["content"] for sent in server.requests[-2:]] == [
        "slow question",
        "quick question",
    ]
    with SqliteChatMemoryStore(db) as store:
        assert store.get_messages("chat") == [UserMessage("quick question"), AiMessage("Kept.")]


def test_edit_composes_the_message_in_the_editor(
    server: FakeServer, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys\n"
        "path = sys.argv[1]\n"
        "start = open(path, encoding='utf-8').read()\n"
        "open(path, 'w', encoding='utf-8').write(start.strip() + ' and more\\nfrom the editor')\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.delenv("VISUAL", raising=False)
    server.reply(answer("Edited."))
    chat = Terminal(server, home, tmp_path / "chat.db")
    chat.send("/edit a draft" + ENTER)
    chat.answered("Edited.")
    assert sent(server) == "a draft and more\nfrom the editor"
    chat.leave()


def test_without_prompt_toolkit_a_terminal_chat_names_the_extra(
    server: FakeServer, home: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(CHATMEMORY_HOME=str(home), TERM="xterm")
    blocked = "import sys; sys.modules['prompt_toolkit'] = None; from chatmemory._cli import main; "
    url = f"{server.url}/v1"
    arguments = ["-c", blocked + f"main(['chat', '--base-url', {url!r}, '--db', 'c.db'])"]
    child = pexpect.spawn(sys.executable, arguments, env=env, cwd=str(tmp_path), encoding="utf-8")
    child.expect(pexpect.EOF, timeout=30)
    child.close()
    assert child.exitstatus == 1
    assert "Error: this command needs the prompt_toolkit package, an optional extra: " \
        "pip install 'chatmemory[cli]'" in child.before  # fmt: skip
    assert "Traceback" not in child.before
