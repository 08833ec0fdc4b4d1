"""What an OpenAI-compatible server refuses of a request, learned from its answers and remembered.

Servers that speak OpenAI's protocol take less of it than OpenAI: llama.cpp's server answers
HTTP 500 "Input should be 'text' or 'json_object'" to a JSON-schema response format, others
refuse `strict` tools, `parallel_tool_calls` or `stream_options`. When an error answer names
a feature the request used, the adapter sends the request again without it, as this module
rewrites it:

- `json_schema` (a JSON-schema response format): `json_object` instead, with the schema as
  format instructions after the last user message's text;
- `json_object`: no response format (the format instructions stay);
- `strict` (strict tools): the tools without `strict`;
- `parallel_tool_calls`, `stream_options`: left out (a stream then may carry no token usage).

What a server refused is remembered for its base URL and model for the life of the process
(`Refusals`), so later requests go without it from the start, and logged once, as a warning
on the `chatmemory.models` logger.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
from collections.abc import Mapping
from typing import Any, Literal

from .._frozen import thaw

__all__ = ["Feature", "Refusals", "is_a_refusal", "refused_feature", "without"]

Feature = Literal["json_schema", "json_object", "strict", "parallel_tool_calls", "stream_options"]

_ORDER: tuple[Feature, ...] = (
    "json_schema",  # before json_object: its fallback is json_object
    "json_object",
    "strict",
    "parallel_tool_calls",
    "stream_options",
)
_LOG = logging.getLogger("chatmemory.models")
_INSTRUCTIONS = "\nYou must answer strictly in the following JSON format: "
_NOT_ABOUT_FEATURES = frozenset({401, 403, 404, 408, 409, 413, 429})
_FALLBACKS: dict[Feature, str] = {
    "json_schema": "a JSON object with the schema as format instructions",
    "json_object": "format instructions only",
    "strict": "tools without `strict`",
    "parallel_tool_calls": "the server's default",
    "stream_options": "streams without token usage",
}


def is_a_refusal(message: str) -> bool:
    """Whether an error message refuses the request itself: it names a request feature that a
    server may not support, or is a validation error (llama.cpp answers those with HTTP 500).
    Such an answer comes again when the same request is sent again."""
    said = message.lower()
    return "validation error" in said or any(
        word in said
        for word in ("response_format", "json_schema", "parallel_tool_calls", "stream_options")
    )


def refused_feature(status: int, message: str, args: Mapping[str, Any]) -> Feature | None:
    """The feature of the request `args` (the keyword arguments of `chat.completions.create`)
    that an error answer with `status` and `message` refuses; None when it names none."""
    if status < 400 or status in _NOT_ABOUT_FEATURES:
        return None
    said = message.lower()
    body: Mapping[str, Any] = args.get("extra_body") or {}
    if "stream_options" in said and "stream_options" in args:
        return "stream_options"
    if "parallel_tool_calls" in said and (
        "parallel_tool_calls" in args or "parallel_tool_calls" in body
    ):
        return "parallel_tool_calls"
    kind = (args.get("response_format") or {}).get("type")
    if "invalid schema" not in said:  # a schema OpenAI cannot use is the caller's to fix
        if kind == "json_schema" and ("response_format" in said or "json_schema" in said):
            return "json_schema"
        if kind == "json_object" and ("response_format" in said or "json_object" in said):
            return "json_object"
    tools = body.get("tools") or ()
    if "strict" in said and any("strict" in tool.get("function", {}) for tool in tools):
        return "strict"
    return None


def without(feature: Feature, args: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the request `args` that no longer uses `feature` (see the module)."""
    result = dict(args)
    body = dict(result.get("extra_body") or {})
    result["extra_body"] = body
    if feature == "json_schema":
        response_format = result.get("response_format") or {}
        if response_format.get("type") == "json_schema":
            schema = response_format["json_schema"].get("schema", {})
            body["messages"] = _with_instructions(body.get("messages", []), schema)
            result["response_format"] = {"type": "json_object"}
    elif feature == "json_object":
        if (result.get("response_format") or {}).get("type") == "json_object":
            del result["response_format"]
    elif feature == "strict":
        if "tools" in body:
            body["tools"] = [_without_strict(tool) for tool in body["tools"]]
    else:
        result.pop(feature, None)
        body.pop(feature, None)
    return result


def _without_strict(tool: Mapping[str, Any]) -> dict[str, Any]:
    function = {k: v for k, v in tool.get("function", {}).items() if k != "strict"}
    return {**tool, "function": function}


def _with_instructions(messages: list[Any], schema: Any) -> list[Any]:
    """The wire messages with the format instructions after the last user message's text."""
    instructions = _INSTRUCTIONS + json.dumps(thaw(schema))
    result = copy.copy(messages)
    for index in range(len(result) - 1, -1, -1):
        message = result[index]
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            result[index] = {**message, "content": content + instructions}
        else:
            parts = [*(content or []), {"type": "text", "text": instructions.lstrip("\n")}]
            result[index] = {**message, "content": parts}
        return result
    result.append({"role": "user", "content": instructions.lstrip("\n")})
    return result


class Refusals:
    """The features each server (base URL and model) was seen to refuse, process-wide."""

    _lock = threading.Lock()
    _known: dict[tuple[str, str], set[Feature]] = {}  # noqa: RUF012 - shared on purpose

    def __init__(self, base_url: str | None, model: str) -> None:
        self.base_url = base_url or "https://api.openai.com/v1"
        self.model = model

    def _key(self, model: str) -> tuple[str, str]:
        return (self.base_url.rstrip("/"), model)

    def known(self, model: str) -> frozenset[Feature]:
        """What the server refused for `model` so far."""
        with self._lock:
            return frozenset(self._known.get(self._key(model), ()))

    def learn(self, model: str, feature: Feature, message: str) -> None:
        """Remember that the server refuses `feature` for `model`; logged the first time."""
        with self._lock:
            seen = self._known.setdefault(self._key(model), set())
            first = feature not in seen
            seen.add(feature)
        if first:
            _LOG.warning(
                "%s (model %r) refuses `%s` (%s); chatmemory sends %s from now on",
                self.base_url,
                model,
                feature,
                " ".join(message.split())[:300] or "no message",
                _FALLBACKS[feature],
            )

    def applied(self, args: dict[str, Any]) -> dict[str, Any]:
        """`args` without what the server is known to refuse for their model."""
        known = self.known(args["model"])
        for feature in _ORDER:
            if feature in known:
                args = without(feature, args)
        return args

    @classmethod
    def forget_all(cls) -> None:
        """Forget every refusal learned (tests start from a clean slate)."""
        with cls._lock:
            cls._known.clear()
