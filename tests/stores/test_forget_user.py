"""`forget_user` on every built-in store: the user's conversations (named, owned by id, or known
to the recall index), their recall entries and working memory go; other users' stay."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from chatmemory import ConfigurationError, MessageWindowChatMemory, UserMessage
from chatmemory.forget import forget_user
from chatmemory.rag import HashingEmbeddingModel, InMemoryEmbeddingStore
from chatmemory.recall import SemanticRecall
from chatmemory.working import InMemoryRecordStore, WorkingMemory

from .backends import Context, drive, store_params


@pytest.fixture
def context(tmp_path: Any) -> Context:
    return Context(tmp_path=tmp_path, unique=f"t{uuid.uuid4().hex[:12]}")


@pytest.mark.parametrize("backend", store_params(modes=("sync",)))
def test_forget_user_removes_everything_of_one_user_only(backend: Any, context: Context) -> None:
    async def scenario(_: Any, store: Any, mode: str) -> None:
        recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), scope="user")
        profiles: WorkingMemory[Any] = WorkingMemory(InMemoryRecordStore())
        for memory_id, user in [("ann:1", "ann"), ("ann:2", "ann"), ("bob:1", "bob"), ("x", "ann")]:
            memory = MessageWindowChatMemory(id=memory_id, max_messages=1, store=store)
            memory.add(UserMessage(f"{user} says my locker code is 4711"))
            memory.add(UserMessage("and more"))
            recall.index(store, memory_id, user_id=user if memory_id != "ann:2" else None)
        profiles.set("ann", "# Ann\n")
        profiles.set("bob", "# Bob\n")
        report = forget_user(
            "ann",
            store=store,
            owns=lambda mid: mid.startswith("ann:"),
            recall=recall,
            working_memory=profiles,
        )
        assert sorted(report.conversations) == ["ann:1", "ann:2", "x"]
        assert report.recall_index
        assert report.working_memory == ["ann"]
        assert str(report) == (
            "forgot ann: 3 conversation(s), 1 working-memory record(s), the recall index"
        )
        assert sorted(store.memory_ids()) == ["bob:1"]
        assert recall.recall(store, "ann:9", "locker code", user_id="ann") == []
        [kept] = recall.recall(store, "bob:9", "locker code", user_id="bob")
        assert kept.memory_id == "bob:1"
        assert recall.memory_ids_of("bob") == ["bob:1"]
        assert profiles.get("ann") is None
        assert profiles.get("bob") == "# Bob\n"

    drive(backend, context, scenario)


def test_named_conversations_are_forgotten_without_recall_or_working_memory() -> None:
    from chatmemory import InMemoryChatMemoryStore

    store = InMemoryChatMemoryStore()
    for memory_id in ("a", "b", "c"):
        MessageWindowChatMemory(id=memory_id, max_messages=5, store=store).add(UserMessage("hi"))
    report = forget_user("ann", store=store, memory_ids=["a", "b", "a"])
    assert (report.conversations, report.recall_index, report.working_memory) == (
        ["a", "b"],
        False,
        [],
    )
    assert store.memory_ids() == ["c"]
    assert str(report) == "forgot ann: 2 conversation(s), 0 working-memory record(s)"


def test_bad_input_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="non-empty user id"):
        forget_user("", store=object())
    with pytest.raises(ConfigurationError, match="is not a chat-memory store"):
        forget_user("ann", store=object())
