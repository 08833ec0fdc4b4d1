"""The retrieval pipeline stage by stage (research §5, RAG checklist)."""

from __future__ import annotations

import asyncio
import pickle
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatmemory import (
    AiMessage,
    ConfigurationError,
    ImageContent,
    ModelBehaviourError,
    ModelError,
    SystemMessage,
    UserMessage,
)
from chatmemory.rag import (
    AugmentationRequest,
    CompressingQueryTransformer,
    Content,
    ContentKey,
    DefaultContentAggregator,
    DefaultContentInjector,
    DefaultQueryRouter,
    DefaultQueryTransformer,
    DefaultRetrievalAugmentor,
    Embedding,
    EmbeddingSearchRequest,
    EmbeddingStoreContentRetriever,
    ExpandingQueryTransformer,
    FilterSyntaxError,
    FullTextContentRetriever,
    HybridContentRetriever,
    LanguageModelFilterBuilder,
    LanguageModelQueryRouter,
    Query,
    QueryMetadata,
    ReciprocalRankFuser,
    ReRankingContentAggregator,
    TextSegment,
    cosine_similarity,
    key,
    relevance_score,
)
from chatmemory.testing import ScriptedChatModel
from tests.rag.doubles import Fixed, filled


def c(text: str, **metadata: Any) -> Content:
    return Content(TextSegment(text, metadata))


def texts(contents: list[Content]) -> list[str]:
    return [content.text for content in contents]


def prompt_of(model: ScriptedChatModel, index: int) -> str:
    """The text of the one user message of the model's `index`-th request."""
    [message] = model.requests[index].messages
    assert isinstance(message, UserMessage)
    return message.text


def meta(history: list[Any] | None = None) -> QueryMetadata:
    return QueryMetadata(user_message=UserMessage("q"), chat_memory=history, memory_id="u")


# -- values -----------------------------------------------------------------------------------


def test_contents_are_equal_by_segment_whatever_their_scores() -> None:
    a = Content(TextSegment("x", {"page": 1}), {ContentKey.SCORE: 0.9})
    b = Content(TextSegment("x", {"page": 1}), {ContentKey.SCORE: 0.1})
    assert a == b
    assert hash(a) == hash(b)
    assert a != Content(TextSegment("x", {"page": 2}))
    assert a.score == 0.9
    assert Content(TextSegment("x")).score is None


def test_values_check_what_they_are_given() -> None:
    with pytest.raises(ConfigurationError, match="non-blank text"):
        Query("  ")
    with pytest.raises(ConfigurationError, match="must be a str"):
        TextSegment(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="mapping with str keys"):
        TextSegment("x", {1: 2})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match="must be a TextSegment"):
        Content("x")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="at least one number"):
        Embedding(())
    with pytest.raises(ConfigurationError, match="sequence of numbers"):
        Embedding(("a",))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="sequence of numbers"):
        Embedding((1.0, None))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"shape \(1, 2\).*add_all\(matrix\)"):
        Embedding(np.ones((1, 2)))


def test_an_embedding_is_one_read_only_array() -> None:
    given = np.array([3.0, 4.0], dtype=np.float32)
    embedding = Embedding(given)
    given[0] = 9.0  # a copy was taken
    assert embedding == Embedding((3, 4)) == Embedding.trusted([3.0, 4.0])
    assert embedding != Embedding((3.0, 4.5))
    assert embedding != (3.0, 4.0)
    assert hash(embedding) == hash(Embedding((3.0, 4.0)))
    assert (embedding.vector, embedding.dimension) == ((3.0, 4.0), 2)
    assert embedding.array.dtype == np.float64
    assert not embedding.array.flags.writeable
    assert Embedding((True, 0.5)).vector == (1.0, 0.5)
    assert Embedding(("1.5", 2)).vector == (1.5, 2.0)  # type: ignore[arg-type]
    assert pickle.loads(pickle.dumps(embedding)) == embedding
    assert repr(embedding) == "Embedding(vector=(3.0, 4.0))"
    with pytest.raises(AttributeError, match="cannot be changed"):
        embedding.vector = (1.0,)  # type: ignore[misc]


# -- scoring ----------------------------------------------------------------------------------


