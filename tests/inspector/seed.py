"""A SQLite file with what the inspector shows: a conversation with evicted messages, a tool
call and its result, a running summary, a recalled block, a title, a user, and a message that
is an attack (`<script>`)."""

from __future__ import annotations

from pathlib import Path

from chatmemory import (
    AiMessage,
    MessageWindowChatMemory,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory._policies.summary import summary_message
from chatmemory.rag import HashingEmbeddingModel
from chatmemory.rag.sqlite import SqliteEmbeddingStore
from chatmemory.recall import SemanticRecall
from chatmemory.services import ConversationTitles
from chatmemory.stores.sqlite import SqliteChatMemoryStore
from chatmemory.testing import ScriptedChatModel
from chatmemory.working import SqliteRecordStore

ATTACK = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"
TRIP = "ann:trip"
LOCKER = "My locker code is 4711, next to the pool."


def seed(path: Path) -> None:
    """Write the conversations of the inspector's tests into `path`."""
    with SqliteChatMemoryStore(path) as store:
        memory = MessageWindowChatMemory(max_messages=6, id=TRIP, store=store)
        memory.add(
            SystemMessage("You are a travel assistant. <recalled>\nuser: Lisbon\n</recalled>")
        )
        memory.add(UserMessage(LOCKER))
        memory.add(AiMessage("Noted: 4711."))
        memory.add(summary_message("Ann plans a trip to Lisbon in May."))
        memory.add(UserMessage("What is the weather in Lisbon?"))
        call = ToolExecutionRequest("c1", "weather", '{"city": "Lisbon"}')
        memory.add(AiMessage(tool_execution_requests=[call]))
        memory.add(ToolExecutionResultMessage("c1", "weather", "sunny, 24 °C"))
        memory.add(AiMessage("Sunny and 24 °C in Lisbon."))
        memory.add(UserMessage(ATTACK))
        memory.add(AiMessage("I cannot run that."))
        MessageWindowChatMemory(max_messages=10, id="bob:chat", store=store).add(
            UserMessage("Hello from Bob")
        )
        recall = SemanticRecall(HashingEmbeddingModel(), SqliteEmbeddingStore(path), top_k=2)
        recall.index(store, TRIP, user_id="ann")
    records = SqliteRecordStore(path)
    ConversationTitles(records, chat_model=ScriptedChatModel(lambda r: "x")).set(TRIP, "Ann's trip")
    records.close()
