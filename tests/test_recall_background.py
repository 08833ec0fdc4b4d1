"""Semantic recall indexing in the background (`index_in_background=True`): a turn returns once
its messages are stored; what reads or removes the index waits for the conversation's pending
job; a failure is logged and caught up later; a process that exits normally indexes first."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated, Any, Protocol

import pytest

from chatmemory import (
    AsyncSqliteChatMemoryStore,
    ConfigurationError,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    SqliteChatMemoryStore,
)
from chatmemory.rag import HashingEmbeddingModel, InMemoryEmbeddingStore, SqliteEmbeddingStore, key
from chatmemory.recall import SemanticRecall
from chatmemory.services import MemoryId, UserId, ai_service
from chatmemory.testing import ScriptedChatModel

MESSAGES = key("kind").eq("chatmemory_recall") & key("role").ne("")


class Chat(Protocol):
    def chat(
        self, user: Annotated[str, UserId], chat_id: Annotated[str, MemoryId], text: str
    ) -> str: ...

    async def achat(
        self, user: Annotated[str, UserId], chat_id: Annotated[str, MemoryId], text: str
    ) -> str: ...


class HeldEmbeddings(HashingEmbeddingModel):
    """Embeds a batch of several texts (an index write) only once let through; a query's single
    text at once."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()
        self.down = False

    def embed_all(self, texts: Any) -> Any:
        if len(texts) > 1:
            self.started.set()
            assert self.gate.wait(30)
            if self.down:
                raise ConnectionError("the embedding server is down")
        return super().embed_all(texts)


def _texts(vectors: Any, memory_id: str) -> set[str]:
    found = vectors.select(MESSAGES & key("memory_id").eq(memory_id)).values()
    return {s.text for s in found if s is not None}


def _service(recall: SemanticRecall, store: Any, reply: str = "OK.") -> Any:
    return ai_service(
        Chat,
        chat_model=ScriptedChatModel(lambda request: reply),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=4, store=store
        ),
        semantic_recall=recall,
    )


def _background() -> tuple[HeldEmbeddings, InMemoryEmbeddingStore, Any, SemanticRecall, Any]:
    embeddings, vectors, store = (
        HeldEmbeddings(),
        InMemoryEmbeddingStore(),
        InMemoryChatMemoryStore(),
    )
    recall = SemanticRecall(embeddings, vectors, index_in_background=True)
    return embeddings, vectors, store, recall, _service(recall, store)


def test_a_turn_returns_before_its_messages_are_indexed_and_recall_waits_for_them() -> None:
    embeddings, vectors, store, recall, service = _background()
    embeddings.gate.clear()
    service.chat("ann", "a", "My locker code is 4711.")  # returns while its index is held
    assert embeddings.started.wait(10)
    assert not any("4711" in text for text in _texts(vectors, "a"))
    threading.Timer(0.2, embeddings.gate.set).start()
    assert recall.recall(store, "a", "what is my locker code?") == []  # (in the window)
    assert any("4711" in text for text in _texts(vectors, "a"))  # it waited for the index


def test_each_turn_waits_for_the_index_of_the_one_before_and_nothing_is_left_behind() -> None:
    embeddings = HeldEmbeddings()
    vectors, store = InMemoryEmbeddingStore(), InMemoryChatMemoryStore()
    recall = SemanticRecall(embeddings, vectors, index_in_background=True)
    service = _service(recall, store)
    for n in range(6):
        embeddings.gate.clear()
        threading.Timer(0.05, embeddings.gate.set).start()  # (the next turn's recall waits)
        service.chat("ann", "a", f"note number {n} is kiwi{n}")
    recall.flush()
    assert {f"note number {n} is kiwi{n}" for n in range(6)} <= _texts(vectors, "a")
    assert recall.index(store, "a", full=True) == 0  # nothing left behind


