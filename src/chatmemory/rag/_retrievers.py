"""Content retrievers over embedding stores: by meaning (vectors), by words (full text), or both
fused (hybrid)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TypeAlias, TypeVar, Union

from .._errors import ConfigurationError
from .._threads import in_thread
from ._embeddings import (
    Embedding,
    EmbeddingMatch,
    EmbeddingModel,
    EmbeddingSearchRequest,
    EmbeddingStore,
    FullTextSearch,
)
from ._filters import Filter
from ._input_types import aembed, embed
from ._listeners import ListenedRetriever
from ._values import Content, ContentKey, Query

__all__ = ["EmbeddingStoreContentRetriever", "FullTextContentRetriever", "HybridContentRetriever"]

V = TypeVar("V")
Setting: TypeAlias = Union[V, Callable[[Query], V]]  # noqa: UP007 - a generic alias
"""A value, or a function of the query giving it (read on every retrieval)."""


def _resolve(setting: Setting[V], query: Query) -> V:
    return setting(query) if callable(setting) else setting


def _content(match: EmbeddingMatch) -> Content | None:
    if match.embedded is None:
        return None
    return Content(
        match.embedded, {ContentKey.SCORE: match.score, ContentKey.EMBEDDING_ID: match.embedding_id}
    )


class EmbeddingStoreContentRetriever(ListenedRetriever):
    """The segments whose embeddings are nearest the query's: at most `max_results` (3), with a
    relevance score of at least `min_score` (0.0), passing `filter`. Each setting may be a
    function of the query. The query is embedded as a query (`InputType`), for the models
    that tell queries from documents, and the request carries its text, so a store that also
    searches words answers with both rankings fused (hybrid search, see
    `EmbeddingSearchRequest`). `listeners` are told of each retrieval."""

    def __init__(
        self,
        store: EmbeddingStore,
        embedding_model: EmbeddingModel,
        *,
        max_results: Setting[int] = 3,
        min_score: Setting[float] = 0.0,
        filter: Setting[Filter | None] = None,
        display_name: str = "Default",
        listeners: Sequence[object] = (),
    ) -> None:
        if not isinstance(store, EmbeddingStore):
            raise ConfigurationError(f"{store!r} is not an embedding store")
        if not callable(getattr(embedding_model, "embed_all", None)) and not callable(
            getattr(embedding_model, "aembed_all", None)
        ):
            raise ConfigurationError(f"{embedding_model!r} is not an embedding model")
        self.store = store
        self.embedding_model = embedding_model
        self.max_results = max_results
        self.min_score = min_score
        self.filter = filter
        self.display_name = display_name
        self.listeners = tuple(listeners)

    def __repr__(self) -> str:
        return f"EmbeddingStoreContentRetriever({self.display_name!r})"

    def _request(self, query: Query, embedding: Embedding) -> EmbeddingSearchRequest:
        return EmbeddingSearchRequest(
            query_embedding=embedding,
            max_results=_resolve(self.max_results, query),
            min_score=_resolve(self.min_score, query),
            filter=_resolve(self.filter, query),
            query=query.text,
        )

    def _retrieve(self, query: Query) -> list[Content]:
        [embedding] = embed(self.embedding_model, [query.text], "query")
        result = self.store.search(self._request(query, embedding))
        return [c for c in map(_content, result.matches) if c is not None]

    async def _aretrieve(self, query: Query) -> list[Content]:
        [embedding] = await aembed(self.embedding_model, [query.text], "query")
        request = self._request(query, embedding)
        asearch = getattr(self.store, "asearch", None)
        result = await asearch(request) if asearch else await in_thread(self.store.search, request)
        return [c for c in map(_content, result.matches) if c is not None]


class FullTextContentRetriever(ListenedRetriever):
    """The segments that best match the query's words (the store's full-text ranking, BM25 on
    SQLite's FTS5): no embedding model needed. `listeners` are told of each retrieval."""

    def __init__(
        self,
        store: FullTextSearch,
        *,
        max_results: Setting[int] = 3,
        filter: Setting[Filter | None] = None,
        listeners: Sequence[object] = (),
    ) -> None:
        if not isinstance(store, FullTextSearch):
            raise ConfigurationError(f"{store!r} has no full-text search (search_text)")
        self.store = store
        self.max_results = max_results
        self.filter = filter
        self.listeners = tuple(listeners)

    def _retrieve(self, query: Query) -> list[Content]:
        matches = self.store.search_text(
            query.text,
            max_results=_resolve(self.max_results, query),
            filter=_resolve(self.filter, query),
        )
        return [c for c in map(_content, matches) if c is not None]

    async def _aretrieve(self, query: Query) -> list[Content]:
        return await in_thread(self._retrieve, query)


class HybridContentRetriever(ListenedRetriever):
    """Full text and vectors fused by reciprocal rank: the words of the query and its meaning.
    Without an embedding model it is the full-text search alone. `listeners` are told of each
    retrieval (the fused one)."""

    def __init__(
        self,
        store: FullTextSearch,
        embedding_model: EmbeddingModel | None = None,
        *,
        max_results: Setting[int] = 3,
        filter: Setting[Filter | None] = None,
        k: int = 60,
        listeners: Sequence[object] = (),
    ) -> None:
        from ._aggregation import ReciprocalRankFuser

        self.text = FullTextContentRetriever(store, max_results=max_results, filter=filter)
        self.vectors = (
            EmbeddingStoreContentRetriever(
                store,  # type: ignore[arg-type]
                embedding_model,
                max_results=max_results,
                filter=filter,
            )
            if embedding_model is not None
            else None
        )
        self.max_results = max_results
        self.fuser = ReciprocalRankFuser(k)
        self.listeners = tuple(listeners)

    def _fuse(self, query: Query, lists: Sequence[list[Content]]) -> list[Content]:
        return self.fuser.fuse(lists)[: _resolve(self.max_results, query)]

    def _retrieve(self, query: Query) -> list[Content]:
        lists = [self.text.retrieve(query)]
        if self.vectors is not None:
            lists.append(self.vectors.retrieve(query))
        return self._fuse(query, lists)

    async def _aretrieve(self, query: Query) -> list[Content]:
        if self.vectors is None:
            return self._fuse(query, [await self.text.aretrieve(query)])
        words, meaning = await asyncio.gather(
            self.text.aretrieve(query), self.vectors.aretrieve(query)
        )
        return self._fuse(query, [words, meaning])