def test_cosine_similarity_and_relevance() -> None:
    a, b = Embedding((1.0, 0.0)), Embedding((0.0, 1.0))
    assert cosine_similarity(a, a) == pytest.approx(1.0)
    assert cosine_similarity(a, b) == pytest.approx(0.0)
    assert cosine_similarity(a, Embedding((-2.0, 0.0))) == pytest.approx(-1.0)
    assert cosine_similarity(Embedding((0.0, 0.0)), a) == 0.0  # floored denominator
    assert [relevance_score(x) for x in (-1, 0, 1)] == [0.0, 0.5, 1.0]
    assert Embedding((3.0, 4.0)).normalized().vector == pytest.approx((0.6, 0.8))
    assert Embedding((0.0, 0.0)).normalized() == Embedding((0.0, 0.0))
    with pytest.raises(ConfigurationError, match="dimension 2 and 3"):
        cosine_similarity(a, Embedding((1.0, 2.0, 3.0)))


def test_search_requests_check_their_ranges() -> None:
    e = Embedding((1.0,))
    assert EmbeddingSearchRequest(query_embedding=e).max_results == 3
    with pytest.raises(ConfigurationError, match="at least 1"):
        EmbeddingSearchRequest(query_embedding=e, max_results=0)
    with pytest.raises(ConfigurationError, match=r"in \[0, 1\]"):
        EmbeddingSearchRequest(query_embedding=e, min_score=1.5)
    with pytest.raises(ConfigurationError, match="must be an int"):
        EmbeddingSearchRequest(query_embedding=e, max_results=True)
    with pytest.raises(ConfigurationError, match="must be an Embedding"):
        EmbeddingSearchRequest(query_embedding=[1.0])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="must be a Filter"):
        EmbeddingSearchRequest(query_embedding=e, filter="x")  # type: ignore[arg-type]


# -- filters ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "metadata", "expected"),
    [
        (key("a").eq(1), {"a": 1}, True),
        (key("a").eq(1), {"a": 1.0}, True),
        (key("a").eq(1), {"a": "1"}, False),
        (key("a").eq(1), {"a": True}, False),
        (key("a").eq(True), {"a": True}, True),
        (key("a").eq(1), {}, False),
        (key("a").ne(1), {}, True),
        (key("a").ne(1), {"a": 2}, True),
        (key("a").ne(1), {"a": 1}, False),
        (key("a").gt(1), {"a": 2}, True),
        (key("a").gt(1), {"a": "2"}, False),
        (key("a").gte(2), {"a": 2}, True),
        (key("a").lt("b"), {"a": "a"}, True),
        (key("a").lte(2), {"a": 3}, False),
        (key("a").gt(True), {"a": True}, False),
        (key("a").in_(["x", "y"]), {"a": "y"}, True),
        (key("a").in_(["x", "y"]), {}, False),
        (key("a").not_in(["x"]), {}, True),
        (key("a").not_in(["x"]), {"a": "x"}, False),
        (key("a").eq(1) & key("b").eq(2), {"a": 1, "b": 2}, True),
        (key("a").eq(1) & key("b").eq(2), {"a": 1}, False),
        (key("a").eq(1) | key("b").eq(2), {"b": 2}, True),
        (~key("a").eq(1), {"a": 1}, False),
    ],
)
def test_filter_meaning(condition: Any, metadata: dict[str, Any], expected: bool) -> None:
    assert condition.test(metadata) is expected


def test_filters_refuse_what_they_cannot_compare() -> None:
    with pytest.raises(ConfigurationError, match="str, int, float or bool"):
        key("a").eq([1])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="at least one value"):
        key("a").in_([])
    with pytest.raises(ConfigurationError, match="collection of values"):
        key("a").in_("abc")
    with pytest.raises(ConfigurationError, match="non-empty str"):
        key("")
    with pytest.raises(ConfigurationError, match="filters combine with filters"):
        key("a").eq(1) & "b"  # type: ignore[operator]


# -- transformers -----------------------------------------------------------------------------


def test_the_default_transformer_keeps_the_query() -> None:
    query = Query("q")
    assert DefaultQueryTransformer().transform(query) == [query]
    assert asyncio.run(DefaultQueryTransformer().atransform(query)) == [query]


def test_compressing_does_nothing_without_a_conversation() -> None:
    model = ScriptedChatModel([])
    transformer = CompressingQueryTransformer(model)
    for query in (Query("q"), Query("q", meta(None)), Query("q", meta([]))):
        assert transformer.transform(query) == [query]
    assert model.requests == []


