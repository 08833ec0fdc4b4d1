"""`RerankScoringModel`: a `ScoringModel` over the `/rerank` HTTP API that Cohere, Jina, vLLM and
Hugging Face's Text Embeddings Inference serve.

Two dialects of one idea (a query and documents in, a relevance score per document out):
- ``"cohere"`` (Cohere, Jina, vLLM): ``{"model", "query", "documents": [...], "top_n"}`` →
  ``{"results": [{"index", "relevance_score"}, ...]}``;
- ``"tei"`` (Text Embeddings Inference): ``{"query", "texts": [...]}`` →
  ``[{"index", "score"}, ...]``.
Scores come back in the order of the segments, whatever order the server sorts them in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .._errors import ConfigurationError, ModelError
from ._http import HttpEndpoint
from ._values import TextSegment

__all__ = ["RerankScoringModel"]

Dialect = Literal["cohere", "tei"]


class RerankScoringModel:
    """Scores segments against a query with a re-ranking server.

    Cohere: ``RerankScoringModel("https://api.cohere.com/v2", model="rerank-v3.5",
    api_key=...)``; Jina: ``RerankScoringModel("https://api.jina.ai/v1",
    model="jina-reranker-v2-base-multilingual", api_key=...)``; vLLM:
    ``RerankScoringModel("http://localhost:8000/v1", model="BAAI/bge-reranker-base")``; TEI:
    ``RerankScoringModel("http://localhost:8080", dialect="tei")``. Give it to
    `ReRankingContentAggregator`. A failing server raises `ModelError`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        dialect: Dialect = "cohere",
        path: str = "/rerank",
        timeout: float = 30.0,
    ) -> None:
        if dialect not in ("cohere", "tei"):
            raise ConfigurationError(f"`dialect` is 'cohere' or 'tei', got {dialect!r}")
        if dialect == "cohere" and not model:
            raise ConfigurationError(
                "the 'cohere' dialect (Cohere, Jina, vLLM) needs `model`, the re-ranker's name"
            )
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.endpoint = HttpEndpoint(
            "Rerank server", base_url, headers=headers, timeout=timeout, owner="RerankScoringModel"
        )
        self.model = model
        self.dialect: Dialect = dialect
        self.path = path

    def __repr__(self) -> str:
        return f"RerankScoringModel({self.endpoint.base_url!r}, dialect={self.dialect!r})"

    def score_all(self, segments: Sequence[TextSegment], query: str) -> list[float]:
        """One score per segment, in the segments' order."""
        if not segments:
            return []
        return self._scores(self.endpoint.post(self.path, self._body(segments, query)), segments)

    async def ascore_all(self, segments: Sequence[TextSegment], query: str) -> list[float]:
        """The same, without blocking the event loop."""
        if not segments:
            return []
        answer = await self.endpoint.apost(self.path, self._body(segments, query))
        return self._scores(answer, segments)

    def close(self) -> None:
        self.endpoint.close()

    async def aclose(self) -> None:
        await self.endpoint.aclose()

    def _body(self, segments: Sequence[TextSegment], query: str) -> dict[str, Any]:
        texts = [segment.text for segment in segments]
        if self.dialect == "tei":
            return {"query": query, "texts": texts}
        return {"model": self.model, "query": query, "documents": texts, "top_n": len(texts)}

    def _scores(self, answer: Any, segments: Sequence[TextSegment]) -> list[float]:
        rows = answer.get("results") if isinstance(answer, Mapping) else answer
        field = "score" if self.dialect == "tei" else "relevance_score"
        scores: list[float | None] = [None] * len(segments)
        for row in rows if isinstance(rows, list) else []:
            index = row.get("index") if isinstance(row, Mapping) else None
            value = row.get(field) if isinstance(row, Mapping) else None
            if isinstance(index, int) and 0 <= index < len(scores) and value is not None:
                scores[index] = float(value)
        missing = [i for i, score in enumerate(scores) if score is None]
        if missing:
            raise ModelError(
                f"the re-ranker at {self.endpoint.base_url} scored {len(segments) - len(missing)} "
                f"of {len(segments)} segments (missing indexes {missing[:5]}); check `dialect`",
                retriable=False,
                provider="rerank",
            )
        return [score for score in scores if score is not None]
