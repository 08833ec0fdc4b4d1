"""OpenAI chat-completions codec: exact dicts both ways, refusals, errors, and round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatmemory import (
    AiMessage,
    AudioContent,
    ChatMessage,
    Content,
    CustomMessage,
    DetailLevel,
    ImageContent,
    PdfFileContent,
    SerializationError,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
    from_openai,
    to_openai,
)
from chatmemory._errors import shorten
from chatmemory._frozen import FrozenDict
from tests.strategies import TEXTS, chat_messages, json_values

CALL = ToolExecutionRequest("call_1", "weather", '{"city":"Munich"}')

CONVERSATION: list[tuple[ChatMessage, dict[str, Any]]] = [
    (SystemMessage("Be brief."), {"role": "system", "content": "Be brief."}),
    (UserMessage("Hi"), {"role": "user", "content": "Hi"}),
    (UserMessage("Hi", name="Klaus"), {"role": "user", "content": "Hi", "name": "Klaus"}),
    (
        UserMessage(
            contents=[
                TextContent("What is this?"),
                ImageContent(url="https://x/cat.png", detail_level=DetailLevel.HIGH),
                ImageContent(base64_data="iVBOR", mime_type="image/png"),
                ImageContent(url="https://x/dog.png", detail_level=DetailLevel.AUTO),
                AudioContent(base64_data="UklG", mime_type="audio/wav"),
                AudioContent(base64_data="SUQz", mime_type="audio/mpeg"),
                PdfFileContent(base64_data="JVBERi0", mime_type="application/pdf"),
            ]
        ),
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "high"}},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64,iVBOR", "detail": "low"},
                },
                {"type": "image_url", "image_url": {"url": "https://x/dog.png", "detail": "auto"}},
                {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
                {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
                {
                    "type": "file",
                    "file": {
                        "filename": "document.pdf",
                        "file_data": "data:application/pdf;base64,JVBERi0",
                    },
                },
            ],
        },
    ),
    (
        UserMessage(contents=[TextContent("a")], name="n"),
        {"role": "user", "content": "a", "name": "n"},
    ),
    (
        UserMessage(contents=[TextContent("a"), TextContent("b")]),
        {
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        },
    ),
    (
        AiMessage(tool_execution_requests=[CALL]),
        {
            "role": "assistant",
            "content": "",  # not null: llama.cpp's server refuses it
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Munich"}'},
                }
            ],
        },
    ),
    (
        ToolExecutionResultMessage("call_1", "weather", "sunny"),
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ),
    (
        ToolExecutionResultMessage(
            "call_1", "weather", contents=[TextContent("a"), TextContent("")]
        ),
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": ""}],
        },
    ),
    (AiMessage("Sunny."), {"role": "assistant", "content": "Sunny."}),
    (AiMessage(""), {"role": "assistant", "content": ""}),
]


def test_writes_the_openai_message_dicts() -> None:
    messages = [message for message, _ in CONVERSATION]
    assert to_openai(messages) == [expected for _, expected in CONVERSATION]
    assert [list(d) for d in to_openai(messages)] == [list(d) for _, d in CONVERSATION]
    json.dumps(to_openai(messages))


def test_reads_what_it_writes() -> None:
    assert from_openai([expected for _, expected in CONVERSATION]) == [m for m, _ in CONVERSATION]
    assert to_openai([]) == []
    assert from_openai([]) == []
    assert from_openai(iter([{"role": "system", "content": "x"}])) == [SystemMessage("x")]


def test_drops_what_openai_cannot_hold() -> None:
    messages = [
        SystemMessage("s"),
        UserMessage(
            contents=[
                ImageContent(
                    url="https://x/a.png",
                    base64_data="AAAA",
                    mime_type="image/png",
                    detail_level=DetailLevel.ULTRA_HIGH,
                    revised_prompt="a cat",
                ),
                AudioContent(url="https://x/a.mp3", base64_data="SUQz", mime_type="Audio/MP3"),
                PdfFileContent(base64_data="JVBERi0"),
            ],
            attributes={"tenant": "acme"},
        ),
        AiMessage("a", thinking="hmm", tool_execution_requests=[CALL], attributes={"x": 1}),
        ToolExecutionResultMessage("call_1", "weather", "boom", is_error=True, attributes={"y": 2}),
    ]
    assert to_openai(messages) == [  # type: ignore[arg-type]
        {"role": "system", "content": "s"},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "high"}},
                {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
                {
                    "type": "file",
                    "file": {
                        "filename": "document.pdf",
                        "file_data": "data:application/pdf;base64,JVBERi0",
                    },
                },
            ],
        },
        {
            "role": "assistant",
            "content": "a",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Munich"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "boom"},
    ]


def test_subclasses_are_written_as_their_base() -> None:
    class Instructions(SystemMessage):
        pass

    assert to_openai([Instructions("x")]) == [{"role": "system", "content": "x"}]


# --- lenient reading ----------------------------------------------------------------------------

READS: list[tuple[list[dict[str, Any]], list[ChatMessage]]] = [
    ([{"role": "developer", "content": "Be brief."}], [SystemMessage("Be brief.")]),
    (
        [
            {
                "role": "system",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ],
        [SystemMessage("ab")],
    ),
    ([{"role": "system", "content": "x", "name": "boss"}], [SystemMessage("x")]),
    (
        [{"role": "user", "content": "x", "name": None, "extra": 1}],
        [UserMessage("x")],
    ),
    (
        [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
                    {"type": "image_url", "image_url": "https://x/b.png"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:;base64,AAAA", "detail": None},
                    },
                    {"type": "image_url", "image_url": {"url": "data:text/plain,hello"}},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64"}},
                    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "flac"}},
                    {"type": "file", "file": {"file_data": "JVBERi0", "filename": "a.pdf"}},
                    {"type": "file", "file": {"file_data": "data:;base64,JVBERi0"}},
                ],
            }
        ],
        [
            UserMessage(
                contents=[
                    ImageContent(url="https://x/a.png", detail_level=DetailLevel.AUTO),
                    ImageContent(url="https://x/b.png", detail_level=DetailLevel.AUTO),
                    ImageContent(base64_data="AAAA", detail_level=DetailLevel.AUTO),
                    ImageContent(url="data:text/plain,hello", detail_level=DetailLevel.AUTO),
                    ImageContent(url="data:image/png;base64", detail_level=DetailLevel.AUTO),
                    AudioContent(base64_data="AAAA", mime_type="audio/flac"),
                    PdfFileContent(base64_data="JVBERi0", mime_type="application/pdf"),
                    PdfFileContent(base64_data="JVBERi0", mime_type="application/pdf"),
                ]
            )
        ],
    ),
    (
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "I "},
                    {"type": "refusal", "refusal": "can't"},
                ],
                "reasoning_content": "policy",
                "refusal": None,
                "tool_calls": None,
                "annotations": [],
            }
        ],
        [AiMessage("I can't", thinking="policy")],
    ),
    (
        [
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": None, "type": "function", "function": {"name": "g", "arguments": ""}},
                    {"id": "c", "type": "function", "function": {"name": "h", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "latest call with that id wins"},
        ],
        [
            AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "f", "{}")]),
            AiMessage(
                tool_execution_requests=[
                    ToolExecutionRequest(None, "g", ""),
                    ToolExecutionRequest("c", "h", "{}"),
                ]
            ),
            ToolExecutionResultMessage("c", "h", "latest call with that id wins"),
        ],
    ),
    (
        [
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]},
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "x"}]},
        ],
        [
            AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "f")]),
            ToolExecutionResultMessage("c", "f", "x"),
        ],
    ),
]


@pytest.mark.parametrize(("given_dicts", "expected"), READS)
def test_reads_leniently(given_dicts: list[dict[str, Any]], expected: list[ChatMessage]) -> None:
    assert from_openai(given_dicts) == expected


def test_reads_mappings_that_are_not_dicts() -> None:
    message = FrozenDict({"role": "user", "content": ({"type": "text", "text": "x"},)})
    with pytest.raises(SerializationError, match="must be a string or an array of parts"):
        from_openai([message])
    assert from_openai([FrozenDict({"role": "user", "content": "x"})]) == [UserMessage("x")]


# --- refusals and errors ------------------------------------------------------------------------

WRITE_ERRORS: list[tuple[ChatMessage, str, str]] = [
    (CustomMessage({"a": 1}), "a CustomMessage has no OpenAI form; filter it out", "CustomMessage"),
    (
        UserMessage(contents=[TextContent("x"), VideoContent(url="https://x/v.mp4")]),
        "`contents[1]` is a video, which OpenAI chat completions cannot take",
        "VideoContent(url='https://x/v.mp4'",
    ),
    (
        UserMessage(contents=[ImageContent(base64_data="AAAA")]),
        "`contents[0]` has base64 data but no mime type, which OpenAI needs; set `mime_type`",
        "ImageContent(url=None, base64_data='AAAA'",
    ),
    (
        UserMessage(contents=[AudioContent(url="https://x/a.wav", mime_type="audio/wav")]),
        "`contents[0]` cannot be sent: OpenAI takes audio as base64 data in wav or mp3 format",
        "AudioContent(url='https://x/a.wav'",
    ),
    (
        UserMessage(contents=[AudioContent(base64_data="T2dn", mime_type="audio/ogg")]),
        "`contents[0]` cannot be sent",
        "audio/ogg",
    ),
    (
        UserMessage(contents=[AudioContent(base64_data="T2dn")]),
        "`contents[0]` cannot be sent",
        "mime_type=None",
    ),
    (
        UserMessage(contents=[PdfFileContent(url="https://x/a.pdf")]),
        "`contents[0]` has no base64 data, and OpenAI chat completions take PDFs only inline",
        "PdfFileContent(url='https://x/a.pdf'",
    ),
    (
        AiMessage(tool_execution_requests=[CALL, ToolExecutionRequest(None, "now")]),
        "`tool_execution_requests[1]` has no id, and OpenAI matches tool results to calls by id",
        "ToolExecutionRequest(None, 'now', '{}')",
    ),
    (
        ToolExecutionResultMessage(None, "weather", "sunny"),
        "`id` is missing: OpenAI tool messages answer a tool call by its id",
        "ToolExecutionResultMessage(None, 'weather', 'sunny')",
    ),
    (  # as LangChain4j builds it: `ToolExecutionResultMessage.from(null, null, "sunny")`
        ToolExecutionResultMessage(None, None, "sunny"),
        "`id` is missing: OpenAI tool messages answer a tool call by its id; give the result the "
        "id of the ToolExecutionRequest it answers",
        "ToolExecutionResultMessage(None, None, 'sunny')",
    ),
    (
        ToolExecutionResultMessage(
            "c", "film", contents=[TextContent("x"), VideoContent(url="https://x/v.mp4")]
        ),
        "`contents[1]` is a video, which OpenAI chat completions cannot take",
        "VideoContent(url='https://x/v.mp4'",
    ),
]


@pytest.mark.parametrize(("message", "says", "fragment"), WRITE_ERRORS)
def test_refuses_what_openai_cannot_hold(message: ChatMessage, says: str, fragment: str) -> None:
    with pytest.raises(SerializationError) as caught:
        to_openai([SystemMessage("first"), message])
    error = caught.value
    assert str(error).startswith(f"cannot convert the message at index 1 to OpenAI: {says}")
    assert error.fragment is not None
    assert fragment in error.fragment
    assert str(error).endswith(f"; in {shorten(error.fragment)!r}")


def test_a_result_with_an_id_needs_no_tool_name() -> None:
    # OpenAI tool messages do not name the tool; reading takes the name from the call
    messages: list[ChatMessage] = [AiMessage(tool_execution_requests=[CALL])]
    dicts = to_openai([*messages, ToolExecutionResultMessage(CALL.id, None, "sunny")])
    assert dicts[1] == {"role": "tool", "tool_call_id": CALL.id, "content": "sunny"}
    assert from_openai(dicts)[1] == ToolExecutionResultMessage(CALL.id, CALL.name, "sunny")


def test_tool_calls_without_text_are_written_with_empty_content_and_read_back_as_none() -> None:
    calls = [ToolExecutionRequest("c", "f", "{}")]
    for text in (None, ""):
        (written,) = to_openai([AiMessage(text, tool_execution_requests=calls)])
        assert written["content"] == ""
        assert from_openai([written]) == [AiMessage(tool_execution_requests=calls)]


def test_refuses_what_is_not_a_message() -> None:
    with pytest.raises(
        SerializationError, match=r'index 0 to OpenAI: the string "x" is not a chat'
    ):
        to_openai(["x"])  # type: ignore[list-item]


ASSISTANT = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c", "function": {"name": "f"}}],
}

READ_ERRORS: list[tuple[Any, str, str]] = [
    # (one message dict, what the error says, the fragment it quotes)
    ("hi", 'an OpenAI message must be an object, got the string "hi"', '"hi"'),
    ({"content": "x"}, "`role` is missing: every OpenAI message has a role", '{"content":"x"}'),
    ({"role": "function", "content": "x"}, '`role` is the string "function", expected system', ""),
    ({"role": 1}, "`role` is 1, expected system", '{"role":1}'),
    ({"role": "system"}, "`content` must be a string or an array of text parts, got null", ""),
    ({"role": "system", "content": "  "}, "SystemMessage.text must not be blank", '"  "'),
    (
        {"role": "system", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
        '`content[0]` is a "image_url" part, but this message holds only text parts',
        '{"type":"image_url"',
    ),
    (
        {"role": "system", "content": [{"text": "x"}]},
        "`content[0]` has no `type`, but this message holds only text parts",
        '{"text":"x"}',
    ),
    (
        {"role": "system", "content": ["x"]},
        '`content[0]` must be an object, got the string "x"',
        "",
    ),
    ({"role": "system", "content": [{"type": "text"}]}, "`content[0].text` is missing", "text"),
    (
        {"role": "system", "content": [{"type": "refusal", "refusal": "no"}]},
        '`content[0]` is a "refusal" part, but this message holds only text parts',
        "refusal",
    ),
    ({"role": "user", "content": None}, "`content` must be a string or an array of parts", ""),
    (
        {"role": "user", "content": []},
        "UserMessage(contents=...) needs at least one content",
        '"content":[]',
    ),
    ({"role": "user", "content": "x", "name": 3}, "`name` must be a string or null, got 3", "3"),
    ({"role": "user", "content": [7]}, "`content[0]` must be an object, got 7", "7"),
    ({"role": "user", "content": [{"text": "x"}]}, "`content[0].type` is missing: expected", ""),
    (
        {"role": "user", "content": [{"type": "video_url"}]},
        '`content[0].type` is the string "video_url": expected text, image_url, input_audio',
        "video_url",
    ),
    ({"role": "user", "content": [{"type": "text", "text": 1}]}, "`content[0].text` must be", ""),
    (
        {"role": "user", "content": [{"type": "image_url"}]},
        "`content[0].image_url` is missing: it holds the image's `url`",
        '{"type":"image_url"}',
    ),
    (
        {"role": "user", "content": [{"type": "image_url", "image_url": 5}]},
        "`content[0].image_url` must be an object, got 5",
        '"image_url":5',
    ),
    (
        {"role": "user", "content": [{"type": "image_url", "image_url": {}}]},
        "`content[0].image_url.url` is missing: an image part holds the image's URL",
        "{}",
    ),
    (
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "u", "detail": "x"}}],
        },
        '`content[0].image_url.detail` is the string "x", expected low, high, auto or null',
        '"detail":"x"',
    ),
    (
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "u", "detail": 1}}],
        },
        "`content[0].image_url.detail` is 1",
        '"detail":1',
    ),
    (
        {"role": "user", "content": [{"type": "input_audio"}]},
        "`content[0].input_audio` is missing: it holds `data` and `format`",
        "input_audio",
    ),
    (
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "A"}}]},
        "`content[0].input_audio.format` is missing: input audio names its format",
        '{"data":"A"}',
    ),
    (
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {"format": "wav"}}]},
        "`content[0].input_audio.data` is missing",
        "wav",
    ),
    (
        {"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]},
        "`content[0].file.file_id` refers to an uploaded file, which chatmemory cannot hold",
        '{"file_id":"file-1"}',
    ),
    (
        {"role": "user", "content": [{"type": "file", "file": {"filename": "a.pdf"}}]},
        "`content[0].file.file_data` is missing: a file part holds the PDF as a base64 data URL",
        "a.pdf",
    ),
    (
        {"role": "user", "content": [{"type": "file", "file": {"file_data": ["x"]}}]},
        "`content[0].file.file_data` must be a string, got an array",
        '["x"]',
    ),
    (
        {"role": "user", "content": [{"type": "file", "file": "x"}]},
        '`content[0].file` must be an object, got the string "x"',
        "",
    ),
    ({"role": "assistant", "content": 5}, "`content` must be a string or an array of text", ""),
    (
        {"role": "assistant", "content": [{"type": "refusal"}]},
        "`content[0].refusal` is missing: a refusal part holds a text",
        "refusal",
    ),
    (
        {"role": "assistant", "content": [{"type": "image_url"}]},
        '`content[0]` is a "image_url" part, but this message holds only text and refusal parts',
        "",
    ),
    ({"role": "assistant", "content": "x", "reasoning_content": 1}, "`reasoning_content` must", ""),
    ({"role": "assistant", "tool_calls": {}}, "`tool_calls` must be an array, got an object", ""),
    ({"role": "assistant", "tool_calls": ["c"]}, "`tool_calls[0]` must be an object", '"c"'),
    (
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "custom": {}}]},
        '`tool_calls[0].type` is the string "custom"; only "function" tool calls can be held',
        '"type":"custom"',
    ),
    (
        {"role": "assistant", "tool_calls": [{"id": "c"}]},
        "`tool_calls[0].function` is missing: it names the function and its arguments",
        '{"id":"c"}',
    ),
    (
        {"role": "assistant", "tool_calls": [{"id": "c", "function": "f"}]},
        '`tool_calls[0].function` must be an object, got the string "f"',
        "",
    ),
    (
        {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": 1}}]},
        "`tool_calls[0].function.name` must be a string, got 1",
        '{"name":1}',
    ),
    (
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]},
        "`tool_calls[0].function.arguments` must be a string or null, got an object",
        '"arguments":{}',
    ),
    (
        {"role": "assistant", "tool_calls": [{"id": 1, "function": {"name": "f"}}]},
        "`tool_calls[0].id` must be a string or null, got 1",
        '"id":1',
    ),
    (
        {"role": "tool", "content": "x"},
        "`tool_call_id` is missing: a tool message answers a tool call by its id",
        '{"role":"tool","content":"x"}',
    ),
    (
        {"role": "tool", "tool_call_id": "nope", "content": "x"},
        "`tool_call_id` is 'nope', but no earlier assistant message made a tool call with that id",
        '"tool_call_id":"nope"',
    ),
    (
        {"role": "tool", "tool_call_id": "c", "content": None},
        "`content` must be a string or an array of text parts, got null",
        '"content":null',
    ),
    (
        {"role": "tool", "tool_call_id": "c", "content": []},
        "ToolExecutionResultMessage(contents=...) needs at least one content",
        "[]",
    ),
]


@pytest.mark.parametrize(("item", "says", "fragment"), READ_ERRORS)
def test_unreadable_dicts_raise_a_serialization_error_naming_index_and_fragment(
    item: Any, says: str, fragment: str
) -> None:
    with pytest.raises(SerializationError) as caught:
        from_openai([ASSISTANT, item])
    error = caught.value
    assert str(error).startswith(f"cannot read the OpenAI message at index 1: {says}")
    assert error.fragment is not None
    assert fragment in error.fragment
    assert str(error).endswith(f"; in {shorten(error.fragment)!r}")


def test_a_failed_assistant_message_registers_no_tool_calls() -> None:
    broken = {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}, 1]}
    with pytest.raises(SerializationError, match="index 0"):
        from_openai([broken, {"role": "tool", "tool_call_id": "c", "content": "x"}])


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"role": "user", "content": "x"}, "dicts, got an object; wrap a single message in a list"),
        ("user", 'got the string "user"'),
        (b"[]", "got a Python bytes"),
        (5, "dicts, got 5; in '5'"),
        (None, "got null"),
    ],
)
def test_refuses_what_is_not_a_list_of_messages(value: Any, says: str) -> None:
    with pytest.raises(SerializationError) as caught:
        from_openai(value)
    assert str(caught.value).startswith("`from_openai` takes a list of OpenAI message dicts, ")
    assert says in str(caught.value)


# --- properties ---------------------------------------------------------------------------------

_B64 = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", max_size=12)
_OPENAI_LEVELS = st.sampled_from([DetailLevel.LOW, DetailLevel.HIGH, DetailLevel.AUTO])


def _expressible_contents() -> st.SearchStrategy[Content]:
    return st.one_of(
        st.builds(TextContent, TEXTS),
        st.builds(
            lambda path, level: ImageContent(url=f"https://example.com/{path}", detail_level=level),
            TEXTS,
            _OPENAI_LEVELS,
        ),
        st.builds(
            lambda data, mime, level: ImageContent(
                base64_data=data, mime_type=mime, detail_level=level
            ),
            _B64,
            st.sampled_from(["image/png", "image/jpeg", "image/webp", "image/gif"]),
            _OPENAI_LEVELS,
        ),
        st.builds(
            lambda data, mime: AudioContent(base64_data=data, mime_type=mime),
            _B64,
            st.sampled_from(["audio/wav", "audio/mpeg"]),
        ),
        st.builds(lambda data: PdfFileContent(base64_data=data, mime_type="application/pdf"), _B64),
    )


@st.composite
def openai_conversations(draw: st.DrawFn) -> list[ChatMessage]:
    """Conversations OpenAI can hold: every tool result answers an earlier call, by id."""
    calls: dict[str, str] = {}
    messages: list[ChatMessage] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
        if kind == "system":
            messages.append(SystemMessage(draw(TEXTS.filter(str.strip))))
        elif kind == "user":
            name = draw(st.none() | TEXTS)
            if draw(st.booleans()):
                messages.append(UserMessage(draw(TEXTS), name=name))
            else:
                items = draw(st.lists(_expressible_contents(), min_size=1, max_size=4))
                messages.append(UserMessage(contents=items, name=name))
        elif kind == "assistant":
            requests = draw(
                st.lists(st.builds(ToolExecutionRequest, TEXTS, TEXTS, TEXTS), max_size=3)
            )
            for request in requests:  # a later call with the same id wins, as when reading
                calls[request.id] = request.name  # type: ignore[index]
            text = draw(st.none() | TEXTS)
            if text == "" and requests:  # written as no text is: "" (llama.cpp refuses null)
                text = None
            messages.append(AiMessage(text, tool_execution_requests=requests))
        elif calls:
            call_id = draw(st.sampled_from(sorted(calls)))
            texts = draw(st.lists(TEXTS, min_size=1, max_size=3))
            messages.append(
                ToolExecutionResultMessage(
                    call_id, calls[call_id], contents=[TextContent(t) for t in texts]
                )
            )
    return messages


@given(openai_conversations())
def test_expressible_conversations_survive_a_round_trip(messages: list[ChatMessage]) -> None:
    dicts = to_openai(messages)
    json.dumps(dicts)
    assert from_openai(dicts) == messages
    assert from_openai(json.loads(json.dumps(dicts))) == messages


def _answers_earlier_calls(messages: list[ChatMessage]) -> bool:
    """Whether every tool result answers a tool call made earlier in `messages`."""
    calls: set[str | None] = set()
    for message in messages:
        if isinstance(message, AiMessage):
            calls.update(request.id for request in message.tool_execution_requests)
        elif isinstance(message, ToolExecutionResultMessage) and message.id not in calls:
            return False
    return True


@given(st.lists(chat_messages(), max_size=5))
def test_any_messages_convert_or_raise_serialization_error(messages: list[ChatMessage]) -> None:
    try:
        dicts = to_openai(messages)
    except SerializationError:
        return
    json.dumps(dicts)
    if _answers_earlier_calls(messages):
        assert len(from_openai(dicts)) == len(messages)
    else:
        with pytest.raises(SerializationError, match="no earlier assistant message made a tool"):
            from_openai(dicts)


_ROLES = st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", ""])
_OPENAI_KEYS = st.sampled_from(
    [
        "role",
        "content",
        "name",
        "tool_calls",
        "tool_call_id",
        "type",
        "text",
        "image_url",
        "url",
        "detail",
        "input_audio",
        "data",
        "format",
        "file",
        "file_data",
        "file_id",
        "function",
        "arguments",
        "id",
        "refusal",
        "reasoning_content",
    ]
)
OPENAI_SHAPED = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXTS | _ROLES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_OPENAI_KEYS, inner, max_size=5),
    max_leaves=20,
)


@given(st.lists(OPENAI_SHAPED | json_values(), max_size=4) | OPENAI_SHAPED)
def test_any_input_reads_or_raises_serialization_error(value: Any) -> None:
    try:
        messages = from_openai(value)
    except SerializationError as error:
        str(error).encode("utf-8")
        return
    assert isinstance(messages, list)


def test_a_tool_results_media_follow_the_tool_messages_in_a_user_message() -> None:
    calls = [ToolExecutionRequest("c1", "plot", "{}"), ToolExecutionRequest("c2", "add", "{}")]
    image = ImageContent(url="https://x/p.png")
    messages: list[ChatMessage] = [
        UserMessage("Plot it"),
        AiMessage(tool_execution_requests=calls),
        ToolExecutionResultMessage("c1", "plot", contents=[TextContent("A plot."), image]),
        ToolExecutionResultMessage("c2", "add", "3"),
        AiMessage("Here."),
        ToolExecutionResultMessage("c9", "pic", contents=[image]),
    ]
    written = to_openai(messages)
    note = "(what else the tool returned follows in a user message naming the call c1)"
    image_part = {"type": "image_url", "image_url": {"url": "https://x/p.png", "detail": "low"}}
    assert written[2:] == [
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": [{"type": "text", "text": "A plot."}, {"type": "text", "text": note}],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "3"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "What the tool call c1 returned:"}, image_part],
        },
        {"role": "assistant", "content": "Here."},
        {
            "role": "tool",
            "tool_call_id": "c9",
            "content": [{"type": "text", "text": note.replace("c1", "c9")}],
        },
        {
            "role": "user",
            "content": [{"type": "text", "text": "What the tool call c9 returned:"}, image_part],
        },
    ]


def test_a_tool_result_of_several_texts_stays_one_tool_message() -> None:
    result = ToolExecutionResultMessage("c", "t", contents=[TextContent("a"), TextContent("b")])
    assert to_openai([result]) == [
        {
            "role": "tool",
            "tool_call_id": "c",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        }
    ]
