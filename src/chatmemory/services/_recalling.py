"""Semantic recall in a service call: once per turn, what the history recalls for the user's
text goes at the end of the system message of every model call, and after the turn is stored
its new messages are indexed."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._messages import ChatMessage
from ..recall import RecalledMessages, SemanticRecall, with_recall

__all__ = ["RecallStep"]


@dataclass
class RecallStep:
    recall: SemanticRecall
    memory_id: str
    user_id: str | None
    query: str
    _found: list[RecalledMessages] | None = field(default=None)

    def window(self, memory: Any, window: Sequence[ChatMessage]) -> list[ChatMessage]:
        if self._found is None:
            self._found = self.recall.recall(
                memory.store, self.memory_id, self.query, user_id=self.user_id
            )
        return self._placed(memory, window, self._found)

    async def awindow(self, memory: Any, window: Sequence[ChatMessage]) -> list[ChatMessage]:
        if self._found is None:
            self._found = await self.recall.arecall(
                memory.store, self.memory_id, self.query, user_id=self.user_id
            )
        return self._placed(memory, window, self._found)

    def _placed(
        self, memory: Any, window: Sequence[ChatMessage], found: list[RecalledMessages]
    ) -> list[ChatMessage]:
        """The window with the block; the window gives up its oldest messages for it, and when
        even that is not enough, the weakest recalled runs go."""
        fits = getattr(memory, "fits", None)
        for count in range(len(found), 0, -1):
            placed = with_recall(list(window), self.recall.block(found[:count]), fits=fits)
            if fits is None or fits(placed):
                return placed
        return list(window)

    def index(self, memory: Any) -> None:
        self.recall.index(memory.store, self.memory_id, user_id=self.user_id)

    async def aindex(self, memory: Any, memory_is_async: bool) -> None:
        if memory_is_async:
            await self.recall.aindex(memory.store, self.memory_id, user_id=self.user_id)
        else:
            await asyncio.to_thread(self.index, memory)