def test_compressing_rewrites_with_the_conversation() -> None:
    model = ScriptedChatModel(["  price of the red bike  ", "x"])
    history = [
        SystemMessage("sys"),
        UserMessage("Tell me about the red bike"),
        AiMessage("It is light."),
        AiMessage(tool_execution_requests=[]),
    ]
    query = Query("how much is it?", meta(history))
    [rewritten] = CompressingQueryTransformer(model).transform(query)
    assert rewritten == Query("price of the red bike", query.metadata)
    prompt = prompt_of(model, 0)
    assert "User: Tell me about the red bike\nAI: It is light." in prompt
    assert "sys" not in prompt
    assert "New query: how much is it?" in prompt
    assert asyncio.run(CompressingQueryTransformer(model).atransform(query)) == [
        Query("x", query.metadata)
    ]


def test_expanding_asks_for_n_versions_and_drops_blank_lines() -> None:
    model = ScriptedChatModel(["one\n\n two\nthree\n", "a\nb"])
    queries = ExpandingQueryTransformer(model).transform(Query("q"))
    assert [q.text for q in queries] == ["one", " two", "three"]
    assert "Write 3 different versions" in prompt_of(model, 0)
    custom = ExpandingQueryTransformer(model, n=2, prompt="{{n}} of {{query}}")
    assert [q.text for q in asyncio.run(custom.atransform(Query("q")))] == ["a", "b"]
    assert model.requests[1].messages[0].text == "2 of q"  # type: ignore[union-attr]
    with pytest.raises(ConfigurationError, match="n must be greater than zero, but is: 0"):
        ExpandingQueryTransformer(model, n=0)
    with pytest.raises(ConfigurationError, match="needs a chat model"):
        ExpandingQueryTransformer(object())


# -- routers ----------------------------------------------------------------------------------


def test_the_default_router_routes_to_all_in_order() -> None:
    a, b = Fixed("a"), Fixed("b")
    assert DefaultQueryRouter(a, b).route(Query("q")) == [a, b]
    assert asyncio.run(DefaultQueryRouter(a).aroute(Query("q"))) == [a]
    with pytest.raises(ConfigurationError, match="at least one"):
        DefaultQueryRouter()
    with pytest.raises(ConfigurationError, match="not a content retriever"):
        DefaultQueryRouter(object())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "answer",
    [ModelError("down", retriable=True), "the first one", "3", "1, 7"],
    ids=["model failure", "not numbers", "unknown id", "partly unknown"],
)
@pytest.mark.parametrize("fallback", ["do_not_route", "route_to_all", "fail"])
def test_the_model_router_falls_back(answer: Any, fallback: Any) -> None:
    a, b = Fixed("a"), Fixed("b")
    router = LanguageModelQueryRouter(
        ScriptedChatModel([answer]), {a: "cats", b: "dogs"}, fallback=fallback
    )
    if fallback == "fail":
        with pytest.raises((ModelError, ModelBehaviourError)):
            router.route(Query("q"))
    else:
        expected = [] if fallback == "do_not_route" else [a, b]
        assert router.route(Query("q")) == expected


@pytest.mark.parametrize(
    "answer",
    [
        "kind = 'bike'",
        "SELECT * FROM segments WHERE kind = 'bike';",
        "```sql\nSELECT * FROM segments WHERE kind = 'bike'\n```",
        "Here is the query:\nSELECT * FROM segments WHERE kind = 'bike'\nIt keeps bikes.",
    ],
)
def test_the_model_states_the_filter_a_query_implies(answer: str) -> None:
    """LangChain4j's LanguageModelSqlFilterBuilder: the model writes SQL, the parser reads it,
    and the retriever searches only what passes."""
    store, embedder = filled(DOCS)
    chat = ScriptedChatModel([answer])
    builder = LanguageModelFilterBuilder(
        chat, {"kind": ("VARCHAR", "one of bike, car, boat, train"), "year": "INTEGER"}
    )
    retriever = EmbeddingStoreContentRetriever(store, embedder, filter=builder, max_results=4)
    assert texts(retriever.retrieve(Query("what has wheels for my bike"))) == [
        "Bikes have two wheels and pedals."
    ]
    prompt = prompt_of(chat, 0)
    assert "CREATE TABLE segments (\n    kind VARCHAR, -- one of bike, car, boat, train\n" in prompt
    assert "    year INTEGER,\n)" in prompt
    assert "Question: what has wheels for my bike" in prompt


