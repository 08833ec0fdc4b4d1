"""One declaration with a method per way of calling a service (sync, async, a text stream, an
async text stream), and `ask`, which calls it one way: for tests that check a behaviour on
every path."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any, Protocol

from chatmemory.services import MemoryId

MODES = ("sync", "async", "stream", "astream")


class EveryWay(Protocol):
    def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    async def achat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    def stream(self, user: Annotated[str, MemoryId], text: str) -> Iterator[str]: ...

    def astream(self, user: Annotated[str, MemoryId], text: str) -> AsyncIterator[str]: ...


def ask(service: Any, mode: str, text: str) -> str:
    """The answer to `text` for memory id "u", called as `mode` says (streams joined)."""
    if mode == "sync":
        return str(service.chat("u", text))
    if mode == "async":
        return str(asyncio.run(service.achat("u", text)))
    if mode == "stream":
        return "".join(service.stream("u", text))

    async def collect() -> str:
        return "".join([piece async for piece in service.astream("u", text)])

    return asyncio.run(collect())
