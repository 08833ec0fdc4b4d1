"""Semantic recall: past messages out of the window found by meaning (here: shared words, with
the hashing model), brought back with their neighbours, whole tool exchanges, never another
user's, indexed incrementally, and in a service call at the end of the system message only."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Protocol

import pytest

from chatmemory import (
    AiMessage,
    AsyncSqliteChatMemoryStore,
    AsyncTokenWindowChatMemory,
    ConfigurationError,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    OpenAiTokenCountEstimator,
    SqliteChatMemoryStore,
    SystemMessage,
    TokenWindowChatMemory,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.models import ChatRequest
from chatmemory.rag import (
    HashingEmbeddingModel,
    InMemoryEmbeddingStore,
    SqliteEmbeddingStore,
    key,
)
from chatmemory.recall import SemanticRecall
from chatmemory.services import MemoryId, UserId, ai_service, system_message
from chatmemory.testing import ScriptedChatModel
from tests.conftest import server_unavailable
from tests.rag.pgvector_server import pgvector_dsn

ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o-mini")
TODAY = datetime.now(timezone.utc).date().isoformat()
FILLER = [
    UserMessage("Let us talk about the weather today."),
    AiMessage("It is mild and cloudy."),
    UserMessage("Any plans for the weekend?"),
    AiMessage("Hiking, if it stays dry."),
]


def chat_with_a_fact(memory: Any, fact: str = "My locker code is 4711.") -> None:
    memory.add(UserMessage("Hello there."))
    memory.add(AiMessage("Hi! How can I help?"))
    memory.add(UserMessage(fact))
    memory.add(AiMessage("Noted, I will remember it."))
    for _ in range(3):
        for message in FILLER:
            memory.add(message)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteChatMemoryStore]:
    with SqliteChatMemoryStore(tmp_path / "chat.db") as opened:
        yield opened


def test_an_evicted_fact_comes_back_with_its_neighbours(store: SqliteChatMemoryStore) -> None:
    memory = MessageWindowChatMemory(id="ann", max_messages=4, store=store)
    chat_with_a_fact(memory)
    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), message_range=1)
    assert recall.index(store, "ann") == 16
    assert recall.index(store, "ann") == 0  # incremental: nothing new
    [found] = recall.recall(store, "ann", "what is my locker code?")[:1]
    assert found.memory_id == "ann"
    assert list(found.messages) == [
        AiMessage("Hi! How can I help?"),
        UserMessage("My locker code is 4711."),
        AiMessage("Noted, I will remember it."),
    ]
    block = recall.block([found])
    assert block.startswith("<recalled>\nEarlier messages that may be relevant")
    assert (
        f"[from conversation ann, message 1, {TODAY}]\nassistant: Hi! How can I help?\n"
        "user: My locker code" in block
    )
    assert block.endswith("</recalled>")


def test_messages_in_the_window_are_not_recalled_and_repeats_are_merged(
    store: SqliteChatMemoryStore,
) -> None:
    memory = MessageWindowChatMemory(id="ann", max_messages=100, store=store)
    chat_with_a_fact(memory)
    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore())
    recall.index(store, "ann")
    assert recall.recall(store, "ann", "locker code") == []  # all still in the window
    memory.set([UserMessage("fresh start")])  # everything else leaves the window
    recall.index(store, "ann")
    found = recall.recall(store, "ann", "weather weekend hiking plans")
    seqs = [(run.memory_id, seq) for run in found for seq in run.seqs]
    assert len(seqs) == len(set(seqs))
    assert all(seq >= 0 for _, seq in seqs)
    assert len(seqs) <= recall.max_messages == 10  # the default budget, in messages
    assert recall.recall(store, "ann", "   ") == []


def test_tool_exchanges_come_back_whole(store: SqliteChatMemoryStore) -> None:
    memory = MessageWindowChatMemory(id="t", max_messages=2, store=store)
    call = AiMessage(tool_execution_requests=[ToolExecutionRequest("1", "forecast", "{}")])
    memory.add(UserMessage("Forecast for the regatta in Kiel?"))
    memory.add(call)
    memory.add(ToolExecutionResultMessage("1", "forecast", "windy"))
    memory.add(AiMessage("Windy for the regatta."))
    for message in FILLER * 2:
        memory.add(message)  # type: ignore[arg-type]
    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), message_range=1)
    recall.index(store, "t")
    [found] = recall.recall(store, "t", "regatta in Kiel")[:1]
    assert found.messages[:2] == (UserMessage("Forecast for the regatta in Kiel?"), call)
    assert found.seqs[:3] == (0, 1, 2)  # the call's result came with it: the group is whole
    assert ToolExecutionResultMessage("1", "forecast", "windy") in found.messages


def test_the_index_mark_survives_a_restart(store: SqliteChatMemoryStore, tmp_path: Path) -> None:
    memory = MessageWindowChatMemory(id="ann", max_messages=4, store=store)
    chat_with_a_fact(memory)
    vectors = SqliteEmbeddingStore(tmp_path / "chat.db")
    assert SemanticRecall(HashingEmbeddingModel(), vectors).index(store, "ann") == 16
    restarted = SemanticRecall(HashingEmbeddingModel(), vectors)
    assert restarted.index(store, "ann") == 0
    memory.add(UserMessage("One more thing."))
    assert restarted.index(store, "ann") == 1
    assert restarted.recall(store, "ann", "locker code")[0].score > 0.5


def test_indexing_turn_after_turn_removes_no_row_and_resumes_from_the_furthest_mark(
    store: SqliteChatMemoryStore,
) -> None:
    """A removed row costs an approximate index its saved graph: the marks saved as a long
    conversation is indexed turn by turn are rows of their own, never rewritten."""
    added: list[str] = []
    removed: list[object] = []

    class Watched(InMemoryEmbeddingStore):
        def add_all(self, *args: Any, ids: Any = None, **kwargs: Any) -> list[str]:
            added.extend(ids or [])
            return super().add_all(*args, ids=ids, **kwargs)

        def remove_all(self, *args: Any, **kwargs: Any) -> None:
            removed.append(args or kwargs)
            super().remove_all(*args, **kwargs)

    vectors = Watched()
    memory = MessageWindowChatMemory(id="ann", max_messages=4, store=store)
    recall = SemanticRecall(HashingEmbeddingModel(), vectors)
    for n in range(100):  # 200 messages: marks saved at 1, 65, 129 and 193 messages
        memory.add(UserMessage(f"Note {n} about tea."))
        memory.add(AiMessage(f"Reply {n}."))
        assert recall.index(store, "ann") == 2
    assert removed == []
    assert len(added) == len(set(added)) == 200 + 4, "no row replaced (a replacement removes)"
    marks = vectors.select(key("kind").eq("chatmemory_recall_mark"))
    assert sorted(s.metadata["upto"] for s in marks.values() if s is not None) == [1, 65, 129, 193]
    restarted = SemanticRecall(HashingEmbeddingModel(), vectors)
    assert restarted.index(store, "ann") == 6, "the messages after the furthest mark, again"
    assert restarted.forget(memory_id="ann") == 200 + 4


def test_the_block_keeps_to_its_budget() -> None:
    store = InMemoryChatMemoryStore()
    memory = MessageWindowChatMemory(id="b", max_messages=2, store=store)
    for i in range(10):
        memory.add(UserMessage(f"The parcel number {i} is {'x' * 50}"))
    recall = SemanticRecall(
        HashingEmbeddingModel(), InMemoryEmbeddingStore(), top_k=5, recall_budget=80
    )
    recall.index(store, "b")
    found = recall.recall(store, "b", "parcel number")
    block = recall.block(found)
    assert ESTIMATOR.count_text(block) <= 80
    assert recall.block(found, budget=10) == ""


@pytest.fixture(params=["memory", "sqlite", "pgvector", "pgvector-approx"])
def vectors(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryEmbeddingStore()
    elif request.param == "sqlite":
        with SqliteEmbeddingStore(tmp_path / "v.db") as opened:
            yield opened
    else:
        from chatmemory.rag.pgvector import PgVectorEmbeddingStore

        try:
            with (
                pgvector_dsn() as dsn,
                PgVectorEmbeddingStore(
                    dsn,
                    dimension=384,
                    table=f"recall_{uuid.uuid4().hex[:10]}",
                    approximate_filters=request.param == "pgvector-approx",
                ) as opened,
            ):
                yield opened
                opened.remove_all()
        except RuntimeError as error:
            server_unavailable("PostgreSQL with pgvector", str(error))


def test_user_scope_searches_every_conversation_of_one_user_only(vectors: Any) -> None:
    store = InMemoryChatMemoryStore()
    recall = SemanticRecall(HashingEmbeddingModel(), vectors, scope="user", top_k=3)
    for memory_id, user, fact in [
        ("ann:1", "ann", "My locker code is 4711."),
        ("ann:2", "ann", "My bike lock code is 1234."),
        ("bob:1", "bob", "My locker code is 9999."),
    ]:
        memory = MessageWindowChatMemory(id=memory_id, max_messages=2, store=store)
        chat_with_a_fact(memory, fact)
        recall.index(store, memory_id, user_id=user)
    found = recall.recall(store, "ann:3", "what is my locker code?", user_id="ann")
    texts = " ".join(getattr(m, "text", "") or "" for run in found for m in run.messages)
    assert "4711" in texts
    assert "9999" not in texts
    assert {run.memory_id for run in found} <= {"ann:1", "ann:2"}
    recall.forget(user_id="ann")
    assert recall.recall(store, "ann:3", "locker code", user_id="ann") == []
    assert recall.recall(store, "bob:2", "locker code", user_id="bob")
    with pytest.raises(ConfigurationError, match="needs the user id"):
        recall.recall(store, "x", "locker code")


class Assistant(Protocol):
    @system_message("You are helpful.")
    def chat(
        self, user: Annotated[str, UserId], chat_id: Annotated[str, MemoryId], text: str
    ) -> str: ...

    @system_message("You are helpful.")
    async def achat(
        self, user: Annotated[str, UserId], chat_id: Annotated[str, MemoryId], text: str
    ) -> str: ...


def test_a_service_sees_recalled_messages_in_its_system_message_only(tmp_path: Path) -> None:
    model = ScriptedChatModel(lambda request: "OK.")
    with SqliteChatMemoryStore(tmp_path / "chat.db") as store:
        recall = SemanticRecall(HashingEmbeddingModel(), SqliteEmbeddingStore(tmp_path / "chat.db"))
        service = ai_service(
            Assistant,
            chat_model=model,
            chat_memory_provider=lambda mid: TokenWindowChatMemory(
                id=mid, max_tokens=100, estimator=ESTIMATOR, store=store
            ),
            semantic_recall=recall,
        )
        service.chat("ann", "ann:1", "My locker code is 4711.")
        for text in ["Clouds?", "Rain?", "Snow?", "Wind?", "Fog?", "Hail?", "Sleet?", "Sun?"]:
            service.chat("ann", "ann:1", text)
        service.chat("ann", "ann:1", "What was my locker code?")
        request: ChatRequest = model.requests[-1]
        system = request.messages[0]
        assert isinstance(system, SystemMessage)
        assert system.text.startswith("You are helpful.\n\n<recalled>")
        assert "user: My locker code is 4711." in system.text
        assert UserMessage("My locker code is 4711.") not in request.messages  # evicted
        # the window gave up its oldest messages so that the request, block included, fits
        assert TokenWindowChatMemory(
            id="ann:1", max_tokens=100, estimator=ESTIMATOR, store=store
        ).fits(request.messages)
        assert request.messages[-1] == UserMessage("What was my locker code?")
        stored = [e.message for e in store.history("ann:1")]
        assert all(
            "<recalled>" not in getattr(m, "text", "")
            for m in stored
            if isinstance(m, SystemMessage)
        )


def test_the_async_path_recalls_from_an_async_store(tmp_path: Path) -> None:
    model = ScriptedChatModel(lambda request: "OK.")

    async def main() -> str:
        async with AsyncSqliteChatMemoryStore(tmp_path / "chat.db") as store:
            recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore())
            service = ai_service(
                Assistant,
                chat_model=model,
                chat_memory_provider=lambda mid: AsyncTokenWindowChatMemory(
                    id=mid, max_tokens=100, estimator=ESTIMATOR, store=store
                ),
                semantic_recall=recall,
            )
            await service.achat("ann", "a", "My locker code is 4711.")
            for text in ["Clouds?", "Rain?", "Snow?", "Wind?", "Fog?", "Hail?", "Sleet?", "Sun?"]:
                await service.achat("ann", "a", text)
            await service.achat("ann", "a", "What was my locker code?")
            system = model.requests[-1].messages[0]
            return getattr(system, "text", "")

    assert "user: My locker code is 4711." in asyncio.run(main())


def test_bad_settings_are_refused() -> None:
    model, vectors = HashingEmbeddingModel(), InMemoryEmbeddingStore()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"top_k": 0}, "`top_k` must be an int >= 1"),
        ({"message_range": -1}, "`message_range` must be an int >= 0"),
        ({"scope": "team"}, "`scope` is 'memory' or 'user'"),
        ({"max_messages": 0}, "`max_messages` must be an int >= 1"),
        ({"message_range": (1, 2, 3)}, "`message_range` is 'auto', an int or a pair"),
        ({"hybrid": "yes"}, "`hybrid` is True or False"),
    ]
    for options, message in cases:
        with pytest.raises(ConfigurationError, match=message):
            SemanticRecall(model, vectors, **options)
    with pytest.raises(ConfigurationError, match="`embedding_store` must be"):
        SemanticRecall(model, object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="`semantic_recall` must be a SemanticRecall"):
        ai_service(Assistant, chat_model=ScriptedChatModel([]), semantic_recall=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="forget\\(\\) takes memory_id= or user_id="):
        SemanticRecall(model, vectors).forget()


def test_an_async_method_with_a_sync_memory_recalls_and_indexes_on_a_thread() -> None:
    model = ScriptedChatModel(lambda request: "OK.")
    store = InMemoryChatMemoryStore()
    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore())
    service = ai_service(
        Assistant,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=4, store=store
        ),
        semantic_recall=recall,
    )

    async def main() -> None:
        await service.achat("ann", "a", "My locker code is 4711.")
        for text in ["Clouds?", "Rain?", "Snow?"]:
            await service.achat("ann", "a", text)
        await service.achat("ann", "a", "What was my locker code?")

    asyncio.run(main())
    assert "user: My locker code is 4711." in getattr(model.requests[-1].messages[0], "text", "")
    assert recall.index(store, "a", full=True) == 0  # every turn was indexed as it was stored


def test_scope_user_recalls_what_is_still_in_another_conversations_window(
    store: SqliteChatMemoryStore,
) -> None:
    """Only the window of the conversation being answered is in the request: the last
    conversation's messages are recalled at once, not only after they leave its window."""
    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), scope="user")
    last = MessageWindowChatMemory(id="ann:1", max_messages=50, store=store)
    last.add(UserMessage("My locker code is 4711."))
    last.add(AiMessage("Noted."))
    recall.index(store, "ann:1", user_id="ann")
    now = MessageWindowChatMemory(id="ann:2", max_messages=50, store=store)
    now.add(UserMessage("What was my locker code?"))
    recall.index(store, "ann:2", user_id="ann")
    found = recall.recall(store, "ann:2", "What was my locker code?", user_id="ann")
    assert [(f.memory_id, f.messages[0]) for f in found][:1] == [
        ("ann:1", UserMessage("My locker code is 4711."))
    ]
    assert all(f.memory_id != "ann:2" for f in found)  # its own window is never recalled


