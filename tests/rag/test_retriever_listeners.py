"""Listeners on content retrievers (LangChain4j's ContentRetrieverListener): request, then the
contents or the error, sync and async, on every built-in retriever."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from chatmemory.rag import (
    ContentRetrieverErrorContext,
    ContentRetrieverListener,
    ContentRetrieverRequestContext,
    ContentRetrieverResponseContext,
    EmbeddingStoreContentRetriever,
    FullTextContentRetriever,
    HashingEmbeddingModel,
    HybridContentRetriever,
    Query,
    TextSegment,
    WebSearchContentRetriever,
    WebSearchResult,
)
from chatmemory.rag.sqlite import SqliteEmbeddingStore

TEXTS = ["refunds take five days", "shipping is free", "returns within thirty days"]


class Recorder(ContentRetrieverListener):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def on_request(self, context: ContentRetrieverRequestContext) -> None:
        context.attributes["query"] = context.query.text
        self.seen.append(("request", context.retriever))

    def on_response(self, context: ContentRetrieverResponseContext) -> None:
        texts = [c.segment.text for c in context.contents]
        self.seen.append(("response", (texts, context.attributes)))

    def on_error(self, context: ContentRetrieverErrorContext) -> None:
        self.seen.append(("error", (str(context.error), context.attributes)))


class Raising:
    def on_request(self, context: object) -> None:
        raise RuntimeError("listener bug")


class Engine:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def search(self, query: str, max_results: int) -> Sequence[WebSearchResult]:
        if self.fail:
            raise ConnectionError("search engine down")
        return [WebSearchResult(title="Refunds", url="https://x.test/r", snippet="five days")]


@pytest.fixture
def store() -> Iterator[SqliteEmbeddingStore]:
    store = SqliteEmbeddingStore()
    model = HashingEmbeddingModel()
    store.add_all(model.embed_all(TEXTS), [TextSegment(t) for t in TEXTS])
    yield store
    store.close()


def retrievers(store: SqliteEmbeddingStore, listener: object) -> list[Any]:
    model = HashingEmbeddingModel()
    return [
        EmbeddingStoreContentRetriever(store, model, max_results=1, listeners=[listener]),
        FullTextContentRetriever(store, max_results=1, listeners=[listener]),
        HybridContentRetriever(store, model, max_results=1, listeners=[listener]),
        WebSearchContentRetriever(Engine(), max_results=1, listeners=[listener]),
    ]


def test_every_retriever_tells_the_query_then_its_contents(store: SqliteEmbeddingStore) -> None:
    query = Query("how long do refunds take")
    for retriever in retrievers(store, recorder := Recorder()):
        found = [c.segment.text for c in retriever.retrieve(query)]
        afound = [c.segment.text for c in asyncio.run(retriever.aretrieve(query))]
        assert found == afound
        annotated = {"query": query.text}
        assert recorder.seen == [("request", retriever), ("response", (found, annotated))] * 2
        recorder.seen.clear()


def test_a_failing_retrieval_tells_on_error_and_raises() -> None:
    recorder = Recorder()
    retriever = WebSearchContentRetriever(Engine(fail=True), listeners=[recorder])
    with pytest.raises(ConnectionError):
        retriever.retrieve(Query("q"))
    with pytest.raises(ConnectionError):
        asyncio.run(retriever.aretrieve(Query("q")))
    assert [kind for kind, _ in recorder.seen] == ["request", "error"] * 2
    assert recorder.seen[1] == ("error", ("search engine down", {"query": "q"}))


def test_a_listener_that_raises_never_breaks_the_retrieval(
    store: SqliteEmbeddingStore, caplog: pytest.LogCaptureFixture
) -> None:
    retriever = FullTextContentRetriever(store, max_results=1, listeners=[Raising()])
    with caplog.at_level(logging.ERROR, logger="chatmemory.listeners"):
        found = retriever.retrieve(Query("free shipping"))
    assert [c.segment.text for c in found] == ["shipping is free"]
    assert "raised in on_request" in caplog.records[0].getMessage()
