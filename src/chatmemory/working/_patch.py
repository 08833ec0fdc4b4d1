"""The two ways working memory changes, both patches (never a silent full replace):
JSON merge-patch (RFC 7386) for structured records, and section replace for Markdown ones.

Pure functions: no store, no model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["headings", "merge_patch", "normalised", "replace_section", "section_title", "sections"]

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def merge_patch(target: Any, patch: Any) -> Any:
    """`target` with `patch` applied as RFC 7386 says: an object patch changes only the keys it
    names (`null` removes one, an object merges into one), anything else replaces."""
    if not isinstance(patch, Mapping):
        return patch
    result = dict(target) if isinstance(target, Mapping) else {}
    for name, value in patch.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = merge_patch(result.get(name), value)
    return result


def sections(text: str) -> dict[str, str]:
    """Each heading's title (lower case) and its own body: the text up to the next heading,
    stripped (a subsection is a section of its own)."""
    found: dict[str, str] = {}
    headings = list(_HEADING.finditer(text))
    for i, heading in enumerate(headings):
        end = headings[i + 1].start() if i + 1 < len(headings) else len(text)
        found.setdefault(heading.group(2).strip().lower(), text[heading.end() : end].strip())
    return found


def headings(text: str) -> list[str]:
    """The Markdown headings in `text`, as written (``## Location``)."""
    return [heading.group(0).strip() for heading in _HEADING.finditer(text)]


def section_title(given: str) -> str:
    """The title a section is named by: `given` stripped, without the ``#`` marks of a heading
    (``"## Goals"`` names Goals); empty when nothing is left."""
    given = given.strip()
    heading = _HEADING.fullmatch(given)
    return heading.group(2).strip() if heading else given.lstrip("#").strip()


def normalised(text: str) -> str:
    """`text` as Markdown reads it, for comparing: runs of whitespace as one space, blank lines
    and the ends of lines dropped, case ignored (``"-  First: "`` is ``"- first:"``)."""
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line).casefold()


def replace_section(text: str, title: str, content: str) -> str:
    """`text` with the own body of the section headed `title` (case-insensitive) replaced by
    `content` (its subsections stay); a section that does not exist is added at the end, one
    level below the highest heading (level 2 when there is none)."""
    wanted = title.strip().lower()
    headings = list(_HEADING.finditer(text))
    body = content.strip()
    for i, heading in enumerate(headings):
        if heading.group(2).strip().lower() != wanted:
            continue
        end = headings[i + 1].start() if i + 1 < len(headings) else len(text)
        tail = text[end:]
        middle = f"\n{body}\n" if body else "\n"
        return text[: heading.end()] + middle + ("\n" + tail if tail else "")
    level = min(min((len(h.group(1)) for h in headings), default=1) + 1, 6)
    added = f"{'#' * level} {title.strip()}\n" + (f"{body}\n" if body else "")
    prefix = text.rstrip()
    return f"{prefix}\n\n{added}" if prefix else added
