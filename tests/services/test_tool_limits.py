"""Per-tool limits: a retry budget (a tool sends the model back with `ModelRetry`, or the
model's arguments do not fit) and a timeout, per tool or for the whole service, on every path."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    ConfigurationError,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    ModelBehaviourError,
    ModelRetry,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
)
from chatmemory.services import ai_service
from chatmemory.testing import ScriptedChatModel
from chatmemory.tools import ToolLimits, tool, tool_from
from tests.services.modes import MODES, EveryWay, ask


def call(name: str, arguments: str, number: int = 0) -> AiMessage:
    return AiMessage(tool_execution_requests=[ToolExecutionRequest(f"c{number}", name, arguments)])


def make(script: list[Any], *tools: Any, **options: Any) -> tuple[Any, ScriptedChatModel, Any]:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel(script)
    service = ai_service(
        EveryWay,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=50, store=store
        ),
        tools=tools,
        **options,
    )
    return service, model, store


@tool(retries=1)
def book(date: str) -> str:
    """Book a table on a date (YYYY-MM-DD)."""
    if len(date) != 10:
        raise ModelRetry(f"{date!r} is not a date like 2026-11-26; ask again with one")
    return f"booked for {date}"


@pytest.mark.parametrize("mode", MODES)
def test_model_retry_sends_its_message_back_and_the_model_corrects_itself(mode: str) -> None:
    script = [call("book", '{"date": "tomorrow"}'), call("book", '{"date": "2026-11-27"}', 1)]
    service, model, store = make([*script, "Booked."], book)
    assert ask(service, mode, "book a table tomorrow") == "Booked."
    told = model.requests[1].messages[-1]
    assert isinstance(told, ToolExecutionResultMessage)
    assert told.text == "'tomorrow' is not a date like 2026-11-26; ask again with one"
    assert told.is_error
    results = [m for m in store.get_messages("u") if isinstance(m, ToolExecutionResultMessage)]
    assert [r.text for r in results][-1] == "booked for 2026-11-27"


@pytest.mark.parametrize("mode", MODES)
def test_past_its_retries_the_call_fails_and_stores_nothing(mode: str) -> None:
    script = [call("book", '{"date": "soon"}', i) for i in range(3)]
    service, model, store = make([*script, "never"], book)
    with pytest.raises(ModelBehaviourError, match=r"sent back to the tool 'book' 2 times"):
        ask(service, mode, "book something")
    assert len(model.requests) == 2
    assert store.get_messages("u") == []


def test_arguments_that_do_not_fit_count_and_the_service_sets_the_default() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    script = [call("add", '{"a": "x", "b": 1}', i) for i in range(2)]
    service, _, _ = make([*script, "never"], add, tool_retries=1)
    with pytest.raises(
        ModelBehaviourError, match=r"'add' 2 times in one call \(its retries allow 1\)"
    ):
        service.chat("u", "add")
    # a tool's own limit wins over the service's
    generous = tool_from(add, retries=5)
    assert generous.limits == ToolLimits(retries=5)
    service, _, _ = make([*script, "fine"], generous, tool_retries=0)
    assert service.chat("u", "add") == "fine"


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_past_its_timeout_is_reported_to_the_model_and_the_call_goes_on(
    mode: str,
) -> None:
    @tool(timeout=0.05)
    def slow() -> str:
        """Takes its time."""
        time.sleep(0.5)
        return "late"

    @tool(timeout=0.05)
    async def aslow() -> str:
        """Takes its time, asynchronously."""
        await asyncio.sleep(0.5)
        return "late"

    script = [call("slow", "{}"), call("aslow", "{}", 1), "They timed out."]
    service, model, _ = make(script, slow, aslow)
    started = time.perf_counter()
    assert ask(service, mode, "go") == "They timed out."
    assert time.perf_counter() - started < 0.45
    for index in (1, 2):
        told = model.requests[index].messages[-1]
        assert isinstance(told, ToolExecutionResultMessage)
        assert told.is_error
        assert "did not finish within 0.05 s" in told.text


def test_the_service_timeout_applies_to_tools_without_their_own() -> None:
    @tool
    def slow() -> str:
        """Takes its time."""
        time.sleep(0.5)
        return "late"

    service, model, _ = make([call("slow", "{}"), "ok"], slow, tool_timeout=0.05)
    assert service.chat("u", "go") == "ok"
    assert "did not finish within 0.05 s" in str(model.requests[1].messages[-1])


def test_limits_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="`retries` must be an int >= 0"):
        tool(retries=-1)
    with pytest.raises(ConfigurationError, match="`timeout` must be a positive number"):
        tool(timeout=0)
    with pytest.raises(ConfigurationError, match="`timeout` must be a positive number"):
        make([], tool_timeout=-2.0)
