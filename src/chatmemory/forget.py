"""Forgetting a user: every conversation, recall index entry and working-memory record."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ._errors import ConfigurationError
from .recall import SemanticRecall

__all__ = ["Forgotten", "forget_user"]


@dataclass
class Forgotten:
    """What `forget_user` removed."""

    user_id: str
    conversations: list[str] = field(default_factory=list)
    """The memory ids whose messages (window and history) were deleted."""
    recall_index: bool = False
    """Whether the user's recall index entries were removed."""
    working_memory: list[str] = field(default_factory=list)
    """The keys whose working-memory record was removed."""

    def __str__(self) -> str:
        return (
            f"forgot {self.user_id}: {len(self.conversations)} conversation(s), "
            f"{len(self.working_memory)} working-memory record(s)"
            + (", the recall index" if self.recall_index else "")
        )


def forget_user(
    user_id: str,
    *,
    store: Any,
    owns: Callable[[str], bool] | None = None,
    memory_ids: Iterable[str] = (),
    recall: SemanticRecall | None = None,
    working_memory: Any | None = None,
) -> Forgotten:
    """Delete everything kept about `user_id`.

    The user's conversations are those named in `memory_ids`, those of `store.memory_ids()` that
    `owns(memory_id)` accepts (``owns=lambda mid: mid.startswith("ann:")`` for ids made as
    "user:chat"), and those the recall index knows as the user's (a service with a `UserId`
    parameter records it). Their messages are deleted from `store` (any built-in store, sync),
    their recall entries and the user's go from `recall`'s embedding store, and the
    working-memory records keyed by the user id or by one of those memory ids are removed.
    """
    if not isinstance(user_id, str) or not user_id:
        raise ConfigurationError(f"forget_user() needs a non-empty user id, got {user_id!r}")
    if not callable(getattr(store, "delete_messages", None)):
        raise ConfigurationError(f"{store!r} is not a chat-memory store (delete_messages)")
    found = list(dict.fromkeys(memory_ids))
    if owns is not None:
        found += [mid for mid in store.memory_ids() if owns(mid) and mid not in found]
    if recall is not None:
        found += [mid for mid in recall.memory_ids_of(user_id) if mid not in found]
    report = Forgotten(user_id)
    for memory_id in found:
        store.delete_messages(memory_id)
        report.conversations.append(memory_id)
    if recall is not None:
        recall.forget(user_id=user_id)
        for memory_id in found:
            recall.forget(memory_id=memory_id)
        report.recall_index = True
    if working_memory is not None:
        for key in dict.fromkeys([user_id, *found]):
            if working_memory.forget(key):
                report.working_memory.append(key)
    return report
