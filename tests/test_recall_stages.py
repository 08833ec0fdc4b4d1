"""Recall reads only what it shows, and its optional stages (issue 24): a match's neighbours are
read alone from a store that reads parts of a history, an index catches up on the messages it
missed alone, a query transformer's queries are searched beside the user's own, and a scoring
model re-ranks what was found."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    ChatMessage,
    ConfigurationError,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    UserMessage,
)
from chatmemory.rag import (
    ExpandingQueryTransformer,
    HashingEmbeddingModel,
    InMemoryEmbeddingStore,
    Query,
    TextSegment,
)
from chatmemory.recall import SemanticRecall
from chatmemory.stores import HistoryEntry, StoredMessage, WindowSnapshot
from chatmemory.testing import ScriptedChatModel

NOW = datetime(2026, 1, 5, 9, tzinfo=timezone.utc)


class Partial:
    """A history store that reads parts of a history (`seqs=`) and counts what it is asked."""

    def __init__(self, messages: Sequence[ChatMessage], window: int = 4) -> None:
        count = len(messages)
        self.entries = [
            HistoryEntry(seq, message, NOW, seq >= count - window)
            for seq, message in enumerate(messages)
        ]
        self.full_reads = 0
        self.asked: list[list[int]] = []

    def history(
        self, memory_id: str, *, errors: str = "raise", seqs: Iterable[int] | None = None
    ) -> list[HistoryEntry]:
        if seqs is None:
            self.full_reads += 1
            return list(self.entries)
        wanted = list(seqs)
        self.asked.append(wanted)
        return [e for e in self.entries if e.seq in set(wanted)]

    def load_window(self, memory_id: str) -> WindowSnapshot:
        rows = tuple(StoredMessage(e.seq, e.message) for e in self.entries if e.in_window)
        return WindowSnapshot(version=1, rows=rows, life="1")


class Whole:
    """The same history, read only whole (a history object of one's own may have no `seqs`)."""

    def __init__(self, partial: Partial) -> None:
        self.partial = partial

    def history(self, memory_id: str) -> list[HistoryEntry]:
        return list(self.partial.entries)

    def load_window(self, memory_id: str) -> WindowSnapshot:
        return self.partial.load_window(memory_id)


def talk(count: int) -> list[ChatMessage]:
    """`count` messages of small talk, with three facts among them."""
    facts = {
        40: "My locker code at the gym is 4711.",
        300: "What is your sister's name?",
        301: "Mia.",
        600: "The wifi password at home is maple7sky.",
    }
    return [
        UserMessage(facts.get(i, f"Small talk {i}, nothing much."))
        if i % 2 == 0 or i == 301
        else AiMessage(facts.get(i, f"Reply {i}, fine."))
        for i in range(count)
    ]


def recall_over(history: Any, **options: Any) -> SemanticRecall:
    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), **options)
    recall.index(history, "c", full=True)
    return recall


def test_a_recall_reads_the_neighbours_of_its_matches_alone() -> None:
    history = Partial(talk(1_000))
    recall = recall_over(history)
    history.full_reads, history.asked = 0, []
    runs = recall.recall(history, "c", "what is my sister called? her name")
    assert history.full_reads == 0
    assert sum(len(seqs) for seqs in history.asked) <= 3 * recall.top_k + 6
    assert any({300, 301} <= set(run.seqs) for run in runs)  # a question and its answer
    whole = recall_over(Whole(history))  # the same runs from a history read whole
    assert [r.seqs for r in whole.recall(Whole(history), "c", "sister's name")] == [
        r.seqs for r in recall.recall(history, "c", "sister's name")
    ]


def test_a_fixed_message_range_reads_that_many_neighbours_and_no_more() -> None:
    history = Partial(talk(1_000))
    recall = recall_over(history, top_k=1, message_range=(2, 3))
    history.asked = []
    [run] = recall.recall(history, "c", "gym locker code")
    assert run.seqs == (38, 39, 40, 41, 42, 43)
    assert sorted(s for seqs in history.asked for s in seqs) == [38, 39, 40, 41, 42, 43]


def test_an_index_catches_up_by_reading_only_what_it_missed() -> None:
    messages = talk(200)
    history = Partial(messages[:100], window=4)
    recall = recall_over(history)
    history.entries = Partial(messages, window=4).entries  # 100 more; 96 left the window
    history.full_reads, history.asked = 0, []
    assert recall.index(history, "c") == 100
    assert history.full_reads == 0
    assert [sorted(seqs) for seqs in history.asked] == [list(range(100, 196))]
    assert recall.index(history, "c") == 0  # nothing more to read
    assert history.asked == [list(range(100, 196))]


