"""`chatmemory tokens`: exact, offline OpenAI token counts of text or of chat messages."""

from __future__ import annotations

import json
from typing import IO, Any

import click
from rich.text import Text

from .._codec.langchain4j import message_from_dict
from .._errors import SerializationError
from .._messages import ChatMessage
from .base import InputError, console, estimator_options, make_estimator, read_input
from .render import Row, message_table, n_messages

__all__ = ["tokens"]


@click.command()
@click.argument("file", type=click.File("rb"), default="-", required=False)
@estimator_options
@click.option(
    "--text", "as_text", is_flag=True, help="Count the input as plain text, even if it is JSON."
)
def tokens(file: IO[bytes], as_text: bool, model: str, encoding: str | None) -> None:
    """Count tokens of text or chat messages, exactly.

    Reads FILE, or stdin when FILE is - or not given; counts offline. Plain text prints its
    token count (one final newline is not counted). A JSON list of messages in LangChain4j's
    format, or one message object, prints each message's count and the total of a request made
    of them, as LangChain4j's OpenAiTokenCountEstimator counts them.
    """
    estimator = make_estimator(model, encoding)
    text, source = read_input(file)
    messages = None if as_text else _messages(text, source)
    if messages is None:
        body = text[:-1].removesuffix("\r") if text.endswith("\n") else text
        click.echo(estimator.count_text(body))
        return
    rows = [Row(m, seq=i, tokens=estimator.count_message(m)) for i, m in enumerate(messages)]
    total = estimator.count_messages(messages)
    overhead = total - sum(r.tokens or 0 for r in rows)
    out = console()
    out.print(message_table(rows))
    out.print(
        Text.assemble(
            ("request total: ", "bold"),
            (f"{total} tokens", "bold"),
            f" ({overhead} per request + {n_messages(len(rows))}; "
            f"{estimator.model}, {estimator.encoding_name})",
        )
    )


def _messages(text: str, source: str) -> list[ChatMessage] | None:
    """The messages in `text` if it is a LangChain4j message list or message object, else None."""
    try:
        value: Any = json.loads(text)
    except ValueError:
        return None
    items = [value] if isinstance(value, dict) else value
    if not isinstance(items, list) or not items:
        return None
    if not all(isinstance(item, dict) and "type" in item for item in items):
        return None
    try:
        return [message_from_dict(item) for item in items]
    except SerializationError as error:
        raise InputError(f"{source}: {error}") from None
