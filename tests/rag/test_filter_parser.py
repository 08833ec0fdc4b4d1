"""LangChain4j's SqlFilterParserTest, ported: SQL WHERE text read into the Filter the builder
methods make, meaning what LangChain4j's filters mean; and what cannot be read refused with
the position in the text."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from chatmemory import ConfigurationError
from chatmemory.rag import Filter, FilterSyntaxError, SqlFilterParser, key, parse_filter

NOW = dt.datetime(2024, 3, 7, 14, 25, tzinfo=dt.timezone.utc)  # a Thursday, ISO week 10
parser = SqlFilterParser(clock=lambda: NOW)

name, age, weight, color = key("name"), key("age"), key("weight"), key("color")

PARSED: list[tuple[str, Filter]] = [
    # eq
    ("name = 'Klaus'", name.eq("Klaus")),
    ("age = 18", age.eq(18)),
    ("age = +18", age.eq(18)),
    ("age = -18", age.eq(-18)),
    ("weight = 67.8", weight.eq(67.8)),
    ("weight = +67.8", weight.eq(67.8)),
    ("weight = -67.8", weight.eq(-67.8)),
    # ne
    ("name != 'Klaus'", name.ne("Klaus")),
    ("age != 18", age.ne(18)),
    ("weight <> 67.8", weight.ne(67.8)),
    # gt, gte, lt, lte
    ("name > 'Klaus'", name.gt("Klaus")),
    ("age > 18", age.gt(18)),
    ("weight > 67.8", weight.gt(67.8)),
    ("name >= 'Klaus'", name.gte("Klaus")),
    ("age >= 18", age.gte(18)),
    ("weight >= 67.8", weight.gte(67.8)),
    ("name < 'Klaus'", name.lt("Klaus")),
    ("age < 18", age.lt(18)),
    ("weight < 67.8", weight.lt(67.8)),
    ("name <= 'Klaus'", name.lte("Klaus")),
    ("age <= 18", age.lte(18)),
    ("weight <= 67.8", weight.lte(67.8)),
    # in, not in
    ("name IN ('Klaus', 'Francine')", name.in_(["Klaus", "Francine"])),
    ("age IN (18, 42)", age.in_([18, 42])),
    ("age IN (-18, 42)", age.in_([-18, 42])),
    ("age IN (+18, 42)", age.in_([18, 42])),
    ("age IN (-9223372036854775808)", age.in_([-(2**63)])),
    ("weight IN (67.8, 78.9)", weight.in_([67.8, 78.9])),
    ("weight IN (-67.8, 78.9)", weight.in_([-67.8, 78.9])),
    ("name NOT IN ('Klaus', 'Francine')", name.not_in(["Klaus", "Francine"])),
    ("age NOT IN (-18, -42)", age.not_in([-18, -42])),
    ("weight NOT IN (-67.8, -78.9)", weight.not_in([-67.8, -78.9])),
    # and, or, not, parentheses, precedence
    ("name = 'Klaus' AND age = 18", name.eq("Klaus") & age.eq(18)),
    ("NOT name = 'Klaus'", ~name.eq("Klaus")),
    ("NOT (name = 'Klaus')", ~name.eq("Klaus")),
    ("name = 'Klaus' OR age = 18", name.eq("Klaus") | age.eq(18)),
    (
        "color = 'white' OR color = 'black' OR color = 'red'",
        (color.eq("white") | color.eq("black")) | color.eq("red"),
    ),
    (
        "color = 'white' OR (color = 'black' OR color = 'red')",
        color.eq("white") | (color.eq("black") | color.eq("red")),
    ),
    (
        "color = 'white' OR color = 'black' AND form = 'circle'",
        color.eq("white") | (color.eq("black") & key("form").eq("circle")),
    ),
    (
        "(color = 'white' OR color = 'black') AND form = 'circle'",
        (color.eq("white") | color.eq("black")) & key("form").eq("circle"),
    ),
    (
        "color = 'white' AND shape = 'circle' OR color = 'red'",
        (color.eq("white") & key("shape").eq("circle")) | color.eq("red"),
    ),
    (
        "color = 'white' AND form = 'circle' AND area > 7",
        (color.eq("white") & key("form").eq("circle")) & key("area").gt(7),
    ),
    # complete SQL statements
    ("SELECT * from fake_table WHERE id = 7", key("id").eq(7)),
    ("select * from fake_table where id = 7", key("id").eq(7)),
    ("Select * From fake_table Where id = 7;", key("id").eq(7)),
    # between
    ("key BETWEEN 18 AND 42", key("key").gte(18) & key("key").lte(42)),
    ("key NOT BETWEEN -42 AND -18", ~(key("key").gte(-42) & key("key").lte(-18))),
    ("key BETWEEN 'a' AND 'z'", key("key").gte("a") & key("key").lte("z")),
    ("key BETWEEN 1 + 1 AND 2 + 3", key("key").gte(2) & key("key").lte(5)),
    (
        "SELECT name FROM movies WHERE year BETWEEN 1990 AND 1999;",
        key("year").gte(1990) & key("year").lte(1999),
    ),
    # dates of today and arithmetic, computed when parsing
    ("year = YEAR(CURDATE())", key("year").eq(2024)),
    ("month = MONTH(CURDATE())", key("month").eq(3)),
    ("week = WEEKOFYEAR(CURDATE())", key("week").eq(10)),
    ("doy = DAYOFYEAR(CURDATE())", key("doy").eq(67)),
    ("day = DAYOFMONTH(CURDATE())", key("day").eq(7)),
    ("dow = DAYOFWEEK(CURDATE())", key("dow").eq(4)),
    ("year = EXTRACT(YEAR FROM CURRENT_DATE)", key("year").eq(2024)),
    ("month = EXTRACT(MONTH FROM CURRENT_TIMESTAMP)", key("month").eq(3)),
    ("hour = EXTRACT(HOUR FROM CURRENT_TIME)", key("hour").eq(14)),
    ("minute = EXTRACT(MINUTE FROM CURRENT_TIMESTAMP)", key("minute").eq(25)),
    ("year = EXTRACT(YEAR FROM CURRENT_DATE) + 1", key("year").eq(2025)),
    ("year = EXTRACT(YEAR FROM CURRENT_DATE) - 1", key("year").eq(2023)),
    ("year = EXTRACT(YEAR FROM CURRENT_DATE) * 2", key("year").eq(4048)),
    ("year = EXTRACT(YEAR FROM CURRENT_DATE) / 2", key("year").eq(1012)),
    ("n = -7 / 2", key("n").eq(-3)),  # long division truncates, as in Java
    ("n = 7.0 / 2", key("n").eq(3.5)),
    ("year IN (YEAR(CURDATE()), YEAR(CURDATE()) - 1)", key("year").in_([2024, 2023])),
    (
        "SELECT * FROM movies WHERE YEAR(year) = 2024 AND genre IN ('comedy', 'drama')",
        key("year").eq(2024) & key("genre").in_(["comedy", "drama"]),
    ),
    ("WEEKOFYEAR(publish_date) = WEEKOFYEAR(CURDATE())", key("publish_date").eq(10)),
    # beyond LangChain4j: booleans, contains, quoted keys, escaped quotes, value first
    ("draft = TRUE AND NOT published = false", key("draft").eq(True) & ~key("published").eq(False)),
    ("title LIKE '%zlib%'", key("title").contains("zlib")),
    ("title NOT LIKE '%zlib%'", ~key("title").contains("zlib")),
    ("CONTAINS(title, '100% pure')", key("title").contains("100% pure")),
    ("\"file name\" = 'a.md'", key("file name").eq("a.md")),
    ("doc.lang = 'en'", key("doc.lang").eq("en")),
    ("name = 'it''s'", name.eq("it's")),
    ("18 < age", age.gt(18)),
    ("n = 9223372036854775808", key("n").eq(2**63)),  # Python ints are not longs
    ("n = 1e3", key("n").eq(1000.0)),
    ("n = (2)", key("n").eq(2)),
]


@pytest.mark.parametrize(("text", "expected"), PARSED, ids=[t for t, _ in PARSED])
def test_parses_what_the_builder_methods_make(text: str, expected: Filter) -> None:
    assert parser.parse(text) == expected


def test_not_between_is_the_explicit_not_form() -> None:
    for bounds in ("1990 AND 1999", "-20 AND -10", "'a' AND 'z'"):
        assert parser.parse(f"k NOT BETWEEN {bounds}") == parser.parse(f"NOT (k BETWEEN {bounds})")


def test_the_dates_are_the_clocks() -> None:
    """Without a clock the dates are today's, in UTC."""
    today = dt.datetime.now(dt.timezone.utc)
    assert parse_filter("y = YEAR(CURDATE())") == key("y").eq(today.year)


