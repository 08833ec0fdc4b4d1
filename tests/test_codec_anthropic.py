"""`to_anthropic` / `from_anthropic`: Anthropic's Messages API messages, both ways."""

from __future__ import annotations

from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    AudioContent,
    ChatMessage,
    CustomMessage,
    ImageContent,
    PdfFileContent,
    SerializationError,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
    from_anthropic,
    to_anthropic,
)

CONVERSATION: list[ChatMessage] = [
    SystemMessage("Be terse."),
    UserMessage("Weather in Oslo and Rome?"),
    AiMessage(
        "Checking.",
        thinking="Two calls.",
        tool_execution_requests=[
            ToolExecutionRequest("t1", "weather", '{"city":"Oslo"}'),
            ToolExecutionRequest("t2", "weather", '{"city":"Rome"}'),
        ],
        attributes={"thinking_signature": "sig", "redacted_thinking": ["ENC"]},
    ),
    ToolExecutionResultMessage("t1", "weather", "snow"),
    ToolExecutionResultMessage("t2", "weather", "sun", is_error=False),
    UserMessage(
        contents=[
            TextContent("And this?"),
            ImageContent(base64_data="iVBO", mime_type="image/png"),
            ImageContent(url="https://example.com/a.png"),
            PdfFileContent(base64_data="JVBE", mime_type="application/pdf"),
            PdfFileContent(url="https://example.com/a.pdf"),
        ]
    ),
    AiMessage("A cat and a PDF."),
]


def test_the_system_prompt_goes_apart_and_tool_results_form_one_turn() -> None:
    system, messages = to_anthropic(CONVERSATION)
    assert system == "Be terse."
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "user", "assistant"]
    assert messages[1]["content"] == [
        {"type": "thinking", "thinking": "Two calls.", "signature": "sig"},
        {"type": "redacted_thinking", "data": "ENC"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}},
        {"type": "tool_use", "id": "t2", "name": "weather", "input": {"city": "Rome"}},
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "snow"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "sun", "is_error": False},
    ]
    assert messages[3]["content"][1:3] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
    ]


def test_round_trip_is_lossless() -> None:
    assert from_anthropic(*to_anthropic(CONVERSATION)) == CONVERSATION


def test_several_system_messages_join_and_system_blocks_read_back() -> None:
    system, messages = to_anthropic([SystemMessage("A"), UserMessage("hi"), SystemMessage("B")])
    assert system == "A\n\nB"
    assert messages == [{"role": "user", "content": "hi"}]
    blocks = [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]
    assert from_anthropic(blocks, []) == [SystemMessage("A"), SystemMessage("B")]
    assert from_anthropic(None, []) == []


def test_what_anthropic_lacks_is_dropped_on_write() -> None:
    unsigned = AiMessage("hi", thinking="from an OpenAI-compatible server")
    named = UserMessage("hi", name="ann", attributes={"k": 1})
    _, messages = to_anthropic([named, unsigned])
    assert messages == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
    ]
    pdf = UserMessage(contents=[TextContent("x"), PdfFileContent(base64_data="JVBE")])
    _, messages = to_anthropic([pdf])
    assert messages[0]["content"][1]["source"]["media_type"] == "application/pdf"


DEEP_ARGUMENTS = '{"a": ' * 100_000 + "1" + "}" * 100_000


@pytest.mark.parametrize(
    ("message", "match"),
    [
        (CustomMessage({"a": 1}), "CustomMessage has no Anthropic form"),
        (UserMessage(contents=[AudioContent(url="https://a")]), "AudioContent"),
        (UserMessage(contents=[VideoContent(url="https://v")]), "VideoContent"),
        (UserMessage(contents=[ImageContent(base64_data="x")]), "no mime type"),
        (AiMessage(tool_execution_requests=[ToolExecutionRequest(None, "t")]), "has no id"),
        (
            AiMessage(tool_execution_requests=[ToolExecutionRequest("i", "t", "[1]")]),
            "not a JSON object",
        ),
        (
            AiMessage(tool_execution_requests=[ToolExecutionRequest("i", "t", DEEP_ARGUMENTS)]),
            "nested too deeply to read",
        ),
        (ToolExecutionResultMessage(None, None, "r"), "tool_use block by its id"),
        (
            ToolExecutionResultMessage("i", "t", contents=[PdfFileContent(url="https://p")]),
            "in a tool result",
        ),
    ],
)
def test_what_anthropic_cannot_hold_is_refused(message: ChatMessage, match: str) -> None:
    with pytest.raises(SerializationError, match=match) as caught:
        to_anthropic([UserMessage("first"), message])
    assert "index 1" in str(caught.value)
    assert len(str(caught.value)) < 400  # arguments 100k deep are quoted, not copied


def test_reading_is_lenient_where_it_costs_nothing() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": "plain"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
                {"type": "text", "text": "b"},
                {"type": "tool_use", "id": "t", "name": "f", "input": None},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t"},
                {"type": "tool_result", "tool_use_id": "unknown", "content": [
                    {"type": "text", "text": "r"},
                    {"type": "image", "source": {"type": "url", "url": "https://i"}},
                ]},
                {"type": "text", "text": "thanks"},
            ],
        },
    ]  # fmt: skip
    assert from_anthropic("", messages) == [
        AiMessage("plain"),
        AiMessage("a\nb", tool_execution_requests=[ToolExecutionRequest("t", "f", "{}")]),
        ToolExecutionResultMessage("t", "f", ""),
        ToolExecutionResultMessage(
            "unknown", None, contents=[TextContent("r"), ImageContent(url="https://i")]
        ),
        UserMessage("thanks"),
    ]


def _result(**fields: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", **fields}]}


def _assistant(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


@pytest.mark.parametrize(
    ("system", "messages", "match"),
    [
        (None, {"role": "user"}, "list of Anthropic message dicts"),
        (None, ["x"], "must be an object"),
        (None, [{"role": "system", "content": "x"}], "expected user or assistant"),
        (None, [{"role": "user"}], "string or an array of blocks"),
        (None, [{"role": "user", "content": [1]}], "must be an object"),
        (None, [{"role": "user", "content": [{"type": "audio"}]}], "expected text, image"),
        (None, [{"role": "user", "content": [{"type": "image"}]}], "source"),
        (
            None,
            [{"role": "user", "content": [{"type": "image", "source": {"type": "file"}}]}],
            "expected base64 or url",
        ),
        (None, [_result(is_error=1)], "must be a boolean"),
        (None, [_result(content=5)], "non-empty array"),
        (None, [_assistant({"type": "tool_use", "id": "t"})], "names its tool"),
        ([{"type": "image"}], [], "must be a text block"),
        (5, [], "string or a list of text blocks"),
        (None, [{"role": "user", "content": [{"type": "text", "text": 5}]}], "must be a string"),
    ],
)
def test_unreadable_input_names_where(system: Any, messages: Any, match: str) -> None:
    with pytest.raises(SerializationError, match=match):
        from_anthropic(system, messages)


def test_a_message_breaking_its_own_rules_is_a_serialization_error() -> None:
    blank = [{"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]}]
    with pytest.raises(SerializationError, match="index 0"):
        from_anthropic(None, blank)
