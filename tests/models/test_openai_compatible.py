"""`OpenAiChatModel` against servers that take less of OpenAI's protocol than OpenAI (answering
as llama.cpp's server does): features refused are dropped and remembered, never "try again
later"; assistant tool calls go without a null `content`; errors name the server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Protocol

import pytest
from pydantic import BaseModel

from chatmemory import (
    AiMessage,
    ChatMessage,
    ConfigurationError,
    ModelError,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.models import (
    Capability,
    ChatParameters,
    ChatRequest,
    ChatResponse,
    OpenAiChatModel,
    ResponseFormat,
    ToolSpecification,
)
from chatmemory.models._refusals import Refusals
from chatmemory.services import ai_service

from .fake_server import FakeServer, Reply, llama_cpp_refusal
from .test_openai import chunk, completion

SCHEMA_REFUSED = llama_cpp_refusal(
    "response_format.type", "Input should be 'text' or 'json_object'", "json_schema"
)
PERSON_JSON = '{"name": "Ada", "age": 36}'


class Person(BaseModel):
    name: str
    age: int


class Extract(Protocol):
    def person(self, text: str) -> Person: ...


@pytest.fixture(autouse=True)
def _fresh_refusals() -> Iterator[None]:
    Refusals.forget_all()
    yield
    Refusals.forget_all()


@pytest.fixture
def model(server: FakeServer) -> Iterator[OpenAiChatModel]:
    model = OpenAiChatModel(model="smol", base_url=f"{server.url}/v1", api_key="k")
    yield model
    model.close()


def test_a_refused_json_schema_falls_back_to_json_mode_with_instructions_once(
    server: FakeServer, model: OpenAiChatModel, caplog: pytest.LogCaptureFixture
) -> None:
    server.reply(SCHEMA_REFUSED, Reply(body=completion(PERSON_JSON)))
    server.reply(Reply(body=completion(PERSON_JSON)))
    extract = ai_service(Extract, chat_model=model)
    with caplog.at_level(logging.WARNING, logger="chatmemory.models"):
        assert extract.person("Ada is 36") == Person(name="Ada", age=36)
        assert extract.person("Ada is 36") == Person(name="Ada", age=36)
    # refused once, not retried by the SDK (llama.cpp answers 500): then JSON mode + schema
    assert len(server.requests) == 3
    assert server.requests[0].body["response_format"]["type"] == "json_schema"
    fallback = server.requests[1].body
    assert fallback["response_format"] == {"type": "json_object"}
    assert "following JSON format" in fallback["messages"][-1]["content"]
    assert '"age"' in fallback["messages"][-1]["content"]
    # remembered: the next call has the service's own instructions and no schema format
    assert "response_format" not in server.requests[2].body
    assert "following JSON format" in server.requests[2].body["messages"][-1]["content"]
    assert Capability.RESPONSE_FORMAT_JSON_SCHEMA not in model.capabilities
    warnings = [r for r in caplog.records if "refuses `json_schema`" in r.getMessage()]
    assert len(warnings) == 1
    assert "Input should be 'text' or 'json_object'" in warnings[0].getMessage()


def test_what_a_server_refused_is_remembered_per_base_url_and_model(server: FakeServer) -> None:
    fmt = ResponseFormat.json_schema({"type": "object"})
    request = ChatRequest([UserMessage("hi")], response_format=fmt)
    server.reply(SCHEMA_REFUSED, Reply(body=completion("{}")), Reply(body=completion("{}")))
    server.reply(Reply(body=completion("{}")))
    first = OpenAiChatModel(model="smol", base_url=f"{server.url}/v1", api_key="k")
    first.chat(request)
    again = OpenAiChatModel(model="smol", base_url=f"{server.url}/v1/", api_key="k")
    again.chat(request)  # the same server and model: json_object straight away
    other = OpenAiChatModel(model="other", base_url=f"{server.url}/v1", api_key="k")
    other.chat(request)  # another model: asked with the schema
    for each in (first, again, other):
        each.close()
    formats = [r.body["response_format"]["type"] for r in server.requests]
    assert formats == ["json_schema", "json_object", "json_object", "json_schema"]


def test_json_mode_refused_too_leaves_the_format_to_the_instructions(
    server: FakeServer, model: OpenAiChatModel
) -> None:
    refused = llama_cpp_refusal("response_format", "Extra inputs are not permitted", "x")
    server.reply(SCHEMA_REFUSED, refused, Reply(body=completion("{}")))
    fmt = ResponseFormat.json_schema({"type": "object"})
    model.chat(ChatRequest([UserMessage("hi")], response_format=fmt))
    last = server.requests[-1].body
    assert "response_format" not in last
    assert last["messages"][-1]["content"].startswith("hi\nYou must answer strictly")


def test_strict_tools_parallel_calls_and_stream_options_are_dropped_when_refused(
    server: FakeServer, model: OpenAiChatModel
) -> None:
    tool = ToolSpecification(name="f", strict=True)
    server.reply(
        Reply(400, {"error": {"message": "validation error: 'strict' is not permitted"}}),
        llama_cpp_refusal("parallel_tool_calls", "Extra inputs are not permitted", True),
        Reply(body=completion("ok")),
    )
    request = ChatRequest(
        [UserMessage("hi")],
        tools=[tool],
        parameters=ChatParameters(extra_body={"parallel_tool_calls": False}),
    )
    assert model.chat(request).ai_message.text == "ok"
    sent = [r.body for r in server.requests]
    assert sent[0]["tools"][0]["function"]["strict"] is True
    assert "strict" not in sent[1]["tools"][0]["function"]
    assert "parallel_tool_calls" in sent[1]
    assert "parallel_tool_calls" not in sent[2]

    server.reply(
        llama_cpp_refusal("stream_options", "Extra inputs are not permitted", {}),
        Reply(events=[(None, chunk({"content": "hi"}, "stop")), (None, "[DONE]")]),
    )
    events = list(model.stream(ChatRequest([UserMessage("hi")])))
    assert isinstance(events[-1], ChatResponse)
    assert events[-1].ai_message.text == "hi"
    assert "stream_options" in server.requests[3].body
    assert "stream_options" not in server.requests[4].body


def test_the_async_calls_fall_back_too(server: FakeServer, model: OpenAiChatModel) -> None:
    server.reply(SCHEMA_REFUSED, Reply(body=completion("{}")))
    fmt = ResponseFormat.json_schema({"type": "object"})

    async def run() -> ChatResponse:
        try:
            return await model.achat(ChatRequest([UserMessage("hi")], response_format=fmt))
        finally:
            await model.aclose()

    assert asyncio.run(run()).ai_message.text == "{}"
    assert server.requests[1].body["response_format"] == {"type": "json_object"}


def test_a_server_error_naming_a_feature_is_not_try_again_later(
    server: FakeServer, model: OpenAiChatModel
) -> None:
    refused = llama_cpp_refusal("messages.1.content", "Input should be a valid string", None)
    server.reply(refused)  # names no feature the request used: nothing to drop
    with pytest.raises(ModelError) as caught:
        model.chat(ChatRequest([UserMessage("hi")]))
    assert len(server.requests) == 1  # the SDK did not retry it
    assert not caught.value.retriable
    assert "try again later" not in str(caught.value)
    assert "the server at http://127.0.0.1" in str(caught.value)
    assert "does not take part of the request" in str(caught.value)


def test_a_tool_round_trip_sends_no_null_content(
    server: FakeServer, model: OpenAiChatModel
) -> None:
    server.reply(Reply(body=completion("Sunny.")))
    call = ToolExecutionRequest("c1", "weather", '{"city":"Paris"}')
    messages: list[ChatMessage] = [
        UserMessage("weather?"),
        AiMessage(tool_execution_requests=[call]),
        ToolExecutionResultMessage("c1", "weather", "sunny"),
    ]
    model.chat(ChatRequest(messages))
    assistant = server.requests[0].body["messages"][1]
    assert assistant == {
        "role": "assistant",
        "content": "",  # llama.cpp refuses null, and its tool-calling template needs the key
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
            }
        ],
    }


def test_a_base_url_without_a_scheme_says_add_http() -> None:
    with pytest.raises(ConfigurationError, match=r"add http:// \(or https://\), e.g. http://l"):
        OpenAiChatModel(model="m", base_url="localhost:8080/v1", api_key="k")


def test_openai_itself_is_named_openai_and_gets_its_own_output_limit_field() -> None:
    model = OpenAiChatModel(model="m", api_key="k", base_url="https://api.openai.com/v1")
    assert model._clients.errors.who == "OpenAI"
    assert model._max_tokens_field == "max_completion_tokens"
    model.close()


def test_a_compatible_server_gets_max_tokens(server: FakeServer, model: OpenAiChatModel) -> None:
    server.reply(Reply(body=completion("ok")))
    model.chat(ChatRequest([UserMessage("hi")], parameters=ChatParameters(max_output_tokens=9)))
    body = server.requests[0].body
    assert body["max_tokens"] == 9  # llama.cpp's Python server ignores max_completion_tokens
    assert "max_completion_tokens" not in body


def test_a_server_that_times_out_is_not_sent_the_request_again(server: FakeServer) -> None:
    import time

    class SlowReply(Reply):
        def encode(self) -> tuple[bytes, str]:
            time.sleep(0.6)
            return super().encode()

    server.reply(SlowReply(body=completion()))
    slow = OpenAiChatModel(
        model="m", base_url=f"{server.url}/v1", api_key="k", timeout=0.2, max_retries=3
    )
    with pytest.raises(ModelError, match="not sent again") as caught:
        slow.chat(ChatRequest([UserMessage("hi")]))
    slow.close()
    assert len(server.requests) == 1
    assert caught.value.retriable

    server.reply(SlowReply(body=completion()))
    slow = OpenAiChatModel(
        model="m", base_url=f"{server.url}/v1", api_key="k", timeout=0.2, max_retries=3
    )

    async def run() -> None:
        try:
            await slow.achat(ChatRequest([UserMessage("hi")]))
        finally:
            await slow.aclose()

    with pytest.raises(ModelError, match="not sent again"):
        asyncio.run(run())
    assert len(server.requests) == 2
