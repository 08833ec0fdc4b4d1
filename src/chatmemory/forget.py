"""Forgetting a user: every conversation, recall index entry, working-memory record and title.

What a forget guarantees on each store is written in the README ("Forgetting a user"): in short,
every row, key or entry is deleted through the store, SQLite files keep no copy of the words
(deleted pages are zeroed and the ``-wal`` file is emptied), and a second call finds nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ._errors import ConfigurationError
from ._flow import Flow, arun, call, run
from ._threads import in_thread
from .recall import SemanticRecall

__all__ = ["Forgotten", "aforget_user", "forget_user"]


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
    parts = _Parts(store, recall, working_memory, titles)
    return run(_forget(user_id, store, owns, memory_ids, titles), parts)


async def aforget_user(
    user_id: str,
    *,
    store: Any,
    owns: Callable[[str], bool] | None = None,
    memory_ids: Iterable[str] = (),
    recall: SemanticRecall | None = None,
    working_memory: Any | None = None,
    titles: _Titles | None = None,
) -> Forgotten:
    """`forget_user` for asyncio: `store` may be an async store (its calls are awaited); the
    embedding store, working memory and titles run on worker threads."""
    parts = _AsyncParts(_Parts(store, recall, working_memory, titles))
    return await arun(_forget(user_id, store, owns, memory_ids, titles), parts)


def _forget(
    user_id: str,
    store: Any,
    owns: Callable[[str], bool] | None,
    memory_ids: Iterable[str],
    titles: object,
) -> Flow[Forgotten]:
    if not isinstance(user_id, str) or not user_id:
        raise ConfigurationError(f"forget_user() needs a non-empty user id, got {user_id!r}")
    if not callable(getattr(store, "delete_messages", None)):
        raise ConfigurationError(f"{store!r} is not a chat-memory store (delete_messages)")
    if titles is not None and not isinstance(titles, _Titles):
        raise ConfigurationError(f"`titles` must be ConversationTitles, got {titles!r}")
    found = list(dict.fromkeys(memory_ids))
    if owns is not None:
        every = yield from call(_Parts.memory_ids)
        found += [mid for mid in every if owns(mid) and mid not in found]
    found += [mid for mid in (yield from call(_Parts.recalled, user_id)) if mid not in found]
    report = Forgotten(user_id)
    held = yield from call(_Parts.held, found)
    for memory_id in found:
        yield from call(_Parts.delete, memory_id)
        if held.get(memory_id):
            report.conversations.append(memory_id)
            report.messages += held[memory_id]
    report.recall_entries = yield from call(_Parts.unindex, user_id, found)
    report.working_memory = yield from call(_Parts.unrecord, [user_id, *found])
    report.titles = yield from call(_Parts.untitle, found)
    report.unscrubbed = yield from call(_Parts.scrub)
    return report


class _Parts:
    """What a forget asks of the stores, blocking."""

    def __init__(
        self, store: Any, recall: SemanticRecall | None, working_memory: Any, titles: Any
    ) -> None:
        self.store, self.recall = store, recall
        self.working_memory, self.titles = working_memory, titles

    def memory_ids(self) -> list[str]:
        return list(self.store.memory_ids())

    def recalled(self, user_id: str) -> list[str]:
        """The conversations the recall index knows as the user's."""
        return [] if self.recall is None else self.recall.memory_ids_of(user_id)

    def held(self, memory_ids: list[str]) -> dict[str, int]:
        """How many messages each of `memory_ids` holds now (history rows; for a store of the
        basic contract, its list)."""
        if not memory_ids:
            return {}
        if callable(getattr(self.store, "summaries", None)):
            return _counted(memory_ids, self.store.summaries())
        return {mid: len(self.store.get_messages(mid)) for mid in memory_ids}

    def delete(self, memory_id: str) -> None:
        self.store.delete_messages(memory_id)

    def unindex(self, user_id: str, memory_ids: list[str]) -> int:
        """Remove the recall entries of the user and of the conversations; how many."""
        if self.recall is None:
            return 0
        removed = int(self.recall.forget(user_id=user_id))
        return removed + sum(int(self.recall.forget(memory_id=mid)) for mid in memory_ids)

    def unrecord(self, keys: list[str]) -> list[str]:
        """Remove the working-memory records of `keys`; the keys that had one."""
        if self.working_memory is None:
            return []
        return [key for key in dict.fromkeys(keys) if self.working_memory.forget(key)]

    def untitle(self, memory_ids: list[str]) -> list[str]:
        if self.titles is None:
            return []
        return [memory_id for memory_id in memory_ids if self.titles.forget(memory_id)]

    def scrub(self) -> list[str]:
        """Empty the ``-wal`` file of each SQLite store among the parts; those that could not be."""
        return [repr(part) for part in self.scrubbing() if not part.scrub()]

    def scrubbing(self) -> list[Any]:
        """The SQLite stores among the parts (those with `scrub`), each once."""
        others = (
            getattr(p, "store", None) for p in (self.recall, self.working_memory, self.titles)
        )
        parts = {id(p): p for p in (self.store, *others) if callable(getattr(p, "scrub", None))}
        return list(parts.values())


class _AsyncParts:
    """`_Parts` for asyncio: an async chat store is awaited, everything else runs on a thread."""

    def __init__(self, parts: _Parts) -> None:
        self._parts = parts
        self._async = inspect.iscoroutinefunction(getattr(parts.store, "delete_messages", None))

    async def _store(self, name: str, *args: Any) -> Any:
        method = getattr(self._parts.store, name)
        return await method(*args) if self._async else await in_thread(method, *args)

    async def memory_ids(self) -> list[str]:
        return list(await self._store("memory_ids"))

    async def recalled(self, user_id: str) -> list[str]:
        recall = self._parts.recall
        return [] if recall is None else await recall.amemory_ids_of(user_id)

    async def held(self, memory_ids: list[str]) -> dict[str, int]:
        store = self._parts.store
        if not self._async:
            return await in_thread(self._parts.held, memory_ids)
        if not memory_ids:
            return {}
        if callable(getattr(store, "summaries", None)):
            return _counted(memory_ids, await store.summaries())
        return {mid: len(await store.get_messages(mid)) for mid in memory_ids}

    async def delete(self, memory_id: str) -> None:
        await self._store("delete_messages", memory_id)

    async def unindex(self, user_id: str, memory_ids: list[str]) -> int:
        recall = self._parts.recall
        if recall is None:
            return 0
        removed = await recall.aforget(user_id=user_id)
        for memory_id in memory_ids:
            removed += await recall.aforget(memory_id=memory_id)
        return removed

    async def unrecord(self, keys: list[str]) -> list[str]:
        return await in_thread(self._parts.unrecord, keys)

    async def untitle(self, memory_ids: list[str]) -> list[str]:
        return await in_thread(self._parts.untitle, memory_ids)

    async def scrub(self) -> list[str]:
        left = []
        for part in self._parts.scrubbing():
            if inspect.iscoroutinefunction(part.scrub):
                done = await part.scrub()
            else:
                done = await in_thread(part.scrub)
            if not done:
                left.append(repr(part))
        return left


def _counted(memory_ids: list[str], summaries: Iterable[Any]) -> dict[str, int]:
    """The message counts of `memory_ids` among a store's `summaries()`."""
    wanted = set(memory_ids)
    return {s.memory_id: s.messages for s in summaries if s.memory_id in wanted}