def test_forget_waits_for_the_pending_index_and_leaves_nothing(tmp_path: Path) -> None:
    embeddings = HeldEmbeddings()
    with SqliteChatMemoryStore(tmp_path / "chat.db") as store:
        vectors = SqliteEmbeddingStore(tmp_path / "chat.db")
        recall = SemanticRecall(embeddings, vectors, index_in_background=True)
        service = _service(recall, store)
        service.chat("ann", "a", "My locker code is 4711.")
        recall.flush()
        embeddings.gate.clear()
        embeddings.started.clear()
        service.chat("ann", "a", "My bike is green.")
        assert embeddings.started.wait(10)
        threading.Timer(0.2, embeddings.gate.set).start()
        assert recall.forget(memory_id="a") > 0
        assert _texts(vectors, "a") == set()
        assert recall.memory_ids_of("ann") == []
        vectors.close()


def test_a_failed_background_index_is_logged_and_caught_up_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    embeddings, vectors, _, recall, service = _background()
    embeddings.down = True
    assert service.chat("ann", "a", "The boat is called Nautilus.") == "OK."
    recall.flush()
    assert "could not index the turn" in caplog.text
    assert not any("Nautilus" in text for text in _texts(vectors, "a"))
    embeddings.down = False
    service.chat("ann", "a", "And the dinghy Nemo.")
    recall.flush()
    assert any("Nautilus" in text for text in _texts(vectors, "a"))


def test_an_async_service_indexes_a_sync_store_in_the_background_and_an_async_one_in_the_turn(
    tmp_path: Path,
) -> None:
    embeddings = HeldEmbeddings()
    vectors = InMemoryEmbeddingStore()
    recall = SemanticRecall(embeddings, vectors, index_in_background=True)
    sync_store = InMemoryChatMemoryStore()
    service = _service(recall, sync_store)

    async def main() -> None:
        embeddings.gate.clear()
        await service.achat("ann", "a", "My locker code is 4711.")  # returns: index held
        assert not any("4711" in text for text in _texts(vectors, "a"))
        embeddings.gate.set()
        await recall.aflush()
        assert any("4711" in text for text in _texts(vectors, "a"))
        async with AsyncSqliteChatMemoryStore(tmp_path / "chat.db") as store:
            from chatmemory import AsyncMessageWindowChatMemory

            service_async = ai_service(
                Chat,
                chat_model=ScriptedChatModel(lambda request: "OK."),
                chat_memory_provider=lambda mid: AsyncMessageWindowChatMemory(
                    id=mid, max_messages=4, store=store
                ),
                semantic_recall=recall,
            )
            await service_async.achat("ann", "b", "My bike is green.")
            assert any("green" in text for text in _texts(vectors, "b"))  # in the turn
            found = await recall.arecall(store, "b", "what colour is my bike?")
            assert found == []  # (still in the window)
            assert await recall.aforget(user_id="ann") > 0

    asyncio.run(main())


def test_a_process_that_exits_indexes_what_it_stored_first(tmp_path: Path) -> None:
    script = f"""
import threading, time
from typing import Annotated, Protocol
from chatmemory import MessageWindowChatMemory, SqliteChatMemoryStore
from chatmemory.rag import HashingEmbeddingModel, SqliteEmbeddingStore
from chatmemory.recall import SemanticRecall
from chatmemory.services import MemoryId, ai_service
from chatmemory.testing import ScriptedChatModel

class Slow(HashingEmbeddingModel):
    def embed_all(self, texts):
        if len(texts) > 1:
            time.sleep(0.5)
        return super().embed_all(texts)

class Chat(Protocol):
    def chat(self, chat_id: Annotated[str, MemoryId], text: str) -> str: ...

path = {str(tmp_path / "chat.db")!r}
store = SqliteChatMemoryStore(path)
recall = SemanticRecall(Slow(), SqliteEmbeddingStore(path), index_in_background=True)
service = ai_service(Chat, chat_model=ScriptedChatModel(lambda r: "OK."),
    chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=4, store=store),
    semantic_recall=recall)
service.chat("a", "My locker code is 4711.")
print("returned")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "returned"
    with SqliteEmbeddingStore(tmp_path / "chat.db") as vectors:
        assert any("4711" in text for text in _texts(vectors, "a"))


def test_index_in_background_is_a_bool() -> None:
    with pytest.raises(ConfigurationError, match="`index_in_background` is True or False"):
        SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), index_in_background=1)  # type: ignore[arg-type]
