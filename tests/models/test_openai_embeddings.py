"""`OpenAiEmbeddingModel` through the real `openai` SDK against the local server."""

from __future__ import annotations

import asyncio

import pytest

from chatmemory import ConfigurationError, ModelError
from chatmemory.rag import Embedding, OpenAiEmbeddingModel

from .fake_server import FakeServer, Reply


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
    with pytest.raises(ModelError, match="answered 1 texts with No embedding data received"):
        embedder.embed_all(["x"])
    with pytest.raises(ModelError, match="returned 2 embeddings for 1 texts"):
        embedder.embed_all(["x"])


def test_bad_input_is_refused_before_any_call(server: FakeServer) -> None:
    embedder = model(server)
    with pytest.raises(ConfigurationError, match="list of texts"):
        embedder.embed_all("one")
    with pytest.raises(ConfigurationError, match="only non-empty text"):
        embedder.embed_all([""])
    with pytest.raises(ConfigurationError, match="`batch_size` must be a positive int"):
        model(server, batch_size=0)
    assert server.requests == []
