"""Semantic recall (issue 11): what it adds to a turn, and how often it brings back the answer.

`latency`: a service turn (`ScriptedChatModel`, a 20-message window on SQLite) with and without
`semantic_recall`, over a history of N stored messages already indexed, on the SQLite and the
pgvector embedding stores; the difference is recall's cost per turn (embedding the query, the
search, reading the neighbours, indexing the turn). Beside it, embedding one query alone with
the hashing and the local model.

`quality`: a scripted conversation of 60 facts ("My gym locker code is 4711.") among small talk,
in a 10-message window; then a question about each evicted fact. The share of questions whose
recalled block holds the fact's value, at top_k 2 and 5, with the hashing and the local model.
"""

from __future__ import annotations

import importlib.util
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any, Protocol

from chatmemory import (
    AiMessage,
    MemoryId,
    MessageWindowChatMemory,
    SqliteChatMemoryStore,
    UserMessage,
    ai_service,
)
from chatmemory.rag import EmbeddingModel, HashingEmbeddingModel, InMemoryEmbeddingStore
from chatmemory.rag.sqlite import SqliteEmbeddingStore
from chatmemory.recall import SemanticRecall
from chatmemory.testing import ScriptedChatModel

from .common import table

TURNS = 50
THINGS = [
    "gym locker code", "bike lock code", "wifi password", "passport number", "favourite tea",
    "dentist's name", "sister's birthday", "car plate", "flight number", "hotel room",
    "library card", "insurance policy", "bank branch", "shoe size", "blood type",
    "dog's name", "office floor", "parking spot", "train seat", "pharmacy",
]  # fmt: skip
SMALL_TALK = ["How is the weather?", "Any plans today?", "Did you sleep well?", "Nice!", "Thanks."]


class Agent(Protocol):
    def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...


def _history(count: int) -> list[UserMessage | AiMessage]:
    rng = random.Random(count)
    return [
        UserMessage(f"{rng.choice(SMALL_TALK)} Note {i} about {rng.choice(THINGS)}.")
        if i % 2 == 0
        else AiMessage(f"Reply {i}.")
        for i in range(count)
    ]


def _turns(service: Agent, memory_id: str) -> float:
    samples = []
    for i in range(TURNS):
        start = time.perf_counter()
        service.chat(memory_id, f"What was note {i} about my {THINGS[i % len(THINGS)]}?")
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def _latency_rows(sizes: tuple[int, ...], with_pgvector: bool) -> list[list[object]]:
    rows: list[list[object]] = []
    model = HashingEmbeddingModel()
    with tempfile.TemporaryDirectory() as directory, ExitStack() as stack:
        stores: list[tuple[str, Any]] = []
        path = Path(directory) / "chat.db"
        stores.append(("SQLite", stack.enter_context(SqliteEmbeddingStore(path, table="recall"))))
        if with_pgvector:
            from tests.rag.pgvector_server import pgvector_dsn

            from chatmemory.rag.pgvector import PgVectorEmbeddingStore

            dsn = stack.enter_context(pgvector_dsn())
            table_name = f"recall_{uuid.uuid4().hex[:8]}"
            stores.append(
                (
                    "pgvector",
                    stack.enter_context(
                        PgVectorEmbeddingStore(dsn, dimension=384, table=table_name)
                    ),
                )
            )
        chats = stack.enter_context(SqliteChatMemoryStore(path))
        for size in sizes:
            memory_id = f"bench{size}"
            MessageWindowChatMemory(id=memory_id, max_messages=20, store=chats).add(_history(size))

            def provider(mid: str) -> MessageWindowChatMemory:
                return MessageWindowChatMemory(id=mid, max_messages=20, store=chats)

            plain = ai_service(
                Agent, chat_model=ScriptedChatModel(lambda r: "OK."), chat_memory_provider=provider
            )
            floor = _turns(plain, memory_id)
            for name, vectors in stores:
                recall = SemanticRecall(model, vectors)
                recall.index(chats, memory_id)
                service = ai_service(
                    Agent,
                    chat_model=ScriptedChatModel(lambda r: "OK."),
                    chat_memory_provider=provider,
                    semantic_recall=recall,
                )
                ours = _turns(service, memory_id)
                rows.append(
                    [
                        name,
                        f"{size:,}",
                        f"{ours:.2f} ms",
                        f"{floor:.2f} ms",
                        f"{ours - floor:+.2f} ms",
                    ]
                )
    return rows


def _embedding_rows(models: list[tuple[str, EmbeddingModel]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for name, model in models:
        model.embed_all(["warm up"])
        samples = []
        for i in range(50):
            start = time.perf_counter()
            model.embed_all([f"What was my {THINGS[i % len(THINGS)]} again? ({i})"])
            samples.append(time.perf_counter() - start)
        rows.append([name, f"{statistics.median(samples) * 1e3:.2f} ms"])
    return rows


def _quality_rows(models: list[tuple[str, EmbeddingModel]]) -> list[list[object]]:
    rng = random.Random(7)
    facts = [(f"{thing}", f"{rng.randint(1000, 9999)}") for thing in THINGS]
    facts += [(f"second {thing}", f"{rng.randint(1000, 9999)}") for thing in THINGS]
    facts += [(f"old {thing}", f"{rng.randint(1000, 9999)}") for thing in THINGS]
    rows: list[list[object]] = []
    for name, model in models:
        for top_k in (2, 5):
            store = SqliteChatMemoryStore(":memory:")
            memory = MessageWindowChatMemory(id="q", max_messages=10, store=store)
            for thing, value in facts:
                memory.add(UserMessage(f"My {thing} is {value}."))
                memory.add(AiMessage("Noted."))
                for talk in rng.sample(SMALL_TALK, 2):
                    memory.add(UserMessage(talk))
                    memory.add(AiMessage("Sure."))
            recall = SemanticRecall(
                model, InMemoryEmbeddingStore(), top_k=top_k, recall_budget=4_000
            )
            recall.index(store, "q")
            hits = 0
            for thing, value in facts:
                block = recall.block(recall.recall(store, "q", f"What is my {thing}?"))
                hits += value in block
            rows.append([name, top_k, f"{hits}/{len(facts)}", f"{hits / len(facts):.0%}"])
            store.close()
    return rows


def run(quick: bool = False) -> Iterator[str]:
    models: list[tuple[str, EmbeddingModel]] = [("hashing", HashingEmbeddingModel())]
    if importlib.util.find_spec("sentence_transformers") is not None:
        from chatmemory.rag import LocalEmbeddingModel

        models.append(("local all-MiniLM-L6-v2", LocalEmbeddingModel()))
    yield table("Recall: embedding one query", ["model", "p50"], _embedding_rows(models))
    sizes = (1_000, 10_000) if quick else (10_000, 100_000)
    yield table(
        f"Recall: a service turn with semantic recall (defaults: hybrid, top_k 10; hashing "
        f"model) over N stored "
        f"messages (floor: the same turn without recall; median of {TURNS} turns)",
        ["embedding store", "messages", "with recall", "floor", "recall adds"],
        _latency_rows(sizes, with_pgvector=True),
    )
    yield table(
        "Recall quality: questions about 60 evicted facts whose recalled block holds the answer",
        ["model", "top_k", "answered", "share"],
        _quality_rows(models),
    )