def test_neighbours_before_and_after_a_match_are_counted_apart(
    store: SqliteChatMemoryStore,
) -> None:
    memory = MessageWindowChatMemory(id="ann", max_messages=2, store=store)
    texts = [f"filler number {n}" for n in range(5)] + ["My locker code is 4711."]
    texts += [f"later words {n}" for n in range(5)]
    for text in texts:
        memory.add(UserMessage(text))
    recall = SemanticRecall(
        HashingEmbeddingModel(), InMemoryEmbeddingStore(), top_k=1, message_range=(1, 3)
    )
    recall.index(store, "ann")
    [found] = recall.recall(store, "ann", "locker code 4711")
    assert found.seqs == (4, 5, 6, 7, 8)
    for bad in ((1,), (1, 2, 3), (-1, 2), (1, "2")):
        with pytest.raises(ConfigurationError, match="message_range"):
            SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), message_range=bad)  # type: ignore[arg-type]


def test_identical_words_are_embedded_once(store: SqliteChatMemoryStore) -> None:
    embedded: list[str] = []

    class Counting(HashingEmbeddingModel):
        def embed_all(self, texts: Any) -> Any:
            embedded.extend(texts)
            return super().embed_all(texts)

    memory = MessageWindowChatMemory(id="ann", max_messages=50, store=store)
    for _ in range(40):
        memory.add(UserMessage("ok"))
        memory.add(AiMessage("Sure."))
    recall = SemanticRecall(Counting(), InMemoryEmbeddingStore())
    assert recall.index(store, "ann") == 80
    assert sorted(embedded) == ["Sure.", "ok"]
    assert len(recall.store.select(key("kind").eq("chatmemory_recall"))) == 80  # type: ignore[attr-defined]


