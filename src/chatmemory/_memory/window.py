"""The window memories: message-count and token windows, sync and async.

Each is a thin shell: it normalizes arguments, serializes its own operations with a lock, and
drives the flows of `MemoryCore` against its store. The budget is all that tells the message
window from the token window.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from .._contracts import AsyncChatMemoryStore, AsyncWindowStore, ChatMemoryStore, WindowStore
from .._errors import ConfigurationError
from .._flow import arun, run
from .._messages import MESSAGE_TYPES, ChatMessage, check_messages
from .._threads import in_thread
from .._tokens.estimator import TokenCountEstimator
from ..stores.in_memory import AsyncInMemoryChatMemoryStore, SingleMemoryStore
from .budget import Budget, Limit, MessageBudget, TokenBudget
from .core import MemoryCore

__all__ = [
    "AsyncChatMemory",
    "AsyncMessageWindowChatMemory",
    "AsyncTokenWindowChatMemory",
    "ChatMemory",
    "MessageWindowChatMemory",
    "TokenWindowChatMemory",
]

Messages = ChatMessage | Iterable[ChatMessage]
StoreLike = ChatMemoryStore | WindowStore
"""A store a sync memory accepts: the basic whole-list contract, or the window contract."""
AsyncStoreLike = AsyncChatMemoryStore | AsyncWindowStore


@runtime_checkable
class ChatMemory(Protocol):
    """The messages to send to the model for one conversation (its window, not its history)."""

    @property
    def id(self) -> str: ...

    def add(self, *messages: Messages) -> None:
        """Add messages (one, several, or an iterable), evicting what no longer fits."""
        ...

    def messages(self) -> list[ChatMessage]:
        """The window under the current limit, as a new list the caller may change."""
        ...

    def set(self, *messages: Messages) -> None:
        """Replace the window with `messages` (after eviction) in one write."""
        ...

    def clear(self) -> None:
        """Delete everything stored for this memory id."""
        ...


@runtime_checkable
class AsyncChatMemory(Protocol):
    """`ChatMemory` for asyncio."""

    @property
    def id(self) -> str: ...

    async def add(self, *messages: Messages) -> None: ...

    async def messages(self) -> list[ChatMessage]: ...

    async def set(self, *messages: Messages) -> None: ...

    async def clear(self) -> None: ...


def _flatten(messages: tuple[Messages, ...]) -> list[ChatMessage]:
    """`add(m1, m2)` and `add([m1, m2])` alike: the messages, checked, as a new list."""
    if len(messages) == 1 and not isinstance(messages[0], MESSAGE_TYPES):
        return check_messages(messages[0], "the argument")
    return check_messages(messages, "the arguments")


class _Shell:
    _kind: str

    def __init__(
        self,
        budget: Callable[[str], Budget],
        memory_id: str,
        store: StoreLike | AsyncStoreLike,
        system_first: bool,
    ) -> None:
        self._store = store
        self._core = MemoryCore(
            memory_id=memory_id,
            budget=budget(memory_id),
            system_first=system_first,
            store=store,
            windowed=isinstance(store, (WindowStore, AsyncWindowStore)),
        )
        self._limit_repr = ""

    @property
    def id(self) -> str:
        """The memory id: whose conversation this is."""
        return self._core.memory_id

    @property
    def store(self) -> StoreLike | AsyncStoreLike:
        """Where the messages live."""
        return self._store

    def fits(self, messages: Sequence[ChatMessage]) -> bool:
        """Whether `messages`, sent as one request, are within this memory's budget."""
        budget = self._core.budget
        used = budget.overhead + sum(budget.size(m) for m in messages)
        return used <= budget.capacity(self._core.memory_id)

    @property
    def last_evicted(self) -> int:
        """How many messages the last `add` (or `set`) took out of the window, or stored as
        history only (0 before any): what a traced service call counts as
        ``chatmemory.memory.evicted``."""
        return self._core.last_evicted

    @property
    def last_window_tokens(self) -> int | None:
        """The tokens of the window the last `preview` returned, by this memory's estimator
        (the request's overhead included): what a traced service call records as
        ``chatmemory.window.tokens``. None for a memory that counts messages, and before any
        preview."""
        return self._core.last_size if isinstance(self._core.budget, TokenBudget) else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, {self._limit_repr}, store={self._store!r})"


class _SyncShell(_Shell):
    def __init__(
        self,
        budget: Callable[[str], Budget],
        memory_id: str,
        store: StoreLike | None,
        system_first: bool,
    ) -> None:
        if store is None:
            store = SingleMemoryStore(memory_id)
        elif not isinstance(store, (ChatMemoryStore, WindowStore)) or _is_async(store):
            raise ConfigurationError(
                f"`store` must have get_messages, update_messages and delete_messages, or "
                f"load_window, commit_window and delete_messages (sync; use an Async... memory "
                f"for an async store), got {store!r}"
            )
        super().__init__(budget, memory_id, store, system_first)
        self._lock = threading.RLock()

    def add(self, *messages: Messages) -> None:
        batch = _flatten(messages)
        with self._lock:
            run(self._core.add(batch), self._store)

    def messages(self) -> list[ChatMessage]:
        with self._lock:
            return run(self._core.messages(), self._store)

    def preview(self, *messages: Messages, reread: bool = True) -> list[ChatMessage]:
        """The window `add(*messages)` would leave, without writing anything.

        AI services build each model request of a turn with it and add the whole turn in one
        commit when the call completes. With ``reread=False`` the window this memory last read
        is used without asking the store (a later commit checks it anyway).
        """
        batch = _flatten(messages)
        with self._lock:
            return run(self._core.preview(batch, reread=reread), self._store)

    def set(self, *messages: Messages) -> None:
        batch = _flatten(messages)
        with self._lock:
            run(self._core.set(batch), self._store)

    def clear(self) -> None:
        with self._lock:
            run(self._core.clear(), self._store)


