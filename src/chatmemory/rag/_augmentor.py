"""Putting retrieved contents into the user message, and the augmentor that runs the stages:
transform the query, route each query, retrieve (concurrently), aggregate, inject."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._errors import ConfigurationError
from .._messages import UserMessage
from .._prompts import PromptTemplate
from .._threads import in_thread
from ._aggregation import DefaultContentAggregator
from ._stages import (
    ContentAggregator,
    ContentInjector,
    ContentRetriever,
    DefaultQueryRouter,
    DefaultQueryTransformer,
    QueryRouter,
    QueryTransformer,
)
from ._values import Content, Query, QueryMetadata

__all__ = [
    "AsyncRetrievalAugmentor",
    "AugmentationRequest",
    "AugmentationResult",
    "DefaultContentInjector",
    "DefaultRetrievalAugmentor",
    "RetrievalAugmentor",
]

INJECTION_PROMPT = """\
{{user_message}}

Answer using the following information:
{{contents}}"""


class DefaultContentInjector:
    """Appends the contents to the user's text with `prompt_template` (variables
    ``{{user_message}}`` and ``{{contents}}``); contents are joined by blank lines, each with the
    `metadata_keys_to_include` it has, as "key: value" lines after "content: text"."""

    def __init__(
        self,
        prompt_template: str | PromptTemplate | None = None,
        *,
        metadata_keys_to_include: Sequence[str] = (),
    ) -> None:
        template = prompt_template if prompt_template is not None else INJECTION_PROMPT
        self.prompt_template = (
            template if isinstance(template, PromptTemplate) else PromptTemplate(template)
        )
        self.metadata_keys = tuple(metadata_keys_to_include)

    def _format(self, content: Content) -> str:
        metadata = content.segment.metadata
        present = [k for k in self.metadata_keys if k in metadata]
        if not present:
            return content.text
        return "\n".join([f"content: {content.text}", *(f"{k}: {metadata[k]}" for k in present)])

    def inject(self, contents: Sequence[Content], message: UserMessage) -> UserMessage:
        if not contents:
            return message
        text = self.prompt_template.apply(
            {
                "user_message": message.text,
                "contents": "\n\n".join(self._format(c) for c in contents),
            }
        ).text
        return UserMessage(text, name=message.name, attributes=message.attributes)


@dataclass(frozen=True, slots=True)
class AugmentationRequest:
    """The user message to augment and the turn it belongs to."""

    user_message: UserMessage
    metadata: QueryMetadata


@dataclass(frozen=True, slots=True)
class AugmentationResult:
    """The augmented user message and the contents it was given."""

    user_message: UserMessage
    contents: tuple[Content, ...]


@runtime_checkable
class RetrievalAugmentor(Protocol):
    """Augments a user message with what it retrieves."""

    def augment(self, request: AugmentationRequest) -> AugmentationResult: ...


@runtime_checkable
class AsyncRetrievalAugmentor(Protocol):
    """Augments a user message without blocking the event loop (an async service awaits it;
    an augmentor without it runs on a worker thread)."""

    async def aaugment(self, request: AugmentationRequest) -> AugmentationResult: ...


class DefaultRetrievalAugmentor:
    """LangChain4j's pipeline: `query_transformer` (the query as is), `query_router` (or one
    `content_retriever`), `content_aggregator` (reciprocal rank fusion), `content_injector`.

    Several queries, and several retrievers for a query, run at once: on threads for `augment`,
    as tasks for `aaugment`. Results are in the order of the queries, then of the retrievers.
    """

    def __init__(
        self,
        *,
        query_transformer: QueryTransformer | None = None,
        query_router: QueryRouter | None = None,
        content_retriever: ContentRetriever | None = None,
        content_aggregator: ContentAggregator | None = None,
        content_injector: ContentInjector | None = None,
        max_workers: int = 16,
    ) -> None:
        if (query_router is None) == (content_retriever is None):
            raise ConfigurationError(
                "DefaultRetrievalAugmentor takes a query_router or a content_retriever (one)"
            )
        self.query_transformer = query_transformer or DefaultQueryTransformer()
        self.query_router: QueryRouter = query_router or DefaultQueryRouter(content_retriever)  # type: ignore[arg-type]
        self.content_aggregator = content_aggregator or DefaultContentAggregator()
        self.content_injector = content_injector or DefaultContentInjector()
        self.max_workers = max_workers

    @staticmethod
    def _query(request: AugmentationRequest) -> Query:
        message = request.user_message
        if not isinstance(message, UserMessage):
            raise ConfigurationError(f"only a UserMessage can be augmented, got {message!r}")
        if not message.has_single_text():
            raise ConfigurationError(
                f"retrieval needs the user message's text alone, got contents {message.contents!r}"
            )
        return Query(message.text, request.metadata)

    def augment(self, request: AugmentationRequest) -> AugmentationResult:
        query = self._query(request)
        queries = self.query_transformer.transform(query)
        routes = [(q, self.query_router.route(q)) for q in queries]
        jobs = [(q, r) for q, retrievers in routes for r in retrievers]
        if len(jobs) <= 1:
            found_lists = [r.retrieve(q) for q, r in jobs]
        else:
            with concurrent.futures.ThreadPoolExecutor(min(len(jobs), self.max_workers)) as pool:
                found_lists = list(pool.map(lambda job: job[1].retrieve(job[0]), jobs))
        return self._finish(request, routes, found_lists)

    async def aaugment(self, request: AugmentationRequest) -> AugmentationResult:
        query = self._query(request)
        queries = await _call(self.query_transformer, "transform", query)
        routes = [(q, await _call(self.query_router, "route", q)) for q in queries]
        jobs = [(q, r) for q, retrievers in routes for r in retrievers]
        found_lists = await asyncio.gather(*(_call(r, "retrieve", q) for q, r in jobs))
        return await self._afinish(request, routes, list(found_lists))

    def _found(
        self, routes: list[tuple[Query, list[ContentRetriever]]], lists: list[list[Content]]
    ) -> dict[Query, list[list[Content]]]:
        found: dict[Query, list[list[Content]]] = {}
        position = 0
        for query, retrievers in routes:
            found.setdefault(query, []).extend(lists[position : position + len(retrievers)])
            position += len(retrievers)
        return {q: v for q, v in found.items() if v}

    def _finish(
        self,
        request: AugmentationRequest,
        routes: list[tuple[Query, list[ContentRetriever]]],
        lists: list[list[Content]],
    ) -> AugmentationResult:
        found = self._found(routes, lists)
        return self._inject(request, self.content_aggregator.aggregate(found) if found else [])

    async def _afinish(
        self,
        request: AugmentationRequest,
        routes: list[tuple[Query, list[ContentRetriever]]],
        lists: list[list[Content]],
    ) -> AugmentationResult:
        found = self._found(routes, lists)
        contents = await _call(self.content_aggregator, "aggregate", found) if found else []
        return self._inject(request, contents)

    def _inject(self, request: AugmentationRequest, contents: list[Content]) -> AugmentationResult:
        message = self.content_injector.inject(contents, request.user_message)
        return AugmentationResult(message, tuple(contents))


async def _call(stage: object, name: str, argument: Any) -> Any:
    """`stage.a<name>(argument)` when the stage has it, else `<name>` on a worker thread."""
    method = getattr(stage, "a" + name, None)
    if method is not None:
        return await method(argument)
    return await in_thread(getattr(stage, name), argument)
