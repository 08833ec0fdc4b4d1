"""`AnthropicChatModel` with the real `anthropic` SDK against a local server speaking its
Messages API (JSON and server-sent events)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    ConfigurationError,
    ModelError,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.models import (
    AnthropicChatModel,
    ChatParameters,
    ChatRequest,
    ChatResponse,
    CompleteToolCall,
    FinishReason,
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
)
FAST_RETRY = {"retry-after-ms": "1"}


def message(*content: dict[str, Any], stop_reason: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 6},
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def error(status: int, kind: str, text: str) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": text}}
    return Reply(status, body, headers=FAST_RETRY)


def sse(*events: dict[str, Any]) -> Reply:
    return Reply(events=[(event["type"], event) for event in events])


@pytest.fixture
def model(server: FakeServer) -> Iterator[AnthropicChatModel]:
    model = AnthropicChatModel(
        model="claude-test", base_url=server.url, api_key="sk-ant-test", max_tokens=256
    )
    yield model
    model.close()


def test_chat_sends_the_system_prompt_apart(server: FakeServer, model: AnthropicChatModel) -> None:
    server.reply(Reply(body=message(text("Hello!"))))
    request = ChatRequest(
        [SystemMessage("Be terse."), UserMessage("Hi")],
        parameters=ChatParameters(temperature=0.5, top_k=5, stop=["END"]),
    )
    response = model.chat(request)
    assert response == ChatResponse(
        ai_message=AiMessage("Hello!"),
        token_usage=TokenUsage(12, 6),
        finish_reason=FinishReason.STOP,
        model_name="claude-sonnet-4-5-20250929",
        id="msg_1",
    )
    (sent,) = server.requests
    assert sent.path == "/v1/messages"
    # the key travels as x-api-key (older SDKs) or as a bearer token (newer ones)
    sent_key = sent.headers.get("x-api-key") or sent.headers["authorization"].removeprefix(
        "Bearer "
    )
    assert sent_key == "sk-ant-test"
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 256,
        "system": "Be terse.",
        "messages": [{"role": "user", "content": "Hi"}],
        "stop_sequences": ["END"],
        "temperature": 0.5,
        "top_k": 5,
    }


def test_tool_use_and_thinking_round_trip(server: FakeServer, model: AnthropicChatModel) -> None:
    thinking = {"type": "thinking", "thinking": "Need the weather.", "signature": "sig=="}
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}
    server.reply(
        Reply(body=message(thinking, text("Let me check."), tool_use, stop_reason="tool_use")),
        Reply(body=message(text("Snow in Oslo."))),
    )
    user = UserMessage("Weather in Oslo?")
    first = model.chat(ChatRequest([user], tools=[WEATHER], tool_choice="required"))
    assert first.ai_message == AiMessage(
        "Let me check.",
        thinking="Need the weather.",
        tool_execution_requests=[ToolExecutionRequest("toolu_1", "weather", '{"city":"Oslo"}')],
        attributes={"thinking_signature": "sig=="},
    )
    assert first.finish_reason is FinishReason.TOOL_EXECUTION

    result = ToolExecutionResultMessage("toolu_1", "weather", "snow", is_error=False)
    second = model.chat(ChatRequest([user, first.ai_message, result], tools=[WEATHER]))
    assert second.ai_message.text == "Snow in Oslo."

    assert server.requests[0].body["tools"] == [
        {
            "name": "weather",
            "description": "The weather in a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    assert server.requests[0].body["tool_choice"] == {"type": "any"}
    assert server.requests[1].body["messages"][1:] == [
        {"role": "assistant", "content": [thinking, text("Let me check."), tool_use]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "snow",
                    "is_error": False,
                }
            ],
        },
    ]


def test_json_schema_goes_to_output_config(server: FakeServer, model: AnthropicChatModel) -> None:
    server.reply(Reply(body=message(text('{"n": 1}'))))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    model.chat(
        ChatRequest([UserMessage("one")], response_format=ResponseFormat.json_schema(schema))
    )
    assert server.requests[0].body["output_config"] == {
        "format": {"type": "json_schema", "schema": schema}
    }
    with pytest.raises(ConfigurationError, match="no JSON mode without a schema"):
        model.chat(ChatRequest([UserMessage("one")], response_format=ResponseFormat.JSON))


def test_what_anthropic_lacks_is_refused_before_any_call(
    server: FakeServer, model: AnthropicChatModel
) -> None:
    with pytest.raises(ConfigurationError, match="no `seed`"):
        model.chat(ChatRequest([UserMessage("hi")], parameters=ChatParameters(seed=1)))
    with pytest.raises(ConfigurationError, match="no `presence_penalty`"):
        AnthropicChatModel(
            model="m",
            api_key="k",
            base_url=server.url,
            parameters=ChatParameters(presence_penalty=1.0),
        )
    with pytest.raises(ConfigurationError, match="at least one user or assistant"):
        model.chat(ChatRequest([SystemMessage("only a system prompt")]))
    assert server.requests == []


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("max_tokens", FinishReason.LENGTH),
        ("stop_sequence", FinishReason.STOP),
        ("refusal", FinishReason.CONTENT_FILTER),
        ("pause_turn", FinishReason.OTHER),
    ],
)
def test_stop_reasons(
    server: FakeServer, model: AnthropicChatModel, reason: str, expected: FinishReason
) -> None:
    server.reply(Reply(body=message(text("x"), stop_reason=reason)))
    assert model.chat(ChatRequest([UserMessage("go")])).finish_reason is expected


# --- streaming ------------------------------------------------------------------------------

STREAM = (
    {
        "type": "message_start",
        "message": {**message(), "usage": {"input_tokens": 30, "output_tokens": 1}},
    },
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "Hmm"},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "signature_delta", "signature": "SIG"},
    },
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "ping"},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "On "}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "it."}},
    {"type": "content_block_stop", "index": 1},
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "tool_use", "id": "toolu_9", "name": "weather", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": ""},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": '{"city": "Ro'},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": 'me"}'},
    },
    {"type": "content_block_stop", "index": 2},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 40},
    },
    {"type": "message_stop"},
)
CALL = ToolExecutionRequest("toolu_9", "weather", '{"city": "Rome"}')
EXPECTED: list[StreamEvent] = [
    PartialThinking("Hmm"),
    PartialText("On "),
    PartialText("it."),
    PartialToolCall(index=0, id="toolu_9", name="weather", arguments_delta=""),
    PartialToolCall(index=0, id="toolu_9", name="weather", arguments_delta=""),
    PartialToolCall(index=0, id="toolu_9", name="weather", arguments_delta='{"city": "Ro'),
    PartialToolCall(index=0, id="toolu_9", name="weather", arguments_delta='me"}'),
    CompleteToolCall(index=0, request=CALL),
    ChatResponse(
        ai_message=AiMessage(
            "On it.",
            thinking="Hmm",
            tool_execution_requests=[CALL],
            attributes={"thinking_signature": "SIG"},
        ),
        token_usage=TokenUsage(30, 40),
        finish_reason=FinishReason.TOOL_EXECUTION,
        model_name="claude-sonnet-4-5-20250929",
        id="msg_1",
    ),
]


def test_stream(server: FakeServer, model: AnthropicChatModel) -> None:
    server.reply(sse(*STREAM))
    events = list(model.stream(ChatRequest([UserMessage("Rome?")], tools=[WEATHER])))
    assert events == EXPECTED
    assert server.requests[0].body["stream"] is True


def test_astream_and_achat(server: FakeServer, model: AnthropicChatModel) -> None:
    server.reply(sse(*STREAM), Reply(body=message(text("async"))))

    async def run() -> tuple[list[StreamEvent], ChatResponse]:
        events = [event async for event in model.astream(ChatRequest([UserMessage("Rome?")]))]
        response = await model.achat(ChatRequest([UserMessage("hi")]))
        await model.aclose()
        return events, response

    events, response = asyncio.run(run())
    assert events == EXPECTED
    assert response.ai_message == AiMessage("async")


def test_stream_of_several_text_blocks_and_redacted_thinking(
    server: FakeServer, model: AnthropicChatModel
) -> None:
    server.reply(
        sse(
            {"type": "message_start", "message": message()},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "redacted_thinking", "data": "ENC"},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "text", "text": "a"},
            },
            {"type": "content_block_stop", "index": 1},
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {"type": "text", "text": "b"},
            },
            {"type": "content_block_stop", "index": 2},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 2},
            },
            {"type": "message_stop"},
        )
    )
    events = list(model.stream(ChatRequest([UserMessage("hi")])))
    assert events[:-1] == [PartialText("a"), PartialText("\n"), PartialText("b")]
    final = events[-1]
    assert isinstance(final, ChatResponse)
    assert final.ai_message == AiMessage("a\nb", attributes={"redacted_thinking": ["ENC"]})


# --- errors ---------------------------------------------------------------------------------


def test_errors_keep_status_and_message(server: FakeServer, model: AnthropicChatModel) -> None:
    server.reply(error(400, "invalid_request_error", "messages: roles must alternate"))
    with pytest.raises(ModelError) as caught:
        model.chat(ChatRequest([UserMessage("hi")]))
    assert (caught.value.status, caught.value.retriable) == (400, False)
    assert caught.value.provider_message == "messages: roles must alternate"
    assert caught.value.provider == "anthropic"

    server.reply(*[error(529, "overloaded_error", "Overloaded")] * 3)
    with pytest.raises(ModelError, match="Overloaded") as caught:
        model.chat(ChatRequest([UserMessage("hi")]))
    assert (caught.value.status, caught.value.retriable) == (529, True)
    assert len(server.requests) == 4  # 1 + the SDK's 2 retries of the overloaded call


def test_rate_limit_is_retried_by_the_sdk_then_succeeds(
    server: FakeServer, model: AnthropicChatModel
) -> None:
    server.reply(error(429, "rate_limit_error", "slow down"), Reply(body=message(text("ok"))))
    assert model.chat(ChatRequest([UserMessage("hi")])).ai_message.text == "ok"
    assert len(server.requests) == 2


def test_an_error_event_mid_stream(server: FakeServer, model: AnthropicChatModel) -> None:
    server.reply(
        sse(
            {"type": "message_start", "message": message()},
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        )
    )
    events: list[StreamEvent] = []
    with pytest.raises(ModelError, match="while streaming") as caught:
        events.extend(model.stream(ChatRequest([UserMessage("hi")])))
    assert caught.value.retriable
    assert events == []


def test_async_errors_are_mapped(server: FakeServer, model: AnthropicChatModel) -> None:
    server.reply(error(401, "authentication_error", "invalid x-api-key"))

    async def run() -> None:
        try:
            async for _ in model.astream(ChatRequest([UserMessage("hi")])):
                pass
        finally:
            await model.aclose()

    with pytest.raises(ModelError, match="check the API key") as caught:
        asyncio.run(run())
    assert caught.value.status == 401


# --- answers that are not the protocol's ----------------------------------------------------

NOT_JSON_OBJECTS = not_json_objects("{'content': []}", message(text("hi")))


@pytest.mark.parametrize("way", ["chat", "achat"])
@pytest.mark.parametrize(("reply", "said"), NOT_JSON_OBJECTS.values(), ids=NOT_JSON_OBJECTS)
def test_an_answer_that_is_not_a_json_object_is_a_model_error_not_retried(
    server: FakeServer, model: AnthropicChatModel, reply: Reply, said: str, way: str
) -> None:
    server.reply(reply)
    assert_unreadable(lambda: answer(model, way), said, "anthropic")
    assert len(server.requests) == 1


WRONG_SHAPES = {
    "no content": ({"type": "message", "role": "assistant"}, "`content` must be an array"),
    "content that is text": ({"content": "hi"}, "`content` must be an array"),
    "a block that is not an object": ({"content": [1]}, r"`content\[0\]` must be an object"),
    "a text block without text": (
        {"content": [{"type": "text", "text": 5}]},
        r"`content\[0\].text` must be a string",
    ),
}


@pytest.mark.parametrize("way", ["chat", "achat"])
@pytest.mark.parametrize(("body", "said"), WRONG_SHAPES.values(), ids=WRONG_SHAPES)
def test_an_answer_of_the_wrong_shape_is_a_model_error_that_says_where(
    server: FakeServer, model: AnthropicChatModel, body: dict[str, Any], said: str, way: str
) -> None:
    server.reply(Reply(body=body))
    with pytest.raises(ModelError, match=said) as caught:
        answer(model, way)
    assert "cannot read" in str(caught.value)
    assert not caught.value.retriable


def test_metadata_of_the_wrong_type_is_left_out(
    server: FakeServer, model: AnthropicChatModel
) -> None:
    body = {
        **message(text("Hi")),
        "id": 7,
        "model": None,
        "stop_reason": 1,
        "usage": {"input_tokens": "many", "output_tokens": "few"},
    }
    server.reply(Reply(body=body))
    expected = ChatResponse(ai_message=AiMessage("Hi"), token_usage=TokenUsage(0, 0))
    assert model.chat(ChatRequest([UserMessage("hi")])) == expected


NOT_EVENT_STREAMS = {
    "data that is not JSON": (Reply(events=[("message_start", "<b>hi</b>")]), "not JSON"),
    "data nested 100k deep": (Reply(events=[("message_start", DEEP)]), "nested too deeply"),
    "an HTML page": (Reply(text="<html>Log in to the proxy</html>"), "no stream events"),
    "a JSON answer": (Reply(body=message(text("hi"))), "no stream events"),
}


@pytest.mark.parametrize("way", ["stream", "astream"])
@pytest.mark.parametrize(("reply", "said"), NOT_EVENT_STREAMS.values(), ids=NOT_EVENT_STREAMS)
def test_a_stream_that_is_not_json_events_is_a_model_error_not_retried(
    server: FakeServer, model: AnthropicChatModel, reply: Reply, said: str, way: str
) -> None:
    server.reply(reply)
    with pytest.raises(ModelError, match=said) as caught:
        answer(model, way)
    assert not caught.value.retriable
    assert "check base_url" in str(caught.value)
    assert len(str(caught.value)) < 400
    assert len(server.requests) == 1


START = {"type": "message_start", "message": message()}
WRONG_EVENTS = {
    "a message that is text": (
        {"type": "message_start", "message": "hi"},
        "`message` must be an object",
    ),
    "a block that is text": (
        {"type": "content_block_start", "index": 0, "content_block": "hi"},
        "`content_block` must be an object",
    ),
    "an index that is not a number": (
        {"type": "content_block_start", "index": [0], "content_block": text("hi")},
        "`index` must be an integer",
    ),
    "a delta that is text": (
        {"type": "content_block_delta", "index": 0, "delta": "hi"},
        "`delta` must be an object",
    ),
}


@pytest.mark.parametrize("way", ["stream", "astream"])
@pytest.mark.parametrize(("event", "said"), WRONG_EVENTS.values(), ids=WRONG_EVENTS)
def test_an_event_of_the_wrong_shape_is_a_model_error_that_says_where(
    server: FakeServer, model: AnthropicChatModel, event: dict[str, Any], said: str, way: str
) -> None:
    events = [event] if event["type"] == "message_start" else [START, event]
    server.reply(sse(*events, {"type": "message_stop"}))
    with pytest.raises(ModelError, match=said) as caught:
        answer(model, way)
    assert "cannot read" in str(caught.value)
    assert not caught.value.retriable


def test_stream_metadata_and_text_of_the_wrong_type_are_left_out(
    server: FakeServer, model: AnthropicChatModel
) -> None:
    server.reply(
        sse(
            {"type": "message_start", "message": {**message(), "id": 7, "usage": None}},
            {"type": "content_block_start", "index": 0, "content_block": text("Hi")},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}},
            {"type": "content_block_stop"},  # no index: the first block
            {"type": "message_delta", "delta": {}, "usage": {"output_tokens": "many"}},
            {"type": "message_stop"},
        )
    )
    *_, final = model.stream(ChatRequest([UserMessage("hi")]))
    assert final == ChatResponse(
        ai_message=AiMessage("Hi"),
        token_usage=TokenUsage(0, 0),
        model_name="claude-sonnet-4-5-20250929",
    )


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("weather", {"type": "tool", "name": "weather"}),
    ],
)
def test_tool_choice_is_sent_in_anthropics_form(
    server: FakeServer, model: AnthropicChatModel, choice: str, sent: object
) -> None:
    server.reply(Reply(body=message(text("ok"))))
    model.chat(ChatRequest([UserMessage("Hi")], tools=[WEATHER], tool_choice=choice))
    assert server.requests[0].body["tool_choice"] == sent
