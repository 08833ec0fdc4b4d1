"""What a service turn guarantees, each written against the way it used to fail: a failed call
stores nothing (recall's index included), the model always sees the call's own messages, a
stream's last piece comes with the memory id free again, a cancel never leaves a turn stored
and raised, and a turn reads the window once however many model calls it makes."""

from __future__ import annotations

import asyncio
import gc
import itertools
import threading
from collections.abc import Iterator
from typing import Annotated, Any, Protocol

import pytest

from chatmemory import (
    AiMessage,
    ApproximateTokenCountEstimator,
    AsyncInMemoryChatMemoryStore,
    AsyncMessageWindowChatMemory,
    ConfigurationError,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    SystemMessage,
    TokenWindowChatMemory,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.models import ChatRequest
from chatmemory.rag import HashingEmbeddingModel, InMemoryEmbeddingStore, key
from chatmemory.recall import SemanticRecall
from chatmemory.services import ChatMemoryAccess, MemoryId, ai_service, system_message
from chatmemory.testing import ScriptedChatModel
from chatmemory.tools import tool


class Chat(Protocol):
    def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    async def achat(self, user: Annotated[str, MemoryId], text: str) -> str: ...


class Briefed(Protocol):
    @system_message("You are terse.")
    def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...


class Streamer(ChatMemoryAccess, Protocol):
    def words(self, user: Annotated[str, MemoryId], text: str) -> Iterator[str]: ...


@tool
def lookup(n: int) -> str:
    """The item numbered n."""
    return f"item {n}"


def parallel_calls(count: int) -> AiMessage:
    return AiMessage(
        tool_execution_requests=[
            ToolExecutionRequest(f"c{i}", "lookup", f'{{"n": {i}}}') for i in range(count)
        ]
    )


# -- 1. a failed call stores nothing; an index that fails does not fail a stored call ---------


class FlakyEmbeddings(HashingEmbeddingModel):
    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def embed_all(self, texts: Any) -> Any:
        if self.down and len(texts) > 1:  # the index's batches fail, a query's one text passes
            raise ConnectionError("the embedding server is down")
        return super().embed_all(texts)


def test_a_turn_whose_index_fails_is_stored_once_and_indexed_on_a_later_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    embeddings = FlakyEmbeddings()
    vectors = InMemoryEmbeddingStore()
    store = InMemoryChatMemoryStore()
    service = ai_service(
        Chat,
        chat_model=ScriptedChatModel(["noted", "sure"]),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=50, store=store
        ),
        semantic_recall=SemanticRecall(embedding_model=embeddings, embedding_store=vectors),
    )
    service.chat("u", "my locker code is 4417")  # indexed
    embeddings.down = True
    assert service.chat("u", "the boat is called Nautilus") == "sure"  # stored, not indexed
    assert "could not index the turn" in caplog.text
    texts = [m.text for m in store.get_messages("u") if isinstance(m, (UserMessage, AiMessage))]
    assert texts.count("the boat is called Nautilus") == 1
    embeddings.down = False
    recall = SemanticRecall(embedding_model=embeddings, embedding_store=vectors)
    recall.index(store, "u")  # the next index catches up
    everything = key("kind").ne("")
    indexed = {s.text for s in vectors.select(everything).values() if s is not None}
    assert any("Nautilus" in text for text in indexed)


# -- 2. the model always sees the call's own messages ------------------------------------------


@pytest.mark.parametrize("declaration", [Briefed, Chat], ids=["with system", "without"])
def test_twenty_parallel_tool_calls_in_a_twenty_message_window_keep_the_turn(
    declaration: Any,
) -> None:
    model = ScriptedChatModel([parallel_calls(20), "done"])
    service = ai_service(
        declaration,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=20),
        tools=[lookup],
    )
    assert service.chat("u", "look up twenty items") == "done"
    follow_up = model.requests[1].messages
    assert UserMessage("look up twenty items") in follow_up
    results = [m for m in follow_up if isinstance(m, ToolExecutionResultMessage)]
    assert [r.text for r in results] == [f"item {i}" for i in range(20)]
    assert isinstance(follow_up[-21], AiMessage)  # the calls, right before their results


def test_a_user_message_larger_than_the_token_window_fails_before_the_model_is_asked() -> None:
    model = ScriptedChatModel(["never"])
    store = InMemoryChatMemoryStore()
    service = ai_service(
        Chat,
        chat_model=model,
        chat_memory_provider=lambda mid: TokenWindowChatMemory(
            id=mid, max_tokens=50, estimator=ApproximateTokenCountEstimator(), store=store
        ),
    )
    with pytest.raises(ConfigurationError, match=r"does not fit.*raise the memory's limit"):
        service.chat("u", "word " * 400)
    assert model.requests == []
    assert store.get_messages("u") == []


