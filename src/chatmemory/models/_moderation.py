"""Moderation: the verdict a moderation model gives on the input of a service call, and the
protocols the services call (`@moderate` methods).

A verdict names the first text that was flagged, so `ModerationError` can say which; the
categories and scores are the provider's, for logs and for applications that decide by them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from .._errors import ConfigurationError
from .._messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    TextContent,
    UserMessage,
    check_messages,
)

__all__ = [
    "AsyncModerationModel",
    "Moderation",
    "ModerationModel",
    "moderation_texts",
]


@dataclass(frozen=True, slots=True)
class Moderation:
    """A moderation model's verdict.

    `flagged_text` is the first text the model flagged (None when nothing was); `categories`
    are the names of the categories that text violates (sorted), `scores` the provider's score
    of every category for it (empty when the provider gives none).
    """

    flagged_text: str | None = None
    categories: Sequence[str] = ()
    scores: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.flagged_text is not None and not isinstance(self.flagged_text, str):
            raise ConfigurationError(
                f"`flagged_text` is the flagged text or None, got {self.flagged_text!r}"
            )
        object.__setattr__(self, "categories", tuple(self.categories))
        object.__setattr__(self, "scores", MappingProxyType(dict(self.scores)))

    @property
    def flagged(self) -> bool:
        """Whether any text was flagged."""
        return self.flagged_text is not None

    @classmethod
    def not_flagged(cls) -> Moderation:
        """The verdict on input that violates nothing."""
        return cls()


@runtime_checkable
class ModerationModel(Protocol):
    """Judges texts against a content policy, blocking."""

    def moderate(self, messages: str | Sequence[ChatMessage], /) -> Moderation: ...


@runtime_checkable
class AsyncModerationModel(Protocol):
    """Judges texts against a content policy, without blocking the event loop."""

    async def amoderate(self, messages: str | Sequence[ChatMessage], /) -> Moderation: ...


def moderation_texts(messages: str | Sequence[ChatMessage] | Iterable[ChatMessage]) -> list[str]:
    """The texts a moderation model judges: a str as is; of messages, the text of each system,
    user and AI message (tool calls and tool results are not moderated), in order, empty texts
    left out."""
    if isinstance(messages, str):
        return [messages] if messages else []
    texts: list[str] = []
    for message in check_messages(messages, "moderate"):
        if isinstance(message, SystemMessage):
            text = message.text
        elif isinstance(message, UserMessage):
            text = "\n".join(c.text for c in message.contents if isinstance(c, TextContent))
        elif isinstance(message, AiMessage):
            text = message.text or ""
        else:
            continue
        if text:
            texts.append(text)
    return texts
