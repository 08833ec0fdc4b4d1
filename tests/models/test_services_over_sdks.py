"""AI services on the real SDKs against the local servers: parallel tool calls, streamed partial
tool calls, Anthropic's tool_use blocks, structured output, async."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Annotated, Protocol

import pytest
from pydantic import BaseModel

from chatmemory import (
    AiMessage,
    MessageWindowChatMemory,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.models import AnthropicChatModel, OpenAiChatModel, TokenUsage
from chatmemory.services import ChatMemoryAccess, MemoryId, Result, TokenStream, ai_service
from tests.services.tooling import FnTool

from . import test_anthropic as anthropic_wire
from . import test_openai as openai_wire
from .fake_server import FakeServer, Reply


class Agent(ChatMemoryAccess, Protocol):
    def chat(self, user: Annotated[str, MemoryId], text: str) -> Result[str]: ...

    async def achat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    def events(self, user: Annotated[str, MemoryId], text: str) -> TokenStream: ...


class Weather(BaseModel):
    city: str
    celsius: int


class Extract(Protocol):
    def weather(self, text: str) -> Weather: ...


TOOLS = [
    FnTool("weather", lambda city: f"snow in {city}", "city"),
    FnTool("time", lambda: "noon"),
]


def agent(model: object) -> Agent:
    return ai_service(
        Agent,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=20),
        tools=TOOLS,
        execute_tools_concurrently=True,
    )


@pytest.fixture
def openai_model(server: FakeServer) -> Iterator[OpenAiChatModel]:
    model = OpenAiChatModel(model="gpt-4o-mini", base_url=server.url + "/v1", api_key="sk-test")
    yield model
    model.close()


def two_calls() -> list[dict[str, object]]:
    return [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
        },
        {"id": "call_b", "type": "function", "function": {"name": "time", "arguments": "{}"}},
    ]


def test_parallel_tool_calls_through_openai(
    server: FakeServer, openai_model: OpenAiChatModel
) -> None:
    server.reply(
        Reply(
            body=openai_wire.completion(None, tool_calls=two_calls(), finish_reason="tool_calls")
        ),
        Reply(body=openai_wire.completion("Snow at noon.")),
    )
    service = agent(openai_model)
    result = service.chat("u", "Weather and time?")
    assert result.content == "Snow at noon."
    assert result.token_usage == TokenUsage(22, 14, 36)
    first, second = (r.body for r in server.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["weather", "time"]
    assert second["messages"][-2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "snow in Oslo"},
        {"role": "tool", "tool_call_id": "call_b", "content": "noon"},
    ]
    assert service.get_chat_memory("u").messages()[2:4] == [
        ToolExecutionResultMessage("call_a", "weather", "snow in Oslo"),
        ToolExecutionResultMessage("call_b", "time", "noon"),
    ]


def test_streamed_partial_tool_calls_through_openai(
    server: FakeServer, openai_model: OpenAiChatModel
) -> None:
    server.reply(
        openai_wire.sse(*openai_wire.STREAM),
        openai_wire.sse(
            openai_wire.chunk({"content": "Done"}),
            openai_wire.chunk({}, finish_reason="stop"),
            openai_wire.usage_chunk(),
        ),
    )
    stream = agent(openai_model).events("u", "Weather and time?")
    kinds = [type(event).__name__ for event in stream]
    assert kinds.count("CompleteToolCall") == 2
    assert kinds.count("ToolExecuted") == 2
    assert stream.result.content == "Done"
    assert [e.result for e in stream.result.tool_executions] == ["snow in Paris", "noon"]
    assert server.requests[1].body["messages"][-2]["content"] == "snow in Paris"


def test_tool_use_blocks_through_anthropic(server: FakeServer) -> None:
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}
    server.reply(
        Reply(body=anthropic_wire.message(tool_use, stop_reason="tool_use")),
        Reply(body=anthropic_wire.message(anthropic_wire.text("Snow in Oslo."))),
    )
    model = AnthropicChatModel(
        model="claude-test", base_url=server.url, api_key="sk-ant-test", max_tokens=256
    )
    result = agent(model).chat("u", "Weather?")
    assert result.content == "Snow in Oslo."
    sent = server.requests[1].body["messages"]
    assert sent[-1] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "snow in Oslo"}],
    }
    assert result.tool_executions[0].request == ToolExecutionRequest(
        "toolu_1", "weather", '{"city":"Oslo"}'
    )


def test_structured_output_through_openai(
    server: FakeServer, openai_model: OpenAiChatModel
) -> None:
    server.reply(Reply(body=openai_wire.completion('{"city": "Oslo", "celsius": -3}')))
    extract = ai_service(Extract, chat_model=openai_model)
    assert extract.weather("Oslo is at -3 degrees") == Weather(city="Oslo", celsius=-3)
    response_format = server.requests[0].body["response_format"]
    assert response_format["type"] == "json_schema"
    assert set(response_format["json_schema"]["schema"]["properties"]) == {"city", "celsius"}


def test_async_service_call_through_openai(
    server: FakeServer, openai_model: OpenAiChatModel
) -> None:
    server.reply(
        Reply(
            body=openai_wire.completion(None, tool_calls=two_calls(), finish_reason="tool_calls")
        ),
        Reply(body=openai_wire.completion("Snow at noon.")),
    )
    service = agent(openai_model)

    async def main() -> str:
        try:
            return await service.achat("u", "Weather and time?")
        finally:
            await openai_model.aclose()

    assert asyncio.run(main()) == "Snow at noon."
    messages = service.get_chat_memory("u").messages()
    assert messages[0] == UserMessage("Weather and time?")
    assert messages[-1] == AiMessage("Snow at noon.")
