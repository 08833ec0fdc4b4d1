"""Metadata filters written as the text of a SQL ``WHERE`` clause (LangChain4j's
`SqlFilterParser`), so that a CLI user or a language model can state a filter::

    parse_filter("lang = 'en' AND year >= 2020 AND NOT draft = TRUE")

What it reads: ``=`` (or ``==``), ``!=`` / ``<>``, ``<``, ``<=``, ``>``, ``>=``, ``IN (...)``,
``NOT IN (...)``, ``BETWEEN a AND b``, ``AND``, ``OR``, ``NOT``, parentheses; single-quoted
strings (``'it''s'``), numbers, ``TRUE`` / ``FALSE``; "contains" as ``title LIKE '%zlib%'``
or ``CONTAINS(title, 'zlib')``; a whole ``SELECT ... WHERE ...`` statement (its condition is
used). As in LangChain4j, arithmetic on values (``1 + 1``) and the date of today
(``YEAR(CURDATE())``, ``EXTRACT(MONTH FROM CURRENT_DATE)``, ...) are computed when parsing, and
``YEAR(key)`` on the key side names the key. A key is a column name, ``"quoted"`` when it is
not one word.

SQL is parsed by `sqlglot` (the `filters` extra), as LangChain4j parses it with JSqlParser; only
the resulting tree is read here. Whatever it cannot read is refused with a `FilterSyntaxError`
naming the position in the text, never guessed: ``LIKE 'ab%'`` (a prefix, not a contains), a
comparison of two keys, ``IS NULL``, a second statement.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._errors import ConfigurationError
from ._filters import Filter, MetadataKey, Scalar, key

if TYPE_CHECKING:
    from sqlglot import exp

__all__ = ["FilterSyntaxError", "SqlFilterParser", "parse_filter"]

_PREFIX = "SELECT * FROM metadata WHERE "


class FilterSyntaxError(ConfigurationError):
    """A filter text that cannot be read; `position` is the 0-based index in the text of where
    reading stopped (the message counts from 1)."""

    def __init__(self, text: str, position: int, reason: str) -> None:
        self.text = text
        self.position = max(0, min(position, len(text)))
        line = text.replace("\n", " ")
        super().__init__(
            f"cannot read the filter at character {self.position + 1}: {reason}\n"
            f"  {line}\n  {' ' * self.position}^"
        )


def _today() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class SqlFilterParser:
    """Reads SQL ``WHERE`` text into a `Filter` (see the module's documentation); `clock` gives
    the moment ``CURDATE()`` and its kin mean (now, in UTC, by default)."""

    def __init__(self, *, clock: Callable[[], dt.datetime] = _today) -> None:
        self.clock = clock

    def parse(self, text: str) -> Filter:
        if not isinstance(text, str) or not text.strip():
            raise ConfigurationError(
                f"a filter is the text of a SQL WHERE clause, like \"lang = 'en'\", got {text!r}"
            )
        try:
            import sqlglot
            from sqlglot import exp
        except ImportError:  # pragma: no cover - the test extra installs it
            raise ConfigurationError(
                "reading filters from text needs sqlglot: pip install 'chatmemory[filters]'"
            ) from None
        if not _COMPARISONS:
            _tables()
        statement = re.match(r"\s*select\b", text, re.IGNORECASE) is not None
        offset = 0 if statement else len(_PREFIX)
        sql = text if statement else _PREFIX + text
        try:
            trees = [tree for tree in sqlglot.parse(sql) if tree is not None]
        except sqlglot.errors.ParseError as error:
            position = _error_position(sql, error) - offset
            raise FilterSyntaxError(text, position, _reason(error)) from None
        except sqlglot.errors.TokenError as error:
            raise FilterSyntaxError(text, len(text), f"{error} (an unclosed quote?)") from None
        if len(trees) != 1 or not isinstance(trees[0], exp.Select):
            raise FilterSyntaxError(
                text, _second_statement(sql) - offset, "a filter is one condition"
            )
        where = trees[0].args.get("where")
        if where is None:
            raise FilterSyntaxError(text, len(text), "the statement has no WHERE condition")
        return _Reader(text, offset, self.clock()).condition(where.this)


def parse_filter(text: str) -> Filter:
    """The `Filter` that SQL ``WHERE`` text states: ``"lang = 'en' AND year >= 2020"`` (see
    `SqlFilterParser`)."""
    return SqlFilterParser().parse(text)


def _error_position(sql: str, error: Any) -> int:
    """The index in `sql` of the token sqlglot stopped at (its line and column are 1-based and
    point at the token's last character)."""
    found = error.errors[0] if error.errors else {}
    line, col = found.get("line"), found.get("col")
    if not isinstance(line, int) or not isinstance(col, int):  # pragma: no cover - always set
        return len(sql)
    lines = sql.split("\n")
    index = sum(len(one) + 1 for one in lines[: line - 1]) + col - 1
    return index - max(len(found.get("highlight") or ""), 1) + 1


def _reason(error: Any) -> str:
    found = error.errors[0] if error.errors else {}
    description = str(found.get("description") or error)
    if "Required keyword" in description or "Expected" in description:
        return "the condition is incomplete here (a missing value or parenthesis?)"
    return f"unexpected text here ({description.split(' for ')[0]})"


def _second_statement(sql: str) -> int:
    """The index in `sql` of what follows its first `;`."""
    import sqlglot
    from sqlglot import TokenType

    tokens = sqlglot.tokenize(sql)
    ends = [i for i, token in enumerate(tokens) if token.token_type == TokenType.SEMICOLON]
    after = ends[0] + 1 if ends else 0
    return tokens[after].start if after < len(tokens) else len(sql)


def _start(node: exp.Expression, sql: str, offset: int) -> int:
    """The index in the parsed `sql` where `node` begins: the earliest token sqlglot kept the
    position of, else where its first word first appears."""
    starts = [n.meta["start"] for n in node.walk() if "start" in n.meta]
    if starts:
        return int(min(starts))
    word = re.match(r"\W*\w*", node.sql()).group()  # type: ignore[union-attr]
    return max(sql.upper().find(word.upper(), offset), offset)


class _Reader:
    """Turns one sqlglot condition tree into a Filter."""

    def __init__(self, text: str, offset: int, now: dt.datetime) -> None:
        self.text = text
        self.offset = offset
        self.now = now

    def fail(self, node: exp.Expression, reason: str) -> FilterSyntaxError:
        sql = self.text if self.offset == 0 else _PREFIX + self.text
        return FilterSyntaxError(self.text, _start(node, sql, self.offset) - self.offset, reason)

    def condition(self, node: exp.Expression) -> Filter:
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self.condition(node.this)
        if isinstance(node, exp.And):
            return self.condition(node.this) & self.condition(node.expression)
        if isinstance(node, exp.Or):
            return self.condition(node.this) | self.condition(node.expression)
        if isinstance(node, exp.Not) and isinstance(node.this, exp.In):
            return self.membership(node.this, negated=True)  # a NOT IN (...)
        if isinstance(node, exp.Not):
            return ~self.condition(node.this)
        if isinstance(node, exp.In):
            return self.membership(node)
        if isinstance(node, exp.Between):
            name = self.key(node.this)
            low, high = self.value(node.args["low"]), self.value(node.args["high"])
            return self.build(node, lambda: name.gte(low) & name.lte(high))
        if isinstance(node, (exp.Like, exp.Contains)):
            return self.contains(node)
        if isinstance(node, tuple(_COMPARISONS)):
            return self.comparison(node)
        if isinstance(node, exp.Is):
            raise self.fail(node, "IS NULL cannot be stated: a filter tests values that are there")
        raise self.fail(node, f"{node.sql()!r} is not a condition this parser reads")

    def comparison(self, node: exp.Expression) -> Filter:
        op = _COMPARISONS[type(node)]
        left, right = node.this, node.expression
        if not self.is_key(left) and self.is_key(right):  # 18 < age is age > 18
            left, right, op = right, left, _FLIPPED[op]
        name, value = self.key(left), self.value(right)
        return self.build(node, lambda: getattr(name, op)(value))

    def membership(self, node: exp.Expression, *, negated: bool = False) -> Filter:
        if node.args.get("query") is not None:
            raise self.fail(node, "IN takes a list of values, not a SELECT")
        name = self.key(node.this)
        values = [self.value(one) for one in node.expressions]
        if not values:
            raise self.fail(node, "IN needs at least one value")
        return self.build(node, lambda: name.not_in(values) if negated else name.in_(values))

    def contains(self, node: exp.Expression) -> Filter:
        from sqlglot import exp

        name, pattern = self.key(node.this), self.value(node.expression)
        if not isinstance(pattern, str):
            raise self.fail(node.expression, "contains takes a string: '%text%'")
        if isinstance(node, exp.Like):
            inner = pattern[1:-1]
            if len(pattern) < 2 or pattern[0] != "%" or pattern[-1] != "%" or "%" in inner:
                raise self.fail(
                    node.expression,
                    "LIKE reads only '%text%' (contains); prefixes and other patterns are not "
                    "filters every store has",
                )
            if "_" in inner:
                raise self.fail(
                    node.expression, "'_' (any one character) in LIKE has no filter: use CONTAINS"
                )
            pattern = inner
        found = self.build(node, lambda: name.contains(pattern))
        return ~found if node.args.get("negate") else found

    def build(self, node: exp.Expression, make: Callable[[], Filter]) -> Filter:
        try:
            return make()
        except ConfigurationError as error:
            raise self.fail(node, str(error)) from None

    def is_key(self, node: exp.Expression) -> bool:
        from sqlglot import exp

        return isinstance(node, exp.Column) or (
            isinstance(node, tuple(_DATE_PARTS)) and isinstance(node.this, exp.Column)
        )

    def key(self, node: exp.Expression) -> MetadataKey:
        from sqlglot import exp

        if isinstance(node, tuple(_DATE_PARTS)) and isinstance(node.this, exp.Column):
            node = node.this  # YEAR(year) = 2024 names the key `year`, as in LangChain4j
        if not isinstance(node, exp.Column):
            raise self.fail(node, f"expected a metadata key, found {node.sql()!r}")
        return key(".".join(part.name for part in node.parts))

    def value(self, node: exp.Expression) -> Scalar:
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self.value(node.this)
        if isinstance(node, exp.Literal):
            return node.this if node.is_string else _number(node.this)
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Neg):
            inner = self.value(node.this)
            if not _is_number(inner):
                raise self.fail(node, "only a number can be negative")
            return -inner  # type: ignore[operator]
        if type(node) in _ARITHMETIC:
            return self.arithmetic(node)
        if isinstance(node, exp.Extract):
            return self.date_part(node, node.this.name.upper(), node.expression)
        if isinstance(node, tuple(_DATE_PARTS)):
            return self.date_part(node, _DATE_PARTS[type(node)], node.this)
        if isinstance(node, exp.Column) and node.this.args.get("quoted"):
            raise self.fail(node, "a string goes in single quotes: 'text'")
        if isinstance(node, exp.Column):
            raise self.fail(node, "a key compares with a value, not with another key")
        raise self.fail(node, f"{node.sql()!r} is not a value (a string, number or boolean)")

    def arithmetic(self, node: exp.Expression) -> Scalar:
        left, right = self.value(node.this), self.value(node.expression)
        if not _is_number(left) or not _is_number(right):
            raise self.fail(node, "arithmetic needs numbers")
        assert isinstance(left, (int, float))
        assert isinstance(right, (int, float))
        operation = _ARITHMETIC[type(node)]
        if operation == "/":
            if right == 0:
                raise self.fail(node, "division by zero")
            if isinstance(left, int) and isinstance(right, int):  # as Java's long division
                quotient = abs(left) // abs(right)
                return quotient if (left < 0) == (right < 0) else -quotient
            return left / right
        return {"+": left + right, "-": left - right, "*": left * right}[operation]

    def date_part(self, node: exp.Expression, part: str, of: exp.Expression) -> int:
        from sqlglot import exp

        today = isinstance(of, (exp.CurrentDate, exp.CurrentTime, exp.CurrentTimestamp)) or (
            isinstance(of, exp.Anonymous) and str(of.this).upper() in ("CURDATE", "NOW")
        )
        if not today:
            raise self.fail(node, "dates are read only from CURDATE() or CURRENT_DATE")
        now = self.now
        parts = {
            "YEAR": now.year,
            "MONTH": now.month,
            "WEEK": now.isocalendar()[1],
            "DAY": now.day,
            "DOW": now.isoweekday(),
            "DAYOFWEEK": now.isoweekday(),
            "DOY": now.timetuple().tm_yday,
            "HOUR": now.hour,
            "MINUTE": now.minute,
        }
        if part not in parts:
            raise self.fail(node, f"{part} is not a part of a date this parser reads")
        return parts[part]


def _is_number(value: Scalar) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _tables() -> None:
    """The sqlglot node types read here (sqlglot is imported on first use)."""
    from sqlglot import exp

    _COMPARISONS.update(
        {exp.EQ: "eq", exp.NEQ: "ne", exp.GT: "gt", exp.GTE: "gte", exp.LT: "lt", exp.LTE: "lte"}
    )
    _ARITHMETIC.update({exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"})
    _DATE_PARTS.update(
        {
            exp.Year: "YEAR",
            exp.Month: "MONTH",
            exp.WeekOfYear: "WEEK",
            exp.DayOfYear: "DOY",
            exp.DayOfMonth: "DAY",
            exp.DayOfWeek: "DOW",
        }
    )


_COMPARISONS: dict[type[Any], str] = {}
_ARITHMETIC: dict[type[Any], str] = {}
_DATE_PARTS: dict[type[Any], str] = {}
_FLIPPED = {"eq": "eq", "ne": "ne", "gt": "lt", "gte": "lte", "lt": "gt", "lte": "gte"}