class Rewording:
    """A query transformer of one's own: the query, and the words the facts use."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def transform(self, query: Query) -> list[Query]:
        self.seen.append(query.text)
        return [Query("locker code gym"), query]


def test_a_query_transformer_s_queries_are_searched_beside_the_user_s() -> None:
    history = Partial(talk(400))
    asked = "Kombination vom Spind?"
    plain = recall_over(history, top_k=2, message_range=0)
    assert 40 not in [s for run in plain.recall(history, "c", asked) for s in run.seqs]
    transformer = Rewording()
    expanded = recall_over(history, top_k=2, message_range=0, query_transformer=transformer)
    assert 40 in [s for run in expanded.recall(history, "c", asked) for s in run.seqs]
    assert transformer.seen == [asked]
    runs = asyncio.run(expanded.arecall(history, "c", asked))
    assert 40 in [s for run in runs for s in run.seqs]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_expanding_query_transformer_asks_the_chat_model_for_rewordings(mode: str) -> None:
    model = ScriptedChatModel(lambda request: "gym locker code\nlocker combination")
    history = Partial(talk(400))
    recall = recall_over(
        history,
        top_k=1,
        message_range=0,
        query_transformer=ExpandingQueryTransformer(model, n=2),
    )
    asked = "Kombination vom Spind?"
    if mode == "sync":
        runs = recall.recall(history, "c", asked)
    else:
        runs = asyncio.run(recall.arecall(history, "c", asked))
    assert [run.seqs for run in runs] == [(40,)]
    [request] = model.requests
    assert asked in str(getattr(request.messages[-1], "text", ""))


class Prefers:
    """A scoring model that scores segments holding `word` 1 and the others 0."""

    def __init__(self, word: str) -> None:
        self.word = word
        self.calls = 0

    def score_all(self, segments: Sequence[TextSegment], query: str) -> list[float]:
        self.calls += 1
        return [1.0 if self.word in s.text else 0.0 for s in segments]


class AsyncPrefers(Prefers):
    async def ascore_all(self, segments: Sequence[TextSegment], query: str) -> list[float]:
        return [0.5 * score for score in self.score_all(segments, query)]


def test_a_scoring_model_re_ranks_what_was_found() -> None:
    history = Partial(talk(700))
    query = "password code"  # both facts match; the scorer prefers the locker
    plain = recall_over(history, top_k=1, message_range=0)
    [first] = plain.recall(history, "c", query)
    assert first.seqs == (600,)
    scorer = Prefers("locker")
    ranked = recall_over(history, top_k=1, message_range=0, scoring_model=scorer)
    [best] = ranked.recall(history, "c", query)
    assert (best.seqs, best.score) == ((40,), 1.0)
    assert scorer.calls == 1
    slow = AsyncPrefers("locker")
    on_loop = recall_over(history, top_k=1, message_range=0, scoring_model=slow)
    [best] = asyncio.run(on_loop.arecall(history, "c", query))
    assert (best.seqs, best.score) == ((40,), 0.5)


def test_async_recall_runs_a_sync_scoring_model_and_transformer_too() -> None:
    history = Partial(talk(700))
    recall = recall_over(
        history,
        top_k=1,
        message_range=0,
        scoring_model=Prefers("locker"),
        query_transformer=Rewording(),
    )
    [best] = asyncio.run(recall.arecall(history, "c", "password code"))
    assert best.seqs == (40,)


def test_a_scoring_model_that_miscounts_is_named() -> None:
    class Short(Prefers):
        def score_all(self, segments: Sequence[TextSegment], query: str) -> list[float]:
            return [1.0]

    history = Partial(talk(100))
    recall = recall_over(history, scoring_model=Short("x"))
    with pytest.raises(ConfigurationError, match="gave 1 scores for"):
        recall.recall(history, "c", "small talk")


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("query_transformer", "expand", "must be a QueryTransformer"),
        ("scoring_model", object(), "must be a ScoringModel"),
    ],
)
def test_a_stage_that_is_not_one_is_refused(option: str, value: object, says: str) -> None:
    given: dict[str, Any] = {option: value}
    with pytest.raises(ConfigurationError, match=says):
        SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), **given)


def test_a_store_that_keeps_the_window_only_recalls_messages_as_they_were_indexed() -> None:
    store = InMemoryChatMemoryStore(keep_history=False)
    memory = MessageWindowChatMemory(id="c", max_messages=2, store=store)
    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), message_range=0)
    for said in (
        UserMessage("My locker code at the gym is 4711.", name="Ann"),
        AiMessage("Noted, the gym locker code."),
        UserMessage("Nice weather."),
        AiMessage("Indeed."),
    ):
        memory.add(said)
        recall.index(store, "c")
    assert [e.seq for e in store.history("c")] == [2, 3]  # the rest is gone
    runs = recall.recall(store, "c", "gym locker code")
    messages = {run.seqs: run.messages for run in runs}
    assert messages[(0,)] == (UserMessage("My locker code at the gym is 4711.", name="Ann"),)
    assert messages[(1,)] == (AiMessage("Noted, the gym locker code."),)
