"""`ScriptedModerationModel`: a moderation model for tests, flagging what a rule says."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from .._errors import ConfigurationError
from .._messages import ChatMessage
from ..models._moderation import Moderation, moderation_texts

__all__ = ["ScriptedModerationModel"]


class ScriptedModerationModel:
    """A moderation model that flags by a rule: no network, no key.

    ``ScriptedModerationModel(flag=["bomb", "poison"])`` flags the first text containing one of
    the words (case-insensitive); ``ScriptedModerationModel(flag=lambda text: ...)`` flags the
    first text for which the function is true. Every call's texts are kept in `asked`, in
    order. `moderate` and `amoderate` both work; `categories` go into each verdict.
    """

    def __init__(
        self,
        flag: Iterable[str] | Callable[[str], bool] = (),
        *,
        categories: Sequence[str] = ("scripted",),
    ) -> None:
        if isinstance(flag, str):
            raise ConfigurationError(
                f"`flag` is a list of words or a function of a text, got the str {flag!r}: "
                f"write flag=[{flag!r}]"
            )
        if callable(flag):
            self._rule = flag
        else:
            words = [word.casefold() for word in flag]
            self._rule = lambda text: any(word in text.casefold() for word in words)
        self.categories = tuple(categories)
        self.asked: list[list[str]] = []

    def __repr__(self) -> str:
        return "ScriptedModerationModel()"

    def moderate(self, messages: str | Sequence[ChatMessage], /) -> Moderation:
        """The verdict on `messages` (a text, or chat messages)."""
        texts = moderation_texts(messages)
        self.asked.append(texts)
        flagged = next((text for text in texts if self._rule(text)), None)
        if flagged is None:
            return Moderation.not_flagged()
        return Moderation(flagged, self.categories, dict.fromkeys(self.categories, 1.0))

    async def amoderate(self, messages: str | Sequence[ChatMessage], /) -> Moderation:
        """The same verdict, awaitable."""
        return self.moderate(messages)
