"""Embedding input types: a query and a document embedded differently, for the models trained so
(e5, bge and nomic take a prefix on the text; Cohere, Voyage and NVIDIA's servers an
``input_type`` field).

A model says it distinguishes them by accepting ``input_type`` in `embed_all` (and
`aembed_all`): ``embed_all(texts, *, input_type: InputType | None = None)``. The retrievers
embed queries as ``"query"``, the `Ingestor` segments as ``"document"``; a model without the
parameter is called as before. `PrefixedEmbeddingModel` gives any model the prefixes its
training used::

    PrefixedEmbeddingModel.e5(LocalEmbeddingModel("/models/e5-small-v2"))

Ingest and query with the same prefixes: the store refuses to compare embeddings made by
another model, and a wrapped model is another model.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeAlias

from .._errors import ConfigurationError
from .._threads import in_thread
from ._embeddings import Embedding, EmbeddingModel

__all__ = ["InputType", "PrefixedEmbeddingModel", "aembed", "embed"]

InputType: TypeAlias = Literal["query", "document"]
"""What a text is embedded as: a query to search with, or a document to be found."""


def _takes_input_type(method: Callable[..., Any]) -> bool:
    try:
        return "input_type" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def embed(model: EmbeddingModel, texts: Sequence[str], input_type: InputType) -> list[Embedding]:
    """`texts` embedded by `model` as `input_type`, when the model distinguishes input types."""
    if _takes_input_type(model.embed_all):
        return model.embed_all(texts, input_type=input_type)  # type: ignore[call-arg]
    return model.embed_all(texts)


async def aembed(model: object, texts: Sequence[str], input_type: InputType) -> list[Embedding]:
    """`embed` for asyncio: `aembed_all` when the model has it, else on a worker thread."""
    aembed_all = getattr(model, "aembed_all", None)
    if aembed_all is None:
        return await in_thread(embed, model, texts, input_type)  # type: ignore[arg-type]
    if _takes_input_type(aembed_all):
        found: list[Embedding] = await aembed_all(texts, input_type=input_type)
    else:
        found = await aembed_all(texts)
    return found


class PrefixedEmbeddingModel:
    """`model` with a prefix put before each query and each document: what e5 (``"query: "``,
    ``"passage: "``), bge and nomic were trained with. `embed_all` without an input type
    embeds documents (what code unaware of input types stores)."""

    def __init__(self, model: EmbeddingModel, *, query_prefix: str, document_prefix: str) -> None:
        if not callable(getattr(model, "embed_all", None)):
            raise ConfigurationError(f"{model!r} is not an embedding model (embed_all)")
        for name, prefix in (("query_prefix", query_prefix), ("document_prefix", document_prefix)):
            if not isinstance(prefix, str):
                raise ConfigurationError(f"`{name}` must be a str, got {prefix!r}")
        if query_prefix == document_prefix:
            raise ConfigurationError(
                "`query_prefix` and `document_prefix` are the same: the model would not tell "
                "queries from documents; use the model itself"
            )
        self.model = model
        self.prefixes: dict[InputType, str] = {"query": query_prefix, "document": document_prefix}
        inner = getattr(model, "model_name", None) or getattr(model, "model", None)
        name = type(model).__name__ + (f":{inner}" if isinstance(inner, str) else "")
        self.model_name = f"{name}+{query_prefix!r}/{document_prefix!r}"

    @classmethod
    def e5(cls, model: EmbeddingModel) -> PrefixedEmbeddingModel:
        """The e5 family's prefixes: ``"query: "`` and ``"passage: "``."""
        return cls(model, query_prefix="query: ", document_prefix="passage: ")

    @classmethod
    def nomic(cls, model: EmbeddingModel) -> PrefixedEmbeddingModel:
        """nomic-embed-text's: ``"search_query: "`` and ``"search_document: "``."""
        return cls(model, query_prefix="search_query: ", document_prefix="search_document: ")

    @classmethod
    def bge(cls, model: EmbeddingModel) -> PrefixedEmbeddingModel:
        """bge (English v1.5)'s: an instruction before queries, nothing before documents."""
        instruction = "Represent this sentence for searching relevant passages: "
        return cls(model, query_prefix=instruction, document_prefix="")

    def __repr__(self) -> str:
        return f"PrefixedEmbeddingModel({self.model!r}, prefixes={self.prefixes!r})"

    @property
    def dimension(self) -> int:
        return self.model.dimension

    def _prefixed(self, texts: Sequence[str], input_type: InputType | None) -> list[str]:
        if isinstance(texts, str):
            raise ConfigurationError("embed_all() takes a list of texts; wrap one text in [ ]")
        if input_type is not None and input_type not in self.prefixes:
            raise ConfigurationError(f"`input_type` is 'query' or 'document', got {input_type!r}")
        prefix = self.prefixes[input_type or "document"]
        return [prefix + text for text in texts]

    def embed_all(
        self, texts: Sequence[str], *, input_type: InputType | None = None
    ) -> list[Embedding]:
        return embed(self.model, self._prefixed(texts, input_type), input_type or "document")

    async def aembed_all(
        self, texts: Sequence[str], *, input_type: InputType | None = None
    ) -> list[Embedding]:
        prefixed = self._prefixed(texts, input_type)
        return await aembed(self.model, prefixed, input_type or "document")
