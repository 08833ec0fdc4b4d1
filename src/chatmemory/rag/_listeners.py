"""Listeners on content retrievers (LangChain4j's `ContentRetrieverListener`): told of each
query, the contents found or the error, with a context they can annotate.

``EmbeddingStoreContentRetriever(store, model, listeners=[MyListener()])``; a listener has any
of `on_request`, `on_response`, `on_error`. The three contexts of one retrieval share one
`attributes` dict. A listener that raises is logged and the retrieval goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..models.listeners import arun_observed, run_observed
from ._values import Content, Query

__all__ = [
    "ContentRetrieverErrorContext",
    "ContentRetrieverListener",
    "ContentRetrieverRequestContext",
    "ContentRetrieverResponseContext",
    "ListenedRetriever",
]


@dataclass
class ContentRetrieverRequestContext:
    """What `on_request` is told: the query, the retriever, and the retrieval's attributes."""

    query: Query
    retriever: object
    attributes: dict[Any, Any] = field(default_factory=dict)


@dataclass
class ContentRetrieverResponseContext:
    """What `on_response` is told: the contents found for the query."""

    contents: list[Content]
    query: Query
    retriever: object
    attributes: dict[Any, Any] = field(default_factory=dict)


@dataclass
class ContentRetrieverErrorContext:
    """What `on_error` is told: the error the retrieval raised."""

    error: BaseException
    query: Query
    retriever: object
    attributes: dict[Any, Any] = field(default_factory=dict)


class ContentRetrieverListener:
    """A listener on retrievals; override what you need (each does nothing here)."""

    def on_request(self, context: ContentRetrieverRequestContext) -> None:
        """Before the retrieval."""

    def on_response(self, context: ContentRetrieverResponseContext) -> None:
        """After it found its contents."""

    def on_error(self, context: ContentRetrieverErrorContext) -> None:
        """After it failed."""


class _Observation:
    """The contexts of one retrieval (for `run_observed` / `arun_observed`)."""

    __slots__ = ("attributes", "listeners", "query", "retriever")

    def __init__(self, listeners: tuple[object, ...], query: Query, retriever: object) -> None:
        self.listeners = listeners
        self.query = query
        self.retriever = retriever
        self.attributes: dict[Any, Any] = {}

    def request(self) -> ContentRetrieverRequestContext:
        return ContentRetrieverRequestContext(self.query, self.retriever, self.attributes)

    def response(self, result: list[Content]) -> ContentRetrieverResponseContext:
        return ContentRetrieverResponseContext(result, self.query, self.retriever, self.attributes)

    def error(self, error: BaseException) -> ContentRetrieverErrorContext:
        return ContentRetrieverErrorContext(error, self.query, self.retriever, self.attributes)


class ListenedRetriever:
    """`retrieve` and `aretrieve`, told to the retriever's listeners (LangChain4j's
    `ContentRetrieverListener`s) when it has any."""

    listeners: tuple[object, ...] = ()
    _retrieve: Callable[[Query], list[Content]]
    """The retrieval itself (each retriever's)..."""
    _aretrieve: Callable[[Query], Awaitable[list[Content]]]
    """...and its async twin."""

    def retrieve(self, query: Query) -> list[Content]:
        if not self.listeners:
            return self._retrieve(query)
        observation = _Observation(self.listeners, query, self)
        return run_observed(observation, lambda: self._retrieve(query))

    async def aretrieve(self, query: Query) -> list[Content]:
        if not self.listeners:
            return await self._aretrieve(query)
        observation = _Observation(self.listeners, query, self)
        return await arun_observed(observation, lambda: self._aretrieve(query))
