"""The seed contract (get / update / delete) on top of the incremental capability, once.

A built-in store implements `load_window`, `commit_window` and `delete_messages`; these mixins
give it `get_messages` and `update_messages`. `update_messages` keeps the rows of the current
window that the new list still holds (in order) and appends the rest, so a caller of the seed
contract (LangChain4j-style code writing the whole window each time) does not duplicate history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from .._errors import ConcurrentUpdateError
from .._eviction import plan_replace
from .._flow import Call, Flow, Sleep, arun, backoff, run
from .._messages import ChatMessage, check_messages
from ._protocol import NewMessage, WindowSnapshot

__all__ = ["AsyncSeedContract", "SeedContract", "replace_flow"]

S = TypeVar("S", bound="SeedContract")
A = TypeVar("A", bound="AsyncSeedContract")


def replace_flow(store: object, memory_id: str, messages: Sequence[ChatMessage]) -> Flow[None]:
    """Make `messages` the window of `memory_id`, in one versioned commit (retried on conflict)."""
    wanted = check_messages(messages, "update_messages()")
    delays = backoff()
    while True:
        snapshot: WindowSnapshot = yield Call("load_window", (memory_id,))
        reused = plan_replace(snapshot.rows, wanted)
        kept = {row.seq for row in reused if row is not None}
        append = [NewMessage(m) for m, row in zip(wanted, reused, strict=True) if row is None]
        evict = [row.seq for row in snapshot.rows if row.seq not in kept]
        if not append and not evict:
            return
        committed = yield Call(
            "commit_window",
            (memory_id,),
            {"version": snapshot.version, "append": append, "evict": evict},
        )
        if committed:
            return
        delay = next(delays, None)
        if delay is None:
            raise ConcurrentUpdateError(
                "other writers changed this memory on every attempt; nothing was written",
                store=store,
                memory_id=memory_id,
            )
        yield Sleep(delay)


class SeedContract:
    """`get_messages` / `update_messages` and the context-manager protocol for a sync store."""

    if TYPE_CHECKING:  # provided by the store

        def load_window(self, memory_id: str) -> WindowSnapshot: ...

        def close(self) -> None: ...

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        return [row.message for row in self.load_window(memory_id).rows]

    def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        run(replace_flow(self, memory_id, messages), self)


class AsyncSeedContract:
    """`get_messages` / `update_messages` and `async with` for an asyncio store."""

    if TYPE_CHECKING:  # provided by the store

        async def load_window(self, memory_id: str) -> WindowSnapshot: ...

        async def aclose(self) -> None: ...

    async def __aenter__(self: A) -> A:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        return [row.message for row in (await self.load_window(memory_id)).rows]

    async def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        await arun(replace_flow(self, memory_id, messages), self)
