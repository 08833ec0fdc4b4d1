"""Embedding input types: the retrievers embed queries as queries, the Ingestor documents as
documents, for models that tell them apart (an `input_type` parameter, or the prefixes of
`PrefixedEmbeddingModel`); models without the parameter are called as before."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from chatmemory import ConfigurationError
from chatmemory.rag import (
    Document,
    Embedding,
    EmbeddingStoreContentRetriever,
    HybridContentRetriever,
    Ingestor,
    InMemoryEmbeddingStore,
    InputType,
    PrefixedEmbeddingModel,
    Query,
)

from .doubles import WordsModel


class TypedModel(WordsModel):
    """Records the input type of each call; sync only."""

    def __init__(self) -> None:
        super().__init__()
        self.types: list[InputType | None] = []

    def embed_all(
        self, texts: Sequence[str], *, input_type: InputType | None = None
    ) -> list[Embedding]:
        self.types.append(input_type)
        return super().embed_all(texts)


class AsyncTypedModel(TypedModel):
    async def aembed_all(
        self, texts: Sequence[str], *, input_type: InputType | None = None
    ) -> list[Embedding]:
        self.types.append(input_type)
        return WordsModel.embed_all(self, texts)


class AsyncUntypedModel(WordsModel):
    async def aembed_all(self, texts: Sequence[str]) -> list[Embedding]:
        return self.embed_all(texts)


def ingested(model: object) -> InMemoryEmbeddingStore:
    store = InMemoryEmbeddingStore()
    Ingestor(model, store).ingest(  # type: ignore[arg-type]
        [Document("Refunds take five business days."), Document("Parcels ship in a day.")]
    )
    return store


@pytest.mark.parametrize("model_type", [TypedModel, AsyncTypedModel])
def test_queries_are_embedded_as_queries_and_documents_as_documents(
    model_type: type[TypedModel],
) -> None:
    model = model_type()
    store = ingested(model)
    assert model.types == ["document", "document"]  # a call per document
    retriever = EmbeddingStoreContentRetriever(store, model, max_results=1)
    assert retriever.retrieve(Query("refunds"))[0].text == "Refunds take five business days."
    found = asyncio.run(retriever.aretrieve(Query("refunds")))
    assert found[0].text == "Refunds take five business days."
    hybrid = HybridContentRetriever(store, model, max_results=1)
    hybrid.retrieve(Query("parcels"))
    assert model.types == ["document", "document", "query", "query", "query"]


def test_models_without_input_types_are_called_as_before() -> None:
    for model in (WordsModel(), AsyncUntypedModel()):
        store = ingested(model)
        retriever = EmbeddingStoreContentRetriever(store, model, max_results=1)
        assert retriever.retrieve(Query("refunds"))[0].text.startswith("Refunds")
        assert asyncio.run(retriever.aretrieve(Query("parcels")))[0].text.startswith("Parcels")
        assert ["refunds"] in model.calls
        assert ["parcels"] in model.calls


@pytest.mark.parametrize(
    ("make", "query", "document"),
    [
        (PrefixedEmbeddingModel.e5, "query: ", "passage: "),
        (PrefixedEmbeddingModel.nomic, "search_query: ", "search_document: "),
        (
            PrefixedEmbeddingModel.bge,
            "Represent this sentence for searching relevant passages: ",
            "",
        ),
    ],
)
def test_prefixes_go_before_queries_and_documents(make: object, query: str, document: str) -> None:
    inner = WordsModel()
    model = make(inner)  # type: ignore[operator]
    store = ingested(model)
    assert inner.calls == [
        [f"{document}Refunds take five business days."],
        [f"{document}Parcels ship in a day."],
    ]
    retriever = EmbeddingStoreContentRetriever(store, model, max_results=1)
    retriever.retrieve(Query("refunds"))
    asyncio.run(retriever.aretrieve(Query("parcels")))
    assert inner.calls[2:] == [[f"{query}refunds"], [f"{query}parcels"]]
    assert model.embed_all(["x"]) == inner.embed_all([f"{document}x"])  # no type: a document
    assert model.dimension == inner.dimension


def test_a_prefixed_model_passes_the_input_type_on() -> None:
    inner = AsyncTypedModel()
    model = PrefixedEmbeddingModel(inner, query_prefix="q: ", document_prefix="d: ")
    model.embed_all(["a"], input_type="query")
    asyncio.run(model.aembed_all(["b"], input_type="query"))
    asyncio.run(model.aembed_all(["c"]))
    assert inner.types == ["query", "query", "document"]
    assert inner.calls == [["q: a"], ["q: b"], ["d: c"]]
    assert "WordsModel" not in model.model_name
    assert model.model_name == "AsyncTypedModel+'q: '/'d: '"
    assert repr(model).startswith("PrefixedEmbeddingModel(")


def test_a_prefixed_model_refuses_bad_settings() -> None:
    with pytest.raises(ConfigurationError, match="not an embedding model"):
        PrefixedEmbeddingModel(object(), query_prefix="q", document_prefix="d")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="`query_prefix` must be a str"):
        PrefixedEmbeddingModel(WordsModel(), query_prefix=None, document_prefix="d")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="are the same"):
        PrefixedEmbeddingModel(WordsModel(), query_prefix="x", document_prefix="x")
    model = PrefixedEmbeddingModel.e5(WordsModel())
    with pytest.raises(ConfigurationError, match="list of texts"):
        model.embed_all("one")
    with pytest.raises(ConfigurationError, match="'query' or 'document'"):
        model.embed_all(["one"], input_type="passage")  # type: ignore[arg-type]


class NoSignature:
    """A callable inspect cannot read (as some C functions): taken as without input types."""

    __signature__ = "unreadable"

    def __call__(self, texts: Sequence[str]) -> list[Embedding]:
        return WordsModel().embed_all(texts)


def test_a_model_whose_signature_cannot_be_read_is_called_plainly() -> None:
    class Model:
        dimension = WordsModel.dimension
        embed_all = NoSignature()

    store = ingested(Model())
    retriever = EmbeddingStoreContentRetriever(store, Model(), max_results=1)
    assert retriever.retrieve(Query("refunds"))[0].text.startswith("Refunds")
