"""Semantic recall in a service call: the I/O of one call's recall (the turn places what is
found, `_turn._with_recalled`): what the history recalls for the user's text, once per turn,
and after the turn is stored, its new messages indexed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._threads import in_thread
from ..recall import RecalledMessages, SemanticRecall

__all__ = ["RecallStep"]


@dataclass(frozen=True, slots=True)
class RecallStep:
    recall: SemanticRecall
    store: Any
    """The store of the call's memory (its history is searched and indexed)."""
    store_is_async: bool
    memory_id: str
    user_id: str | None
    query: str

    def found(self) -> list[RecalledMessages]:
        return self.recall.recall(self.store, self.memory_id, self.query, user_id=self.user_id)

    async def afound(self) -> list[RecalledMessages]:
        return await self.recall.arecall(
            self.store, self.memory_id, self.query, user_id=self.user_id
        )

    def index(self) -> None:
        if self.recall.index_in_background:
            self.recall.index_later(self.store, self.memory_id, user_id=self.user_id)
        else:
            self.recall.index(self.store, self.memory_id, user_id=self.user_id)

    async def aindex(self) -> None:
        if self.store_is_async:  # (its connections belong to this loop: indexed here)
            await self.recall.aindex(self.store, self.memory_id, user_id=self.user_id)
        elif self.recall.index_in_background:
            self.index()  # (returns at once)
        else:
            await in_thread(self.index)