def test_earlier_history_gives_way_to_the_turn_not_the_turn_to_history() -> None:
    model = ScriptedChatModel(["first answer", parallel_calls(4), "done"])
    service = ai_service(
        Briefed,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=5),
        tools=[lookup],
    )
    service.chat("u", "hello")
    service.chat("u", "look up four")
    follow_up = model.requests[2].messages
    assert follow_up[0] == SystemMessage("You are terse.")
    assert follow_up[1] == UserMessage("look up four")
    assert len([m for m in follow_up if isinstance(m, ToolExecutionResultMessage)]) == 4


# -- 3. a stream's last piece comes with the memory id free --------------------------------------


def test_a_stream_read_to_its_last_piece_but_not_exhausted_frees_the_memory_id() -> None:
    service = ai_service(
        Streamer,
        chat_model=ScriptedChatModel(["one two three", "again"]),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=20),
    )
    stream = service.words("u", "count")
    pieces = list(itertools.islice(stream, 3))  # "one", " two", " three": all of it
    assert "".join(pieces) == "one two three"
    finished = threading.Event()

    def second() -> None:
        list(service.words("u", "more"))
        finished.set()

    worker = threading.Thread(target=second)
    worker.start()
    worker.join(timeout=5)
    assert finished.is_set(), "the first stream kept the memory id's lock"


def test_an_abandoned_stream_frees_the_memory_id_when_collected() -> None:
    service = ai_service(
        Streamer,
        chat_model=ScriptedChatModel(["one two three", "again"]),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=20),
    )
    stream = service.words("u", "count")
    next(stream)
    del stream
    gc.collect()
    done = threading.Event()

    def second() -> None:
        list(service.words("u", "more"))
        done.set()

    worker = threading.Thread(target=second)
    worker.start()
    worker.join(timeout=5)
    assert done.is_set()
    memory = service.get_chat_memory("u")
    assert memory.messages() == [UserMessage("more"), AiMessage("again")]


# -- 4. a cancel during the commit: stored and returned, or not stored and raised ----------------


class SlowModel(ScriptedChatModel):
    async def achat(self, request: ChatRequest, /) -> Any:
        await asyncio.sleep(0.005)
        return await super().achat(request)


class SlowCommits(AsyncInMemoryChatMemoryStore):
    async def commit_window(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.01)
        return await super().commit_window(*args, **kwargs)


def test_a_cancelled_call_is_either_stored_and_returned_or_not_stored_and_raised() -> None:
    async def attempt(delay: float) -> tuple[bool, bool]:
        store = SlowCommits()
        service = ai_service(
            Chat,
            chat_model=SlowModel(["answer"]),
            chat_memory_provider=lambda mid: AsyncMessageWindowChatMemory(
                id=mid, max_messages=20, store=store
            ),
        )
        task = asyncio.ensure_future(service.achat("u", "hi"))
        await asyncio.sleep(delay)
        task.cancel()
        try:
            await task
            returned = True
        except asyncio.CancelledError:
            returned = False
        stored = await store.get_messages("u") != []
        return returned, stored

    async def main() -> list[tuple[bool, bool]]:
        return [await attempt(d / 1000) for d in range(20)]

    outcomes = asyncio.run(main())
    assert all(returned == stored for returned, stored in outcomes), outcomes
    assert (True, True) in outcomes  # a cancel during the commit lets it finish and return
    assert (False, False) in outcomes  # a cancel before it stores nothing


# -- 5. one window read per turn ---------------------------------------------------------------


class CountingStore(InMemoryChatMemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    def load_window(self, *args: Any, **kwargs: Any) -> Any:
        self.loads += 1
        return super().load_window(*args, **kwargs)


def test_a_turn_with_a_tool_round_reads_the_window_once() -> None:
    store = CountingStore()
    model = ScriptedChatModel([parallel_calls(1), "done", parallel_calls(2), "done again"])
    service = ai_service(
        Chat,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=20, store=store
        ),
        tools=[lookup],
    )
    service.chat("u", "one")
    assert store.loads == 1  # two model calls, one commit: one read
    service.chat("u", "two")
    assert store.loads == 2
    assert len(model.requests) == 4
    # the second model call of a turn saw the first call's tool round
    assert isinstance(model.requests[3].messages[-1], ToolExecutionResultMessage)


def test_the_stored_turn_is_the_one_the_model_saw() -> None:
    requests: list[ChatRequest] = []

    def answer(request: ChatRequest) -> str:
        requests.append(request)
        return f"answer {len(requests)}"

    store = InMemoryChatMemoryStore()
    service = ai_service(
        Chat,
        chat_model=ScriptedChatModel(answer),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=20, store=store
        ),
    )
    service.chat("u", "a")
    service.chat("u", "b")
    assert list(requests[1].messages) == [UserMessage("a"), AiMessage("answer 1"), UserMessage("b")]