@pytest.mark.parametrize(
    ("answer", "on_error", "expected"),
    [
        ("NONE", "fail", None),
        ("year >= 2021 AND kind != 'car'", "fail", key("year").gte(2021) & key("kind").ne("car")),
        ("kind = ", "no_filter", None),
        ("I cannot write SQL for that.", "no_filter", None),
        ("SELECT * FROM segments WHERE kind = ", "no_filter", None),
        (ModelError("down", retriable=True), "no_filter", None),
        ("kind = ", "fail", ModelBehaviourError),
        ("SELECT * FROM segments WHERE kind = ", "fail", FilterSyntaxError),
        (ModelError("down", retriable=True), "fail", ModelError),
    ],
)
def test_the_filter_builder_without_a_readable_answer(
    answer: Any, on_error: Any, expected: Any
) -> None:
    builder = LanguageModelFilterBuilder(
        ScriptedChatModel([answer, answer]), {"kind": "VARCHAR"}, on_error=on_error
    )
    if isinstance(expected, type):
        with pytest.raises(expected):
            builder(Query("q"))
        with pytest.raises(expected):
            asyncio.run(builder.abuild(Query("q")))
    else:
        assert builder(Query("q")) == expected
        assert asyncio.run(builder.abuild(Query("q"))) == expected


def test_the_filter_builder_asks_once_per_query() -> None:
    """A hybrid retriever searches twice (words, vectors) with one filter: one model call."""
    store, embedder = filled(DOCS)
    chat = ScriptedChatModel(["kind = 'boat'", "kind = 'car'"])
    builder = LanguageModelFilterBuilder(chat, {"kind": "VARCHAR"})
    hybrid = HybridContentRetriever(store, embedder, filter=builder, max_results=4)
    assert texts(hybrid.retrieve(Query("float on water"))) == ["Boats float on water."]
    assert asyncio.run(hybrid.aretrieve(Query("float on water"))) == [
        Content(TextSegment(*DOCS[2]))
    ]
    assert len(chat.requests) == 1
    assert asyncio.run(builder.abuild(Query("engines"))) == key("kind").eq("car")
    assert asyncio.run(builder.abuild(Query("engines"))) == key("kind").eq("car")
    assert len(chat.requests) == 2


def test_the_filter_builder_refuses_bad_settings() -> None:
    model = ScriptedChatModel([])
    with pytest.raises(ConfigurationError, match="metadata keys as columns"):
        LanguageModelFilterBuilder(model, {})
    with pytest.raises(ConfigurationError, match="`on_error` is"):
        LanguageModelFilterBuilder(model, {"a": "INT"}, on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs a chat model"):
        LanguageModelFilterBuilder(object(), {"a": "INT"})


def test_the_model_router_routes_by_numbers() -> None:
    a, b = Fixed("a"), Fixed("b")
    model = ScriptedChatModel(["2", " 2 , 1 ,2"])
    router = LanguageModelQueryRouter(model, {a: "cats", b: "dogs"})
    assert router.route(Query("woof")) == [b]
    assert asyncio.run(router.aroute(Query("both"))) == [b, a]
    prompt = prompt_of(model, 0)
    assert "1: cats\n2: dogs" in prompt
    with pytest.raises(ConfigurationError, match="must be non-blank"):
        LanguageModelQueryRouter(model, {a: " "})
    with pytest.raises(ConfigurationError, match="`fallback` is"):
        LanguageModelQueryRouter(model, {a: "x"}, fallback="ignore")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="at least one retriever"):
        LanguageModelQueryRouter(model, {})


# -- fusion and aggregation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lists", "expected"),
    [
        ([["A", "B"], ["B", "A"]], ["A", "B"]),
        ([["A", "B", "C"], ["C", "B"]], ["C", "B", "A"]),  # 1/63+1/61 > 2/62
        ([["A"], [], ["B"]], ["A", "B"]),
        ([[]], []),
        ([["A", "B"], ["A", "B"]], ["A", "B"]),
        ([["A", "B", "C"], ["D", "C", "E"]], ["C", "A", "D", "B", "E"]),
    ],
)
def test_reciprocal_rank_fusion(lists: list[list[str]], expected: list[str]) -> None:
    fused = ReciprocalRankFuser().fuse([[c(x) for x in items] for items in lists])
    assert texts(fused) == expected


