"""Working memory in a service call: before each model call of a turn the record is read and its
block goes at the end of the request's first system message (or first, as a system message of
its own), so an update the model made earlier in the turn is seen at once. The block is never
stored: the memory keeps the system message the application wrote, so a record that changes does
not make the window place a changed system message at its end, turn after turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._messages import ChatMessage
from .._policies.blocks import with_block
from ..working import WorkingMemory

__all__ = ["WorkingStep", "with_working_memory"]


@dataclass(frozen=True, slots=True)
class WorkingStep:
    """The working memory of one call: whose record (`key`) and where it is kept."""

    memory: WorkingMemory[Any]
    key: str

    def window(self, window: Sequence[ChatMessage], memory: object) -> list[ChatMessage]:
        return with_working_memory(window, self.memory.instructions(self.key), _fits(memory))

    async def awindow(self, window: Sequence[ChatMessage], memory: object) -> list[ChatMessage]:
        block = await asyncio.to_thread(self.memory.instructions, self.key)
        return with_working_memory(window, block, _fits(memory))


def _fits(memory: object) -> Callable[[list[ChatMessage]], bool] | None:
    return getattr(memory, "fits", None)


def with_working_memory(
    window: Sequence[ChatMessage],
    block: str,
    fits: Callable[[list[ChatMessage]], bool] | None = None,
) -> list[ChatMessage]:
    """`window` with `block` at the end of its first system message, where that message is (the
    window's rule for system messages stays as it is), or as a system message first when there
    is none; the oldest other messages (whole tool groups, never the last) make room while `fits`
    says the request is too large."""
    return with_block(window, block, fits)
