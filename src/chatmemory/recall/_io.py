"""The I/O the recall flows ask for (history rows, the window, embeddings, the index), once for a
sync caller and once for asyncio: each method a few lines, the logic is in the flows."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .._contracts import HistoryEntry
from .._messages import ChatMessage
from .._threads import in_thread
from ..rag import (
    AsyncEmbeddingModel,
    Embedding,
    EmbeddingModel,
    EmbeddingSearchRequest,
    EmbeddingSearchResult,
    EmbeddingStore,
    Filter,
    MetadataSelect,
    TextSegment,
)
from ..rag._input_types import InputType, aembed, embed

Rows = list[tuple[int, ChatMessage]]


@dataclass(frozen=True, slots=True)
class Window:
    """A conversation's window as (seq, message) rows, and the life of the id they belong to."""

    life: str
    rows: Rows


class History(Protocol):
    def history(self, memory_id: str) -> list[HistoryEntry]: ...


class Io(Protocol):
    """What the recall flows ask for: history rows, embeddings, the index."""

    def history(self, memory_id: str) -> list[HistoryEntry]: ...

    def window(self, memory_id: str) -> Window | None:
        """The window and its life, when the store has the window contract."""
        ...

    def embed(self, texts: list[str], input_type: InputType) -> list[Embedding]: ...

    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult: ...

    def select(self, condition: Filter) -> dict[str, TextSegment | None]: ...

    def add_all(
        self, embeddings: list[Embedding], segments: list[TextSegment], ids: list[str]
    ) -> None: ...

    def remove(self, ids: list[str]) -> None: ...


def _window(snapshot: Any) -> Window:
    return Window(snapshot.life, [(row.seq, row.message) for row in snapshot.rows])


class SyncIo:
    def __init__(
        self,
        history: Any,
        model: EmbeddingModel,
        store: EmbeddingStore,
        probe: Callable[[], Embedding],
    ) -> None:
        self._history, self._model, self._store, self._probe = history, model, store, probe

    def history(self, memory_id: str) -> list[HistoryEntry]:
        return self._history.history(memory_id)  # type: ignore[no-any-return]

    def window(self, memory_id: str) -> Window | None:
        load = getattr(self._history, "load_window", None)
        return None if load is None else _window(load(memory_id))

    def embed(self, texts: list[str], input_type: InputType) -> list[Embedding]:
        return embed(self._model, texts, input_type)

    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
        return self._store.search(request)

    def select(self, condition: Filter) -> dict[str, TextSegment | None]:
        if isinstance(self._store, MetadataSelect):
            return self._store.select(condition)
        # A store of one's own without `select`: its filtered search, as exact as it is.
        request = EmbeddingSearchRequest(
            query_embedding=self._probe(), max_results=100_000, filter=condition
        )
        return {m.embedding_id: m.embedded for m in self._store.search(request).matches}

    def add_all(
        self, embeddings: list[Embedding], segments: list[TextSegment], ids: list[str]
    ) -> None:
        self._store.add_all(embeddings, segments, ids=ids)

    def remove(self, ids: list[str]) -> None:
        if ids:
            self._store.remove_all(ids)


class AsyncIo:
    """History read the way the store reads it (awaited for an async store); the embedding model
    and store on a worker thread (`aembed_all` when the model has it)."""

    def __init__(
        self,
        history: Any,
        model: EmbeddingModel,
        store: EmbeddingStore,
        probe: Callable[[], Embedding],
    ) -> None:
        self._sync = SyncIo(history, model, store, probe)
        self._history, self._model = history, model

    async def history(self, memory_id: str) -> list[HistoryEntry]:
        if inspect.iscoroutinefunction(self._history.history):
            return await self._history.history(memory_id)  # type: ignore[no-any-return]
        return await in_thread(self._sync.history, memory_id)

    async def window(self, memory_id: str) -> Window | None:
        load = getattr(self._history, "load_window", None)
        if load is None:
            return None
        if not inspect.iscoroutinefunction(load):
            return await in_thread(self._sync.window, memory_id)
        return _window(await load(memory_id))

    async def embed(self, texts: list[str], input_type: InputType) -> list[Embedding]:
        if isinstance(self._model, AsyncEmbeddingModel):
            return await aembed(self._model, texts, input_type)
        return await in_thread(self._sync.embed, texts, input_type)

    async def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
        return await in_thread(self._sync.search, request)

    async def select(self, condition: Filter) -> dict[str, TextSegment | None]:
        return await in_thread(self._sync.select, condition)

    async def add_all(
        self, embeddings: list[Embedding], segments: list[TextSegment], ids: list[str]
    ) -> None:
        await in_thread(self._sync.add_all, embeddings, segments, ids)

    async def remove(self, ids: list[str]) -> None:
        await in_thread(self._sync.remove, ids)
