"""`OpenAiEmbeddingModel` through the real `openai` SDK against the local server."""

from __future__ import annotations

import asyncio

import pytest

from chatmemory import ConfigurationError, ModelError
from chatmemory.rag import Embedding, OpenAiEmbeddingModel

from .fake_server import FakeServer, Reply, assert_unreadable, not_json_objects


def answer(*vectors: list[float]) -> Reply:
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    data.reverse()  # the index decides the order, not the position
    return Reply(
        body={
            "object": "list",
            "data": data,
            "model": "text-embedding-3-small",
            "usage": {"prompt_tokens": 3, "total_tokens": 3},
        }
    )


def model(server: FakeServer, **options: object) -> OpenAiEmbeddingModel:
    return OpenAiEmbeddingModel(
        base_url=f"{server.url}/v1",
        api_key="k",
        max_retries=0,
        **options,  # type: ignore[arg-type]
    )


def test_texts_are_embedded_in_batches_in_order(server: FakeServer) -> None:
    server.reply(answer([1.0, 0.0], [0.0, 1.0]), answer([0.5, 0.5]))
    embedder = model(server, batch_size=2, dimensions=2)
    assert embedder.embed_all(["a", "b", "c"]) == [
        Embedding((1.0, 0.0)),
        Embedding((0.0, 1.0)),
        Embedding((0.5, 0.5)),
    ]
    assert [r.body["input"] for r in server.requests] == [["a", "b"], ["c"]]
    assert server.requests[0].path == "/v1/embeddings"
    assert server.requests[0].body["dimensions"] == 2
    assert embedder.dimension == 2


def test_async_and_a_dimension_measured_on_first_use(server: FakeServer) -> None:
    server.reply(answer([1.0, 2.0, 3.0]), answer([3.0, 2.0, 1.0]))
    embedder = model(server, model="nomic-embed-text")
    assert embedder.dimension == 3  # one call, for a model whose size is not known

    async def main() -> list[Embedding]:
        try:
            return await embedder.aembed_all(["x"])
        finally:
            await embedder.aclose()

    assert asyncio.run(main()) == [Embedding((3.0, 2.0, 1.0))]
    assert "dimensions" not in server.requests[0].body
    assert repr(embedder).startswith("OpenAiEmbeddingModel(model='nomic-embed-text', base_url=")


def test_errors_are_model_errors(server: FakeServer) -> None:
    server.reply(Reply(401, {"error": {"message": "bad key"}}), answer(), answer([1.0], [2.0]))
    embedder = model(server)
    with pytest.raises(ModelError, match="bad key") as info:
        embedder.embed_all(["x"])
    assert (info.value.status, info.value.retriable) == (401, False)
    with pytest.raises(ModelError, match="returned 0 embeddings for 1 texts"):
        embedder.embed_all(["x"])
    with pytest.raises(ModelError, match="returned 2 embeddings for 1 texts"):
        embedder.embed_all(["x"])


def embed(embedder: OpenAiEmbeddingModel, way: str) -> list[Embedding]:
    if way == "embed_all":
        return embedder.embed_all(["x"])

    async def main() -> list[Embedding]:
        try:
            return await embedder.aembed_all(["x"])
        finally:
            await embedder.aclose()

    return asyncio.run(main())


NOT_JSON_OBJECTS = not_json_objects("{'data': []}", [1.0, 2.0])


@pytest.mark.parametrize("way", ["embed_all", "aembed_all"])
@pytest.mark.parametrize(("reply", "said"), NOT_JSON_OBJECTS.values(), ids=NOT_JSON_OBJECTS)
def test_an_answer_that_is_not_a_json_object_is_a_model_error_not_retried(
    server: FakeServer, reply: Reply, said: str, way: str
) -> None:
    server.reply(reply)
    assert_unreadable(lambda: embed(model(server), way), said, "openai")


def item(embedding: object, index: object = 0) -> dict[str, object]:
    return {"data": [{"object": "embedding", "index": index, "embedding": embedding}]}


