"""What a store is.

The floor is the seed contract, `ChatMemoryStore`: read, replace and delete the messages of a
memory id. Any object with those three methods works, like LangChain4j's SPI.

Built-in stores also speak `IncrementalChatMemoryStore`: every message is one row with a
sequence number, kept forever as history; the window is the set of rows not yet evicted; and
each memory id has a version that every commit checks and bumps. Adding a message is then one
appended row plus marks on the rows that leave the window — the same work after 100 messages as
after 100,000 — and two writers never lose each other's messages: the loser re-reads and retries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from .._errors import ConfigurationError
from .._messages import ChatMessage

__all__ = [
    "AsyncChatMemoryStore",
    "AsyncIncrementalChatMemoryStore",
    "ChatMemoryStore",
    "HistoryEntry",
    "IncrementalChatMemoryStore",
    "NewMessage",
    "StoredMessage",
    "WindowSnapshot",
    "check_errors",
    "check_memory_id",
]


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One message of a window, as a store holds it."""

    seq: int
    """Position in the memory's history: 0 for the first message ever added, then 1, 2, ..."""
    message: ChatMessage
    token_count: int | None = None
    """The message's token count, if one was stored with it..."""
    counted_by: str | None = None
    """...and the `cache_key` of the estimator that counted it (counts of others are ignored)."""


@dataclass(frozen=True, slots=True)
class WindowSnapshot:
    """The window of a memory id at one version: rows in history order."""

    version: int
    """0 when nothing was ever stored; every successful commit increases it."""
    rows: tuple[StoredMessage, ...]


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message to append to a memory's history."""

    message: ChatMessage
    in_window: bool = True
    """False when the message is evicted as soon as it is added (larger than the budget)."""
    token_count: int | None = None
    counted_by: str | None = None


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """A message of a memory's history: everything ever added, evicted or not."""

    seq: int
    message: ChatMessage
    created_at: datetime
    """When the message was stored (UTC)."""
    in_window: bool
    """Whether the message is still in the window sent to the model."""


@runtime_checkable
class ChatMemoryStore(Protocol):
    """The seed contract: messages of a memory id, read, replaced and deleted as a whole."""

    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of `memory_id`, in order; `[]` for an unknown id."""
        ...

    def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        """Make `messages` the stored messages of `memory_id` (an empty list is legal)."""
        ...

    def delete_messages(self, memory_id: str) -> None:
        """Forget everything about `memory_id`; unknown ids are fine."""
        ...


@runtime_checkable
class IncrementalChatMemoryStore(ChatMemoryStore, Protocol):
    """A store that appends rows, marks evicted ones, and versions each memory id."""

    def load_window(self, memory_id: str) -> WindowSnapshot:
        """The rows in the window of `memory_id` and the version they belong to."""
        ...

    def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> bool:
        """Atomically append `append` and take the rows numbered `evict` out of the window.

        Does nothing and returns False when the memory id is no longer at `version` (another
        writer committed first); the caller re-reads and tries again.
        """
        ...

    def history(
        self, memory_id: str, *, errors: Literal["raise", "skip"] = "raise"
    ) -> list[HistoryEntry]:
        """Every message ever added to `memory_id`, oldest first.

        A stored row that cannot be read raises `SerializationError` naming the memory id and
        the row; with `errors="skip"` such rows are left out and the rest is returned.
        """
        ...

    def memory_ids(self) -> list[str]:
        """The memory ids that have anything stored, sorted."""
        ...


@runtime_checkable
class AsyncChatMemoryStore(Protocol):
    """`ChatMemoryStore` for asyncio: the same three operations, awaited."""

    async def get_messages(self, memory_id: str) -> list[ChatMessage]: ...

    async def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None: ...

    async def delete_messages(self, memory_id: str) -> None: ...


@runtime_checkable
class AsyncIncrementalChatMemoryStore(AsyncChatMemoryStore, Protocol):
    """`IncrementalChatMemoryStore` for asyncio."""

    async def load_window(self, memory_id: str) -> WindowSnapshot: ...

    async def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> bool: ...

    async def history(
        self, memory_id: str, *, errors: Literal["raise", "skip"] = "raise"
    ) -> list[HistoryEntry]: ...

    async def memory_ids(self) -> list[str]: ...


def check_memory_id(memory_id: object) -> str:
    """`memory_id` if it is a usable memory id (a non-empty str), else a ConfigurationError."""
    if not isinstance(memory_id, str) or not memory_id:
        raise ConfigurationError(f"a memory id must be a non-empty str, got {memory_id!r}")
    return memory_id


def check_errors(errors: object) -> None:
    """A ConfigurationError unless `errors` (of `history`) is "raise" or "skip"."""
    if errors not in ("raise", "skip"):
        raise ConfigurationError(f"`errors` must be 'raise' or 'skip', got {errors!r}")
