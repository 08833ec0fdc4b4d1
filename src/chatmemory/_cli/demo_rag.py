"""The demo's retrieval scene: a small help center ingested offline, a question answered from it."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from rich.console import Console

from .._messages import UserMessage
from ..models import ChatRequest
from ..rag import Document, HashingEmbeddingModel, HybridContentRetriever, Ingestor
from ..services import Result, ai_service
from ..testing import ScriptedChatModel

__all__ = ["play_rag_scene"]

ARTICLES = {
    "refunds.md": "Refunds take five business days. Card payments are refunded first.",
    "shipping.md": "Parcels leave the warehouse within one day and arrive in two to four days.",
    "returns.md": "Returns are free for 30 days: print the label from your order page.",
    "accounts.md": "To close your account, write to support with the e-mail you signed up with.",
}
QUESTION = "How long does a refund take?"


class _HelpDesk(Protocol):
    def answer(self, question: str) -> Result[str]: ...


def _reply_from_passages(request: ChatRequest) -> str:
    """The scripted model reads the first passage the injector added to the question."""
    last = request.messages[-1]
    text = last.text if isinstance(last, UserMessage) and last.has_single_text() else ""
    passages = text.split("Answer using the following information:\n", 1)[-1]
    return f"From the help center: {passages.strip().splitlines()[0]}"


def play_rag_scene(out: Console, path: Path) -> None:
    from ..rag.sqlite import SqliteEmbeddingStore

    out.rule("retrieval · a help center, offline")
    model = HashingEmbeddingModel()
    with SqliteEmbeddingStore(path, table="demo_help_center") as store:
        documents = [Document(text, {"file_name": name}) for name, text in ARTICLES.items()]
        store.remove_all()  # the scene starts from the same articles every run
        report = Ingestor(model, store).ingest(documents)
        out.print(
            f"Ingested {report.segments} articles with {model!r} into {path.name}.", soft_wrap=True
        )
        desk = ai_service(
            _HelpDesk,
            chat_model=ScriptedChatModel(_reply_from_passages),
            content_retriever=HybridContentRetriever(store, model, max_results=2),
        )
        result = desk.answer(QUESTION)
        out.print(f"user: {QUESTION}")
        for content in result.sources:
            name = content.segment.metadata["file_name"]
            out.print(f"  retrieved {name}: {content.text}", soft_wrap=True)
        out.print(f"assistant: {result.content}\n", soft_wrap=True)
