"""The OpenAI adapter against a real llama.cpp server (llama-cpp-python's, with a tiny model):
a chat, a stream, a tool round trip and structured output through an AI service.

It runs when a server answers at `$REAL_LLM_URL` (default http://127.0.0.1:8099/v1, where
`../shared/tools/real-llm start` puts it) and is skipped, saying why, when none does. The model
is tiny: the tests check the wire protocol and chatmemory's handling of the server's answers,
not what the model says.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Protocol

import pytest
from pydantic import BaseModel

from chatmemory import ChatMessage, OutputParsingError, ToolExecutionResultMessage, UserMessage
from chatmemory.models import (
    Capability,
    ChatParameters,
    ChatRequest,
    ChatResponse,
    OpenAiChatModel,
    PartialText,
    ToolSpecification,
)
from chatmemory.models._refusals import Refusals
from chatmemory.services import ai_service

URL = os.environ.get("REAL_LLM_URL", "http://127.0.0.1:8099/v1")


def _served_model() -> str | None:
    try:
        with urllib.request.urlopen(f"{URL}/models", timeout=10) as answer:
            models = json.load(answer)["data"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return str(models[0]["id"]) if models else None


SERVED = _served_model()
pytestmark = pytest.mark.skipif(
    SERVED is None,
    reason=f"no llama.cpp server answers at {URL} (start one: ../shared/tools/real-llm start)",
)


class Person(BaseModel):
    name: str
    age: int


class Extract(Protocol):
    def person(self, text: str) -> Person: ...


@pytest.fixture
def model() -> Iterator[OpenAiChatModel]:
    Refusals.forget_all()
    assert SERVED is not None
    model = OpenAiChatModel(
        model=SERVED,
        base_url=URL,
        api_key="any",
        timeout=120,
        parameters=ChatParameters(max_output_tokens=48, temperature=0.0, seed=1),
    )
    yield model
    model.close()
    Refusals.forget_all()


def test_chat_and_stream(model: OpenAiChatModel) -> None:
    answer = model.chat(ChatRequest([UserMessage("Say hello.")]))
    assert answer.ai_message.text
    assert answer.token_usage is not None
    assert answer.token_usage.input_tokens > 0
    events = list(model.stream(ChatRequest([UserMessage("Say hello.")])))
    assert isinstance(events[-1], ChatResponse)
    pieces = "".join(e.text for e in events if isinstance(e, PartialText))
    assert pieces == events[-1].ai_message.text


def test_a_tool_round_trip(model: OpenAiChatModel) -> None:
    weather = ToolSpecification(
        name="weather",
        description="The weather in a city.",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )
    question = UserMessage("What is the weather in Paris? Use the weather tool.")
    first = model.chat(ChatRequest([question], tools=[weather], tool_choice="auto"))
    calls = first.ai_message.tool_execution_requests
    if not calls:  # the tiny model may answer in words: the round trip is what is tested
        call_message = first.ai_message
        pytest.skip(f"the model answered without a tool call: {call_message.text!r}")
    results = [ToolExecutionResultMessage(c.id, c.name, "sunny, 21 °C") for c in calls]
    # the follow-up carries the assistant's tool calls without text: no null content
    second = model.chat(ChatRequest([question, first.ai_message, *results], tools=[weather]))
    assert isinstance(second, ChatResponse)


def test_the_assistant_tool_call_message_is_taken_by_the_server(model: OpenAiChatModel) -> None:
    from chatmemory import AiMessage, ToolExecutionRequest

    call = ToolExecutionRequest("call_1", "weather", '{"city": "Paris"}')
    messages: list[ChatMessage] = [
        UserMessage("What is the weather in Paris?"),
        AiMessage(tool_execution_requests=[call]),
        ToolExecutionResultMessage("call_1", "weather", "sunny, 21 °C"),
    ]
    assert isinstance(model.chat(ChatRequest(messages)), ChatResponse)


def test_structured_output_falls_back_from_json_schema(model: OpenAiChatModel) -> None:
    extract = ai_service(Extract, chat_model=model)
    with contextlib.suppress(OutputParsingError):  # the tiny model may write another JSON
        extract.person("Ada Lovelace is 36 years old. Give her name and age.")
    # the server refused the schema (HTTP 500 naming response_format): learned, not fatal
    assert Capability.RESPONSE_FORMAT_JSON_SCHEMA not in model.capabilities
