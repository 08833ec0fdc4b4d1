"""Finding the answer in what a model wrote: JSON inside prose or a code fence, a bare value
dressed in quotes or punctuation, one item per line."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

__all__ = ["bare", "bare_fence", "json_candidates", "line_items"]

_FENCE = re.compile(r"```[ \t]*[\w+-]*[ \t]*\r?\n?(.*?)```", re.S)
_OBJECT = re.compile(r'\{(?=\s*["}])')
"""Where a JSON object may start: a brace before a key or a closing brace (not ``{name}``)."""
_ANY = re.compile(r'\{(?=\s*["}])|\[(?=\s*[-"{\[\]\dtfn])')
"""Where a JSON object or array may start."""
_DECODER = json.JSONDecoder()
_DRESS = "\"'`[]*. \t\r\n!,;"
_MARKER = re.compile(r"^(?:[-*•]|\d+[.)])\s+")


def json_candidates(text: str, *, arrays: bool) -> Iterator[str]:
    """The pieces of `text` that may hold the answer, in order: the inside of the first code
    fence, then each JSON object (and array, with `arrays`) found in the text, nested ones too,
    outer first. The search stops at JSON nested deeper than the parser goes: each bracket
    inside it would start another candidate just as deep."""
    fence = _FENCE.search(text)
    if fence is not None:
        yield fence.group(1).strip()
    for start in (_ANY if arrays else _OBJECT).finditer(text):
        try:
            _, end = _DECODER.raw_decode(text, start.start())
        except ValueError:
            continue
        except RecursionError:
            return
        yield text[start.start() : end]


def bare_fence(text: str) -> str:
    """The inside of the first code fence, or the whole text without one."""
    fence = _FENCE.search(text)
    return fence.group(1) if fence is not None else text


def bare(text: str) -> str:
    """A one-value answer without its dressing: code fences, surrounding quotes or brackets,
    emphasis and closing punctuation (``'"POSITIVE".'`` and ``["POSITIVE"]`` are
    ``POSITIVE``)."""
    value = bare_fence(text)
    while True:
        stripped = value.strip(_DRESS)
        if stripped == value:
            return value
        value = stripped


def line_items(text: str) -> list[str]:
    """One item per non-blank line, trimmed; list markers (``- ``, ``* ``, ``1. ``) are removed
    when every line has one."""
    body = bare_fence(text)
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    if lines and all(_MARKER.match(line) for line in lines):
        lines = [_MARKER.sub("", line, count=1) for line in lines]
    return lines
