"""Which messages a summarizing memory folds into its running summary (pure).

The window is read as: the system message, the running summary (one message marked as such),
and the rest in order. When the rest and the messages being added do not fit the budget with
room for the summary, the oldest units of the rest (a tool call with all its results is one
unit) are folded, never the `keep_last` newest messages, until they do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .._messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolExecutionResultMessage,
    UserMessage,
)
from .tool_groups import atomic_units

__all__ = ["SUMMARY_ATTRIBUTE", "Fold", "is_summary", "plan_fold", "summary_message", "transcript"]

SUMMARY_ATTRIBUTE = "chatmemory_summary"
"""The attribute that marks the running summary (stored with the message, so a restart knows it)."""
SUMMARY_HEADER = "Summary of the earlier conversation:\n"


def is_summary(message: ChatMessage) -> bool:
    return isinstance(message, UserMessage) and message.attributes.get(SUMMARY_ATTRIBUTE) is True


def summary_message(text: str) -> UserMessage:
    return UserMessage(SUMMARY_HEADER + text.strip(), attributes={SUMMARY_ATTRIBUTE: True})


def summary_text(message: ChatMessage | None) -> str:
    if message is None or not isinstance(message, UserMessage):
        return ""
    return message.text.removeprefix(SUMMARY_HEADER)


@dataclass(frozen=True, slots=True)
class Fold:
    system: SystemMessage | None
    summary: ChatMessage | None
    folded: list[ChatMessage]
    """The messages to fold into the summary, oldest first."""
    kept: list[ChatMessage]
    """The messages that stay after the summary, in order (the added ones among them)."""


def split(
    window: Sequence[ChatMessage],
) -> tuple[SystemMessage | None, ChatMessage | None, list[ChatMessage]]:
    """The window as system message, summary and the rest."""
    system = next((m for m in window if isinstance(m, SystemMessage)), None)
    summary = next((m for m in window if is_summary(m)), None)
    rest = [m for m in window if m is not system and m is not summary]
    return system, summary, rest


def ordered(window: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The window as the model sees it: system message, summary, then the rest in order."""
    system, summary, rest = split(window)
    return [m for m in (system, summary) if m is not None] + rest


def plan_fold(
    window: Sequence[ChatMessage],
    added: Sequence[ChatMessage],
    *,
    count: Callable[[Sequence[ChatMessage]], int],
    capacity: int,
    keep_last: int,
    reserve: int,
) -> Fold | None:
    """What to fold so that the window with `added` fits `capacity` with `reserve` tokens for the
    summary; None when it fits already (or nothing may be folded)."""
    system, summary, rest = split(window)
    for message in added:
        if isinstance(message, SystemMessage):
            system = message
        else:
            rest.append(message)
    head = [m for m in (system, summary) if m is not None]
    if count([*head, *rest]) <= capacity:
        return None
    units = atomic_units(rest)
    protected = max(0, len(rest) - keep_last)
    base = [m for m in (system,) if m is not None]
    folded_upto = 0
    for unit in units:
        if unit[-1] >= protected:
            break  # a unit holding one of the keep_last newest messages stays
        if count([*base, *rest[folded_upto:]]) + reserve <= capacity:
            break
        folded_upto = unit[-1] + 1
    if folded_upto == 0:
        return None
    return Fold(system, summary, rest[:folded_upto], rest[folded_upto:])


def transcript(messages: Sequence[ChatMessage]) -> str:
    """The messages as lines the summarizing model reads."""
    lines = []
    for message in messages:
        if isinstance(message, UserMessage):
            lines.append(f"user: {_text(message)}")
        elif isinstance(message, AiMessage):
            if message.text:
                lines.append(f"assistant: {message.text}")
            for request in message.tool_execution_requests:
                lines.append(f"assistant called {request.name}({request.arguments})")
        elif isinstance(message, ToolExecutionResultMessage):
            lines.append(f"tool {message.tool_name or ''} returned: {_text(message)}")
        else:
            lines.append(f"{type(message).__name__}: {getattr(message, 'text', '')}")
    return "\n".join(lines)


def _text(message: UserMessage | ToolExecutionResultMessage) -> str:
    return " ".join(getattr(c, "text", f"[{type(c).__name__}]") for c in message.contents)
