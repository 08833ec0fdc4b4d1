"""`OpenAiEmbeddingModel`: the `/embeddings` endpoint of OpenAI and of every compatible server
(Ollama, vLLM, Hugging Face TEI, LM Studio), on the official `openai` SDK."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .._errors import ConfigurationError, ModelError
from ..models._openai_clients import OpenAiClients, require_openai
from ..models._sdk import mapped_errors
from ._embeddings import Embedding

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI

__all__ = ["OpenAiEmbeddingModel"]

_KNOWN = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAiEmbeddingModel:
    """Embeds texts `batch_size` at a time (one request per batch). `dimensions` asks the
    text-embedding-3 models for shorter vectors; `dimension` is known without a call for
    OpenAI's models and `dimensions`, and is otherwise measured with one call on first use.
    `base_url`, `api_key`, `timeout`, `max_retries`, `client` and `async_client` work as in
    `OpenAiChatModel`; what fails raises `ModelError`."""

    def __init__(
        self,
        *,
        model: str = "text-embedding-3-small",
        dimensions: int | None = None,
        batch_size: int = 512,
        base_url: str | None = None,
        api_key: str | None = None,
        organization: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        client: OpenAI | None = None,
        async_client: AsyncOpenAI | None = None,
    ) -> None:
        require_openai("OpenAiEmbeddingModel")
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"`model` must be a non-empty str, got {model!r}")
        for name, value in (("dimensions", dimensions), ("batch_size", batch_size)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigurationError(f"`{name}` must be a positive int, got {value!r}")
        self.model = self.model_name = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self._dimension = dimensions or _KNOWN.get(model)
        self._clients = OpenAiClients(
            model,
            base_url=base_url,
            api_key=api_key,
            organization=organization,
            timeout=timeout,
            max_retries=max_retries,
            client=client,
            async_client=async_client,
        )

    def __repr__(self) -> str:
        base_url = self._clients.base_url
        where = f", base_url={base_url!r}" if base_url else ""
        return f"OpenAiEmbeddingModel(model={self.model!r}{where})"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = self.embed_all(["dimension"])[0].dimension
        return self._dimension

    def close(self) -> None:
        self._clients.close()

    async def aclose(self) -> None:
        await self._clients.aclose()

    def _arguments(self, texts: Sequence[str]) -> dict[str, Any]:
        arguments: dict[str, Any] = {"model": self.model, "input": list(texts)}
        if self.dimensions is not None:
            arguments["dimensions"] = self.dimensions
        return arguments

    def embed_all(self, texts: Sequence[str]) -> list[Embedding]:
        out: list[Embedding] = []
        for batch in _batches(texts, self.batch_size):
            with mapped_errors(self._clients.errors, self.model), self._unreadable(batch):
                answer = self._clients.sync().embeddings.create(**self._arguments(batch))
            out.extend(self._read(batch, answer.to_dict()))
        return out

    async def aembed_all(self, texts: Sequence[str]) -> list[Embedding]:
        out: list[Embedding] = []
        for batch in _batches(texts, self.batch_size):
            with mapped_errors(self._clients.errors, self.model), self._unreadable(batch):
                answer = await self._clients.async_().embeddings.create(**self._arguments(batch))
            out.extend(self._read(batch, answer.to_dict()))
        return out

    @contextmanager
    def _unreadable(self, batch: Sequence[str]) -> Iterator[None]:
        try:
            yield
        except ValueError as error:  # the SDK's own check of the answer (no data...)
            raise self._error(f"{self.model} answered {len(batch)} texts with {error}") from None

    def _error(self, message: str) -> ModelError:
        return ModelError(message, retriable=True, provider="openai")

    def _read(self, batch: Sequence[str], answer: dict[str, Any]) -> list[Embedding]:
        data = sorted(answer.get("data") or [], key=lambda item: item.get("index", 0))
        if len(data) != len(batch):
            raise self._error(
                f"{self.model} returned {len(data)} embeddings for {len(batch)} texts"
            )
        embeddings = [Embedding(tuple(item["embedding"])) for item in data]
        if self._dimension is None:
            self._dimension = embeddings[0].dimension
        return embeddings


def _batches(texts: Sequence[str], size: int) -> list[list[str]]:
    if isinstance(texts, str):
        raise ConfigurationError("embed_all() takes a list of texts; wrap one text in [ ]")
    items = list(texts)
    for text in items:
        if not isinstance(text, str) or not text:
            raise ConfigurationError(f"only non-empty text can be embedded, got {text!r}")
    return [items[i : i + size] for i in range(0, len(items), size)]