def test_a_store_of_ones_own_without_select_is_searched_by_its_filter(
    store: SqliteChatMemoryStore,
) -> None:
    """An embedding store with the four LangChain4j methods only: recall finds marks and what
    to forget through its filtered search."""
    from tests.rag.doubles import DIMENSION, ListStore

    vectors = ListStore()
    recall = SemanticRecall(HashingEmbeddingModel(DIMENSION), vectors, scope="user")
    memory = MessageWindowChatMemory(id="ann:1", max_messages=2, store=store)
    chat_with_a_fact(memory)
    assert recall.index(store, "ann:1", user_id="ann") == 16
    again = SemanticRecall(HashingEmbeddingModel(DIMENSION), vectors, scope="user")
    assert again.index(store, "ann:1", user_id="ann") == 0  # its mark was found
    assert recall.recall(store, "ann:2", "locker code", user_id="ann")
    assert recall.memory_ids_of("ann") == ["ann:1"]
    assert asyncio.run(recall.amemory_ids_of("ann")) == ["ann:1"]
    assert asyncio.run(recall.aforget(user_id="ann")) == 17  # 16 messages and the mark
    assert recall.forget(memory_id="ann:1") == 0
    assert recall.memory_ids_of("ann") == []
    for bad in ({}, {"memory_id": ""}, {"user_id": 7}):
        with pytest.raises(ConfigurationError, match="forget\\(\\)"):
            recall.forget(**bad)
    with pytest.raises(ConfigurationError, match="non-empty user id"):
        recall.memory_ids_of("")


def test_a_message_with_a_lone_surrogate_is_indexed_with_a_replacement(
    store: SqliteChatMemoryStore, tmp_path: Path
) -> None:
    """A message may hold a lone surrogate (LangChain4j can write one); the embedding stores
    refuse them, so the index takes U+FFFD in its place instead of failing the turn."""
    memory = MessageWindowChatMemory(id="s", max_messages=1, store=store)
    memory.add(UserMessage("caf\udce9 at the locker 4711"))
    memory.add(UserMessage("later"))
    for vectors in (InMemoryEmbeddingStore(), SqliteEmbeddingStore(tmp_path / "v.db")):
        recall = SemanticRecall(HashingEmbeddingModel(), vectors)
        assert recall.index(store, "s") == 2
        [found] = recall.recall(store, "s", "locker 4711")[:1]
        assert found.messages[0] == UserMessage("caf\udce9 at the locker 4711")