def test_fusion_k_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="k must be at least 1"):
        ReciprocalRankFuser(0)


@given(st.lists(st.lists(st.sampled_from("ABCDEFG"), unique=True), max_size=4))
def test_fusion_keeps_every_content_once(lists: list[list[str]]) -> None:
    fused = texts(ReciprocalRankFuser().fuse([[c(x) for x in items] for items in lists]))
    assert sorted(fused) == sorted({x for items in lists for x in items})


def scored(text: str, score: float, **metadata: Any) -> Content:
    return Content(TextSegment(text), {ContentKey.SCORE: score, **metadata})


def test_a_fused_list_carries_the_fused_score_and_each_sources_own() -> None:
    """BM25 scores (19.9) and cosines (0.755) are never compared: the fused score orders the
    list, and each source's score stays as detail, None where the source did not find it."""
    words = [scored("zlib.html", 19.9, embedding_id="h"), scored("zlib.md", 18.7)]
    meaning = [scored("manual.html", 0.755), scored("zlib.md", 0.61)]
    fused = ReciprocalRankFuser().fuse([words, meaning])
    assert texts(fused) == ["zlib.md", "zlib.html", "manual.html"]
    assert [f.score for f in fused] == pytest.approx([1 / 62 + 1 / 62, 1 / 61, 1 / 61])
    assert [f.metadata[ContentKey.SOURCE_SCORES] for f in fused] == [
        (18.7, 0.61),
        (19.9, None),
        (None, 0.755),
    ]
    assert fused[1].metadata["embedding_id"] == "h"  # the rest of the metadata is kept
    scores = [f.score or 0 for f in fused]
    assert scores == sorted(scores, reverse=True)
    twice = ReciprocalRankFuser().fuse([[scored("A", 0.9), scored("A", 0.2)], []])
    assert twice[0].metadata[ContentKey.SOURCE_SCORES] == (0.9, None)  # its first score


def test_one_list_is_nothing_to_fuse_and_keeps_its_scores() -> None:
    alone = [scored("A", 0.9), scored("B", 0.8)]
    assert [f.metadata for f in ReciprocalRankFuser().fuse([alone])] == [
        {ContentKey.SCORE: 0.9},
        {ContentKey.SCORE: 0.8},
    ]
    one_query = {Query("q"): [alone]}
    assert [f.score for f in DefaultContentAggregator().aggregate(one_query)] == [0.9, 0.8]


def test_the_default_aggregator_fuses_per_query_then_across_queries() -> None:
    q1, q2 = Query("one"), Query("two")
    found = {q1: [[c("A"), c("B")], [c("B")]], q2: [[c("C"), c("A")]]}
    assert texts(DefaultContentAggregator().aggregate(found)) == ["A", "B", "C"]


class Scorer:
    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores
        self.asked: list[str] = []

    def score_all(self, segments: Any, query: str) -> list[float]:
        self.asked.append(query)
        return [self.scores[s.text] for s in segments]


def test_re_ranking_orders_by_score_filters_and_limits() -> None:
    scorer = Scorer({"A": 0.2, "B": 0.9, "C": 0.5})
    found = {Query("q"): [[c("A", page=1), c("B")], [c("C"), c("A", page=1)]]}
    ranked = ReRankingContentAggregator(scorer).aggregate(found)
    assert texts(ranked) == ["B", "C", "A"]
    assert ranked[0].metadata == {ContentKey.RERANKED_SCORE: 0.9}
    assert scorer.asked == ["q"]
    kept = ReRankingContentAggregator(scorer, min_score=0.5, max_results=1).aggregate(found)
    assert texts(kept) == ["B"]
    assert ReRankingContentAggregator(scorer).aggregate({}) == []
    assert ReRankingContentAggregator(scorer).aggregate({Query("q"): [[]]}) == []
    assert texts(asyncio.run(ReRankingContentAggregator(scorer).aaggregate(found))) == [
        "B",
        "C",
        "A",
    ]


