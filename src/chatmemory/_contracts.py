"""What memories and users need from a store: the store contracts, and the values they exchange.

Each contract is what one consumer calls, nothing more:

* `ChatMemoryStore`, the **basic whole-list contract**: read, replace and delete the messages of
  a memory id. Any object with those three methods works, like LangChain4j's SPI; a memory then
  rewrites the whole window on each change.
* `WindowStore`, what a memory needs for O(1) writes: every message is one row with a sequence
  number, kept forever as history; the window is the set of rows not yet evicted; each memory
  id has a version that every commit checks and bumps. Adding a message is one appended row
  plus marks on the rows that leave the window, the same work after 100 messages as after
  100,000, and two writers never lose each other's messages: the loser re-reads and retries.
* `HistoryStore`, what a person or a tool inspecting the store needs: the whole history of a
  memory id (or the messages of a few sequence numbers, read at the cost of those alone), the
  ids, and a cheap per-id summary.

Every built-in store declares all three (it subclasses them), sync or async. The rows of a
`WindowStore` obey two rules the memories rely on: sequence numbers only grow, and a row that
leaves the window never comes back. So a window read earlier stays valid for every row it holds,
and a later read only has to add the rows numbered after it (`load_window(since=...)`).

This module is the layer between the memories and the stores: both import it, it imports
neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from ._errors import ConfigurationError
from ._messages import ChatMessage

__all__ = [
    "AsyncChatMemoryStore",
    "AsyncHistoryStore",
    "AsyncWindowStore",
    "ChatMemoryStore",
    "Committed",
    "Errors",
    "HistoryEntry",
    "HistoryStore",
    "MemorySummary",
    "NewMessage",
    "StoredMessage",
    "WindowSnapshot",
    "WindowStore",
    "check_errors",
    "check_memory_id",
    "check_seqs",
    "life_of",
]

Errors = Literal["raise", "skip"]
"""What a read does with a stored row it cannot decode: raise `SerializationError`, or skip it."""


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
    unreadable: tuple[int, ...] = ()
    """The seqs of window rows that could not be decoded and were left out (``errors="skip"``)."""
    stamp: object = field(default=None, compare=False, repr=False)
    """The store's own mark of when it read this, if it has one (see `WindowStore.load_window`);
    not part of the value. A store may refresh it on a snapshot it confirms unchanged."""
    life: str = field(default="", compare=False, repr=False)
    """Which life of the memory id the rows belong to: a new value once the id was deleted and
    used again, when its sequence numbers start over ("" when nothing is stored, or for a store
    that does not tell). What is kept about a memory id elsewhere (a recall cache) is only
    valid for the life it was read in."""


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message to append to a memory's history."""

    message: ChatMessage
    in_window: bool = True
    """False when the message is evicted as soon as it is added (larger than the budget)."""
    token_count: int | None = None
    counted_by: str | None = None


@dataclass(frozen=True, slots=True)
class Committed:
    """What a successful `commit_window` did: enough for the caller to know the new window."""

    version: int
    """The memory's version after the commit."""
    first_seq: int
    """The seq of the first appended message; the others follow it one by one."""
    stamp: object = field(default=None, compare=False, repr=False)
    """As `WindowSnapshot.stamp`, for the window as this commit left it."""
    life: str = field(default="", compare=False, repr=False)
    """As `WindowSnapshot.life`: the life of the memory id this commit wrote to."""


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """A message of a memory's history: everything ever added, evicted or not."""

    seq: int
    message: ChatMessage
    created_at: datetime
    """When the message was stored (UTC)."""
    in_window: bool
    """Whether the message is still in the window sent to the model."""


@dataclass(frozen=True, slots=True)
class MemorySummary:
    """How much a memory id holds, counted without decoding a message."""

    memory_id: str
    messages: int
    """Rows in the history (readable or not)."""
    in_window: int
    """Rows of the history still in the window."""
    updated_at: datetime | None
    """When the last message was stored (UTC); None where the store does not keep times."""


@runtime_checkable
class ChatMemoryStore(Protocol):
    """The basic whole-list contract: messages of a memory id, read, replaced and deleted."""

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
class WindowStore(Protocol):
    """Appends rows, marks evicted ones, versions each memory id: what a memory needs for O(1)."""

    def load_window(
        self, memory_id: str, *, since: WindowSnapshot | None = None, errors: Errors = "raise"
    ) -> WindowSnapshot:
        """The rows in the window of `memory_id` and the version they belong to.

        With `since` (an earlier snapshot of the same memory id), returns `since` itself when
        the window has not changed, and otherwise may take the rows it already holds from it,
        decoding only rows numbered after them. A row that cannot be decoded raises
        `SerializationError` naming the memory id and the row; with ``errors="skip"`` it is left
        out and its seq is listed in `WindowSnapshot.unreadable`.
        """
        ...

    def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> Committed | None:
        """Atomically append `append` and take the rows numbered `evict` out of the window.

        Does nothing and returns None when the memory id is no longer at `version` (another
        writer committed first); the caller re-reads and tries again.
        """
        ...

    def delete_messages(self, memory_id: str) -> None:
        """Forget `memory_id`: its window, its whole history and the id itself."""
        ...


