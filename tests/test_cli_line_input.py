"""`chat`'s line editor in this process: prompt_toolkit reading keys from a pipe as it reads
them from a terminal (the pseudo-terminal tests in tests/models/test_chat_terminal.py run the
installed command)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from chatmemory._cli.line_input import history_for, line_reader


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        yield pipe


def test_keys_edit_the_line_and_alt_enter_starts_a_new_one(keys: PipeInput, tmp_path: Path) -> None:
    read = line_reader(True, tmp_path / "history")
    keys.send_text("wrd\x1b[D\x1b[Do\r")
    assert read() == "word"
    keys.send_text("first\x1b\rsecond\r")
    assert read() == "first\nsecond"
    keys.send_text("\x1b[200~pasted\nwhole\x1b[201~\r")
    assert read() == "pasted\nwhole"


def test_ctrl_c_clears_a_line_and_leaves_from_an_empty_one(keys: PipeInput, tmp_path: Path) -> None:
    read = line_reader(True, tmp_path / "history")
    keys.send_text("dropped\x03kept\r")
    assert read() == "kept"
    keys.send_text("\x03")
    with pytest.raises(KeyboardInterrupt):
        read()
    keys.send_text("\x04")
    with pytest.raises(EOFError):
        read()


def test_earlier_sessions_lines_come_back_with_up(keys: PipeInput, tmp_path: Path) -> None:
    path = tmp_path / "data" / "history"
    keys.send_text("remember me\r")
    assert line_reader(True, path)() == "remember me"
    assert path.exists()  # its directory made
    keys.send_text("\x1b[A!\r")
    assert line_reader(True, path)() == "remember me!"  # a new reader: read from the file


def test_a_history_file_that_cannot_be_written_keeps_this_sessions_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("")
    history = history_for(blocker / "history")
    assert "cannot keep the input history in" in capsys.readouterr().err
    history.append_string("this session")
    assert list(history.load_history_strings()) == ["this session"]


def test_without_a_terminal_lines_are_read_as_they_come(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("one line\n"))
    read = line_reader(False, tmp_path / "history")
    assert read() == "one line"
    with pytest.raises(EOFError):
        read()
    assert not (tmp_path / "history").exists()
