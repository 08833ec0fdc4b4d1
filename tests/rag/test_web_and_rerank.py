"""Web search through SearXNG's JSON API and re-ranking through a `/rerank` server, each against
a local server speaking the protocol, and both inside the retrieval pipeline."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator, Sequence
from urllib.parse import parse_qs, urlsplit

import pytest

from chatmemory import ConfigurationError, ModelError, UserMessage
from chatmemory.rag import (
    AugmentationRequest,
    Content,
    ContentKey,
    DefaultRetrievalAugmentor,
    Query,
    QueryMetadata,
    ReRankingContentAggregator,
    RerankScoringModel,
    SearxngWebSearchEngine,
    TextSegment,
    WebSearchContentRetriever,
    WebSearchEngine,
    WebSearchResult,
)
from tests.models.fake_server import FakeServer, Reply, serve


@pytest.fixture
def server() -> Iterator[FakeServer]:
    yield from serve()


def query(text: str) -> Query:
    return Query(text, QueryMetadata(user_message=UserMessage(text)))


SEARXNG = {
    "query": "python memory",
    "results": [
        {
            "url": "https://a.example/one",
            "title": "One",
            "content": "first snippet",
            "engine": "duckduckgo",
            "score": 2.5,
            "category": "general",
        },
        {"url": "https://b.example/two", "title": "", "content": "", "engine": "bing"},
        {"title": "no url, skipped"},
        {"url": "https://c.example/three", "title": "Three", "content": "third"},
    ],
}


# -- SearXNG --------------------------------------------------------------------------------------


def test_searxng_asks_the_json_api_and_results_become_contents(server: FakeServer) -> None:
    server.reply(Reply(body=SEARXNG))
    engine = SearxngWebSearchEngine(
        server.url, categories=["general", "it"], language="en", safesearch=1
    )
    retriever = WebSearchContentRetriever(engine, max_results=2)
    contents = retriever.retrieve(query("python memory"))
    (sent,) = server.requests
    url = urlsplit(sent.path)
    assert (sent.method, url.path) == ("GET", "/search")
    assert parse_qs(url.query) == {
        "q": ["python memory"],
        "format": ["json"],
        "categories": ["general,it"],
        "language": ["en"],
        "safesearch": ["1"],
    }
    assert contents == [
        Content(
            TextSegment(
                "One\nfirst snippet",
                {
                    "url": "https://a.example/one",
                    "engine": "duckduckgo",
                    "score": 2.5,
                    "category": "general",
                },
            )
        ),
        Content(
            TextSegment("https://b.example/two", {"url": "https://b.example/two", "engine": "bing"})
        ),
    ]
    engine.close()


def test_searxng_async_search_and_its_errors(server: FakeServer) -> None:
    server.reply(
        Reply(body=SEARXNG),
        Reply(403, text="<html>Forbidden</html>"),
        Reply(200, text="<html>not json</html>"),
    )
    engine = SearxngWebSearchEngine(server.url, engines=["wikipedia"], time_range="year")

    async def main() -> list[WebSearchResult]:
        try:
            found = await engine.asearch("q", 5)
            with pytest.raises(ModelError, match=r"SearXNG answered HTTP 403 .*Forbidden") as e:
                await engine.asearch("q", 5)
            assert (e.value.status, e.value.retriable) == (403, False)
            with pytest.raises(ModelError, match="sent something other than JSON"):
                await engine.asearch("q", 5)
            return found
        finally:
            await engine.aclose()

    found = asyncio.run(main())
    assert [r.url for r in found] == [
        "https://a.example/one",
        "https://b.example/two",
        "https://c.example/three",
    ]
    assert parse_qs(urlsplit(server.requests[0].path).query)["engines"] == ["wikipedia"]


def test_an_unreachable_searxng_is_a_retriable_error_naming_the_url() -> None:
    with FakeServer() as dead:
        url = dead.url
    engine = SearxngWebSearchEngine(url, timeout=2)
    with pytest.raises(ModelError, match=f"cannot reach SearXNG at {url}") as e:
        engine.search("q", 3)
    assert e.value.retriable
    engine.close()


def test_web_search_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="SearXNG instance's URL"):
        SearxngWebSearchEngine("localhost:8080")
    with pytest.raises(ConfigurationError, match="is not a web search engine"):
        WebSearchContentRetriever(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="`max_results` must be a positive int"):
        WebSearchContentRetriever(Pages([]), max_results=0)


class Pages:
    """A web search engine from a list, blocking only."""

    def __init__(self, results: Sequence[WebSearchResult]) -> None:
        self.results = list(results)

    def search(self, query: str, max_results: int) -> list[WebSearchResult]:
        return self.results[:max_results]


class AsyncPages:
    async def asearch(self, query: str, max_results: int) -> list[WebSearchResult]:
        return [WebSearchResult("T", "https://t", content="page text", snippet="ignored")]


def test_web_results_use_content_before_snippet_and_any_engine_works() -> None:
    engine = Pages([WebSearchResult("Title", "https://x", snippet="snip", metadata={"k": 1})])
    assert isinstance(engine, WebSearchEngine)
    retriever = WebSearchContentRetriever(engine)
    assert repr(retriever).startswith("WebSearchContentRetriever(")
    assert asyncio.run(retriever.aretrieve(query("q"))) == [
        Content(TextSegment("Title\nsnip", {"k": 1, "url": "https://x"}))
    ]
    async_only = WebSearchContentRetriever(AsyncPages())
    assert [c.segment.text for c in asyncio.run(async_only.aretrieve(query("q")))] == [
        "T\npage text"
    ]
    with pytest.raises(ConfigurationError, match="can only be awaited"):
        async_only.retrieve(query("q"))


# -- /rerank ---------------------------------------------------------------------------------------

SEGMENTS = [TextSegment("apples"), TextSegment("pears"), TextSegment("plums")]


def test_cohere_dialect_scores_come_back_in_segment_order(server: FakeServer) -> None:
    server.reply(
        Reply(
            body={
                "results": [
                    {"index": 2, "relevance_score": 0.9},
                    {"index": 0, "relevance_score": 0.5},
                    {"index": 1, "relevance_score": 0.1},
                ]
            }
        )
    )
    model = RerankScoringModel(f"{server.url}/v1", model="bge-reranker", api_key="key")
    assert model.score_all(SEGMENTS, "fruit") == [0.5, 0.1, 0.9]
    (sent,) = server.requests
    assert sent.path == "/v1/rerank"
    assert sent.headers["authorization"] == "Bearer key"
    assert sent.body == {
        "model": "bge-reranker",
        "query": "fruit",
        "documents": ["apples", "pears", "plums"],
        "top_n": 3,
    }
    assert model.score_all([], "fruit") == []
    model.close()


def test_tei_dialect_and_async_scoring(server: FakeServer) -> None:
    server.reply(Reply(body=[{"index": 1, "score": 0.7}, {"index": 0, "score": 0.2}]))
    model = RerankScoringModel(server.url, dialect="tei")

    async def main() -> list[float]:
        try:
            assert await model.ascore_all([], "q") == []
            return await model.ascore_all(SEGMENTS[:2], "q")
        finally:
            await model.aclose()

    assert asyncio.run(main()) == [0.2, 0.7]
    assert server.requests[0].body == {"query": "q", "texts": ["apples", "pears"]}
    assert "authorization" not in server.requests[0].headers


def test_rerank_errors_say_what_went_wrong(server: FakeServer) -> None:
    server.reply(
        Reply(body={"results": [{"index": 0, "relevance_score": 0.3}]}),
        Reply(429, {"error": {"message": "slow down"}}),
    )
    model = RerankScoringModel(server.url, model="m")
    with pytest.raises(ModelError, match=r"scored 1 of 3 segments \(missing indexes \[1, 2\]\)"):
        model.score_all(SEGMENTS, "q")
    with pytest.raises(ModelError, match=r"HTTP 429 .*slow down") as e:
        model.score_all(SEGMENTS, "q")
    assert e.value.retriable
    with pytest.raises(ConfigurationError, match="needs `model`"):
        RerankScoringModel(server.url)
    with pytest.raises(ConfigurationError, match="'cohere' or 'tei'"):
        RerankScoringModel(server.url, dialect="jina")  # type: ignore[arg-type]
    assert repr(model) == f"RerankScoringModel({server.url!r}, dialect='cohere')"
    model.close()


def test_web_search_re_ranked_by_a_server_inside_the_augmentor(server: FakeServer) -> None:
    server.reply(
        Reply(body=SEARXNG),
        Reply(
            body={
                "results": [
                    {"index": 0, "relevance_score": 0.2},
                    {"index": 1, "relevance_score": 0.8},
                    {"index": 2, "relevance_score": 0.6},
                ]
            }
        ),
    )
    engine = SearxngWebSearchEngine(server.url)
    reranker = RerankScoringModel(server.url, model="m")
    augmentor = DefaultRetrievalAugmentor(
        content_retriever=WebSearchContentRetriever(engine),
        content_aggregator=ReRankingContentAggregator(reranker, min_score=0.5),
    )
    message = UserMessage("python memory")
    result = augmentor.augment(AugmentationRequest(message, QueryMetadata(user_message=message)))
    contents = result.contents
    assert [c.segment.text for c in contents] == ["https://b.example/two", "Three\nthird"]
    assert [c.metadata[ContentKey.RERANKED_SCORE] for c in contents] == [0.8, 0.6]
    engine.close()
    reranker.close()


def test_a_server_that_never_answers_times_out_with_a_retriable_error() -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        host, port = silent.getsockname()
        model = RerankScoringModel(f"http://{host}:{port}", dialect="tei", timeout=0.2)
        with pytest.raises(ModelError, match="did not answer in time") as e:
            model.score_all(SEGMENTS, "q")
        assert e.value.retriable
        model.close()
