"""The memories of a service: one per memory id, made on first use, a bounded number cached, and
one turn at a time per id in this process."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TypeAlias

from .._errors import ConfigurationError
from .._memory.window import AsyncChatMemory, ChatMemory

__all__ = ["AnyMemory", "ChatMemoryProvider", "Memories", "is_async_memory"]

AnyMemory: TypeAlias = ChatMemory | AsyncChatMemory
ChatMemoryProvider: TypeAlias = Callable[[str], AnyMemory]
"""Makes the memory of one memory id: ``lambda memory_id: TokenWindowChatMemory(id=memory_id,
...)``. It may return a sync or an async memory; a service calls it once per id."""


def is_async_memory(memory: AnyMemory) -> bool:
    return inspect.iscoroutinefunction(getattr(memory, "add", None))


class _Slot:
    """The turn lock of one memory id, alive while some call holds or waits for it."""

    __slots__ = ("async_locks", "lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.async_locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}


class Memories:
    """One memory per id for a service.

    With a `provider`, the memory of an id is made on its first call (the provider runs once per
    id, also when first calls race: it runs under that id's turn lock) and at most `limit` are
    kept, least recently used dropped first; dropping one forgets the object, not the stored
    messages. With a single shared `memory`, every call uses it.
    """

    def __init__(
        self,
        *,
        memory: AnyMemory | None,
        provider: ChatMemoryProvider | None,
        limit: int,
    ) -> None:
        self.shared = memory
        self.provider = provider
        self.limit = limit
        self._cache: OrderedDict[str, AnyMemory] = OrderedDict()
        self._guard = threading.Lock()
        self._slots: dict[str, _Slot] = {}

    @property
    def configured(self) -> bool:
        return self.shared is not None or self.provider is not None

    def get(self, memory_id: str) -> AnyMemory | None:
        """The memory of `memory_id` (made by the provider if need be); call under `hold`."""
        if self.shared is not None or self.provider is None:
            return self.shared
        with self._guard:
            memory = self._cache.get(memory_id)
            if memory is not None:
                self._cache.move_to_end(memory_id)
                return memory
        memory = self.provider(memory_id)
        _check(memory, memory_id)
        with self._guard:
            self._cache[memory_id] = memory
            while len(self._cache) > self.limit:
                self._cache.popitem(last=False)
        return memory

    def evict(self, memory_id: str) -> bool:
        """Forget the cached memory object of `memory_id`; True if there was one."""
        with self._guard:
            return self._cache.pop(memory_id, None) is not None

    # -- one turn at a time per id ---------------------------------------------------------

    def _enter(self, memory_id: str) -> _Slot:
        with self._guard:
            slot = self._slots.get(memory_id)
            if slot is None:
                slot = self._slots[memory_id] = _Slot()
            slot.users += 1
            return slot

    def _leave(self, memory_id: str, slot: _Slot) -> None:
        with self._guard:
            slot.users -= 1
            if slot.users == 0:
                del self._slots[memory_id]

    @contextmanager
    def hold(self, memory_id: str) -> Iterator[None]:
        """Run a turn of `memory_id`: other turns of the id in this process wait."""
        slot = self._enter(memory_id)
        try:
            with slot.lock:
                yield
        finally:
            self._leave(memory_id, slot)

    @asynccontextmanager
    async def ahold(self, memory_id: str) -> AsyncIterator[None]:
        """`hold` for asyncio: tasks queue on an asyncio lock, so at most one thread per event
        loop waits for the id's lock (which a sync call may hold)."""
        slot = self._enter(memory_id)
        try:
            loop = asyncio.get_running_loop()
            with self._guard:
                queue = slot.async_locks.setdefault(loop, asyncio.Lock())
            async with queue:
                if not slot.lock.acquire(blocking=False):
                    await _acquire_in_thread(slot.lock, loop)
                try:
                    yield
                finally:
                    slot.lock.release()
        finally:
            self._leave(memory_id, slot)


async def _acquire_in_thread(lock: threading.Lock, loop: asyncio.AbstractEventLoop) -> None:
    future = loop.run_in_executor(None, lock.acquire)
    try:
        await asyncio.shield(future)
    except asyncio.CancelledError:
        # the thread still takes the lock; give it back as soon as it has
        future.add_done_callback(lambda _: lock.release())
        raise


def _check(memory: object, memory_id: str) -> None:
    if not isinstance(memory, (ChatMemory, AsyncChatMemory)):
        raise ConfigurationError(
            f"chat_memory_provider returned {memory!r} for memory id {memory_id!r}: it must "
            f"return a chat memory (e.g. TokenWindowChatMemory(id=memory_id, ...))"
        )
    if memory.id != memory_id:
        raise ConfigurationError(
            f"chat_memory_provider returned a memory with id {memory.id!r} for memory id "
            f"{memory_id!r}, so that user's messages would be stored under another id: pass "
            f"id=memory_id to the memory it makes"
        )