class _AsyncShell(_Shell):
    def __init__(
        self,
        budget: Callable[[str], Budget],
        memory_id: str,
        store: AsyncStoreLike | None,
        system_first: bool,
    ) -> None:
        if store is None:
            store = AsyncInMemoryChatMemoryStore(store=SingleMemoryStore(memory_id))
        elif not isinstance(store, (AsyncChatMemoryStore, AsyncWindowStore)) or not _is_async(
            store
        ):
            raise ConfigurationError(
                f"`store` must have async get_messages, update_messages and delete_messages, or "
                f"async load_window, commit_window and delete_messages (use a sync memory for a "
                f"sync store), got {store!r}"
            )
        super().__init__(budget, memory_id, store, system_first)
        self._lock = asyncio.Lock()

    async def add(self, *messages: Messages) -> None:
        batch = _flatten(messages)
        await self._measure_off_the_loop(batch)
        async with self._lock:
            await arun(self._core.add(batch), self._store)

    async def messages(self) -> list[ChatMessage]:
        async with self._lock:
            return await arun(self._core.messages(), self._store)

    async def preview(self, *messages: Messages, reread: bool = True) -> list[ChatMessage]:
        """The window `add(*messages)` would leave, without writing anything (see the sync
        memory's `preview`)."""
        batch = _flatten(messages)
        await self._measure_off_the_loop(batch)
        async with self._lock:
            return await arun(self._core.preview(batch, reread=reread), self._store)

    async def set(self, *messages: Messages) -> None:
        batch = _flatten(messages)
        await self._measure_off_the_loop(batch)
        async with self._lock:
            await arun(self._core.set(batch), self._store)

    async def clear(self) -> None:
        async with self._lock:
            await arun(self._core.clear(), self._store)

    async def _measure_off_the_loop(self, batch: list[ChatMessage]) -> None:
        """Count long messages on a worker thread, so the event loop never waits on tiktoken.

        Counting runs at several MB/s: below `_LONG` characters a message costs less than the
        hop to a thread would. Counts are memoized on the messages, so the flow then finds them.
        """
        long = [m for m in batch if _characters(m) > _LONG]
        if long:
            size = self._core.budget.size
            await in_thread(lambda: [size(m) for m in long])


_LONG = 32_000
"""Characters above which an async memory counts a message on a worker thread (about 5 ms)."""


def _characters(message: ChatMessage) -> int:
    """About how much text counting `message` has to encode."""
    total = len(getattr(message, "text", None) or "") + len(
        getattr(message, "thinking", None) or ""
    )
    for request in getattr(message, "tool_execution_requests", ()):
        total += len(request.arguments)
    return total


def _is_async(store: object) -> bool:
    return inspect.iscoroutinefunction(getattr(store, "delete_messages", None))


def _message_budget(max_messages: Limit) -> Callable[[str], Budget]:
    return lambda memory_id: MessageBudget(max_messages, memory_id)


def _token_budget(max_tokens: Limit, estimator: TokenCountEstimator) -> Callable[[str], Budget]:
    return lambda memory_id: TokenBudget(max_tokens, estimator, memory_id)


class MessageWindowChatMemory(_SyncShell):
    """Keeps the newest `max_messages` messages (the system message counts and always stays).

    `max_messages` may be a function of the memory id, evaluated on every operation.
    """

    def __init__(
        self,
        *,
        max_messages: Limit,
        id: str = "default",
        store: StoreLike | None = None,
        always_keep_system_message_first: bool = False,
    ) -> None:
        super().__init__(_message_budget(max_messages), id, store, always_keep_system_message_first)
        self._limit_repr = f"max_messages={max_messages!r}"


class TokenWindowChatMemory(_SyncShell):
    """Keeps the newest messages whose request costs at most `max_tokens` by `estimator`.

    `max_tokens` may be a function of the memory id, evaluated on every operation.
    """

    def __init__(
        self,
        *,
        max_tokens: Limit,
        estimator: TokenCountEstimator,
        id: str = "default",
        store: StoreLike | None = None,
        always_keep_system_message_first: bool = False,
    ) -> None:
        super().__init__(
            _token_budget(max_tokens, estimator), id, store, always_keep_system_message_first
        )
        self._limit_repr = f"max_tokens={max_tokens!r}"


class AsyncMessageWindowChatMemory(_AsyncShell):
    """`MessageWindowChatMemory` for asyncio: same rules, awaited store calls."""

    def __init__(
        self,
        *,
        max_messages: Limit,
        id: str = "default",
        store: AsyncStoreLike | None = None,
        always_keep_system_message_first: bool = False,
    ) -> None:
        super().__init__(_message_budget(max_messages), id, store, always_keep_system_message_first)
        self._limit_repr = f"max_messages={max_messages!r}"


class AsyncTokenWindowChatMemory(_AsyncShell):
    """`TokenWindowChatMemory` for asyncio: same rules, awaited store calls."""

    def __init__(
        self,
        *,
        max_tokens: Limit,
        estimator: TokenCountEstimator,
        id: str = "default",
        store: AsyncStoreLike | None = None,
        always_keep_system_message_first: bool = False,
    ) -> None:
        super().__init__(
            _token_budget(max_tokens, estimator), id, store, always_keep_system_message_first
        )
        self._limit_repr = f"max_tokens={max_tokens!r}"
