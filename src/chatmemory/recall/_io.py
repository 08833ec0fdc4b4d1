"""The I/O the recall flows ask for (history rows, the window, embeddings, the index), once for a
sync caller and once for asyncio: each method a few lines, the logic is in the flows."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Collection
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
    Query,
    QueryTransformer,
    ScoringModel,
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

    def history(self, memory_id: str, seqs: Collection[int] | None = None) -> list[HistoryEntry]:
        """`memory_id`'s history (only the messages numbered `seqs` when given), rows that
        cannot be read left out."""
        ...

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

    def transform(self, query: str) -> list[str]:
        """The queries the query transformer makes of `query`."""
        ...

    def score(self, texts: list[str], query: str) -> list[float]:
        """The scoring model's relevance of each of `texts` to `query`."""
        ...


@dataclass(frozen=True, slots=True)
class Stages:
    """The optional stages of a recall: a query transformer, a scoring model."""

    query_transformer: QueryTransformer | None = None
    scoring_model: ScoringModel | None = None


def _queries(found: list[Query]) -> list[str]:
    return [query.text for query in found]


def _window(snapshot: Any) -> Window:
    return Window(snapshot.life, [(row.seq, row.message) for row in snapshot.rows])


@dataclass(frozen=True, slots=True)
class _Reading:
    """How to read a history object's messages: the keyword arguments its `history` takes
    (a `HistoryStore` takes `errors` and `seqs`; a history of one's own may take neither)."""

    skip: bool
    partial: bool

    @staticmethod
    def of(history: Any) -> _Reading:
        """The reading of `history` (kept per class when `history` is a method of its class:
        a signature costs more than a store's read of a few messages)."""
        method = getattr(type(history), "history", None)
        if not inspect.isfunction(method) or "history" in getattr(history, "__dict__", ()):
            return _Reading.made(history)
        found = _READINGS.get(method)
        if found is None:
            found = _READINGS[method] = _Reading.made(history)
        return found

    @staticmethod
    def made(history: Any) -> _Reading:
        try:
            names = inspect.signature(history.history).parameters
        except (AttributeError, TypeError, ValueError):
            return _Reading(False, False)
        return _Reading("errors" in names, "seqs" in names)

    def arguments(self, seqs: Collection[int] | None) -> dict[str, Any]:
        given: dict[str, Any] = {"errors": "skip"} if self.skip else {}
        if seqs is not None and self.partial:
            given["seqs"] = sorted(seqs)
        return given

    def chosen(
        self, entries: list[HistoryEntry], seqs: Collection[int] | None
    ) -> list[HistoryEntry]:
        """`entries` cut to `seqs` when the history could not be asked for them alone."""
        if seqs is None or self.partial:
            return entries
        wanted = set(seqs)
        return [entry for entry in entries if entry.seq in wanted]


_READINGS: weakref.WeakKeyDictionary[Callable[..., Any], _Reading] = weakref.WeakKeyDictionary()
"""The reading of each class's `history` method."""


class SyncIo:
    def __init__(
        self,
        history: Any,
        model: EmbeddingModel,
        store: EmbeddingStore,
        probe: Callable[[], Embedding],
        stages: Stages,
    ) -> None:
        self._history, self._model, self._store, self._probe = history, model, store, probe
        self._reading = _Reading.of(history)
        self._stages = stages

    def history(self, memory_id: str, seqs: Collection[int] | None = None) -> list[HistoryEntry]:
        found = self._history.history(memory_id, **self._reading.arguments(seqs))
        return self._reading.chosen(found, seqs)

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

    def transform(self, query: str) -> list[str]:
        assert self._stages.query_transformer is not None
        return _queries(self._stages.query_transformer.transform(Query(query)))

    def score(self, texts: list[str], query: str) -> list[float]:
        assert self._stages.scoring_model is not None
        segments = [TextSegment(text) for text in texts]
        return list(self._stages.scoring_model.score_all(segments, query))


class AsyncIo:
    """History read the way the store reads it (awaited for an async store); the embedding model
    and store on a worker thread (`aembed_all` when the model has it)."""

    def __init__(
        self,
        history: Any,
        model: EmbeddingModel,
        store: EmbeddingStore,
        probe: Callable[[], Embedding],
        stages: Stages,
    ) -> None:
        self._sync = SyncIo(history, model, store, probe, stages)
        self._history, self._model, self._stages = history, model, stages

    async def history(
        self, memory_id: str, seqs: Collection[int] | None = None
    ) -> list[HistoryEntry]:
        if not inspect.iscoroutinefunction(self._history.history):
            return await in_thread(self._sync.history, memory_id, seqs)
        reading = self._sync._reading
        found = await self._history.history(memory_id, **reading.arguments(seqs))
        return reading.chosen(found, seqs)

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

    async def transform(self, query: str) -> list[str]:
        transformer = self._stages.query_transformer
        atransform = getattr(transformer, "atransform", None)
        if atransform is None:
            return await in_thread(self._sync.transform, query)
        return _queries(await atransform(Query(query)))

    async def score(self, texts: list[str], query: str) -> list[float]:
        ascore = getattr(self._stages.scoring_model, "ascore_all", None)
        if ascore is None:
            return await in_thread(self._sync.score, texts, query)
        return list(await ascore([TextSegment(text) for text in texts], query))
