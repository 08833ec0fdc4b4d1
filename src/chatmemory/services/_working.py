"""Working memory in a service call: the I/O of reading one call's record (the turn places its
block at the end of the request's first system message before each model call, so an update
the model made earlier in the turn is seen at once). The block is never stored: the memory
keeps the system message the application wrote, so a record that changes does not make the
window place a changed system message at its end, turn after turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._threads import in_thread
from ..working import WorkingMemory

__all__ = ["WorkingStep"]


@dataclass(frozen=True, slots=True)
class WorkingStep:
    """The working memory of one call: whose record (`key`) and where it is kept."""

    memory: WorkingMemory[Any]
    key: str

    def block(self) -> str:
        return self.memory.instructions(self.key)

    async def ablock(self) -> str:
        return await in_thread(self.block)
