"""What recall puts before the model: the recalled runs as one delimited block (who said what,
and on which day)."""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import AiMessage, ChatMessage
from .._tokens import TokenCountEstimator
from ._index import speaker, text_of
from ._search import RecalledMessages


def block(recalled: Sequence[RecalledMessages], limit: int, estimator: TokenCountEstimator) -> str:
    """The recalled messages as one delimited block of at most `limit` tokens, the best matches
    first; "" when nothing fits."""
    parts: list[str] = []
    for found in recalled:
        when = f", {found.date}" if found.date else ""
        lines = [f"[from conversation {found.memory_id}, message {found.seqs[0]}{when}]"]
        lines.extend(_line(m) for m in found.messages)
        candidate = "\n".join(lines)
        if estimator.count_text(_framed([*parts, candidate])) > limit:
            continue
        parts.append(candidate)
    return _framed(parts) if parts else ""


def _line(message: ChatMessage) -> str:
    text = text_of(message)
    if text is None and isinstance(message, AiMessage):
        text = ", ".join(f"called {r.name}({r.arguments})" for r in message.tool_execution_requests)
    if text is None:
        text = " ".join(getattr(c, "text", "") for c in getattr(message, "contents", ()))
    return f"{speaker(message)}: {text}"


def _framed(parts: Sequence[str]) -> str:
    return (
        "<recalled>\nEarlier messages that may be relevant (recalled from the history, not part "
        "of the current exchange):\n\n" + "\n\n".join(parts) + "\n</recalled>"
    )