M = dict[str, Any]
FILTERED: list[tuple[str, list[M], list[M]]] = [
    (
        "key = 'a'",
        [{"key": "a"}, {"key": "a", "key2": "b"}],
        [{"key": "A"}, {"key": "aa"}, {"key2": "a"}],
    ),
    ("key = -2147483648", [{"key": -(2**31)}], [{"key": -(2**31) + 1}, {"key": 0}]),
    ("key = 9223372036854775807", [{"key": 2**63 - 1}], [{"key": 2**63 - 2}, {"key2": 2**63 - 1}]),
    ("key > 'b'", [{"key": "c"}], [{"key": "a"}, {"key": "b"}, {"key2": "c"}]),
    ("key > 1.1", [{"key": 1.2}], [{"key": -1.2}, {"key": 1.1}, {"key2": 1.2}]),
    ("key >= 1", [{"key": 1}, {"key": 2}], [{"key": 0}, {"key2": 1}]),
    ("key < 1", [{"key": -2}, {"key": 0}], [{"key": 1}, {"key": 2}, {"key2": 0}]),
    ("key <= 1.1", [{"key": 1.1}, {"key": -1.2}], [{"key": 1.2}, {"key2": 1.1}]),
    ("key IN ('a', 'b')", [{"key": "a"}, {"key": "b"}], [{"key": "c"}, {"key2": "a"}]),
    (
        "key LIKE '%ab%'",
        [{"key": "xaby"}, {"key": "ab"}],
        [{"key": "AB"}, {"key": 1}, {"key2": "ab"}],
    ),
    (
        "name = 'Klaus' AND age = 42 OR city = 'Munich'",
        [
            {"name": "Klaus", "age": 42},
            {"city": "Munich"},
            {"name": "Klaus", "age": 42, "city": "X"},
        ],
        [{"name": "Alice"}, {"age": 42}, {"name": "Klaus", "city": "Frankfurt"}],
    ),
    (
        "name = 'Klaus' AND (age = 42 OR city = 'Munich')",
        [{"name": "Klaus", "age": 42}, {"name": "Klaus", "city": "Munich"}],
        [{"name": "Klaus"}, {"age": 42, "city": "Munich"}, {"name": "Alice", "age": 42}],
    ),
]