WRONG_SHAPES = {
    "data not an array": ({"data": "none"}, "`data` must be an array"),
    "an item not an object": ({"data": [1]}, r"`data\[0\]` must be an object"),
    "no embedding": (item(None), r"`data\[0\].embedding` must be an array of numbers"),
    "an embedding of text": (item(["a"]), r"`data\[0\].embedding` must be an array of numbers"),
    "an empty embedding": (item([]), r"`data\[0\].embedding` must be an array of numbers"),
    "an index that is text": (item([1.0], "0"), r"`data\[0\].index` must be an integer"),
    "base64 of no float32s": (item("AAAAAAA="), r"`data\[0\].embedding` is not base64"),
    "text that is not base64": (item("0.5, 1.0"), r"`data\[0\].embedding` is not base64"),
}


@pytest.mark.parametrize("way", ["embed_all", "aembed_all"])
@pytest.mark.parametrize(("body", "said"), WRONG_SHAPES.values(), ids=WRONG_SHAPES)
def test_an_answer_of_the_wrong_shape_is_a_model_error_that_says_where(
    server: FakeServer, body: object, said: str, way: str
) -> None:
    server.reply(Reply(body=body))
    with pytest.raises(ModelError, match=said) as caught:
        embed(model(server), way)
    assert "cannot read" in str(caught.value)
    assert not caught.value.retriable


def test_base64_embeddings_are_read(server: FakeServer) -> None:
    """The SDK asks for base64 (a third of the bytes); servers that ignore it send numbers."""
    import base64
    import struct

    packed = base64.b64encode(struct.pack("<3f", 0.5, -1.0, 2.0)).decode()
    server.reply(Reply(body=item(packed)))
    assert model(server).embed_all(["x"]) == [Embedding((0.5, -1.0, 2.0))]
    assert server.requests[0].body["encoding_format"] == "base64"


def test_bad_input_is_refused_before_any_call(server: FakeServer) -> None:
    embedder = model(server)
    with pytest.raises(ConfigurationError, match="list of texts"):
        embedder.embed_all("one")
    with pytest.raises(ConfigurationError, match="only non-empty text"):
        embedder.embed_all([""])
    with pytest.raises(ConfigurationError, match="`batch_size` must be a positive int"):
        model(server, batch_size=0)
    assert server.requests == []


def test_input_types_are_sent_to_servers_that_distinguish_them(server: FakeServer) -> None:
    """Cohere's compatibility API, NVIDIA NIM or a proxy to Voyage take an `input_type`: the
    retriever's queries go as queries, everything else as documents."""
    from chatmemory.rag import EmbeddingStoreContentRetriever, InMemoryEmbeddingStore, Query

    server.reply(answer([1.0, 0.0]), answer([1.0, 0.0]), answer([0.0, 1.0]))
    embedder = model(server, input_types={"query": "search_query", "document": "search_document"})
    store = InMemoryEmbeddingStore()
    store.add_all(embedder.embed_all(["a doc"]))
    EmbeddingStoreContentRetriever(store, embedder).retrieve(Query("a question"))

    async def main() -> None:
        try:
            await embedder.aembed_all(["q"], input_type="query")
        finally:
            await embedder.aclose()

    asyncio.run(main())
    embedder.close()
    assert [r.body["input_type"] for r in server.requests] == [
        "search_document",
        "search_query",
        "search_query",
    ]
    server.reply(answer([1.0, 0.0]))
    plain = model(server)
    plain.embed_all(["plain"], input_type="query")  # OpenAI's own: none sent
    plain.close()
    assert "input_type" not in server.requests[-1].body


@pytest.mark.parametrize(
    "input_types", [{"query": "q"}, {"query": "q", "document": ""}, ["query", "document"]]
)
def test_input_types_name_both(server: FakeServer, input_types: object) -> None:
    with pytest.raises(ConfigurationError, match="`input_types` names what the server calls"):
        model(server, input_types=input_types)
