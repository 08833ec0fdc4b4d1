"""`OpenAiEmbeddingModel`: the `/embeddings` endpoint of OpenAI and of every compatible server
(Ollama, vLLM, Hugging Face TEI, LM Studio), on the official `openai` SDK.

Vectors are asked for as base64 (the SDK's own default, a third of the bytes of JSON numbers)
and read here, numbers or base64, with the answer's shape checked (`models/_wire.py`): what
cannot be read is a `ModelError` naming where.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._codec.invalid import describe
from .._errors import ConfigurationError, ModelError, SerializationError
from ..models._openai_clients import OpenAiClients, require_openai
from ..models._sdk import mapped_errors
from ..models._wire import answer_object, json_array, json_index, json_object
from ._embeddings import Embedding
from ._input_types import InputType

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
    `OpenAiChatModel`; what fails raises `ModelError`.

    `input_types` names, for servers that embed queries and documents differently behind this
    protocol (Cohere's compatibility API, NVIDIA NIM, a LiteLLM proxy to Voyage), the
    ``input_type`` each is sent with: ``{"query": "search_query", "document":
    "search_document"}``. Without it no input type is sent (OpenAI's models have none)."""

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
        input_types: Mapping[InputType, str] | None = None,
    ) -> None:
        require_openai("OpenAiEmbeddingModel")
        if input_types is not None and (
            not isinstance(input_types, Mapping)
            or set(input_types) != {"query", "document"}
            or not all(isinstance(v, str) and v for v in input_types.values())
        ):
            raise ConfigurationError(
                "`input_types` names what the server calls a query and a document: "
                f"{{'query': 'search_query', 'document': 'search_document'}}, got {input_types!r}"
            )
        self.input_types = None if input_types is None else dict(input_types)
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

    def _arguments(self, texts: Sequence[str], input_type: InputType | None) -> dict[str, Any]:
        # Given (as the SDK would add it), `encoding_format` makes the SDK hand over the answer
        # as it came: its own decoding fails on answers that are not the protocol's. `_read`
        # decodes and checks.
        arguments: dict[str, Any] = {
            "model": self.model,
            "input": list(texts),
            "encoding_format": "base64",
        }
        if self.dimensions is not None:
            arguments["dimensions"] = self.dimensions
        if self.input_types is not None:  # documents unless told: what code unaware stores
            arguments["extra_body"] = {"input_type": self.input_types[input_type or "document"]}
        return arguments

    def embed_all(
        self, texts: Sequence[str], *, input_type: InputType | None = None
    ) -> list[Embedding]:
        out: list[Embedding] = []
        for batch in _batches(texts, self.batch_size):
            arguments = self._arguments(batch, input_type)
            with mapped_errors(self._clients.errors, self.model):
                answer = self._clients.sync().embeddings.create(**arguments)
                out.extend(self._read(batch, answer))
        return out

    async def aembed_all(
        self, texts: Sequence[str], *, input_type: InputType | None = None
    ) -> list[Embedding]:
        out: list[Embedding] = []
        for batch in _batches(texts, self.batch_size):
            arguments = self._arguments(batch, input_type)
            with mapped_errors(self._clients.errors, self.model):
                answer = await self._clients.async_().embeddings.create(**arguments)
                out.extend(self._read(batch, answer))
        return out

    def _read(self, batch: Sequence[str], answer: object) -> list[Embedding]:
        """The embeddings of `batch` in the SDK's `answer`, in the order of the texts."""
        data = json_array(
            answer_object(self._clients.errors, self.model, answer).get("data"), "data"
        )
        if len(data) != len(batch):  # OpenAI's answer is sometimes empty under load
            raise ModelError(
                f"{self.model} returned {len(data)} embeddings for {len(batch)} texts",
                retriable=True,
                provider="openai",
            )
        items = sorted(
            (_item(given, f"data[{i}]") for i, given in enumerate(data)), key=lambda item: item[0]
        )
        embeddings = [embedding for _, embedding in items]
        if self._dimension is None:
            self._dimension = embeddings[0].dimension
        return embeddings


def _item(given: object, where: str) -> tuple[int, Embedding]:
    """The index and embedding of one item of the answer's `data`."""
    item = json_object(given, where, required=True)
    index = json_index(item.get("index"), f"{where}.index")
    vector = item.get("embedding")
    if isinstance(vector, str):
        vector = _float32s(vector, f"{where}.embedding")
    if isinstance(vector, list) and vector:
        odd = next((x for x in vector if not _is_number(x)), None)
        if odd is None:
            return index, Embedding(vector)
        got = f"an array holding {describe(odd)}"
    else:
        got = "an empty array" if isinstance(vector, list) else describe(vector)
    raise SerializationError(f"`{where}.embedding` must be an array of numbers, got {got}")


def _float32s(text: str, where: str) -> list[float]:
    """The little-endian float32 numbers base64 `text` holds (OpenAI's base64 encoding)."""
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error:  # not base64 at all
        raw = b""
    if not raw or len(raw) % 4:
        raise SerializationError(
            f"`{where}` is not base64 of float32 numbers, got {describe(text)}"
        )
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _batches(texts: Sequence[str], size: int) -> list[list[str]]:
    if isinstance(texts, str):
        raise ConfigurationError("embed_all() takes a list of texts; wrap one text in [ ]")
    items = list(texts)
    for text in items:
        if not isinstance(text, str) or not text:
            raise ConfigurationError(f"only non-empty text can be embedded, got {text!r}")
    return [items[i : i + size] for i in range(0, len(items), size)]