def test_re_ranking_several_queries_needs_a_selector() -> None:
    scorer = Scorer({"A": 1.0, "B": 0.0})
    found = {Query("one"): [[c("A")]], Query("two"): [[c("B")]]}
    with pytest.raises(ConfigurationError, match="2 queries were retrieved for"):
        ReRankingContentAggregator(scorer).aggregate(found)
    chosen = ReRankingContentAggregator(scorer, query_selector=lambda f: list(f)[1])
    assert texts(chosen.aggregate(found)) == ["A", "B"]
    assert scorer.asked == ["two"]
    with pytest.raises(ConfigurationError, match="gave 1 scores for 2"):
        ReRankingContentAggregator(WrongCount()).aggregate({Query("q"): [[c("A"), c("B")]]})
    with pytest.raises(ConfigurationError, match="not a scoring model"):
        ReRankingContentAggregator(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="positive int"):
        ReRankingContentAggregator(scorer, max_results=0)


class WrongCount:
    def score_all(self, segments: Any, query: str) -> list[float]:
        return [1.0]


# -- injection --------------------------------------------------------------------------------


def test_injection() -> None:
    injector = DefaultContentInjector()
    message = UserMessage("What is RRF?", name="ann", attributes={"k": "v"})
    assert injector.inject([], message) is message
    injected = injector.inject([c("Fusion by rank."), c("k is 60.")], message)
    assert injected == UserMessage(
        "What is RRF?\n\nAnswer using the following information:\nFusion by rank.\n\nk is 60.",
        name="ann",
        attributes={"k": "v"},
    )


def test_injection_with_metadata_and_a_custom_template() -> None:
    injector = DefaultContentInjector(
        "{{contents}} || {{user_message}}", metadata_keys_to_include=["source", "page", "absent"]
    )
    contents = [c("one", source="a.md", page=3, other=1), c("two")]
    assert injector.inject(contents, UserMessage("q")).text == (
        "content: one\nsource: a.md\npage: 3\n\ntwo || q"
    )


# -- retrievers -------------------------------------------------------------------------------


DOCS = [
    ("Bikes have two wheels and pedals.", {"kind": "bike", "year": 2020}),
    ("Cars have four wheels and an engine.", {"kind": "car", "year": 2022}),
    ("Boats float on water.", {"kind": "boat", "year": 2019}),
    ("Trains run on rails with many wheels.", {"kind": "train", "year": 2021}),
]


def test_embedding_store_retriever_defaults_and_metadata() -> None:
    store, model = filled(DOCS)
    retriever = EmbeddingStoreContentRetriever(store, model)
    found = retriever.retrieve(Query("how many wheels does a bike have"))
    assert len(found) == 3
    assert found[0].text == "Bikes have two wheels and pedals."
    assert found[0].metadata[ContentKey.SCORE] == pytest.approx(found[0].score)
    assert isinstance(found[0].metadata[ContentKey.EMBEDDING_ID], str)
    assert model.calls == [["how many wheels does a bike have"]]
    assert repr(retriever) == "EmbeddingStoreContentRetriever('Default')"


def test_embedding_store_retriever_static_and_dynamic_settings() -> None:
    store, model = filled(DOCS)
    retriever = EmbeddingStoreContentRetriever(
        store,
        model,
        max_results=lambda q: 1 if "one" in q.text else 4,
        min_score=0.0,
        filter=lambda q: key("year").gte(2021) if "new" in q.text else None,
    )
    assert len(retriever.retrieve(Query("one wheels"))) == 1
    newer = retriever.retrieve(Query("new wheels"))
    assert {x.segment.metadata["year"] for x in newer} == {2021, 2022}
    strict = EmbeddingStoreContentRetriever(store, model, min_score=0.99)
    assert strict.retrieve(Query("zebra")) == []
    assert len(asyncio.run(retriever.aretrieve(Query("wheels")))) == 4
    with pytest.raises(ConfigurationError, match="not an embedding store"):
        EmbeddingStoreContentRetriever(object(), model)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="not an embedding model"):
        EmbeddingStoreContentRetriever(store, object())  # type: ignore[arg-type]