@pytest.mark.parametrize(("text", "passing", "failing"), FILTERED, ids=[t for t, _, _ in FILTERED])
def test_filters_by_metadata(text: str, passing: list[M], failing: list[M]) -> None:
    condition = parser.parse(text)
    assert all(condition.test(m) for m in passing)
    assert not any(condition.test(m) for m in failing)
    assert not condition.test({})  # an empty metadata passes none of these


@pytest.mark.parametrize(
    ("text", "position", "reason"),
    [
        ("age IN (1, NULL)", 11, "is not a value"),
        ("age IN (SELECT age FROM other_table)", 0, "not a SELECT"),
        ("age IN (other_column)", 8, "not with another key"),
        ("name = 'Klaus' AND (", 19, "incomplete"),
        ("a = 1 +", 6, "incomplete"),
        ("a = 1 foo", 6, "unexpected text"),
        ("name = 'Klaus", 13, "unclosed quote"),
        ("a = 1; DROP TABLE x", 7, "one condition"),
        ('name = "Klaus"', 7, "single quotes"),
        ("a = b", 4, "not with another key"),
        ("1 = 2", 0, "expected a metadata key"),
        ("a IS NULL", 0, "IS NULL"),
        ("title LIKE 'ab%'", 11, "only '%text%'"),
        ("title LIKE '%a_b%'", 11, "'_'"),
        ("title LIKE 5", 11, "takes a string"),
        ("a = 'x' + 1", 4, "arithmetic needs numbers"),
        ("a = -'x'", 5, "only a number"),
        ("a = 1 / 0", 4, "division by zero"),
        ("a = YEAR(other)", 4, "CURDATE"),
        ("a = EXTRACT(SECOND FROM CURRENT_TIME)", 4, "SECOND"),
        ("a = 1e999", 0, "finite"),
        ("a = 1 AND f(b)", 10, "not a condition"),
        ("a IN ()", 0, "at least one value"),
        ("SELECT * FROM t", 15, "no WHERE"),
        ("a = 1 AND\nb = ", 12, "incomplete"),
    ],
)
def test_what_cannot_be_read_is_refused_with_its_position(
    text: str, position: int, reason: str
) -> None:
    with pytest.raises(FilterSyntaxError, match=reason) as caught:
        parser.parse(text)
    assert caught.value.position == position
    assert f"at character {position + 1}" in str(caught.value)
    assert isinstance(caught.value, ConfigurationError)


@pytest.mark.parametrize("text", ["", "   ", None])
def test_blank_text_is_refused(text: Any) -> None:
    with pytest.raises(ConfigurationError, match="text of a SQL WHERE clause"):
        parse_filter(text)
