"""pydantic's validation errors said in one sentence: the one formatter of the library (tool
arguments for the model, structured answers for the model and the caller, working-memory
records)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from ._errors import shorten

__all__ = ["explain"]


def explain(
    error: ValidationError,
    *,
    whole: str = "",
    shown: int | None = None,
    quote_input: bool = False,
    cut: bool = False,
    say: Mapping[str, str] | None = None,
) -> str:
    """`error`'s problems as ``where: what`` joined by "; ". `whole` names the value itself
    (a problem at its root has no location; empty: no ``where:``); at most `shown` problems,
    then how many more; `quote_input` adds what was given, shortened; `cut` shortens each
    problem; `say` replaces pydantic's message for an error type."""
    items = error.errors(include_url=False)
    listed = items if shown is None else items[:shown]
    problems = []
    for item in listed:
        where = ".".join(str(part) for part in item["loc"]) or whole
        message = (say or {}).get(item["type"], item["msg"])
        if quote_input and item["type"] != "json_invalid":
            message += f" (got {shorten(repr(item['input']), 60)})"
        problem = f"{where}: {message}" if where else message
        problems.append(shorten(problem) if cut else problem)
    if shown is not None and len(items) > shown:
        problems.append(f"and {len(items) - shown} more")
    return "; ".join(problems)
