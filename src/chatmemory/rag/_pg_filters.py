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

`eq` and `in_` also test jsonb containment (``metadata @> '{"user_id": "ann"}'``), which the
store's GIN index on the metadata serves, so finding one user's rows reads that index rather
than the table. Containment alone means more than equality (an array contains its elements,
an object its sub-objects), so it is ANDed with the exact test, which implies it: the meaning
is the equality's, the containment only lets the index narrow the rows first.
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
        left, right = _sql(condition.left, column, params), _sql(condition.right, column, params)
        return sql.SQL("({} AND {})").format(left, right)
    if isinstance(condition, Or):
        left, right = _sql(condition.left, column, params), _sql(condition.right, column, params)
        return sql.SQL("({} OR {})").format(left, right)
    if isinstance(condition, Not):
        return sql.SQL("(NOT {})").format(_sql(condition.inner, column, params))
    if isinstance(condition, In):
        if condition.negated:
            params.extend([condition.key, [jsonb(v) for v in condition.values]])
            return sql.SQL("(NOT coalesce({} -> %s = ANY(%s::jsonb[]), false))").format(column)
        params.extend([[jsonb({condition.key: v}) for v in condition.values], condition.key])
        params.append([jsonb(v) for v in condition.values])
        return sql.SQL(
            "({c} @> ANY(%s::jsonb[]) AND coalesce({c} -> %s = ANY(%s::jsonb[]), false))"
        ).format(c=column)
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
        params.extend([jsonb({condition.key: value}), condition.key, jsonb(value)])
        return sql.SQL("({c} @> %s AND coalesce({c} -> %s = %s, false))").format(c=column)
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
