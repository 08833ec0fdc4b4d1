"""One contract for every embedding store (in-memory, SQLite, pgvector): the same searches,
scores, ids, removals and filters give the same answers everywhere."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from chatmemory import ConfigurationError
from chatmemory.rag import (
    Embedding,
    EmbeddingSearchRequest,
    Filter,
    Hnsw,
    HybridContentRetriever,
    InMemoryEmbeddingStore,
    Query,
    SqliteEmbeddingStore,
    TextSegment,
    cosine_similarity,
    key,
    relevance_score,
)
from tests.conftest import server_unavailable

from .doubles import DIMENSION, WordsModel
from .pgvector_server import pgvector_dsn

KINDS = ["memory", "sqlite", "memory-hnsw", "sqlite-hnsw", "pgvector"]
GRAPH = Hnsw(min_rows=0)  # the approximate index from the first row on


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    try:
        with pgvector_dsn() as found:
            yield found
    except RuntimeError as error:
        server_unavailable("PostgreSQL with pgvector", str(error))


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    approximate = GRAPH if request.param.endswith("-hnsw") else None
    if request.param.startswith("memory"):
        yield InMemoryEmbeddingStore(approximate=approximate)
    elif request.param.startswith("sqlite"):
        with SqliteEmbeddingStore(tmp_path / "vectors.db", approximate=approximate) as opened:
            yield opened
    else:
        from chatmemory.rag.pgvector import PgVectorEmbeddingStore

        table = f"emb_{uuid.uuid4().hex[:12]}"
        dsn = request.getfixturevalue("dsn")
        with PgVectorEmbeddingStore(dsn, dimension=DIMENSION, table=table) as opened:
            yield opened
            opened.remove_all()


def vec(*values: float) -> Embedding:
    return Embedding(tuple(list(values) + [0.0] * (DIMENSION - len(values))))


def test_search_finds_the_nearest_best_first_with_langchain4j_scores(store: Any) -> None:
    ids = store.add_all(
        [vec(1, 0), vec(1, 1), vec(0, 1), vec(-1, 0)],
        [
            TextSegment("east"),
            TextSegment("north-east", {"n": 1}),
            TextSegment("north"),
            TextSegment("west"),
        ],
    )
    assert store.count() == 4
    query = vec(1, 0.1)
    found = store.search(EmbeddingSearchRequest(query_embedding=query, max_results=3)).matches
    assert [m.embedding_id for m in found] == [ids[0], ids[1], ids[2]]
    for match in found:
        assert match.embedding is not None
        assert match.score == pytest.approx(
            relevance_score(cosine_similarity(query, match.embedding)), abs=1e-6
        )
    assert found[1].embedded == TextSegment("north-east", {"n": 1})
    high = store.search(
        EmbeddingSearchRequest(query_embedding=query, max_results=4, min_score=0.85)
    )
    assert [m.embedding_id for m in high.matches] == [ids[0], ids[1]]


def test_ties_keep_insertion_order(store: Any) -> None:
    ids = store.add_all([vec(1, 1)] * 5, [TextSegment(f"same {i}") for i in range(5)])
    found = store.search(EmbeddingSearchRequest(query_embedding=vec(1, 1), max_results=5))
    assert sorted(m.embedding_id for m in found.matches) == sorted(ids)
    assert len({round(m.score, 6) for m in found.matches}) == 1
    if isinstance(store, (InMemoryEmbeddingStore, SqliteEmbeddingStore)):
        # The embedded stores are exact: among equals the row added first wins, also at the
        # cut (pgvector's HNSW index orders equals as it finds them).
        assert [m.embedding_id for m in found.matches] == ids


def test_a_tie_at_the_cut_goes_to_the_row_added_first(store: Any) -> None:
    if not isinstance(store, (InMemoryEmbeddingStore, SqliteEmbeddingStore)):
        pytest.skip("pgvector's HNSW index orders equal scores as it finds them")
    if store.approximate is not None:
        pytest.skip("an HNSW graph finds some of many equal rows, not the first ones added")
    pattern = [(1, 0), (1, 1), (1, 0.5), (1, 1), (1, 0), (1, 0.5), (1, 1), (1, 0.5)] * 40
    ids = store.add_all([vec(*p) for p in pattern], [TextSegment(str(p)) for p in pattern])
    query = vec(1, 0.5)
    for top in (1, 3, 50, 100, 200, 320):
        found = store.search(EmbeddingSearchRequest(query_embedding=query, max_results=top))
        exact = sorted(
            range(len(pattern)),
            key=lambda n: (-round(cosine_similarity(query, vec(*pattern[n])), 6), n),
        )
        assert [m.embedding_id for m in found.matches] == [ids[n] for n in exact[:top]]


def test_ids_given_replace_and_removal_by_id_filter_or_all(store: Any) -> None:
    assert store.add(vec(1), TextSegment("a", {"k": "x"}), id="one") == "one"
    store.add(vec(0, 1), TextSegment("b", {"k": "y"}), id="one")  # replaces
    assert store.count() == 1
    only = store.search(EmbeddingSearchRequest(query_embedding=vec(0, 1))).matches
    assert only[0].embedded == TextSegment("b", {"k": "y"})
    bare = store.add(vec(0, 0, 1))  # an embedding without a segment
    match = store.search(EmbeddingSearchRequest(query_embedding=vec(0, 0, 1))).matches[0]
    assert (match.embedding_id, match.embedded) == (bare, None)
    store.add_all([vec(1, 2), vec(2, 1)], [TextSegment("c", {"k": "z"}), TextSegment("d")])
    store.remove(bare)
    store.remove_all(["one"])
    assert store.count() == 2
    store.remove_all(filter=key("k").eq("z"))
    assert store.count() == 1
    store.remove_all()
    assert store.count() == 0
    assert store.add_all([]) == []


METADATA = [
    {"year": 2020, "lang": "en", "draft": False},
    {"year": 2021.5, "lang": "fr"},
    {"year": "2022", "lang": "en", "draft": True},
    {"lang": "de", "draft": False},
    {"year": 2023, "lang": "en"},
    {"year": True, "lang": "Éa"},
    {},
]

FILTERS: list[Filter] = [
    key("lang").eq("en"),
    key("lang").ne("en"),
    key("year").gt(2020),
    key("year").gte(2020),
    key("year").lt(2022),
    key("year").lte(2021.5),
    key("year").eq(True),
    key("year").gt(True),
    key("lang").gt("en"),
    key("lang").lte("fr"),
    key("lang").in_(["en", "de"]),
    key("lang").not_in(["en", "de"]),
    key("year").in_([2020, "2022"]),
    key("year").eq(2020.0),
    key("draft").eq(False),
    key("draft").ne(True),
    ~key("draft").eq(True),
    key("lang").eq("en") & key("year").gte(2021),
    key("lang").eq("fr") | key("draft").eq(True),
    ~(key("year").lt(2022) | key("lang").eq("de")),
]


@pytest.mark.parametrize("condition", FILTERS, ids=repr)
def test_filters_have_one_meaning_on_every_store(store: Any, condition: Filter) -> None:
    check_one_meaning(store, METADATA, condition)


NESTED: list[dict[str, Any]] = [
    {"tag": "a", "lang": "en"},
    {"tag": ["a", "b"], "lang": "en"},
    {"tag": {"a": 1}, "lang": "en"},
    {"tag": "a", "lang": "fr"},
]


@pytest.mark.parametrize(
    "condition",
    [
        key("tag").eq("a"),
        key("tag").in_(["a", "b"]),
        key("tag").eq("a") & key("lang").eq("en"),
        key("lang").eq("en") & key("tag").eq("a") & key("lang").eq("fr"),
        key("tag").eq("a") & ~key("lang").eq("fr"),
    ],
    ids=repr,
)
def test_an_equality_never_matches_a_list_or_an_object_holding_the_value(
    store: Any, condition: Filter
) -> None:
    check_one_meaning(store, NESTED, condition)


def check_one_meaning(store: Any, metadata: list[dict[str, Any]], condition: Filter) -> None:
    """Search, select, full text and removal pass the rows `condition.test` passes, no other."""
    ids = store.add_all(
        [vec(1, i) for i in range(len(metadata))],
        [TextSegment(f"segment {i}", m) for i, m in enumerate(metadata)],
    )
    store.add(vec(1))  # no segment: no filter passes it
    expected = {i for i, m in zip(ids, metadata, strict=True) if condition.test(m)}
    request = EmbeddingSearchRequest(query_embedding=vec(1), max_results=50, filter=condition)
    assert {m.embedding_id for m in store.search(request).matches} == expected
    selected = store.select(condition)
    assert set(selected) == expected
    assert all(
        selected[i] == TextSegment(f"segment {ids.index(i)}", metadata[ids.index(i)])
        for i in expected
    )
    words = store.search_text("segment", max_results=50, filter=condition)
    assert {m.embedding_id for m in words} == expected
    store.remove_all(filter=condition)
    left = store.search(EmbeddingSearchRequest(query_embedding=vec(1), max_results=50)).matches
    assert {m.embedding_id for m in left} == set(ids) - expected | {
        m.embedding_id for m in left if m.embedded is None
    }


TEXTS: list[dict[str, Any]] = [
    {"title": "The zlib manual"},
    {"title": "ZLIB"},
    {"title": "100% pure_zlib"},
    {"title": "Émile's zlib notes"},
    {"title": 100},
    {"title": ["zlib"]},
    {"name": "zlib"},
    {"title": ""},
]

CONTAINS_FILTERS: list[Filter] = [
    key("title").contains("zlib"),
    key("title").contains("ZLIB"),
    key("title").contains("%"),
    key("title").contains("_"),
    key("title").contains("Émile"),
    key("title").contains("10"),
    key("title").contains(""),
    ~key("title").contains("zlib"),
    key("title").contains("zlib") & ~key("title").contains("manual"),
    key("title").contains("pure") | key("title").eq("ZLIB"),
]


@pytest.mark.parametrize("condition", CONTAINS_FILTERS, ids=repr)
def test_contains_has_one_meaning_on_every_store(store: Any, condition: Filter) -> None:
    check_one_meaning(store, TEXTS, condition)


@pytest.mark.parametrize(
    ("condition", "passing"),
    [
        (key("title").contains("zlib"), [0, 2, 3]),  # case-sensitive, str values only
        (key("title").contains("%"), [2]),  # '%' and '_' are text, not LIKE wildcards
        (key("title").contains("_"), [2]),
        (key("title").contains(""), [0, 1, 2, 3, 7]),  # every str holds ""
        (~key("title").contains("zlib"), [1, 4, 5, 6, 7]),  # the others, absent key too
    ],
)
def test_contains_finds_text_inside_str_values(
    store: Any, condition: Filter, passing: list[int]
) -> None:
    ids = store.add_all(
        [vec(1, i) for i in range(len(TEXTS))],
        [TextSegment(f"segment {i}", m) for i, m in enumerate(TEXTS)],
    )
    assert set(store.select(condition)) == {ids[i] for i in passing}


def test_contains_takes_a_str() -> None:
    with pytest.raises(ConfigurationError, match="only text contains text"):
        key("title").contains(1)  # type: ignore[arg-type]


NUMBERS: list[dict[str, Any]] = [
    {"n": v}
    for v in (
        2**53, 2**53 + 1, 2**53 + 2, float(2**53), 1e16, 10**16 + 1, 2**70, 0.1, 1 / 3,
        1e23, 10**23, -0.0, -(2**63) - 1,
    )
]  # fmt: skip

NUMBER_FILTERS: list[Filter] = [
    key("n").eq(2**53 + 1),
    key("n").ne(2**53 + 1),
    key("n").gt(2**53),
    key("n").gte(2**53 + 1),
    key("n").lt(2**53 + 1),
    key("n").lte(2**53),
    key("n").eq(9007199254740992.0),
    key("n").gt(1e16),
    key("n").lt(10**16 + 1),
    key("n").eq(10**16),
    key("n").eq(0.1),
    key("n").gt(0.1),
    key("n").gte(0.1),
    key("n").lte(1 / 3),
    key("n").gt(10**23 - 1),
    key("n").eq(10**23),
    key("n").lt(1e23),
    key("n").lt(-(2**63)),
    key("n").in_([2**53 + 1, 1e16]),
    key("n").not_in([2**53, 0]),
    key("n").eq(0),
]


@pytest.mark.parametrize("condition", NUMBER_FILTERS, ids=repr)
def test_filters_compare_numbers_exactly(store: Any, condition: Filter) -> None:
    """Numbers compare as Python compares them, exactly: ints beyond 2**53 are not rounded to
    a double, and an int and a float compare by value (1e23 is 99999999999999991611392)."""
    check_one_meaning(store, NUMBERS, condition)


ODD_METADATA: dict[str, Any] = {
    "big": 2**70,
    "edge": 2**53 + 1,
    "negative": -(2**63) - 5,
    "f16": 1e16,
    "f23": 1e23,
    "largest": 1.7976931348623157e308,
    "smallest": 5e-324,
    "small": 1.5e-7,
    "third": 1 / 3,
    "whole": 2.0,
    "zero": -0.0,
    "nested": {"list": [1, 2.5, 1e16, {"deep": 2**64}], "flag": True, "none": None},
    "ключ ✓": "värde 🎉",
    "": "an empty key",
}


def same(given: Any, found: Any) -> bool:
    """Equal and of the same types all the way down: 1e16 is not 10**16 here."""
    if isinstance(given, Mapping):
        return (
            isinstance(found, Mapping)
            and set(given) == set(found)
            and all(same(given[k], found[k]) for k in given)
        )
    if isinstance(given, (list, tuple)):
        return (
            isinstance(found, (list, tuple))
            and len(given) == len(found)
            and all(same(g, f) for g, f in zip(given, found, strict=True))
        )
    return type(given) is type(found) and given == found


def test_metadata_comes_back_as_it_went_in(store: Any) -> None:
    """What goes in comes back equal, each value of its own type: big ints, floats beyond 1e16
    (not ints), the extremes of float, nested values, any str keys. (-0.0 comes back equal,
    but as 0.0 on pgvector: PostgreSQL's numbers have no negative zero.)"""
    store.add(vec(1), TextSegment("odd", ODD_METADATA), id="odd")
    request = EmbeddingSearchRequest(query_embedding=vec(1))
    filtered = EmbeddingSearchRequest(query_embedding=vec(1), filter=key("big").eq(2**70))
    found = [
        store.select(key("edge").eq(2**53 + 1))["odd"],
        store.search(request).matches[0].embedded,
        store.search(filtered).matches[0].embedded,
        store.search_text("odd")[0].embedded,
    ]
    for segment in found:
        assert segment == TextSegment("odd", ODD_METADATA)
        assert same(ODD_METADATA, segment.metadata), segment.metadata


@pytest.mark.parametrize("odd", [math.nan, math.inf, -math.inf], ids=repr)
def test_nan_and_infinity_are_refused_alike(store: Any, odd: float) -> None:
    """No store keeps NaN or an infinity in metadata: JSON (the pgvector column, LangChain4j's
    file) has no form for them, and NaN never equals itself, so it could not come back equal
    nor be found by a filter. Nothing of the call is stored."""
    for metadata in ({"n": odd}, {"n": [1.0, {"deep": odd}]}):
        with pytest.raises(ConfigurationError, match="finite"):
            store.add_all([vec(1), vec(0, 1)], [TextSegment("fine"), TextSegment("odd", metadata)])
    assert store.count() == 0


@pytest.mark.parametrize("odd", [math.nan, math.inf, -math.inf], ids=repr)
def test_filters_refuse_nan_and_infinity(odd: float) -> None:
    for make in (key("n").eq, key("n").gte, lambda v: key("n").in_([1, v])):
        with pytest.raises(ConfigurationError, match="finite"):
            make(odd)


def test_a_filtered_search_finds_the_rows_that_pass_behind_nearer_ones(store: Any) -> None:
    """5 rows pass the filter and 395 nearer ones do not: the search returns the 5, best first
    (pgvector's HNSW index kept its nearest candidates and filtered them afterwards: none)."""
    near = [vec(1, 0.001 * i) for i in range(395)]
    far = [vec(1, 1 + 0.5 * i) for i in range(5)]  # scores 0.85, 0.78, 0.72, 0.69, 0.66
    ids = store.add_all(
        near + far,
        [TextSegment(f"near {i}", {"user": "bob"}) for i in range(395)]
        + [TextSegment(f"far {i}", {"user": "ann"}) for i in range(5)],
    )
    ann = key("user").eq("ann")
    for top in (5, 10):
        request = EmbeddingSearchRequest(query_embedding=vec(1), max_results=top, filter=ann)
        assert [m.embedding_id for m in store.search(request).matches] == ids[395:]
    # min_score drops the rows below it, never the ones above it that pass the filter
    request = EmbeddingSearchRequest(
        query_embedding=vec(1), max_results=5, min_score=0.7, filter=ann
    )
    assert [m.embedding_id for m in store.search(request).matches] == ids[395:398]
    unfiltered = EmbeddingSearchRequest(query_embedding=vec(1), max_results=3, min_score=0.99)
    assert [m.embedding_id for m in store.search(unfiltered).matches] == ids[:3]


def test_a_filtered_text_search_finds_the_rows_that_pass_behind_better_ranked_ones(
    store: Any,
) -> None:
    """30 of 90 rows pass the filter; the 60 that do not rank first by their words (shorter,
    the word repeated): a full-text search, and a hybrid one, with the filter return rows
    that pass, as many as asked for (the SQLite store asks FTS5 for the best rows only when
    enough of the table passes, then for all when too few of them did)."""
    texts = [TextSegment("apple apple", {"user": "bob"}) for _ in range(60)]
    texts += [
        TextSegment(f"an apple among many other words, row {i}", {"user": "ann"}) for i in range(30)
    ]
    ids = store.add_all([vec(1, 0.01 * i) for i in range(90)], texts)
    ann = key("user").eq("ann")
    found = store.search_text("apple", max_results=5, filter=ann)
    assert len(found) == 5
    assert {m.embedding_id for m in found} <= set(ids[60:])
    assert [m.embedding_id for m in store.search_text("apple", max_results=5)] != []
    assert {m.embedding_id for m in store.search_text("apple", max_results=5)} <= set(ids[:60])
    request = EmbeddingSearchRequest(
        query_embedding=vec(1), max_results=40, filter=ann, query="apple"
    )
    assert {m.embedding_id for m in store.search(request).matches} == set(ids[60:])
    assert store.search_text("apple", max_results=5, filter=key("user").eq("eve")) == []


def test_a_filtered_search_is_the_exact_top_of_the_rows_that_pass(store: Any) -> None:
    """Under a filter passing a tenth of the rows, the matches are numpy's brute-force top 10
    of those rows, in order."""
    rng = np.random.default_rng(7)
    points = rng.normal(size=(1_000, DIMENSION))
    ids = store.add_all(
        [Embedding(tuple(p.tolist())) for p in points],
        [TextSegment(f"p{n}", {"tenth": n % 10}) for n in range(len(points))],
    )
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    passing = np.arange(len(points)) % 10 == 3
    for query in rng.normal(size=(5, DIMENSION)):
        scores = np.where(passing, unit @ (query / np.linalg.norm(query)), -np.inf)
        best = np.argsort(-scores, kind="stable")[:10]
        request = EmbeddingSearchRequest(
            query_embedding=Embedding(tuple(query.tolist())),
            max_results=10,
            filter=key("tenth").eq(3),
        )
        found = store.search(request).matches
        assert [m.embedding_id for m in found] == [ids[n] for n in best]
        assert [m.score for m in found] == pytest.approx((scores[best] + 1) / 2, abs=1e-6)


def test_one_user_never_sees_another_users_segments(store: Any) -> None:
    store.add_all(
        [vec(1, 0), vec(1, 0.1), vec(1, 0.2)],
        [
            TextSegment("ann likes tea", {"user": "ann"}),
            TextSegment("bob likes tea", {"user": "bob"}),
            TextSegment("ann likes cake", {"user": "ann"}),
        ],
    )
    request = EmbeddingSearchRequest(query_embedding=vec(1, 0.1), filter=key("user").eq("ann"))
    assert {m.embedded.text for m in store.search(request).matches} == {
        "ann likes tea",
        "ann likes cake",
    }
    found = store.search_text("likes tea", max_results=10, filter=key("user").eq("bob"))
    assert [m.embedded.text for m in found] == ["bob likes tea"]


def test_full_text_ranks_by_words_and_hybrid_retrieval_uses_both(store: Any) -> None:
    model = WordsModel()
    texts = [
        "PostgreSQL stores vectors with the pgvector extension",
        "Cats and more cats sleep most of the day",
        "Vectors and cats: an unlikely pair",
    ]
    store.add_all(model.embed_all(texts), [TextSegment(t) for t in texts])
    found = store.search_text("cats sleep", max_results=3)
    assert found[0].embedded.text == texts[1]
    assert {m.embedded.text for m in found} == {texts[1], texts[2]}
    assert store.search_text("...", max_results=3) == []
    hybrid = HybridContentRetriever(store, model, max_results=2)
    assert hybrid.retrieve(Query("vectors pgvector"))[0].text == texts[0]


def test_bad_input_says_what_to_do(store: Any) -> None:
    with pytest.raises(ConfigurationError):
        store.add_all([vec(1)], [TextSegment("a"), TextSegment("b")])
    with pytest.raises(ConfigurationError):
        store.search("not a request")
    with pytest.raises(ConfigurationError, match="not both"):
        store.remove_all(["a"], filter=key("k").eq(1))
    with pytest.raises(ConfigurationError, match="use remove"):
        store.remove_all("a")
    with pytest.raises(ConfigurationError, match="must be a Filter"):
        store.remove_all(filter="k = 1")
    store.add(vec(1), TextSegment("kept"))
    assert store.count() == 1


def test_full_text_follows_additions_replacements_and_removals(store: Any) -> None:
    store.add(vec(1), TextSegment("red apple fruit"), id="a")
    assert [m.embedding_id for m in store.search_text("pears")] == []
    store.add(vec(1, 1), TextSegment("green pears"), id="p")
    assert [m.embedding_id for m in store.search_text("pears")] == ["p"]
    store.add(vec(1, 1), TextSegment("purple plums"), id="p")  # replaces the pears
    assert [m.embedding_id for m in store.search_text("pears plums")] == ["p"]
    assert store.search_text("plums")[0].embedded == TextSegment("purple plums")
    store.remove("p")
    assert [m.embedding_id for m in store.search_text("fruit pears plums", max_results=5)] == ["a"]


def test_rows_added_one_at_a_time_and_removed_are_all_searched(store: Any) -> None:
    points = [vec(1, (n % 17) / 4, (n % 5) / 3) for n in range(150)]
    for n, point in enumerate(points):
        store.add(point, TextSegment(f"p{n}"), id=f"p{n}")
        if n % 40 == 39:  # a removal between additions
            store.remove(f"p{n - 20}")
    kept = [n for n in range(150) if n not in (19, 59, 99)]
    assert store.count() == len(kept)
    query = vec(1, 2, 0.5)
    found = store.search(EmbeddingSearchRequest(query_embedding=query, max_results=150)).matches
    assert sorted(m.embedding_id for m in found) == sorted(f"p{n}" for n in kept)
    for match in found:
        n = int(match.embedding_id[1:])
        assert match.embedding is not None
        assert match.embedding.vector == pytest.approx(points[n].vector)
        assert match.score == pytest.approx(
            relevance_score(cosine_similarity(query, points[n])), abs=1e-6
        )


def test_an_empty_id_is_refused(store: Any) -> None:
    with pytest.raises(ConfigurationError, match="non-empty str"):
        store.add(vec(1), TextSegment("a"), id="")
    assert store.count() == 0


@pytest.mark.parametrize(
    ("text", "options", "complaint"),
    [
        (None, {}, "takes a str"),
        ("tea", {"max_results": 0}, "max_results"),
        ("tea", {"max_results": -1}, "max_results"),
        ("tea", {"filter": "user = ann"}, "must be a Filter"),
    ],
)
def test_full_text_refuses_bad_arguments_alike(
    store: Any, text: Any, options: dict[str, Any], complaint: str
) -> None:
    store.add(vec(1), TextSegment("tea"))
    with pytest.raises(ConfigurationError, match=complaint):
        store.search_text(text, **options)


def test_an_id_repeated_in_one_call_keeps_the_last(store: Any) -> None:
    ids = store.add_all(
        [vec(1), vec(0, 1), vec(1, 1)], [TextSegment("old"), TextSegment("new"), TextSegment("z")],
        ids=["x", "x", "z"],
    )  # fmt: skip
    assert ids == ["x", "x", "z"]
    assert store.count() == 2
    [match] = store.search(EmbeddingSearchRequest(query_embedding=vec(0, 1), max_results=1)).matches
    assert (match.embedding_id, match.embedded) == ("x", TextSegment("new"))


def test_none_never_removes_everything(store: Any) -> None:
    """A ported ``removeAll(null)`` is refused with a sentence; removing everything is the call
    with no argument, as LangChain4j's ``removeAll()``."""
    store.add_all(
        [vec(1), vec(0, 1)], [TextSegment("a", {"k": 1}), TextSegment("b")], ids=["a", "b"]
    )
    calls: list[Callable[[], object]] = [
        lambda: store.remove_all(None),
        lambda: store.remove_all(filter=None),
        lambda: store.remove_all(None, filter=None),
        lambda: store.remove(None),
        lambda: store.remove_all([None]),
        lambda: store.remove_all(7),
        lambda: store.remove_all("a"),
        lambda: store.remove_all(["a"], filter=key("k").eq(1)),
        lambda: store.remove_all(filter="k = 1"),
    ]
    for call in calls:
        with pytest.raises(ConfigurationError, match=r"remove_all\(\)|remove\(\)|Filter"):
            call()
    assert store.count() == 2
    store.remove_all(key("k").eq(1))  # a filter passed positionally, as removeAll(filter)
    assert set(store.select(~key("k").eq(1))) == {"b"}
    store.remove_all()
    assert store.count() == 0


def test_select_is_exact_and_refuses_what_is_not_a_filter(store: Any) -> None:
    """`select` finds every entry a filter passes, however far from any query: what recall and
    forgetting use to find what to delete."""
    many = 300
    store.add_all(
        [vec(1, i / many) for i in range(many)] + [vec(-1, 0.001 * i) for i in range(5)],
        [TextSegment(f"other {i}", {"user": "bob"}) for i in range(many)]
        + [TextSegment(f"ann {i}", {"user": "ann", "n": i}) for i in range(5)],
    )
    found = store.select(key("user").eq("ann"))
    assert sorted(s.metadata["n"] for s in found.values() if s is not None) == [0, 1, 2, 3, 4]
    assert store.select(key("user").eq("nobody")) == {}
    for bad in (None, "user = 'ann'", {"user": "ann"}):
        with pytest.raises(ConfigurationError, match="select\\(\\) takes a Filter"):
            store.select(bad)


def test_a_lone_surrogate_is_refused_alike_and_nothing_is_stored(store: Any) -> None:
    bad = "caf\udce9"  # bytes decoded with errors='surrogateescape'
    for segments, ids in (
        ([TextSegment("fine"), TextSegment(bad)], None),
        ([TextSegment("fine"), TextSegment("x", {"k": bad})], None),
        ([TextSegment("fine"), TextSegment("x", {bad: 1})], None),
        ([TextSegment("fine"), TextSegment("x", {"k": ["ok", {"deep": bad}]})], None),
        ([TextSegment("fine"), TextSegment("x")], ["ok", bad]),
    ):
        with pytest.raises(ConfigurationError, match=r"lone surrogate.*nothing was stored"):
            store.add_all([vec(1), vec(0, 1)], segments, ids=ids)
    assert store.count() == 0
    store.add(vec(1), TextSegment("café", {"ключ": "значение"}), id="ünïcode")
    assert store.select(key("ключ").eq("значение")) == {
        "ünïcode": TextSegment("café", {"ключ": "значение"})
    }


def test_an_embedding_holding_nan_or_an_infinity_is_refused(store: Any) -> None:
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ConfigurationError, match="NaN or an infinity"):
            store.add_all([vec(1), vec(bad, 1)])
    assert store.count() == 0


