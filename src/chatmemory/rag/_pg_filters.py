"""Metadata filters as PostgreSQL conditions on a `jsonb` column, with the meaning
`_filters` gives them in Python (every value bound as a parameter, never spliced).

The leaves are never NULL (`coalesce`, `CASE ... ELSE false`), so `NOT` negates exactly as the
Python filters do: an absent key fails `eq`, passes `ne` and `not_in`.

`eq` and `in_` also test jsonb containment (``metadata @> '{"user_id": "ann"}'``), which the
store's GIN index on the metadata serves, so finding one user's rows reads that index rather
than the table. Containment alone means more than equality (an array contains its elements,
an object its sub-objects), so it is ANDed with the exact test, which implies it: the meaning
is the equality's, the containment only lets the index narrow the rows first.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from .._errors import ConfigurationError
from ._filters import And, Compare, Filter, In, Not, Or

__all__ = ["filter_sql"]

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
            params.extend([condition.key, [Jsonb(v) for v in condition.values]])
            return sql.SQL("(NOT coalesce({} -> %s = ANY(%s::jsonb[]), false))").format(column)
        params.extend([[Jsonb({condition.key: v}) for v in condition.values], condition.key])
        params.append([Jsonb(v) for v in condition.values])
        return sql.SQL(
            "({c} @> ANY(%s::jsonb[]) AND coalesce({c} -> %s = ANY(%s::jsonb[]), false))"
        ).format(c=column)
    if isinstance(condition, Compare):
        return _compare(condition, column, params)
    raise ConfigurationError(f"{condition!r} is not a filter this store can translate")


def _compare(condition: Compare, column: sql.Identifier, params: list[Any]) -> sql.Composable:
    value = condition.value
    if condition.op == "ne":
        params.extend([condition.key, Jsonb(value)])
        return sql.SQL("(NOT coalesce({} -> %s = %s, false))").format(column)
    if condition.op == "eq":
        params.extend([Jsonb({condition.key: value}), condition.key, Jsonb(value)])
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
    params.extend([condition.key, condition.key, float(value)])
    return sql.SQL(
        "(CASE WHEN jsonb_typeof({c} -> %s) = 'number' "
        "THEN ({c} ->> %s)::float8 {op} %s ELSE false END)"
    ).format(c=column, op=operator)
