"""Tools returning images or content lists (issue 22 item 17): the model gets them as a
multimodal tool result, Anthropic in the tool_result itself, OpenAI in a user message after the
tool messages; on the sync, async and streaming paths."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, Protocol

import pytest

from chatmemory import (
    AiMessage,
    ImageContent,
    MessageWindowChatMemory,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    to_anthropic,
    to_openai,
)
from chatmemory.services import Result, ai_service
from chatmemory.testing import ScriptedChatModel
from chatmemory.tools import ToolContext, tool, tool_from

CHART = ImageContent(base64_data="iVBORw0KGgo=", mime_type="image/png")


@tool
def chart(city: str) -> ImageContent:
    """A temperature chart of a city."""
    return CHART


@tool
def report(city: str) -> list[object]:
    """A chart and its caption."""
    return [f"Temperatures in {city}.", CHART]


@tool
def words(city: str) -> list[str]:
    """Words about a city."""
    return ["cold", "dark"]


class Assistant(Protocol):
    def ask(self, text: str) -> Result[str]: ...

    def stream(self, text: str) -> Iterator[str]: ...


class AsyncAssistant(Protocol):
    async def ask(self, text: str) -> Result[str]: ...


def script(name: str) -> ScriptedChatModel:
    call = ToolExecutionRequest("c1", name, '{"city": "Oslo"}')
    return ScriptedChatModel([AiMessage(tool_execution_requests=[call]), "Cold."])


def sent_result(model: ScriptedChatModel) -> ToolExecutionResultMessage:
    message = model.requests[1].messages[-1]
    assert isinstance(message, ToolExecutionResultMessage)
    return message


@pytest.mark.parametrize(
    ("name", "contents", "text"),
    [
        ("chart", (CHART,), ""),
        ("report", (TextContent("Temperatures in Oslo."), CHART), "Temperatures in Oslo."),
    ],
)
def test_an_image_result_reaches_the_model_as_contents(
    name: str, contents: tuple[Any, ...], text: str
) -> None:
    model = script(name)
    memory = MessageWindowChatMemory(max_messages=10)
    service = ai_service(Assistant, chat_model=model, tools=[chart, report], chat_memory=memory)
    result = service.ask("Show Oslo")
    assert sent_result(model) == ToolExecutionResultMessage("c1", name, contents=contents)
    [execution] = result.tool_executions
    assert execution.contents == contents
    assert execution.result == text
    assert execution.result_object in (CHART, ["Temperatures in Oslo.", CHART])
    assert ToolExecutionResultMessage("c1", name, contents=contents) in memory.messages()


def test_the_streaming_and_async_paths_send_the_same_result() -> None:
    streaming = script("chart")
    service = ai_service(Assistant, streaming_chat_model=streaming, tools=[chart])
    assert "".join(service.stream("Show Oslo")) == "Cold."
    assert sent_result(streaming).contents == (CHART,)
    model = script("chart")
    async_service = ai_service(AsyncAssistant, chat_model=model, tools=[chart])
    assert asyncio.run(async_service.ask("Show Oslo")).content == "Cold."
    assert sent_result(model).contents == (CHART,)


def test_plain_values_and_lists_of_text_stay_json_text() -> None:
    model = script("words")
    ai_service(Assistant, chat_model=model, tools=[words]).ask("Oslo?")
    assert sent_result(model) == ToolExecutionResultMessage("c1", "words", '["cold","dark"]')
    output = tool_from(lambda: TextContent("hi"), name="t").execute("{}", ToolContext("m"))
    assert output.contents == ()
    assert output.text == '{"text":"hi"}'


def test_each_provider_gets_the_image_its_own_way() -> None:
    model = script("chart")
    memory = MessageWindowChatMemory(max_messages=10)
    ai_service(Assistant, chat_model=model, tools=[chart], chat_memory=memory).ask("Show Oslo")
    stored = memory.messages()
    _, anthropic = to_anthropic(stored)
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    assert anthropic[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "c1", "content": [image]}],
    }
    openai = to_openai(stored)
    assert openai[2]["role"] == "tool"
    assert "follows in a user message naming the call c1" in openai[2]["content"][0]["text"]
    assert openai[3]["role"] == "user"
    assert openai[3]["content"][1]["image_url"]["url"] == "data:image/png;base64,iVBORw0KGgo="
