"""Stored messages written out whole, for reading (Markdown) or for programs (JSON), and
searched: what `history show --format` and `history search` print."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from rich.text import Text

from .._codec.langchain4j import message_to_dict
from .._contracts import HistoryEntry
from .render import format_time, full_text, printable, role

__all__ = ["Hit", "find", "json_records", "markdown_lines", "snippet", "terms_of"]


def markdown_lines(
    memory_id: str, entries: Iterable[HistoryEntry], *, marked: bool
) -> Iterator[str]:
    """The conversation as Markdown: a heading per message (its number, role and time, and
    whether it is in the window when `marked`), then its text whole."""
    yield f"# {printable(memory_id)}"
    for entry in entries:
        window = " · in the window" if marked and entry.in_window else ""
        yield f"\n## {entry.seq}. {role(entry.message)} · {format_time(entry.created_at)}{window}\n"
        yield full_text(entry.message)


def json_records(entries: Iterable[tuple[str, HistoryEntry]]) -> str:
    """The messages (with their memory ids) as a JSON array: memory_id, seq, created_at,
    in_window, role, text (as the table shows it, whole) and message (LangChain4j's JSON)."""
    records = [
        {
            "memory_id": memory_id,
            "seq": entry.seq,
            "created_at": entry.created_at.isoformat(),
            "in_window": entry.in_window,
            "role": role(entry.message),
            "text": full_text(entry.message),
            "message": message_to_dict(entry.message),
        }
        for memory_id, entry in entries
    ]
    return printable(json.dumps(records, ensure_ascii=False, indent=2))


@dataclass(frozen=True)
class Hit:
    """A stored message that matches a search, and the conversation it is in."""

    memory_id: str
    entry: HistoryEntry


_TERMS = re.compile(r'"([^"]+)"|(\S+)')


def terms_of(query: str) -> list[str]:
    """The words of `query`, and its "quoted phrases" as one term each."""
    return [phrase or word for phrase, word in _TERMS.findall(query) if (phrase or word).strip()]


def find(
    histories: Iterable[tuple[str, Sequence[HistoryEntry]]], terms: Sequence[str]
) -> list[Hit]:
    """The messages holding every term (any case) in the text `history show --full` prints,
    newest first."""
    patterns = [re.compile(re.escape(term), re.IGNORECASE) for term in terms]
    hits = [
        Hit(memory_id, entry)
        for memory_id, entries in histories
        for entry in entries
        if all(p.search(full_text(entry.message)) for p in patterns)
    ]
    return sorted(hits, key=lambda hit: hit.entry.created_at, reverse=True)


def snippet(text: str, terms: Sequence[str], width: int) -> Text:
    """One line of `text` around its first term, at most `width` characters (… where cut),
    the terms in bold."""
    line = " ".join(text.split())
    first = min(
        (m.start() for term in terms if (m := re.search(re.escape(term), line, re.IGNORECASE))),
        default=0,
    )
    start = max(0, min(first - width // 3, len(line) - width))
    cut = line[start : start + width]
    if start > 0:
        cut = "…" + cut[1:]
    if start + width < len(line):
        cut = cut[:-1] + "…"
    shown = Text(cut)
    shown.highlight_words(terms, style="bold", case_sensitive=False)
    return shown