def test_full_text_and_hybrid_retrievers() -> None:
    store, model = filled(DOCS)
    words = FullTextContentRetriever(store, max_results=2)
    assert texts(words.retrieve(Query("rails wheels"))) == [
        "Trains run on rails with many wheels.",
        "Bikes have two wheels and pedals.",
    ]
    hybrid = HybridContentRetriever(store, model, max_results=2)
    both = hybrid.retrieve(Query("rails wheels"))
    assert texts(both)[0] == "Trains run on rails with many wheels."
    by_words = hybrid.text.retrieve(Query("rails wheels"))
    assert hybrid.vectors is not None
    by_meaning = hybrid.vectors.retrieve(Query("rails wheels"))
    top = both[0]
    ranks = [found.index(top) + 1 for found in (by_words, by_meaning)]
    assert top.score == pytest.approx(sum(1 / (60 + rank) for rank in ranks))
    assert top.metadata[ContentKey.SOURCE_SCORES] == (
        by_words[ranks[0] - 1].score,  # BM25
        by_meaning[ranks[1] - 1].score,  # cosine relevance, 0..1
    )
    assert (both[1].score or 0) <= (top.score or 0)
    assert texts(asyncio.run(hybrid.aretrieve(Query("rails wheels")))) == texts(both)
    words_only = HybridContentRetriever(store, max_results=1)
    assert texts(words_only.retrieve(Query("float"))) == ["Boats float on water."]
    assert texts(asyncio.run(words_only.aretrieve(Query("float")))) == ["Boats float on water."]
    with pytest.raises(ConfigurationError, match="no full-text search"):
        FullTextContentRetriever(object())  # type: ignore[arg-type]


# -- the augmentor ----------------------------------------------------------------------------


def request(text: str = "q") -> AugmentationRequest:
    return AugmentationRequest(UserMessage(text), meta())


def test_one_query_one_retriever() -> None:
    retriever = Fixed("fact")
    result = DefaultRetrievalAugmentor(content_retriever=retriever).augment(request("q"))
    assert texts(list(result.contents)) == ["fact"]
    assert result.user_message.text.endswith("Answer using the following information:\nfact")
    assert retriever.queries == [Query("q", meta())]


def test_several_queries_and_retrievers_run_at_once_in_a_stable_order() -> None:
    started = threading.Barrier(4, timeout=5)

    class Waiting(Fixed):
        def retrieve(self, query: Query) -> list[Content]:
            started.wait()  # passes only when all four retrievals run together
            return super().retrieve(query)

    a, b = Waiting("A"), Waiting("B")
    expanding = ExpandingQueryTransformer(ScriptedChatModel(["x\ny"]), n=2)
    augmentor = DefaultRetrievalAugmentor(
        query_transformer=expanding, query_router=DefaultQueryRouter(a, b)
    )
    result = augmentor.augment(request())
    assert texts(list(result.contents)) == ["A", "B"]
    assert sorted(q.text for q in a.queries) == ["x", "y"]


def test_no_retrievers_means_no_augmentation() -> None:
    model = ScriptedChatModel(["nonsense"])
    router = LanguageModelQueryRouter(model, {Fixed("A"): "a"})
    result = DefaultRetrievalAugmentor(query_router=router).augment(request("q"))
    assert result.contents == ()
    assert result.user_message == UserMessage("q")


def test_the_async_augmentor() -> None:
    a, b = Fixed("A"), Fixed("B")
    augmentor = DefaultRetrievalAugmentor(query_router=DefaultQueryRouter(a, b))
    result = asyncio.run(augmentor.aaugment(request("q")))
    assert texts(list(result.contents)) == ["A", "B"]
    scorer = Scorer({"A": 0.1, "B": 0.8})
    reranking = DefaultRetrievalAugmentor(
        query_router=DefaultQueryRouter(a, b),
        content_aggregator=ReRankingContentAggregator(scorer),
    )
    assert texts(list(asyncio.run(reranking.aaugment(request("q"))).contents)) == ["B", "A"]
    assert texts(list(reranking.augment(request("q")).contents)) == ["B", "A"]


def test_the_augmentor_checks_its_configuration_and_the_message() -> None:
    with pytest.raises(ConfigurationError, match="a query_router or a content_retriever"):
        DefaultRetrievalAugmentor()
    with pytest.raises(ConfigurationError, match="a query_router or a content_retriever"):
        DefaultRetrievalAugmentor(
            content_retriever=Fixed(), query_router=DefaultQueryRouter(Fixed())
        )
    augmentor = DefaultRetrievalAugmentor(content_retriever=Fixed("A"))
    image = UserMessage(contents=[ImageContent(url="https://x/y.png")])
    with pytest.raises(ConfigurationError, match="the user message's text alone"):
        augmentor.augment(AugmentationRequest(image, meta()))
    with pytest.raises(ConfigurationError, match="only a UserMessage"):
        augmentor.augment(AugmentationRequest(SystemMessage("x"), meta()))  # type: ignore[arg-type]
