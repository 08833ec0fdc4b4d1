"""How `chat` reads what the user types.

On a terminal, prompt_toolkit's line editor: arrow keys and the usual editing keys, the lines
of earlier sessions (kept in a file in the data directory) on ↑/↓, Alt-Enter (or Esc
then Enter) for a new line, a bracketed paste arriving whole whatever its length (the terminal's
own line editor cuts a line at 4,095 characters), and Ctrl-C clearing the line (leaving when it
is empty). Anything else (a pipe, a file, a test) is read line by line as it comes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from prompt_toolkit.history import History

__all__ = ["PROMPT", "history_for", "line_reader"]

PROMPT = "you> "

ReadLine = Callable[[], str]
"""Returns what the user entered; raises EOFError at the end of the input and KeyboardInterrupt
when the user leaves with Ctrl-C."""


def line_reader(terminal: bool, history_file: Path) -> ReadLine:
    """prompt_toolkit's line editor when stdin and stdout are a terminal, else `input`."""
    if not terminal:
        return lambda: input(PROMPT)
    from prompt_toolkit import PromptSession
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _new_line(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("c-c")
    def _clear_or_leave(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    session: PromptSession[str] = PromptSession(
        history=history_for(history_file),
        key_bindings=bindings,
        multiline=False,
        prompt_continuation=lambda width, line, wrap: "." * (width - 1) + " ",
        enable_history_search=False,
    )
    return lambda: session.prompt(PROMPT)


def history_for(path: Path) -> History:
    """The lines of earlier sessions, kept in `path` (its directory made when missing); when it
    cannot be written, this session's lines only, with a warning."""
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError as error:
        click.echo(
            f"Warning: cannot keep the input history in {click.format_filename(path)} "
            f"({error.strerror}): this session's lines only",
            err=True,
        )
        return InMemoryHistory()
    return FileHistory(path)
