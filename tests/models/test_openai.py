"""`OpenAiChatModel` with the real `openai` SDK against a local server speaking its protocol."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    ModelError,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.models import (
    Capability,
    ChatParameters,
    ChatRequest,
    ChatResponse,
    CompleteToolCall,
    FinishReason,
    OpenAiChatModel,
    PartialText,
    PartialThinking,
    PartialToolCall,
    ResponseFormat,
    StreamEvent,
    TokenUsage,
    ToolSpecification,
)

from .fake_server import DEEP, FakeServer, Reply, answer, assert_unreadable, not_json_objects

WEATHER = ToolSpecification(
    name="weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    strict=True,
)
FAST_RETRY = {"retry-after-ms": "1"}


def completion(
    content: str | None = "Hello!",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    **message: Any,
) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content, **message}
    if tool_calls is not None:
        msg["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": msg, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def chunk(delta: dict[str, Any] | None = None, finish_reason: str | None = None) -> dict[str, Any]:
    choices = (
        [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    )
    return {
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": choices,
    }


def usage_chunk() -> dict[str, Any]:
    return {
        **chunk(),
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
    }


def sse(*chunks: dict[str, Any]) -> Reply:
    return Reply(events=[*((None, c) for c in chunks), (None, "[DONE]")])


@pytest.fixture
def model(server: FakeServer) -> Iterator[OpenAiChatModel]:
    model = OpenAiChatModel(
        model="gpt-4o-mini", base_url=f"{server.url}/v1", api_key="sk-test", max_retries=2
    )
    yield model
    model.close()  # tests that use it async close it inside their event loop


def test_chat_sends_the_messages_and_reads_the_answer(
    server: FakeServer, model: OpenAiChatModel
) -> None:
    server.reply(Reply(body=completion("Hello!")))
    request = ChatRequest(
        [SystemMessage("Be terse."), UserMessage("Hi", name="ann")],
        parameters=ChatParameters(temperature=0.2, max_output_tokens=50, stop=["\n"], seed=7),
    )
    response = model.chat(request)

    assert response == ChatResponse(
        ai_message=AiMessage("Hello!"),
        token_usage=TokenUsage(11, 7, 18),
        finish_reason=FinishReason.STOP,
        model_name="gpt-4o-mini-2024-07-18",
        id="chatcmpl-1",
    )
    (sent,) = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "Hi", "name": "ann"},
        ],
        "temperature": 0.2,
        "max_tokens": 50,  # a compatible server's name (OpenAI's own is max_completion_tokens)
        "stop": ["\n"],
        "seed": 7,
    }


def test_tools_and_tool_calls_round_trip(server: FakeServer, model: OpenAiChatModel) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
    }
    server.reply(
        Reply(body=completion(None, tool_calls=[call], finish_reason="tool_calls")),
        Reply(body=completion("Sunny in Paris.")),
    )
    user = UserMessage("Weather in Paris?")
    first = model.chat(ChatRequest([user], tools=[WEATHER], tool_choice="required"))
    request = ToolExecutionRequest("call_1", "weather", '{"city":"Paris"}')
    assert first.ai_message == AiMessage(tool_execution_requests=[request])
    assert first.finish_reason is FinishReason.TOOL_EXECUTION

    result = ToolExecutionResultMessage("call_1", "weather", "sunny")
    second = model.chat(ChatRequest([user, first.ai_message, result], tools=[WEATHER]))
    assert second.ai_message.text == "Sunny in Paris."

    assert server.requests[0].body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "The weather in a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                "strict": True,
            },
        }
    ]
    assert server.requests[0].body["tool_choice"] == "required"
    assert server.requests[1].body["messages"][1:] == [
        {"role": "assistant", "content": "", "tool_calls": [call]},  # llama.cpp refuses null
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]


def test_json_schema_response_format(server: FakeServer, model: OpenAiChatModel) -> None:
    server.reply(Reply(body=completion('{"answer": 4}')), Reply(body=completion("{}")))
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}}
    fmt = ResponseFormat.json_schema(schema, name="sum")
    model.chat(ChatRequest([UserMessage("2+2?")], response_format=fmt))
    model.chat(ChatRequest([UserMessage("{}?")], response_format=ResponseFormat.JSON))
    assert server.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "sum", "schema": schema, "strict": True},
    }
    assert server.requests[1].body["response_format"] == {"type": "json_object"}


def test_reasoning_content_of_compatible_servers_is_thinking(
    server: FakeServer, model: OpenAiChatModel
) -> None:
    server.reply(
        Reply(body=completion("4", reasoning_content="2+2 is 4")),
        Reply(body=completion("4", reasoning="two and two")),
    )
    assert model.chat(ChatRequest([UserMessage("2+2?")])).ai_message.thinking == "2+2 is 4"
    assert model.chat(ChatRequest([UserMessage("2+2?")])).ai_message.thinking == "two and two"


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("length", FinishReason.LENGTH),
        ("content_filter", FinishReason.CONTENT_FILTER),
        ("function_call", FinishReason.TOOL_EXECUTION),
        ("something_new", FinishReason.OTHER),
    ],
)
def test_finish_reasons(
    server: FakeServer, model: OpenAiChatModel, reason: str, expected: FinishReason
) -> None:
    server.reply(Reply(body=completion("cut", finish_reason=reason)))
    assert model.chat(ChatRequest([UserMessage("go")])).finish_reason is expected


def test_parameters_merge_model_defaults_and_extra_body(server: FakeServer) -> None:
    server.reply(Reply(body=completion()))
    model = OpenAiChatModel(
        model="llama3.2",
        base_url=f"{server.url}/v1",
        api_key="ollama",
        parameters=ChatParameters(temperature=0.0, top_k=40, extra_body={"a": 1, "b": 1}),
        max_tokens_field="max_tokens",
    )
    override = ChatParameters(model="qwen3", max_output_tokens=9, extra_body={"b": 2})
    model.chat(ChatRequest([UserMessage("hi")], parameters=override))
    model.close()
    assert server.requests[0].body == {
        "model": "qwen3",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.0,
        "max_tokens": 9,
        "top_k": 40,
        "a": 1,
        "b": 2,
    }


# --- streaming ------------------------------------------------------------------------------

STREAM = (
    chunk({"role": "assistant", "content": ""}),
    chunk({"reasoning_content": "Think"}),
    chunk({"content": "Hel"}),
    chunk({"content": "lo"}),
    chunk(
        {
            "tool_calls": [
                _call := {
                    "index": 0,
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "weather", "arguments": ""},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "time", "arguments": "{}"},
                }
            ]
        }
    ),
    chunk({}, finish_reason="tool_calls"),
    usage_chunk(),
)
EXPECTED_EVENTS: list[StreamEvent] = [
    PartialThinking("Think"),
    PartialText("Hel"),
    PartialText("lo"),
    PartialToolCall(index=0, id="call_a", name="weather", arguments_delta=""),
    PartialToolCall(index=0, id="call_a", name="weather", arguments_delta='{"city":'),
    PartialToolCall(index=0, id="call_a", name="weather", arguments_delta='"Paris"}'),
    CompleteToolCall(
        index=0, request=ToolExecutionRequest("call_a", "weather", '{"city":"Paris"}')
    ),
    PartialToolCall(index=1, id="call_b", name="time", arguments_delta="{}"),
    CompleteToolCall(index=1, request=ToolExecutionRequest("call_b", "time", "{}")),
    ChatResponse(
        ai_message=AiMessage(
            "Hello",
            thinking="Think",
            tool_execution_requests=[
                ToolExecutionRequest("call_a", "weather", '{"city":"Paris"}'),
                ToolExecutionRequest("call_b", "time", "{}"),
            ],
        ),
        token_usage=TokenUsage(20, 5, 25),
        finish_reason=FinishReason.TOOL_EXECUTION,
        model_name="gpt-4o-mini-2024-07-18",
        id="chatcmpl-2",
    ),
]


def test_stream_yields_pieces_then_the_response(server: FakeServer, model: OpenAiChatModel) -> None:
    server.reply(sse(*STREAM))
    events = list(model.stream(ChatRequest([UserMessage("hi")], tools=[WEATHER])))
    assert events == EXPECTED_EVENTS
    body = server.requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_astream_and_achat(server: FakeServer, model: OpenAiChatModel) -> None:
    server.reply(sse(*STREAM), Reply(body=completion("async hello")))

    async def run() -> tuple[list[StreamEvent], ChatResponse]:
        stream: AsyncIterator[StreamEvent] = model.astream(ChatRequest([UserMessage("hi")]))
        events = [event async for event in stream]
        response = await model.achat(ChatRequest([UserMessage("hi")]))
        await model.aclose()
        return events, response

    events, response = asyncio.run(run())
    assert events == EXPECTED_EVENTS
    assert response.ai_message == AiMessage("async hello")


def test_stream_of_whole_tool_calls_without_index(
    server: FakeServer, model: OpenAiChatModel
) -> None:
    """Some compatible servers (older Ollama) send each call whole, without `index`."""
    calls = [
        {"id": "1", "function": {"name": "a", "arguments": '{"x":1}'}},
        {"id": "2", "function": {"name": "b", "arguments": ""}},
    ]
    server.reply(sse(chunk({"tool_calls": calls}, finish_reason="tool_calls")))
    events = list(model.stream(ChatRequest([UserMessage("hi")])))
    response = events[-1]
    assert isinstance(response, ChatResponse)
    assert response.ai_message.tool_execution_requests == (
        ToolExecutionRequest("1", "a", '{"x":1}'),
        ToolExecutionRequest("2", "b", "{}"),
    )
    assert response.token_usage is None
    completes = [e for e in events if isinstance(e, CompleteToolCall)]
    assert [c.index for c in completes] == [0, 1]


# --- errors ---------------------------------------------------------------------------------


def test_a_bad_request_is_not_retried_and_keeps_the_provider_message(
    server: FakeServer, model: OpenAiChatModel
) -> None:
    body = {"error": {"message": "Invalid 'messages'.", "type": "invalid_request_error"}}
    server.reply(Reply(400, body, headers={"x-request-id": "req_9"}))
    with pytest.raises(ModelError) as caught:
        model.chat(ChatRequest([UserMessage("hi")]))
    error = caught.value
    assert (error.status, error.retriable, error.provider) == (400, False, "openai")
    assert error.provider_message == "Invalid 'messages'."
    assert error.request_id == "req_9"
    assert "HTTP 400" in str(error)
    assert "Invalid 'messages'." in str(error)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("status", "retriable"), [(401, False), (403, False), (404, False), (429, True), (500, True)]
)
def test_statuses_map_to_retriable_or_not(
    server: FakeServer, model: OpenAiChatModel, status: int, retriable: bool
) -> None:
    body = {"error": {"message": f"status {status}"}}
    attempts = 3 if retriable else 1  # the SDK retries max_retries=2 times, not us
    server.reply(*[Reply(status, body, headers=FAST_RETRY)] * attempts)
    with pytest.raises(ModelError) as caught:
        model.chat(ChatRequest([UserMessage("hi")]))
    assert (caught.value.status, caught.value.retriable) == (status, retriable)
    assert caught.value.provider_message == f"status {status}"
    assert len(server.requests) == attempts


def test_a_server_error_is_retried_by_the_sdk_then_succeeds(
    server: FakeServer, model: OpenAiChatModel
) -> None:
    server.reply(
        Reply(500, {"error": {"message": "boom"}}, headers=FAST_RETRY),
        Reply(body=completion("recovered")),
    )
    assert model.chat(ChatRequest([UserMessage("hi")])).ai_message.text == "recovered"
    assert len(server.requests) == 2


def test_errors_while_streaming_and_async_are_mapped(
    server: FakeServer, model: OpenAiChatModel
) -> None:
    server.reply(Reply(401, {"error": {"message": "bad key"}}))
    with pytest.raises(ModelError, match="bad key") as caught:
        list(model.stream(ChatRequest([UserMessage("hi")])))
    assert caught.value.status == 401

    server.reply(Reply(404, {"error": {"message": "no such model"}}))

    async def run() -> None:
        try:
            await model.achat(ChatRequest([UserMessage("hi")]))
        finally:
            await model.aclose()

    with pytest.raises(ModelError, match="check the model name") as caught:
        asyncio.run(run())
    assert caught.value.status == 404


def test_an_unreachable_server_is_a_retriable_error_naming_the_server() -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAiChatModel(
        model="m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0
    )
    with pytest.raises(
        ModelError, match=r"cannot reach the server at http://127\.0\.0\.1"
    ) as caught:
        model.chat(ChatRequest([UserMessage("hi")]))
    model.close()
    assert ".;" not in str(caught.value)
    assert caught.value.retriable
    assert caught.value.status is None


def test_a_timeout_is_a_retriable_error(server: FakeServer) -> None:
    import time

    slow = OpenAiChatModel(
        model="m", base_url=f"{server.url}/v1", api_key="k", timeout=0.2, max_retries=0
    )
    original = server.reply

    class SlowReply(Reply):
        def encode(self) -> tuple[bytes, str]:
            time.sleep(0.6)
            return super().encode()

    original(SlowReply(body=completion()))
    with pytest.raises(ModelError, match="did not answer in time") as caught:
        slow.chat(ChatRequest([UserMessage("hi")]))
    slow.close()
    assert caught.value.retriable


# --- answers that are not the protocol's ----------------------------------------------------

NOT_JSON_OBJECTS = not_json_objects("{'choices': []}", completion())


@pytest.mark.parametrize("way", ["chat", "achat"])
@pytest.mark.parametrize(("reply", "said"), NOT_JSON_OBJECTS.values(), ids=NOT_JSON_OBJECTS)
def test_an_answer_that_is_not_a_json_object_is_a_model_error_not_retried(
    server: FakeServer, model: OpenAiChatModel, reply: Reply, said: str, way: str
) -> None:
    server.reply(reply)
    assert_unreadable(lambda: answer(model, way), said, "openai")
    assert len(server.requests) == 1


WRONG_SHAPES = {
    "choices not an array": ({"choices": "none"}, "`choices` must be an array"),
    "a choice not an object": ({"choices": [1]}, r"`choices\[0\]` must be an object"),
    "a null message": (
        {"choices": [{"index": 0, "message": None, "finish_reason": "stop"}]},
        r"`choices\[0\].message` must be an object, got null",
    ),
    "a message that is text": (
        {"choices": [{"message": "hi"}]},
        r"`choices\[0\].message` must be an object",
    ),
    "tool calls that are not objects": (
        {"choices": [{"message": {"content": None, "tool_calls": [1]}}]},
        "tool_calls",
    ),
}


@pytest.mark.parametrize("way", ["chat", "achat"])
@pytest.mark.parametrize(("body", "said"), WRONG_SHAPES.values(), ids=WRONG_SHAPES)
def test_an_answer_of_the_wrong_shape_is_a_model_error_that_says_where(
    server: FakeServer, model: OpenAiChatModel, body: Any, said: str, way: str
) -> None:
    server.reply(Reply(body=body))
    with pytest.raises(ModelError, match=said) as caught:
        answer(model, way)
    assert "cannot read" in str(caught.value)
    assert not caught.value.retriable


def test_metadata_of_the_wrong_type_is_left_out(server: FakeServer, model: OpenAiChatModel) -> None:
    body = {
        "id": 7,
        "model": ["m"],
        "choices": [{"message": {"content": "Hi"}, "finish_reason": 3}],
        "usage": {"prompt_tokens": "many", "completion_tokens": 2, "total_tokens": None},
    }
    last = {**chunk(), "id": None, "choices": [{"index": 0, "finish_reason": None}]}  # no delta
    server.reply(Reply(body=body), sse({**chunk({"content": "Hi"}), "id": 7, "usage": [1]}, last))
    expected = ChatResponse(ai_message=AiMessage("Hi"), token_usage=TokenUsage(0, 2))
    assert model.chat(ChatRequest([UserMessage("hi")])) == expected
    *_, streamed = model.stream(ChatRequest([UserMessage("hi")]))
    assert streamed == ChatResponse(ai_message=AiMessage("Hi"), model_name="gpt-4o-mini-2024-07-18")


NOT_EVENT_STREAMS = {
    "data that is not JSON": (
        Reply(events=[(None, chunk({"content": "Hel"})), (None, "<b>lo</b>"), (None, "[DONE]")]),
        "not JSON",
    ),
    "data nested 100k deep": (Reply(events=[(None, DEEP)]), "nested too deeply"),
    "data that is not an object": (Reply(events=[(None, [1, 2])]), "not a JSON object"),
    "an HTML page": (Reply(text="<html>Log in to the proxy</html>"), "no stream events"),
    "a JSON answer": (Reply(body=completion()), "no stream events"),
}


@pytest.mark.parametrize("way", ["stream", "astream"])
@pytest.mark.parametrize(("reply", "said"), NOT_EVENT_STREAMS.values(), ids=NOT_EVENT_STREAMS)
def test_a_stream_that_is_not_json_events_is_a_model_error_not_retried(
    server: FakeServer, model: OpenAiChatModel, reply: Reply, said: str, way: str
) -> None:
    server.reply(reply)
    with pytest.raises(ModelError, match=said) as caught:
        answer(model, way)
    assert not caught.value.retriable
    assert "check base_url" in str(caught.value)
    assert len(str(caught.value)) < 450  # with the server's URL
    assert len(server.requests) == 1


WRONG_CHUNKS = {
    "choices not an array": ({"choices": "x"}, "`choices` must be an array"),
    "a choice not an object": ({"choices": [1]}, r"`choices\[0\]` must be an object"),
    "a delta that is text": (
        {"choices": [{"index": 0, "delta": "x"}]},
        r"`choices\[0\].delta` must be an object",
    ),
    "tool calls not an array": (
        {"choices": [{"delta": {"tool_calls": "x"}}]},
        r"`choices\[0\].delta.tool_calls` must be an array",
    ),
    "a tool call not an object": (
        {"choices": [{"delta": {"tool_calls": [1]}}]},
        r"`choices\[0\].delta.tool_calls\[0\]` must be an object",
    ),
    "a function that is text": (
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": "f"}]}}]},
        r"`choices\[0\].delta.tool_calls\[0\].function` must be an object",
    ),
}


@pytest.mark.parametrize("way", ["stream", "astream"])
@pytest.mark.parametrize(("body", "said"), WRONG_CHUNKS.values(), ids=WRONG_CHUNKS)
def test_a_chunk_of_the_wrong_shape_is_a_model_error_that_says_where(
    server: FakeServer, model: OpenAiChatModel, body: dict[str, Any], said: str, way: str
) -> None:
    server.reply(sse({**chunk(), **body}))
    with pytest.raises(ModelError, match=said) as caught:
        answer(model, way)
    assert "cannot read" in str(caught.value)
    assert not caught.value.retriable


# --- configuration --------------------------------------------------------------------------


def test_capabilities_are_declared_and_checked_before_any_call(server: FakeServer) -> None:
    from chatmemory import ConfigurationError

    model = OpenAiChatModel(
        model="tiny", base_url=server.url, api_key="k", capabilities=[Capability.TOOLS]
    )
    assert model.capabilities == {Capability.TOOLS}
    fmt = ResponseFormat.json_schema({"type": "object"})
    with pytest.raises(ConfigurationError, match="RESPONSE_FORMAT_JSON_SCHEMA"):
        model.chat(ChatRequest([UserMessage("hi")], response_format=fmt))
    with pytest.raises(ConfigurationError, match="STREAMING"):
        model.stream(ChatRequest([UserMessage("hi")]))
    bare = OpenAiChatModel(model="tiny", base_url=server.url, api_key="k", capabilities=())
    with pytest.raises(ConfigurationError, match=r"Capability\.TOOLS"):
        bare.chat(ChatRequest([UserMessage("hi")], tools=[WEATHER]))
    assert server.requests == []
    assert repr(model) == f"OpenAiChatModel(model='tiny', base_url={server.url!r})"
    model.close()
    bare.close()


def test_injected_clients_are_used_and_left_open(server: FakeServer) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="injected")
    async_client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="injected-async")
    model = OpenAiChatModel(model="m", client=client, async_client=async_client)
    server.reply(Reply(body=completion()), Reply(body=completion()))
    model.chat(ChatRequest([UserMessage("hi")]))

    async def run() -> bool:
        await model.achat(ChatRequest([UserMessage("hi")]))
        await model.aclose()
        still_open = not async_client.is_closed()
        await async_client.close()
        return still_open

    assert asyncio.run(run())
    assert not client.is_closed()
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer injected",
        "Bearer injected-async",
    ]
    client.close()


def test_a_missing_api_key_is_reported_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelError, match="api_key") as caught:
        OpenAiChatModel(model="gpt-4o-mini")
    assert not caught.value.retriable


def test_an_unreadable_answer_is_a_model_error(server: FakeServer, model: OpenAiChatModel) -> None:
    bad_call = {"id": "c", "type": "function", "function": {"arguments": "{}"}}  # no name
    server.reply(Reply(body=completion(None, tool_calls=[bad_call])), Reply(body={"choices": []}))
    with pytest.raises(ModelError, match="cannot read") as caught:
        model.chat(ChatRequest([UserMessage("hi")]))
    assert not caught.value.retriable
    with pytest.raises(ModelError, match="without any choice"):
        model.chat(ChatRequest([UserMessage("hi")]))


def test_request_bodies_are_json(server: FakeServer, model: OpenAiChatModel) -> None:
    """Frozen schemas are sent as plain JSON (nested objects and arrays intact)."""
    schema = {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": [1]}}}}
    server.reply(Reply(body=completion()))
    model.chat(
        ChatRequest([UserMessage("hi")], tools=[ToolSpecification(name="t", parameters=schema)])
    )
    sent = server.requests[0].body["tools"][0]["function"]
    assert json.dumps(sent["parameters"]) == json.dumps(schema)
    assert "description" not in sent
    assert "strict" not in sent


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("weather", {"type": "function", "function": {"name": "weather"}}),
    ],
)
def test_tool_choice_is_sent_in_openais_form(
    server: FakeServer, model: OpenAiChatModel, choice: str, sent: object
) -> None:
    server.reply(Reply(body=completion("ok")))
    model.chat(ChatRequest([UserMessage("Hi")], tools=[WEATHER], tool_choice=choice))
    assert server.requests[0].body["tool_choice"] == sent


def test_tool_metadata_is_never_sent(server: FakeServer, model: OpenAiChatModel) -> None:
    server.reply(Reply(body=completion("ok")), Reply(body=completion("ok")))
    tagged = dataclasses.replace(WEATHER, metadata={"team": "payments"})
    model.chat(ChatRequest([UserMessage("hi")], tools=[WEATHER]))
    model.chat(ChatRequest([UserMessage("hi")], tools=[tagged]))
    assert server.requests[1].body["tools"] == server.requests[0].body["tools"]
    assert "payments" not in json.dumps(server.requests[1].body)