def test_add_all_takes_an_array_of_vectors(store: Any) -> None:
    matrix = np.zeros((3, DIMENSION), dtype=np.float64)
    matrix[0, 0], matrix[1, 1], matrix[2, :2] = 1.0, 1.0, (1.0, 1.0)
    ids = store.add_all(matrix, [TextSegment(t) for t in ("east", "north", "north-east")])
    found = store.search(EmbeddingSearchRequest(query_embedding=vec(1, 0.9), max_results=3))
    assert [m.embedding_id for m in found.matches] == [ids[2], ids[0], ids[1]]
    assert found.matches[0].embedding == vec(1, 1)
    assert store.add_all(np.zeros((0, DIMENSION))) == []
    for bad in (np.ones(DIMENSION), np.array([["a"] * DIMENSION]), np.ones((2, 0))):
        with pytest.raises(ConfigurationError, match=r"array|at least one number"):
            store.add_all(bad)
    with pytest.raises(ConfigurationError, match="NaN or an infinity"):
        store.add_all(np.full((1, DIMENSION), 1e39))  # beyond float32
    assert store.count() == 3


# -- one request, both rankings (hybrid search)


def _zoo(store: Any) -> list[str]:
    ids: list[str] = store.add_all(
        [vec(1, 0), vec(0.9, 0.1), vec(0, 1)],
        [
            TextSegment("apples and pears", {"shelf": "a"}),
            TextSegment("pears and plums", {"shelf": "b"}),
            TextSegment("the zebra locker code is 4711", {"shelf": "a"}),
        ],
    )
    return ids