@runtime_checkable
class HistoryStore(Protocol):
    """Everything ever said, for people and tools: whole histories, ids and summaries."""

    def history(
        self, memory_id: str, *, errors: Errors = "raise", seqs: Iterable[int] | None = None
    ) -> list[HistoryEntry]:
        """Every message ever added to `memory_id`, oldest first.

        A stored row that cannot be read raises `SerializationError` naming the memory id and
        the row; with `errors="skip"` such rows are left out and the rest is returned.
        `seqs`: only the messages with these sequence numbers (those that exist; others are
        skipped), oldest first, read in one query whose cost depends on how many are asked,
        not on the length of the history; None reads them all.
        """
        ...

    def memory_ids(self) -> list[str]:
        """The memory ids that have anything stored, sorted."""
        ...

    def summaries(self) -> list[MemorySummary]:
        """One summary per memory id, sorted by id, without decoding any message."""
        ...


@runtime_checkable
class AsyncChatMemoryStore(Protocol):
    """`ChatMemoryStore` for asyncio: the same three operations, awaited."""

    async def get_messages(self, memory_id: str) -> list[ChatMessage]: ...

    async def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None: ...

    async def delete_messages(self, memory_id: str) -> None: ...


@runtime_checkable
class AsyncWindowStore(Protocol):
    """`WindowStore` for asyncio."""

    async def load_window(
        self, memory_id: str, *, since: WindowSnapshot | None = None, errors: Errors = "raise"
    ) -> WindowSnapshot: ...

    async def commit_window(
        self,
        memory_id: str,
        *,
        version: int,
        append: Sequence[NewMessage],
        evict: Sequence[int],
    ) -> Committed | None: ...

    async def delete_messages(self, memory_id: str) -> None: ...


@runtime_checkable
class AsyncHistoryStore(Protocol):
    """`HistoryStore` for asyncio."""

    async def history(
        self, memory_id: str, *, errors: Errors = "raise", seqs: Iterable[int] | None = None
    ) -> list[HistoryEntry]: ...

    async def memory_ids(self) -> list[str]: ...

    async def summaries(self) -> list[MemorySummary]: ...


def life_of(born: object) -> str:
    """A store's birth mark of a memory id's life (a time, as the store keeps it) as the
    `life` of its snapshots and commits."""
    if born is None:
        return ""
    if isinstance(born, bytes):
        return born.decode("ascii", "replace")
    if isinstance(born, datetime):
        return born.isoformat()
    return str(born)


def check_memory_id(memory_id: object) -> str:
    """`memory_id` if it is a usable memory id (a non-empty str), else a ConfigurationError."""
    if not isinstance(memory_id, str) or not memory_id:
        raise ConfigurationError(f"a memory id must be a non-empty str, got {memory_id!r}")
    if not memory_id.isascii():
        try:
            memory_id.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigurationError(
                f"a memory id must be valid Unicode text, but {memory_id!r} holds a lone "
                f"surrogate (text decoded with errors='surrogateescape'?); use another id"
            ) from None
    return memory_id


def check_errors(errors: object) -> None:
    """A ConfigurationError unless `errors` is "raise" or "skip"."""
    if errors not in ("raise", "skip"):
        raise ConfigurationError(f"`errors` must be 'raise' or 'skip', got {errors!r}")


_LARGEST_SEQ = 2**63 - 1
"""The largest sequence number a store can hold (a signed 64-bit integer)."""


def check_seqs(seqs: object) -> tuple[int, ...] | None:
    """The `seqs` argument of `history` as the distinct sequence numbers a store could hold,
    ascending (None stays None: the whole history); a ConfigurationError unless it is an
    iterable of ints. Numbers no row can have (negative, or past 64 bits) are dropped here,
    as any other unknown seq is skipped."""
    if seqs is None:
        return None
    if isinstance(seqs, (str, bytes, bytearray)) or not isinstance(seqs, Iterable):
        raise ConfigurationError(_seqs_error(f"got {seqs!r}"))
    wanted: set[int] = set()
    for seq in seqs:
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise ConfigurationError(_seqs_error(f"it holds {seq!r}"))
        if 0 <= seq <= _LARGEST_SEQ:
            wanted.add(seq)
    return tuple(sorted(wanted))


def _seqs_error(found: str) -> str:
    return (
        f"`seqs` must be an iterable of sequence numbers (ints, as in HistoryEntry.seq), "
        f"for example [12, 13, 14], or None for the whole history; {found}"
    )
