"""The request and response values: immutable, checked on construction, errors naming fields."""

from __future__ import annotations

from typing import Any

import pytest

from chatmemory import AiMessage, ConfigurationError, UserMessage
from chatmemory.models import (
    ChatParameters,
    ChatRequest,
    ChatResponse,
    ResponseFormat,
    TokenUsage,
    ToolSpecification,
)

HI = [UserMessage("hi")]


class _Untyped:
    """The value classes without their signatures, to build values a type checker refuses."""

    def __getattr__(self, name: str) -> Any:
        import chatmemory.models

        return getattr(chatmemory.models, name)


untyped = _Untyped()


def test_values_are_frozen_and_hashable() -> None:
    spec = ToolSpecification(name="t", parameters={"type": "object", "properties": {"a": {}}})
    request = ChatRequest(HI, tools=[spec], response_format=ResponseFormat.TEXT)
    assert hash(request) == hash(ChatRequest(HI, tools=[spec], response_format=ResponseFormat.TEXT))
    with pytest.raises(AttributeError):
        request.tools = ()  # type: ignore[misc]
    assert spec.parameters["properties"]["a"] == {}
    assert ToolSpecification(name="t").parameters == {"type": "object", "properties": {}}


def test_parameters_merge_field_by_field() -> None:
    defaults = ChatParameters(model="a", temperature=0.1, extra_body={"x": 1, "y": 1})
    merged = defaults.merged(ChatParameters(temperature=0.9, stop="END", extra_body={"y": 2}))
    assert merged == ChatParameters(
        model="a", temperature=0.9, stop=("END",), extra_body={"x": 1, "y": 2}
    )
    assert defaults.merged(None) is defaults
    assert defaults.merged(ChatParameters()) is defaults


def test_token_usage_adds_up() -> None:
    assert TokenUsage(1, 2) + TokenUsage(3, 4, 10) == TokenUsage(4, 6, 13)
    assert TokenUsage(1, 2).total_tokens == 3
    assert TokenUsage().__add__(1) is NotImplemented  # type: ignore[operator]


def test_response_format_constructors() -> None:
    fmt = ResponseFormat.json_schema({"type": "object"}, name="x", strict=False)
    assert (fmt.type, fmt.name, fmt.strict) == ("json", "x", False)
    assert ResponseFormat(type="json") == ResponseFormat.JSON


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: untyped.ToolSpecification(name=""), "name"),
        (lambda: untyped.ToolSpecification(name="t", description=1), "description"),
        (lambda: untyped.ToolSpecification(name="t", parameters=[]), "JSON object"),
        (lambda: untyped.ToolSpecification(name="t", parameters={"a": object()}), "JSON-like"),
        (lambda: untyped.ToolSpecification(name="t", strict="yes"), "strict"),
        (lambda: untyped.ResponseFormat(type="xml"), "'text' or 'json'"),
        (lambda: untyped.ResponseFormat(type="text", name="n"), "go with a `schema`"),
        (lambda: untyped.ResponseFormat(type="text", schema={}), "has type 'json'"),
        (lambda: untyped.ResponseFormat(type="json", schema={}, name=""), "name"),
        (lambda: untyped.ChatParameters(model=""), "model"),
        (lambda: untyped.ChatParameters(temperature="hot"), "temperature"),
        (lambda: untyped.ChatParameters(top_p=True), "top_p"),
        (lambda: untyped.ChatParameters(seed=1.5), "seed"),
        (lambda: untyped.ChatParameters(max_output_tokens=0), "at least 1"),
        (lambda: untyped.ChatParameters(stop=[1]), "stop"),
        (lambda: untyped.ChatRequest([]), "at least one message"),
        (lambda: untyped.ChatRequest("hi"), "not a list of chat messages"),
        (lambda: untyped.ChatRequest(HI, tools=["t"]), "ToolSpecification"),
        (
            lambda: untyped.ChatRequest(HI, tools=[untyped.ToolSpecification(name="t")] * 2),
            "two tools are named 't'",
        ),
        (lambda: untyped.ChatRequest(HI, tool_choice="any"), "names no tool of the request"),
        (lambda: untyped.ChatRequest(HI, tool_choice=1), "a tool's name or None"),
        (lambda: untyped.ChatRequest(HI, tool_choice="not a name"), "a tool's name or None"),
        (lambda: untyped.ChatRequest(HI, tool_choice="required"), "at least one tool"),
        (lambda: untyped.ChatRequest(HI, response_format="json"), "ResponseFormat"),
        (lambda: untyped.ChatRequest(HI, parameters={"temperature": 0}), "ChatParameters"),
        (lambda: untyped.ChatResponse(ai_message="hi"), "AiMessage"),
    ],
)
def test_invalid_values_are_refused_naming_the_field(build: Any, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        build()


def test_response_text() -> None:
    assert ChatResponse(ai_message=AiMessage("x")).text == "x"
