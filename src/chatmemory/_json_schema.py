"""JSON schemas pydantic generates, cleaned for a model: the schema a structured answer follows
and the parameters of a tool, made fit for OpenAI's strict mode when that loses nothing.

Strict mode wants an object at the root, ``additionalProperties: false`` and every property
required on each object, no ``default``, typed array items, and a subset of the keywords. The
schema pydantic generates is rewritten to that form when it can be (a default is dropped: it
does not change which answers are valid, and requiring the field only means the model writes
it); when it cannot (a ``dict`` field, a length limit, an untyped ``Any``...), the schema is sent
as pydantic made it with ``strict: false``.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["lenient_schema", "response_schema", "strict_schema"]

_INCOMPATIBLE = frozenset(
    {
        "minLength",
        "maxLength",
        "patternProperties",
        "unevaluatedProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedItems",
        "contains",
        "minContains",
        "maxContains",
        "prefixItems",
        "allOf",
        "not",
    }
)
_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_TYPED = ("type", "$ref", "anyOf", "oneOf", "enum", "const")
_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")
_NOISE = ("title", "$schema")


def response_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """`schema` (pydantic's, with an object at the root) cleaned for a response format, and
    whether it is valid for strict mode."""
    strict = _Walk(strict=True)
    rewritten = strict.node(_inline_root(copy.deepcopy(schema)))
    if strict.compatible:
        return rewritten, True
    return _Walk(strict=False).node(_inline_root(copy.deepcopy(schema))), False


def lenient_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without pydantic's noise (titles), meaning what it did (defaults kept)."""
    return _Walk(strict=False).node(_inline_root(copy.deepcopy(schema)))  # type: ignore[no-any-return]


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """`schema` rewritten for strict mode, or None when strict mode cannot express it."""
    walk = _Walk(strict=True)
    rewritten = walk.node(_inline_root(copy.deepcopy(schema)))
    return rewritten if walk.compatible else None


def _inline_root(schema: dict[str, Any]) -> dict[str, Any]:
    """A recursive model's schema is ``{"$defs": ..., "$ref": "#/$defs/Model"}``; strict mode
    wants the object itself at the root, so the root definition moves there and refers to
    itself as ``#``."""
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        return schema
    defs = dict(schema.get("$defs", {}))
    root = defs.pop(ref.removeprefix("#/$defs/"))
    root = _replace_ref(root, ref)
    if defs:
        root["$defs"] = {name: _replace_ref(value, ref) for name, value in defs.items()}
    return root  # type: ignore[no-any-return]


def _replace_ref(node: Any, ref: str) -> Any:
    if isinstance(node, dict):
        return {
            k: ("#" if k == "$ref" and v == ref else _replace_ref(v, ref)) for k, v in node.items()
        }
    if isinstance(node, list):
        return [_replace_ref(item, ref) for item in node]
    return node


class _Walk:
    def __init__(self, *, strict: bool) -> None:
        self.strict = strict
        self.compatible = True

    def node(self, node: Any) -> Any:
        if not isinstance(node, dict) or not any(key in node for key in _TYPED):
            self.compatible = False  # an untyped value (Any), or a boolean schema
            return node
        for key in _NOISE:
            node.pop(key, None)
        if self.strict:
            self._strict_only(node)
        for key in ("anyOf", "oneOf"):
            if key in node:
                node[key] = [self.node(variant) for variant in node[key]]
        if isinstance(node.get("items"), (dict, bool)):
            node["items"] = self.node(node["items"])
        elif node.get("type") == "array":
            self.compatible = False
        if "properties" in node:
            node["properties"] = {k: self.node(v) for k, v in node["properties"].items()}
        if "$defs" in node:
            node["$defs"] = {k: self.node(v) for k, v in node["$defs"].items()}
        return node

    def _strict_only(self, node: dict[str, Any]) -> None:
        node.pop("default", None)
        node.pop("uniqueItems", None)  # a set removes repeats itself
        if "oneOf" in node:  # pydantic's oneOf (a tagged union) has disjoint variants
            node["anyOf"] = node.pop("oneOf")
            node.pop("discriminator", None)
        if "$ref" in node and len(node) > 1:  # no siblings beside $ref in strict mode
            node["anyOf"] = [{"$ref": node.pop("$ref")}]
        pattern = node.get("pattern")
        if (
            _INCOMPATIBLE.intersection(node)
            or node.get("format", "date") not in _FORMATS
            or (isinstance(pattern, str) and any(t in pattern for t in _LOOKAROUND))
        ):
            self.compatible = False
        if node.get("type") == "object":
            if node.get("additionalProperties", False) is not False:
                self.compatible = False
            properties = node.setdefault("properties", {})
            node["additionalProperties"] = False
            node["required"] = list(properties)
