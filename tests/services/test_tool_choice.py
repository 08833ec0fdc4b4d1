"""`tool_choice` per service and per method (issue 22 item 21, issue 25 item 3): what each
model call of a turn is sent, on the sync, async and streaming paths."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Protocol

import pytest

from chatmemory import AiMessage, ConfigurationError, ToolExecutionRequest, UserMessage
from chatmemory.models import ChatRequest
from chatmemory.services import ai_service, tool_choice
from chatmemory.testing import ScriptedChatModel
from chatmemory.tools import tool, tool_from


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def time_in(city: str) -> str:
    """The time in a city."""
    return f"noon in {city}"


class Assistant(Protocol):
    def chat(self, text: str) -> str: ...

    @tool_choice("none")
    def plain(self, text: str) -> str: ...

    @tool_choice("weather")
    def forecast(self, text: str) -> str: ...

    @tool_choice("required")
    def stream(self, text: str) -> Iterator[str]: ...


class AsyncAssistant(Protocol):
    @tool_choice("required")
    async def chat(self, text: str) -> str: ...


def call_then_answer() -> ScriptedChatModel:
    call = ToolExecutionRequest("c1", "weather", '{"city": "Oslo"}')
    return ScriptedChatModel([AiMessage(tool_execution_requests=[call]), "Sunny."])


def choices(model: ScriptedChatModel) -> list[object]:
    return [request.tool_choice for request in model.requests]


def test_no_tool_choice_sends_none() -> None:
    model = call_then_answer()
    assert ai_service(Assistant, chat_model=model, tools=[weather]).chat("Oslo?") == "Sunny."
    assert choices(model) == [None, None]


def test_the_services_choice_holds_for_the_first_call_then_auto() -> None:
    model = call_then_answer()
    service = ai_service(Assistant, chat_model=model, tools=[weather], tool_choice="required")
    assert service.chat("Oslo?") == "Sunny."
    assert choices(model) == ["required", "auto"]


def test_a_methods_choice_beats_the_services() -> None:
    model = ScriptedChatModel(["No tools."])
    service = ai_service(Assistant, chat_model=model, tools=[weather], tool_choice="required")
    assert service.plain("Oslo?") == "No tools."
    assert choices(model) == ["none"]


def test_a_named_tool_is_forced_on_the_first_call() -> None:
    model = call_then_answer()
    service = ai_service(Assistant, chat_model=model, tools=[weather, time_in])
    assert service.forecast("Oslo?") == "Sunny."
    assert choices(model) == ["weather", "auto"]


def test_none_holds_for_every_call_of_the_turn() -> None:
    model = call_then_answer()
    service = ai_service(Assistant, chat_model=model, tools=[weather], tool_choice="none")
    service.chat("Oslo?")
    assert choices(model) == ["none", "none"]


def test_a_choice_without_tools_is_not_sent() -> None:
    model = ScriptedChatModel(["Hi."])
    assert ai_service(Assistant, chat_model=model, tool_choice="auto").chat("Hi") == "Hi."
    assert choices(model) == [None]


def test_the_streaming_and_async_paths_send_the_same_choices() -> None:
    model = call_then_answer()
    service = ai_service(Assistant, streaming_chat_model=model, tools=[weather])
    assert "".join(service.stream("Oslo?")) == "Sunny."
    assert choices(model) == ["required", "auto"]
    model = call_then_answer()
    async_service = ai_service(AsyncAssistant, chat_model=model, tools=[weather])
    assert asyncio.run(async_service.chat("Oslo?")) == "Sunny."
    assert choices(model) == ["required", "auto"]


def test_a_name_the_tools_lack_is_refused_before_the_model_is_called() -> None:
    model = ScriptedChatModel(["x"])
    service = ai_service(Assistant, chat_model=model, tools=[time_in])
    with pytest.raises(ConfigurationError, match="names no tool of the request"):
        service.forecast("Oslo?")
    assert model.requests == []


@pytest.mark.parametrize("bad", ["any thing", 3, ""])
def test_a_bad_choice_is_refused_where_it_is_declared(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="`tool_choice` must be"):
        tool_choice(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="`tool_choice` must be"):
        ai_service(Assistant, chat_model=ScriptedChatModel(["x"]), tool_choice=bad)  # type: ignore[arg-type]


def test_chat_request_takes_a_tools_name() -> None:
    spec = tool_from(weather).specification
    request = ChatRequest([UserMessage("x")], tools=[spec], tool_choice="weather")
    assert request.tool_choice == "weather"
