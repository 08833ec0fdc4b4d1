"""Web search as a content retriever: a `WebSearchEngine` finds pages, and
`WebSearchContentRetriever` makes each result a `Content` (LangChain4j's rules: the text is the
title, a newline, then the page's content or else its snippet; metadata has the `url`).

`SearxngWebSearchEngine` speaks the JSON API of SearXNG, the self-hostable metasearch engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .._errors import ConfigurationError
from .._frozen import FrozenDict
from .._threads import in_thread
from ._http import HttpEndpoint
from ._listeners import ListenedRetriever
from ._values import Content, Query, TextSegment

__all__ = [
    "AsyncWebSearchEngine",
    "SearxngWebSearchEngine",
    "WebSearchContentRetriever",
    "WebSearchEngine",
    "WebSearchResult",
]


@dataclass(frozen=True, slots=True)
class WebSearchResult:
    """One page a search found: its `title` and `url`, the engine's `snippet`, the page's
    `content` when the engine gives it, and the engine's other `metadata`."""

    title: str
    url: str
    snippet: str | None = None
    content: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=FrozenDict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", FrozenDict(self.metadata))

    @property
    def text(self) -> str:
        """What the model reads: the title, then the content or else the snippet."""
        body = self.content if self.content is not None else self.snippet
        return self.title if not body else f"{self.title}\n{body}"


@runtime_checkable
class WebSearchEngine(Protocol):
    """Finds web pages for a query, blocking."""

    def search(self, query: str, max_results: int) -> Sequence[WebSearchResult]: ...


@runtime_checkable
class AsyncWebSearchEngine(Protocol):
    """Finds web pages for a query, without blocking the event loop."""

    async def asearch(self, query: str, max_results: int) -> Sequence[WebSearchResult]: ...


class WebSearchContentRetriever(ListenedRetriever):
    """A content retriever over a web search engine: one `Content` per result, at most
    `max_results` (5 by default), in the engine's order. `listeners` are told of each
    retrieval."""

    def __init__(
        self,
        engine: WebSearchEngine | AsyncWebSearchEngine,
        *,
        max_results: int = 5,
        listeners: Sequence[object] = (),
    ) -> None:
        if not callable(getattr(engine, "search", None)) and not callable(
            getattr(engine, "asearch", None)
        ):
            raise ConfigurationError(
                f"{engine!r} is not a web search engine: it needs search(query, max_results) "
                f"or asearch(query, max_results)"
            )
        if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
            raise ConfigurationError(f"`max_results` must be a positive int, got {max_results!r}")
        self.engine = engine
        self.max_results = max_results
        self.listeners = tuple(listeners)

    def __repr__(self) -> str:
        return f"WebSearchContentRetriever({self.engine!r})"

    def _retrieve(self, query: Query) -> list[Content]:
        search = getattr(self.engine, "search", None)
        if search is None:
            raise ConfigurationError(
                f"{self.engine!r} can only be awaited (asearch): use the retriever in an async "
                f"service, or give an engine with search(query, max_results)"
            )
        return _contents(search(query.text, self.max_results), self.max_results)

    async def _aretrieve(self, query: Query) -> list[Content]:
        asearch = getattr(self.engine, "asearch", None)
        if asearch is not None:
            found = await asearch(query.text, self.max_results)
        else:
            found = await in_thread(self.engine.search, query.text, self.max_results)  # type: ignore[union-attr]
        return _contents(found, self.max_results)


def _contents(results: Sequence[WebSearchResult], limit: int) -> list[Content]:
    return [
        Content(TextSegment(result.text, {**result.metadata, "url": result.url}))
        for result in list(results)[:limit]
    ]


class SearxngWebSearchEngine:
    """Searches a SearXNG instance through its JSON API (`/search?format=json`; the instance
    must list `json` under `search.formats` in its settings).

    ``SearxngWebSearchEngine("http://localhost:8080")``; `categories`, `language`, `engines`,
    `time_range` and `safesearch` pass through as SearXNG's parameters. A failing instance
    raises `ModelError` with its status and message.
    """

    def __init__(
        self,
        base_url: str,
        *,
        categories: Sequence[str] = (),
        engines: Sequence[str] = (),
        language: str | None = None,
        time_range: str | None = None,
        safesearch: int | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"`base_url` is the SearXNG instance's URL (http://... or https://...), got "
                f"{base_url!r}"
            )
        self.endpoint = HttpEndpoint(
            "SearXNG", base_url, headers=headers, timeout=timeout, owner="SearxngWebSearchEngine"
        )
        params: dict[str, Any] = {"format": "json"}
        if categories:
            params["categories"] = ",".join(categories)
        if engines:
            params["engines"] = ",".join(engines)
        for name, value in (
            ("language", language),
            ("time_range", time_range),
            ("safesearch", safesearch),
        ):
            if value is not None:
                params[name] = value
        self._params = params

    def __repr__(self) -> str:
        return f"SearxngWebSearchEngine({self.endpoint.base_url!r})"

    def search(self, query: str, max_results: int) -> list[WebSearchResult]:
        return _results(self.endpoint.get("/search", {**self._params, "q": query}), max_results)

    async def asearch(self, query: str, max_results: int) -> list[WebSearchResult]:
        answer = await self.endpoint.aget("/search", {**self._params, "q": query})
        return _results(answer, max_results)

    def close(self) -> None:
        self.endpoint.close()

    async def aclose(self) -> None:
        await self.endpoint.aclose()


def _results(answer: Any, limit: int) -> list[WebSearchResult]:
    found: list[WebSearchResult] = []
    rows = answer.get("results") if isinstance(answer, Mapping) else None
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, Mapping) or not row.get("url"):
            continue
        metadata = {
            name: row[name]
            for name in ("engine", "score", "category", "publishedDate")
            if row.get(name) is not None
        }
        found.append(
            WebSearchResult(
                title=str(row.get("title") or row["url"]),
                url=str(row["url"]),
                snippet=row.get("content") or None,
                metadata=metadata,
            )
        )
        if len(found) == limit:
            break
    return found
