"""The demo's recall scene: a fact said long ago, evicted from the window, comes back."""

from __future__ import annotations

import re
from typing import Annotated, Protocol

from rich.console import Console

from .._memory.window import MessageWindowChatMemory
from .._messages import SystemMessage
from ..models import ChatRequest
from ..rag import HashingEmbeddingModel
from ..services import MemoryId, ai_service, system_message
from ..testing import ScriptedChatModel

__all__ = ["play_recall_scene"]

CHAT = [
    "Hi! I am setting up my gym membership.",
    "My locker number is 217 and the code is 4711.",
    "Which classes run on Monday?",
    "Is the pool open on Sundays?",
    "Can I bring a friend?",
    "Do you have towels?",
    "How late is the sauna open?",
]
QUESTION = "Sorry, what was my locker code again?"


class _Desk(Protocol):
    @system_message("You are the front desk of a gym.")
    def chat(self, member: Annotated[str, MemoryId], text: str) -> str: ...


def _answer(request: ChatRequest) -> str:
    """The scripted model answers from what recall put in its system message, if anything."""
    system = request.messages[0]
    text = system.text if isinstance(system, SystemMessage) else ""
    code = re.search(r"code is (\d+)", text)
    return f"Your locker code is {code.group(1)}." if code else "Noted."


def play_recall_scene(out: Console) -> None:
    """In memory: the scene is about what recall finds, and leaves the demo's file alone."""
    from ..rag import InMemoryEmbeddingStore
    from ..recall import SemanticRecall
    from ..stores import InMemoryChatMemoryStore

    out.rule("recall · a fact from long ago")
    member = "demo:recall"
    store, vectors = InMemoryChatMemoryStore(), InMemoryEmbeddingStore()
    recall = SemanticRecall(HashingEmbeddingModel(), vectors, top_k=1, message_range=0)
    desk = ai_service(
        _Desk,
        chat_model=ScriptedChatModel(_answer),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=6, store=store
        ),
        semantic_recall=recall,
    )
    for text in CHAT:
        desk.chat(member, text)
    window = [m for m in store.history(member) if m.in_window]
    out.print(
        f"{len(CHAT)} exchanges later the window holds {len(window)} messages; the locker "
        f"code left it long ago (the history keeps it).",
        soft_wrap=True,
    )
    out.print(f"user: {QUESTION}")
    found = recall.recall(store, member, QUESTION)
    for run in found:
        for message in run.messages:
            out.print(f"  recalled (score {run.score:.2f}): {getattr(message, 'text', '')}")
    out.print(f"assistant: {desk.chat(member, QUESTION)}\n", soft_wrap=True)
