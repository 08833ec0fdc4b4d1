"""Metadata filters as PostgreSQL conditions on a `jsonb` column, with the meaning
`_filters` gives them in Python (every value bound as a parameter, never spliced); and the JSON
that metadata and filter values are written in, so that numbers keep their type and compare
exactly.

jsonb keeps a number as `numeric`, exactly as written, and reads it back as an int unless it
has a decimal point; Python's JSON writes 1e16 as ``1e+16``, which came back as the int
10000000000000000. `json_text` writes a float with a decimal point and no exponent, as the
exact value of an integral float (1e23 as ``99999999999999991611392.0``) and as the shortest
repr of any other. Each reads back as the same float, and comparing them as `numeric` (never
`float8`) is comparing as Python does: ints exactly, an int with a float by value.

The leaves are never NULL (`coalesce`, `CASE ... ELSE false`), so `NOT` negates exactly as the
Python filters do: an absent key fails `eq`, passes `ne` and `not_in`.

`eq` and `in_` are jsonb containment (``metadata @> '{"user_id": "ann"}'``), which the store's
GIN index on the metadata serves, so finding one user's rows reads that index rather than the
table. A filter's value is a scalar, and a scalar at a key contains only an equal scalar (an
array there does not contain its elements: only a whole document that is an array does), so
containment is the equality. The equalities of one conjunction on distinct keys are one
containment (``metadata @> '{"kind": "x", "memory_id": "y"}'``): a filter passing most rows
is tested once per row rather than once per key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from .._errors import ConfigurationError
from ._filters import And, Compare, Contains, Filter, In, Not, Or

__all__ = ["filter_sql", "json_text", "jsonb"]

_ORDER = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def filter_sql(
    condition: Filter | None, column: str = "metadata"
) -> tuple[sql.Composable, list[Any]]:
    """`condition` as SQL over the jsonb `column`, and its parameters in order."""
    params: list[Any] = []
    if condition is None:
        return sql.SQL("true"), params
    return _sql(condition, sql.Identifier(column), params), params


def _sql(condition: Filter, column: sql.Identifier, params: list[Any]) -> sql.Composable:
    if isinstance(condition, And):
        return _conjunction(_conjuncts(condition), column, params)
    if isinstance(condition, Or):
        left, right = _sql(condition.left, column, params), _sql(condition.right, column, params)
        return sql.SQL("({} OR {})").format(left, right)
    if isinstance(condition, Not):
        return sql.SQL("(NOT {})").format(_sql(condition.inner, column, params))
    if isinstance(condition, In):
        if condition.negated:
            params.extend([condition.key, [jsonb(v) for v in condition.values]])
            return sql.SQL("(NOT coalesce({} -> %s = ANY(%s::jsonb[]), false))").format(column)
        params.append([jsonb({condition.key: v}) for v in condition.values])
        return sql.SQL("({} @> ANY(%s::jsonb[]))").format(column)
    if isinstance(condition, Compare):
        return _compare(condition, column, params)
    if isinstance(condition, Contains):  # strpos, not LIKE: '%' and '_' in the value are text
        params.extend([condition.key, condition.key, condition.value])
        return sql.SQL(
            "(CASE WHEN jsonb_typeof({c} -> %s) = 'string' "
            "THEN strpos({c} ->> %s, %s) > 0 ELSE false END)"
        ).format(c=column)
    raise ConfigurationError(f"{condition!r} is not a filter this store can translate")


def _compare(condition: Compare, column: sql.Identifier, params: list[Any]) -> sql.Composable:
    value = condition.value
    if condition.op == "ne":
        params.extend([condition.key, jsonb(value)])
        return sql.SQL("(NOT coalesce({} -> %s = %s, false))").format(column)
    if condition.op == "eq":
        params.append(jsonb({condition.key: value}))
        return sql.SQL("({} @> %s)").format(column)
    operator = sql.SQL(_ORDER[condition.op])
    if isinstance(value, bool):  # booleans only compare for equality
        return sql.SQL("false")
    if isinstance(value, str):
        params.extend([condition.key, condition.key, value])
        return sql.SQL(
            "(CASE WHEN jsonb_typeof({c} -> %s) = 'string' "
            'THEN ({c} ->> %s) COLLATE "C" {op} %s ELSE false END)'
        ).format(c=column, op=operator)
    params.extend([condition.key, condition.key, Decimal(json_text(value))])
    return sql.SQL(
        "(CASE WHEN jsonb_typeof({c} -> %s) = 'number' "
        "THEN ({c} -> %s)::numeric {op} %s ELSE false END)"
    ).format(c=column, op=operator)


def _conjuncts(condition: Filter) -> list[Filter]:
    """The operands of a chain of `And`s, in order."""
    if isinstance(condition, And):
        return [*_conjuncts(condition.left), *_conjuncts(condition.right)]
    return [condition]


def _conjunction(
    conjuncts: list[Filter], column: sql.Identifier, params: list[Any]
) -> sql.Composable:
    """`conjuncts` ANDed, their equalities on distinct keys as one containment (first)."""
    equal: dict[str, Any] = {}
    rest: list[Filter] = []
    for conjunct in conjuncts:
        if isinstance(conjunct, Compare) and conjunct.op == "eq" and conjunct.key not in equal:
            equal[conjunct.key] = conjunct.value
        else:
            rest.append(conjunct)
    parts: list[sql.Composable] = []
    if equal:
        params.append(jsonb(equal))
        parts.append(sql.SQL("{} @> %s").format(column))
    parts += [_sql(conjunct, column, params) for conjunct in rest]
    return sql.SQL("({})").format(sql.SQL(" AND ").join(parts))


def jsonb(value: Any) -> Jsonb:
    """`value` as a jsonb parameter, written by `json_text`."""
    return Jsonb(value, dumps=json_text)


def json_text(value: Any) -> str:
    """A JSON-like value (frozen or not) as JSON text whose numbers jsonb keeps exactly: see
    the module's docstring. Its floats are finite (the stores and filters refuse the others)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value.is_integer():
            return f"{int(value)}.0"
        return format(Decimal(float.__repr__(value)), "f")
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{json_text(k)}:{json_text(v)}" for k, v in value.items()) + "}"
    return "[" + ",".join(json_text(item) for item in value) + "]"
