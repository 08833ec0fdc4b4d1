"""How messages look on a terminal: one line each, in a table.

Message text always goes into `rich.text.Text`, never through console markup, so brackets in a
conversation print as they are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from rich.table import Table
from rich.text import Text

from .._frozen import thaw
from .._messages import (
    AiMessage,
    ChatMessage,
    Content,
    CustomMessage,
    SystemMessage,
    TextContent,
    ToolExecutionResultMessage,
    UserMessage,
)

__all__ = [
    "Row",
    "contents_text",
    "format_time",
    "full_text",
    "message_lines",
    "message_table",
    "n_messages",
    "printable",
    "role",
    "summary",
]

_ROLE_STYLES = {"system": "magenta", "user": "cyan", "ai": "green", "tool": "yellow"}


def n_messages(count: int) -> str:
    """`1 message`, `2 messages`."""
    return f"{count} message{'' if count == 1 else 's'}"


def role(message: ChatMessage) -> str:
    """`system`, `user`, `ai`, `tool` or `custom`."""
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, UserMessage):
        return "user"
    if isinstance(message, AiMessage):
        return "ai"
    if isinstance(message, ToolExecutionResultMessage):
        return "tool"
    return "custom"


def summary(message: ChatMessage) -> str:
    """The message on one line: its text, its tool calls (→) or its tool result (←)."""
    return printable(" ".join(_text(message).split()))


def full_text(message: ChatMessage) -> str:
    """The message as `summary` says it, whole: its lines and spacing kept."""
    return printable(_text(message))


def _text(message: ChatMessage) -> str:
    if isinstance(message, SystemMessage):
        return message.text
    if isinstance(message, UserMessage):
        text = contents_text(message.contents)
        return text if message.name is None else f"{message.name}: {text}"
    if isinstance(message, AiMessage):
        parts = [message.text] if message.text else []
        parts += [f"→ {c.name}({c.arguments})" for c in message.tool_execution_requests]
        return " · ".join(parts) if parts else "(empty)"
    if isinstance(message, ToolExecutionResultMessage):
        error = " (error)" if message.is_error else ""
        return f"← {message.tool_name or '?'}{error}: {contents_text(message.contents)}"
    assert isinstance(message, CustomMessage)
    return json.dumps(thaw(message.attributes), ensure_ascii=False, default=str)


_SURROGATES = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """`text` with every lone surrogate (which no terminal encoding can write, and LangChain4j
    can store) shown as the replacement character U+FFFD."""
    return _SURROGATES.sub("\ufffd", text)


def contents_text(contents: Sequence[Content], separator: str = " ") -> str:
    """The contents' text, with `[Image]`, `[Audio]`... in place of what is not text."""
    return separator.join(
        c.text if isinstance(c, TextContent) else f"[{type(c).__name__.removesuffix('Content')}]"
        for c in contents
    )


@dataclass(frozen=True)
class Row:
    """One line of a message table; the columns whose values are all None are left out."""

    message: ChatMessage
    seq: int | None = None
    created_at: datetime | None = None
    tokens: int | None = None
    in_window: bool | None = None
    mark: str | None = None


def message_table(rows: Sequence[Row], *, title: str | None = None, full: bool = False) -> Table:
    """A table of messages, one line each (long text is cut with an ellipsis), or with each
    message whole (`full`: its lines kept, wrapped to the terminal)."""
    table = Table(title=title, title_justify="left", box=None, pad_edge=False, show_edge=False)
    has = {
        name: any(getattr(r, name) is not None for r in rows)
        for name in ("mark", "seq", "created_at", "tokens", "in_window")
    }
    if has["mark"]:
        table.add_column("", no_wrap=True)
    if has["seq"]:
        table.add_column("seq", justify="right", no_wrap=True)
    if has["created_at"]:
        table.add_column("time", no_wrap=True)
    table.add_column("role", no_wrap=True)
    if has["tokens"]:
        table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("message")  # the one column that gives way when the terminal is narrow
    if has["in_window"]:
        table.add_column("window", justify="center", no_wrap=True)
    for row in rows:
        kind = role(row.message)
        cells: list[Text] = []
        if has["mark"]:
            cells.append(Text(row.mark or "", style="bold"))
        if has["seq"]:
            cells.append(Text("" if row.seq is None else str(row.seq)))
        if has["created_at"]:
            cells.append(Text(format_time(row.created_at), style="dim"))
        cells.append(Text(kind, style=_ROLE_STYLES.get(kind, "")))
        if has["tokens"]:
            cells.append(Text("" if row.tokens is None else str(row.tokens)))
        cells.append(_message_cell(row.message, full))
        if has["in_window"]:
            cells.append(Text("●" if row.in_window else "", style="green"))
        table.add_row(*cells, style="dim" if row.in_window is False else None)
    return table


def _message_cell(message: ChatMessage, full: bool) -> Text:
    if full:
        return Text(full_text(message), overflow="fold")
    return Text(summary(message), no_wrap=True, overflow="ellipsis")


def message_lines(rows: Iterable[Row], width: int = 100, *, full: bool = False) -> Iterator[str]:
    """The rows as plain lines, one at a time: for outputs too long to lay out as one table
    (a table measures every row before printing the first). Text longer than `width` is cut
    unless `full`, which keeps it whole (and its lines)."""
    for row in rows:
        seq = "" if row.seq is None else str(row.seq)
        when = format_time(row.created_at) if row.created_at is not None else ""
        mark = " ●" if row.in_window else ""
        text = full_text(row.message) if full else summary(row.message)
        head = (
            f"{seq:>7}  {when}  {role(row.message):<6}  "
            if when
            else f"{seq:>7}  {role(row.message):<6}  "
        )
        room = max(20, width - len(head) - len(mark))
        yield head + (text if full or len(text) <= room else text[: room - 1] + "…") + mark


def format_time(when: datetime | None) -> str:
    """`when` in local time, to the second ("" for None)."""
    return "" if when is None else when.astimezone().strftime("%Y-%m-%d %H:%M:%S")
