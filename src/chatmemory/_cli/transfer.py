"""The files `history export` writes and `history import` reads.

* JSON: LangChain4j's array of messages (what `ChatMessageSerializer.messagesToJson` writes and
  `messagesFromJson` reads). It holds no memory id and no window membership.
* JSON lines: one object per message, ``{"memory_id", "seq", "created_at", "in_window",
  "message"}`` with the message in LangChain4j's JSON. On import, `seq` and `created_at` are
  informative only (the store numbers and dates the rows it appends); a line may also be a bare
  LangChain4j message object, which joins the window.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .._codec.langchain4j import message_from_dict, message_to_json, messages_from_json
from .._contracts import HistoryEntry, NewMessage
from .._errors import SerializationError
from .base import InputError

__all__ = ["export_jsonl", "parse_import"]


def export_jsonl(memory_id: str, entries: Sequence[HistoryEntry]) -> str:
    """The history as JSON lines, the message of each written by the LangChain4j codec."""
    lines = []
    for entry in entries:
        head = json.dumps(
            {
                "memory_id": memory_id,
                "seq": entry.seq,
                "created_at": entry.created_at.isoformat(),
                "in_window": entry.in_window,
            },
            ensure_ascii=False,
        )
        lines.append(f'{head[:-1]}, "message": {message_to_json(entry.message)}}}\n')
    return "".join(lines)


def parse_import(text: str, *, source: str, memory_id: str | None) -> dict[str, list[NewMessage]]:
    """The messages to append, by memory id, from a JSON array or JSON lines.

    Raises `InputError` (exit code 2) saying where the input is wrong; nothing is read from a
    store or written before the whole input has been checked.
    """
    if not text.strip():
        raise InputError(f"{source} is empty: nothing to import")
    if text.lstrip().startswith("["):
        if memory_id is None:
            raise InputError(
                f"{source} holds a JSON array of messages, which names no memory id: pass --id"
            )
        try:
            messages = messages_from_json(text)
        except SerializationError as error:
            raise InputError(f"{source}: {error}") from None
        batches = {memory_id: [NewMessage(m) for m in messages]} if messages else {}
    else:
        batches = {}
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                target, new = _record(line, memory_id, f"{source}, line {number}")
                batches.setdefault(target, []).append(new)
    if not batches:
        raise InputError(f"{source} holds no messages: nothing to import")
    return batches


def _record(line: str, memory_id: str | None, where: str) -> tuple[str, NewMessage]:
    try:
        record: Any = json.loads(line)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}: not JSON ({error.msg} at column {error.colno})") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply to read") from None
    if not isinstance(record, dict):
        raise InputError(
            f"{where}: expected a JSON object (a record of `history export --format jsonl` or a "
            f"LangChain4j message), got {type(record).__name__}"
        )
    in_window = record.get("in_window", True)
    if not isinstance(in_window, bool):
        raise InputError(f"{where}: `in_window` must be true or false, got {in_window!r}")
    target = memory_id if memory_id is not None else record.get("memory_id")
    if not isinstance(target, str) or not target:
        raise InputError(f"{where}: the record names no memory id; pass --id")
    try:
        message = message_from_dict(record.get("message", record))
    except SerializationError as error:
        raise InputError(f"{where}: {error}") from None
    return target, NewMessage(message, in_window=in_window)
