"""`chatmemory chat`: an interactive chat whose conversation is stored and continued next time,
or one prompt answered (`-m`, `-f`)."""

from __future__ import annotations

import sys
from typing import IO, Any

import click

from .._errors import ChatMemoryError
from .._messages import SystemMessage
from .base import home_dir, read_input
from .chat_model import estimator_for, make_model, model_call_options
from .line_input import line_reader
from .session import Session, one_shot_text
from .stores import StoreSpec, store_options

__all__ = ["chat"]

HISTORY_FILE = "chat-input-history"
"""The lines typed at `chat`'s prompt, in the data directory."""


@click.command()
@click.option(
    "--model",
    help="Model name [default: the first a --base-url server lists, else gpt-4o-mini, or a "
    "Claude model].",
)
@click.option("--base-url", help="An OpenAI-compatible server (Ollama, vLLM, llama.cpp...).")
@click.option(
    "--provider",
    type=click.Choice(["openai", "anthropic"]),
    help="Whose API to speak [default: openai, or anthropic when only its key is set].",
)
@click.option("--memory-id", default="chat", show_default=True, help="The conversation.")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=100),
    default=4000,
    show_default=True,
    help="Tokens of conversation sent to the model; older messages leave the window.",
)
@click.option("--system", "system_text", help="Set the system message before chatting.")
@click.option(
    "-m",
    "--message",
    help="Send this message, print the answer and leave (text piped on stdin comes before it).",
)
@click.option(
    "-f",
    "--file",
    "message_file",
    type=click.File("rb"),
    help="Send the text of this file (- for stdin), print the answer and leave; with -m, the "
    "file comes first.",
)
@model_call_options
@store_options
def chat(
    model: str | None,
    base_url: str | None,
    provider: str | None,
    timeout: float,
    max_retries: int,
    memory_id: str,
    max_tokens: int,
    system_text: str | None,
    message: str | None,
    message_file: IO[bytes] | None,
    **options: Any,
) -> None:
    """Chat with a model; the conversation is stored and continues on the next start.

    The model is OpenAI's unless --provider says otherwise; its key comes from OPENAI_API_KEY
    (or ANTHROPIC_API_KEY), or --base-url points at a local server that needs none. On a
    terminal the input line is editable (Alt-Enter for a new line, ↑ for earlier lines, /edit
    for $EDITOR); -m or -f send one message and leave.
    """
    one_shot = None
    if message is not None or message_file is not None:
        from_file = read_input(message_file)[0] if message_file is not None else None
        one_shot = one_shot_text(from_file, message)
        if not one_shot:
            raise click.UsageError("nothing to send: -m and -f gave no text")
    chat_model, provider, name = make_model(provider, model, base_url, timeout, max_retries)
    spec = StoreSpec.take(options)
    estimator = estimator_for(name)
    with spec.open("create") as store:
        session = Session.start(chat_model, store, memory_id, estimator, max_tokens)
        if system_text:
            session.memory.add(SystemMessage(system_text))
        if one_shot is not None:
            session.turn(one_shot)
            return
        kept = len(session.memory.messages())
        click.echo(
            f"chatting with {name} ({provider}) as {memory_id!r} in {spec.describe()}"
            + (f"; {kept} message(s) in the window" if kept else "")
            + "; /help for commands"
        )
        _converse(session)


def _converse(session: Session) -> None:
    """Read and answer the user's lines until /exit, Ctrl-D, or Ctrl-C on an empty line."""
    terminal = sys.stdin.isatty() and sys.stdout.isatty()
    read = line_reader(terminal, home_dir() / HISTORY_FILE)
    while True:
        try:
            line = read().strip()
        except (EOFError, KeyboardInterrupt):
            click.echo("")
            return
        if not line:
            continue
        if line.startswith("/"):
            if not session.command(line):
                return
            continue
        try:
            session.turn(line)
        except ChatMemoryError as error:  # the model failed: say so, keep chatting
            click.echo(f"\nerror: {error}", err=True)
