"""Forgetting a user: every conversation, recall index entry, working-memory record and title.

What a forget guarantees on each store is written in the README ("Forgetting a user"): in short,
every row, key or entry is deleted through the store, SQLite files keep no copy of the words
(deleted pages are zeroed and the ``-wal`` file is emptied), and a second call finds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ._errors import ConfigurationError
from .recall import SemanticRecall

__all__ = ["Forgotten", "forget_user"]


@runtime_checkable
class _Titles(Protocol):
    """What forgetting needs of `ConversationTitles`."""

    def forget(self, memory_id: str) -> bool: ...


@dataclass
class Forgotten:
    """What `forget_user` removed: each list and count says what was there and is gone now, so
    a second call for the same user reports nothing (`bool(report)` is then False)."""

    user_id: str
    conversations: list[str] = field(default_factory=list)
    """The memory ids that had messages, now deleted (window and history)."""
    messages: int = 0
    """The messages of those conversations (history rows)."""
    recall_entries: int = 0
    """The recall index entries removed: embedded messages and the index marks."""
    working_memory: list[str] = field(default_factory=list)
    """The keys whose working-memory record was removed."""
    titles: list[str] = field(default_factory=list)
    """The memory ids whose title was removed."""
    unscrubbed: list[str] = field(default_factory=list)
    """SQLite stores whose ``-wal`` file could not be emptied (another connection was reading):
    the words are deleted, but copies stay in that file until `scrub()` succeeds."""

    def __bool__(self) -> bool:
        return bool(self.conversations or self.recall_entries or self.working_memory or self.titles)

    def __str__(self) -> str:
        text = (
            f"forgot {self.user_id}: {len(self.conversations)} conversation(s) with "
            f"{self.messages} message(s), {self.recall_entries} recall index entr"
            f"{'y' if self.recall_entries == 1 else 'ies'}, {len(self.working_memory)} "
            f"working-memory record(s), {len(self.titles)} title(s)"
        )
        if self.unscrubbed:
            text += (
                f"; copies remain in the -wal file of {', '.join(self.unscrubbed)} until scrub()"
            )
        return text


def forget_user(
    user_id: str,
    *,
    store: Any,
    owns: Callable[[str], bool] | None = None,
    memory_ids: Iterable[str] = (),
    recall: SemanticRecall | None = None,
    working_memory: Any | None = None,
    titles: _Titles | None = None,
) -> Forgotten:
    """Delete everything kept about `user_id`, and report exactly what was there.

    The user's conversations are those named in `memory_ids`, those of `store.memory_ids()` that
    `owns(memory_id)` accepts (``owns=lambda mid: mid.startswith("ann:")`` for ids made as
    "user:chat"), and those the recall index knows as the user's (a service with a `UserId`
    parameter records it; found by an exact metadata lookup). Their messages are deleted from
    `store` (any built-in store, sync), their recall entries and the user's go from `recall`'s
    embedding store, the working-memory records keyed by the user id or by one of those memory
    ids are removed, and so are their `titles` (`ConversationTitles`; a title being made at that
    moment is not stored). SQLite stores among them then empty their ``-wal`` files.
    """
    if not isinstance(user_id, str) or not user_id:
        raise ConfigurationError(f"forget_user() needs a non-empty user id, got {user_id!r}")
    if not callable(getattr(store, "delete_messages", None)):
        raise ConfigurationError(f"{store!r} is not a chat-memory store (delete_messages)")
    if titles is not None and not isinstance(titles, _Titles):
        raise ConfigurationError(f"`titles` must be ConversationTitles, got {titles!r}")
    found = _conversations(user_id, store, owns, memory_ids, recall)
    report = Forgotten(user_id)
    held = _messages_held(store, found)
    for memory_id in found:
        store.delete_messages(memory_id)
        if held.get(memory_id):
            report.conversations.append(memory_id)
            report.messages += held[memory_id]
    if recall is not None:
        report.recall_entries += recall.forget(user_id=user_id)
        report.recall_entries += sum(recall.forget(memory_id=mid) for mid in found)
    if working_memory is not None:
        keys = dict.fromkeys([user_id, *found])
        report.working_memory = [key for key in keys if working_memory.forget(key)]
    if titles is not None:
        report.titles = [memory_id for memory_id in found if titles.forget(memory_id)]
    parts = [store, *(getattr(p, "store", None) for p in (recall, working_memory, titles))]
    report.unscrubbed = _scrubbed(parts)
    return report


def _conversations(
    user_id: str,
    store: Any,
    owns: Callable[[str], bool] | None,
    memory_ids: Iterable[str],
    recall: SemanticRecall | None,
) -> list[str]:
    """The memory ids named, owned by the user, or known to the recall index as the user's."""
    found = list(dict.fromkeys(memory_ids))
    if owns is not None:
        found += [mid for mid in store.memory_ids() if owns(mid) and mid not in found]
    if recall is not None:
        found += [mid for mid in recall.memory_ids_of(user_id) if mid not in found]
    return found


def _scrubbed(parts: list[Any]) -> list[str]:
    """Empty the ``-wal`` file of each SQLite store among `parts`; those that could not be."""
    scrubbing = {id(p): p for p in parts if callable(getattr(p, "scrub", None))}
    return [repr(part) for part in scrubbing.values() if not part.scrub()]


def _messages_held(store: Any, memory_ids: list[str]) -> dict[str, int]:
    """How many messages each of `memory_ids` holds now (its history rows; for a store of the
    basic contract, its list)."""
    if not memory_ids:
        return {}
    summaries = getattr(store, "summaries", None)
    if callable(summaries):
        wanted = set(memory_ids)
        return {s.memory_id: s.messages for s in summaries() if s.memory_id in wanted}
    return {mid: len(store.get_messages(mid)) for mid in memory_ids}