def test_a_request_with_its_query_text_fuses_words_and_vectors(store: Any) -> None:
    apples, pears, zebra = _zoo(store)
    by_vector = EmbeddingSearchRequest(query_embedding=vec(1, 0.05), max_results=2)
    assert [m.embedding_id for m in store.search(by_vector).matches] == [apples, pears]
    hybrid = EmbeddingSearchRequest(
        query_embedding=vec(1, 0.05), max_results=2, query="where is the zebra code"
    )
    found = store.search(hybrid).matches
    # the words lift the zebra (first by text, third by vector) above both fruit
    assert [m.embedding_id for m in found] == [zebra, apples]
    assert all(0 < m.score <= 1 for m in found)
    assert found[1].embedded == TextSegment("apples and pears", {"shelf": "a"})
    first_in_both = EmbeddingSearchRequest(query_embedding=vec(1, 0), max_results=1, query="apples")
    assert store.search(first_in_both).matches[0].score == pytest.approx(1.0)


def test_a_hybrid_request_keeps_its_filter_and_blank_text_means_vectors_alone(
    store: Any,
) -> None:
    apples, pears, _zebra = _zoo(store)
    filtered = EmbeddingSearchRequest(
        query_embedding=vec(1, 0), max_results=5, query="pears", filter=key("shelf").eq("b")
    )
    assert [m.embedding_id for m in store.search(filtered).matches] == [pears]
    blank = EmbeddingSearchRequest(query_embedding=vec(1, 0), max_results=1, query="  ")
    assert blank.query is None
    assert [m.embedding_id for m in store.search(blank).matches] == [apples]


def test_a_query_that_is_not_text_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="`query` must be a str"):
        EmbeddingSearchRequest(query_embedding=vec(1, 0), query=42)  # type: ignore[arg-type]


def test_the_embedding_store_retriever_sends_the_query_text(store: Any) -> None:
    from chatmemory.rag import EmbeddingStoreContentRetriever

    model = WordsModel()
    texts = ["apples and pears", "pears and plums", "the zebra locker code is 4711"]
    store.add_all(model.embed_all(texts), [TextSegment(t) for t in texts])
    retriever = EmbeddingStoreContentRetriever(store, model, max_results=1)
    [found] = retriever.retrieve(Query("zebra"))
    assert found.text == "the zebra locker code is 4711"
