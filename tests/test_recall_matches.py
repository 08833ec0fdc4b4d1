"""Recall spends its budget on matches (issue 24): one hybrid search, neighbours only where they
add, repeats skipped, at most `max_messages` messages, and who said it and when in the block."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from chatmemory import AiMessage, ChatMessage, UserMessage
from chatmemory.rag import (
    EmbeddingSearchRequest,
    EmbeddingSearchResult,
    HashingEmbeddingModel,
    InMemoryEmbeddingStore,
)
from chatmemory.recall import SemanticRecall
from chatmemory.stores import HistoryEntry, StoredMessage, WindowSnapshot

START = datetime(2025, 3, 1, 12, tzinfo=timezone.utc)


class Dated:
    """A history whose messages were said on given days, the last `window` still in the
    window (the store contract `SemanticRecall` reads)."""

    def __init__(self, messages: list[tuple[ChatMessage, int]], window: int = 2) -> None:
        count = len(messages)
        self.entries = [
            HistoryEntry(seq, message, START + timedelta(days=days), seq >= count - window)
            for seq, (message, days) in enumerate(messages)
        ]

    def history(self, memory_id: str) -> list[HistoryEntry]:
        return self.entries

    def load_window(self, memory_id: str) -> WindowSnapshot:
        rows = tuple(StoredMessage(e.seq, e.message) for e in self.entries if e.in_window)
        return WindowSnapshot(version=1, rows=rows, life="1")


def filler(count: int) -> list[tuple[ChatMessage, int]]:
    return [
        (UserMessage(f"Small talk number {i} about nothing much.", name="Ann"), 9)
        if i % 2 == 0
        else (AiMessage(f"Reply {i}, nothing to add."), 9)
        for i in range(count)
    ]


def recalled(recall: SemanticRecall, history: Dated, query: str) -> list[int]:
    return [seq for run in recall.recall(history, "c", query) for seq in run.seqs]


def test_a_matched_question_brings_its_terse_answer_and_an_answer_its_question() -> None:
    history = Dated(
        [
            (UserMessage("I went for a run this morning.", name="Ann"), 0),
            (AiMessage("What was your time in the half marathon?"), 0),
            (UserMessage("1:52.", name="Ann"), 0),
            (AiMessage("Impressive, well done."), 0),
            *filler(6),
        ]
    )
    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), top_k=1)
    recall.index(history, "c", full=True)
    assert recalled(recall, history, "half marathon time") == [1, 2]  # the question + answer
    assert recalled(recall, history, "1:52") == [1, 2]  # a short reply + what it answers
    fixed = SemanticRecall(
        HashingEmbeddingModel(), InMemoryEmbeddingStore(), top_k=1, message_range=0
    )
    fixed.index(history, "c", full=True)
    assert recalled(fixed, history, "half marathon time") == [1]


def test_the_budget_counts_messages_and_repeats_are_skipped() -> None:
    said = "The wifi password at home is maple7sky."
    history = Dated([(UserMessage(said, name="Ann"), d) for d in range(4)] + filler(20))
    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), max_messages=3)
    recall.index(history, "c", full=True)
    found = recall.recall(history, "c", "what is the wifi password")
    assert next(run.seqs for run in found) == (0,)  # the first copy, the others are repeats
    assert not {1, 2, 3} & {seq for run in found for seq in run.seqs}
    assert sum(len(run.seqs) for run in found) == 3  # the rest of the budget goes elsewhere
    tight = SemanticRecall(
        HashingEmbeddingModel(), InMemoryEmbeddingStore(), max_messages=1, message_range=3
    )
    tight.index(history, "c", full=True)
    assert [run.seqs for run in tight.recall(history, "c", "wifi password")] == [(0,)]


def test_the_block_says_who_said_it_and_on_which_day() -> None:
    history = Dated(
        [
            (UserMessage("Our new puppy is called Biscuit.", name="Ann"), 3),
            (AiMessage("What a lovely name."), 3),
            *filler(6),
        ]
    )
    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), top_k=1)
    recall.index(history, "c", full=True)
    [found] = recall.recall(history, "c", "What did Ann call the puppy?")
    assert found.date == "2025-03-04"
    block = recall.block([found])
    assert "[from conversation c, message 0, 2025-03-04]\nAnn: Our new puppy is called" in block
    indexed = recall.store.search_text("ann biscuit", max_results=1)  # type: ignore[attr-defined]
    assert indexed[0].embedded.text == "Ann: Our new puppy is called Biscuit."
    assert indexed[0].embedded.metadata["speaker"] == "Ann"


def test_a_recall_sends_one_request_with_the_query_text_unless_hybrid_is_off() -> None:
    history = Dated(
        [
            (UserMessage("The landlord's number is 0176 5551234.", name="Ann"), 0),
            *[
                (UserMessage(f"The landlord fixed the heating, call {i} went fine.", name="Ann"), 1)
                for i in range(8)
            ],
            *filler(4),
        ]
    )
    query = "what is 0176 5551234 again"
    for hybrid in (True, False):
        store = Recording()
        recall = SemanticRecall(HashingEmbeddingModel(), store, top_k=1, hybrid=hybrid)
        recall.index(history, "c", full=True)
        assert recalled(recall, history, query)[0] == 0
        assert store.requests[0].query == (query if hybrid else None)


class Recording(InMemoryEmbeddingStore):
    def __init__(self) -> None:
        super().__init__()
        self.requests: list[EmbeddingSearchRequest] = []

    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
        self.requests.append(request)
        return super().search(request)


@pytest.mark.parametrize("hybrid", [True, False])
def test_recall_and_forget_alike_for_asyncio(hybrid: bool) -> None:
    history = Dated([(UserMessage("My locker code is 4711.", name="Ann"), 0), *filler(6)])
    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), hybrid=hybrid)

    async def main() -> tuple[list[int], int]:
        await recall.aindex(history, "c", full=True)
        found = await recall.arecall(history, "c", "locker code")
        return [s for run in found for s in run.seqs], await recall.aforget(memory_id="c")

    seqs, forgotten = asyncio.run(main())
    assert seqs[0] == 0
    assert forgotten == 8  # the seven messages (the window's too) and the mark
    assert recall.recall(history, "c", "locker code") == []


NEAR = (
    "The wifi password at home is maple7sky and it is written on the router in the hallway "
    "near the front door of the flat"
)


def test_a_near_identical_message_is_a_repeat_on_a_store_with_or_without_vectors() -> None:
    history = Dated(
        [
            (UserMessage(NEAR, name="Ann"), 0),
            (UserMessage(NEAR.replace("flat", "flats"), name="Ann"), 1),  # nearly the same
            *filler(12),
        ]
    )
    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), top_k=2)
    recall.index(history, "c", full=True)
    seqs = recalled(recall, history, "wifi password router hallway")
    assert 0 in seqs
    assert 1 not in seqs
    bare = SemanticRecall(HashingEmbeddingModel(), WithoutVectors(), top_k=2)
    bare.index(history, "c", full=True)
    seqs = recalled(bare, history, "wifi password router hallway")
    assert 0 in seqs
    assert 1 not in seqs  # a repeat by its words, vectors or not


class WithoutVectors(InMemoryEmbeddingStore):
    """A store whose matches carry no embedding (allowed by the contract)."""

    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
        found = super().search(request)
        return EmbeddingSearchResult(tuple(replace(m, embedding=None) for m in found.matches))


def test_recall_embeds_its_queries_as_queries_and_the_history_as_documents() -> None:
    seen: list[tuple[str | None, int]] = []

    class Typed(HashingEmbeddingModel):
        def embed_all(self, texts: Any, *, input_type: str | None = None) -> Any:
            seen.append((input_type, len(texts)))
            return super().embed_all(texts)

        async def aembed_all(self, texts: Any, *, input_type: str | None = None) -> Any:
            return self.embed_all(texts, input_type=input_type)

    history = Dated([(UserMessage("the locker code is 4711"), 0), *filler(6)])
    recall = SemanticRecall(embedding_model=Typed(), embedding_store=InMemoryEmbeddingStore())
    recall.index(history, "c", full=True)
    assert recalled(recall, history, "which locker code?")[0] == 0
    assert {kind for kind, _ in seen} == {"document", "query"}
    assert sum(n for kind, n in seen if kind == "document") >= 7  # the history, as documents
    assert ("query", 1) in seen
    seen.clear()
    asyncio.run(recall.arecall(history, "c", "what code again?"))
    assert seen == [("query", 1)]
