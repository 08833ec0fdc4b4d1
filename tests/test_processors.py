"""Memory processors: Mastra's G2 processor tests (research/mastra-memory.md §5), re-created in
our message model with real tool call/result pairs, plus what we do beyond Mastra."""

from __future__ import annotations

import json
import typing
from collections.abc import Sequence
from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    AudioContent,
    ChatMessage,
    ConfigurationError,
    CustomMessage,
    ImageContent,
    MemoryProcessor,
    OpenAiTokenCountEstimator,
    PdfFileContent,
    Processor,
    SystemMessage,
    TextContent,
    TokenLimiter,
    ToolCallFilter,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
    apply_processors,
)
from chatmemory._messages import memo
from chatmemory._policies import ToolGroup, atomic_units, tool_groups

# --- Mastra's fixture (packages/memory/integration-tests/src/test-utils.ts), real tool pairs ---

WORDS = "apple banana orange grape"
USER_TEXT = " ".join([WORDS] * 25)  # 100 words
ASSISTANT_TEXT = " ".join([WORDS] * 15)  # 60 words
TOOL_ARGS = {
    "weather": {"location": "New York"},
    "calculator": {"expression": "2+2"},
    "search": {"query": "latest AI developments"},
}
TOOL_RESULTS = {"weather": "Pretty hot", "calculator": "4", "search": "Anthropic blah blah blah"}
ENCODINGS = ["o200k_base", "cl100k_base"]
NO_TOOLS = 1_000  # a tool frequency no conversation here reaches


def conversation(
    pairs: int,
    tool_frequency: int = 3,
    tool_names: Sequence[str] = ("weather", "calculator", "search"),
) -> list[ChatMessage]:
    """N user/assistant turn pairs; the assistant turn `i > 0` with `i % tool_frequency == 0`
    is a tool step: "Using <tool> tool:" with a call, then the tool's result message. Like
    Mastra, a conversation ending in a tool step gets one more user turn."""
    messages: list[ChatMessage] = []
    for i in range(pairs):
        messages.append(UserMessage(USER_TEXT, attributes={"id": f"message-{2 * i}"}))
        if i > 0 and i % tool_frequency == 0:
            name = tool_names[(i // tool_frequency) % len(tool_names)]
            arguments = json.dumps(TOOL_ARGS[name], separators=(",", ":"))
            request = ToolExecutionRequest(f"tool-{i}", name, arguments)
            messages.append(
                AiMessage(
                    f"Using {name} tool:",
                    tool_execution_requests=[request],
                    attributes={"id": f"tool-call-{2 * i + 1}"},
                )
            )
            messages.append(
                ToolExecutionResultMessage(
                    f"tool-{i}", name, TOOL_RESULTS[name], attributes={"id": f"tool-result-{i}"}
                )
            )
        else:
            messages.append(AiMessage(ASSISTANT_TEXT, attributes={"id": f"message-{2 * i + 1}"}))
    if isinstance(messages[-1], ToolExecutionResultMessage):
        messages.append(UserMessage(USER_TEXT, attributes={"id": f"message-{len(messages) + 2}"}))
    return messages


def ids(messages: Sequence[ChatMessage]) -> list[str]:
    return [message.attributes["id"] for message in messages]  # type: ignore[union-attr]


def call(id: str | None, name: str, arguments: str = "{}", text: str | None = None) -> AiMessage:
    return AiMessage(text, tool_execution_requests=[ToolExecutionRequest(id, name, arguments)])


def result(id: str | None, name: str, text: str = "ok") -> ToolExecutionResultMessage:
    return ToolExecutionResultMessage(id, name, text)


def tool_traffic(messages: Sequence[ChatMessage]) -> list[str]:
    """The tool names of every call and result in `messages`."""
    names: list[str] = []
    for message in messages:
        if isinstance(message, AiMessage):
            names += [request.name for request in message.tool_execution_requests]
        elif isinstance(message, ToolExecutionResultMessage):
            names.append(message.tool_name)  # type: ignore[arg-type]
    return names


# --- TokenLimiter: golden counts ---------------------------------------------------------


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_golden_counts_match_mastra(encoding: str) -> None:
    limiter = TokenLimiter(1000, encoding)
    assert limiter.count_text("Hello") == 1
    assert limiter.count_message(UserMessage("Hello")) == 2 + 3.8  # "userHello" is 2 tokens
    assert limiter.count_message(UserMessage(USER_TEXT)) == 104.8  # 101 + 3.8
    assert limiter.count_message(AiMessage(ASSISTANT_TEXT)) == 64.8  # 61 + 3.8
    assert limiter.count_message(SystemMessage("Hello")) == 2 + 3.8  # "systemHello"
    assert limiter.count_text(USER_TEXT) == 100


def test_counts_are_floats_with_mastra_constants() -> None:
    assert TokenLimiter.TOKENS_PER_MESSAGE == 3.8
    assert TokenLimiter.TOKENS_PER_CONVERSATION == 24
    assert TokenLimiter.JSON_CORRECTION == -12
    assert isinstance(TokenLimiter(10).count_message(UserMessage("Hello")), float)


def test_pure_tool_call_is_clamped_at_zero_where_mastra_counts_minus_4() -> None:
    limiter = TokenLimiter(1000)
    # "assistantweather{"location":"New York"}" is 8 tokens; no 3.8 (pure call), -12 for JSON.
    pure_call = call("1", "weather", '{"location":"New York"}')
    assert limiter.count_text('assistantweather{"location":"New York"}') == 8
    assert limiter.count_message(pure_call) == 0.0
    # A pure JSON tool result: "tool{"a": 1}" is 7 tokens, -12 for JSON, clamped too.
    assert limiter.count_message(result("1", "x", '{"a": 1}')) == 0.0


def test_a_clamped_message_does_not_enlarge_the_budget() -> None:
    limiter = TokenLimiter(24 + 6)  # room for one "Hello" (5.8), not for two
    history = [
        UserMessage("Hello"),
        call("1", "weather", '{"location":"New York"}'),
        result("1", "weather", '{"t": 1}'),
        UserMessage("Hello"),
    ]
    # Mastra's -4 would have let the second "Hello" in; ours counts the pair as 0.
    assert limiter.process(history) == history[1:]  # type: ignore[arg-type]


def test_json_correction_applies_to_json_objects_and_arrays_only() -> None:
    limiter = TokenLimiter(1000)

    def tokens(text: str) -> float:
        return float(limiter.count_text(text))

    text_and_call = AiMessage(
        "Using weather tool:",
        tool_execution_requests=[ToolExecutionRequest("tool-9", "weather", '{"location":"NY"}')],
    )
    assert limiter.count_message(text_and_call) == pytest.approx(
        tokens('assistantUsing weather tool:weather{"location":"NY"}') + 3.8 - 12
    )
    for arguments in ["New York", "{oops", '"quoted"', "42"]:  # not an object: no correction
        message = call("1", "lookup", arguments, text="Looking it up.")
        expected = tokens(f"assistantLooking it up.lookup{arguments}") + 3.8
        assert limiter.count_message(message) == pytest.approx(expected), arguments
    two_calls = AiMessage(
        "Both:",
        tool_execution_requests=[
            ToolExecutionRequest("1", "weather", '["a", "b", "c", "d"]'),
            ToolExecutionRequest("2", "weather", '{"location": "Paris, France, Europe"}'),
        ],
    )
    string = 'assistantBoth:weather["a", "b", "c", "d"]weather{"location": "Paris, France, Europe"}'
    assert tokens(string) + 3.8 - 24 > 0  # one correction per JSON argument, no clamping here
    assert limiter.count_message(two_calls) == pytest.approx(tokens(string) + 3.8 - 24)
    # A call always counts its name, even with empty arguments (Mastra skipped it).
    assert limiter.count_message(call("1", "ping", "", text="x")) == tokens("assistantxping") + 3.8


def test_json_nested_too_deeply_to_parse_counts_as_text() -> None:
    limiter = TokenLimiter(1000)
    deep = "[" * 100_000 + "]" * 100_000
    call = AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "t", deep)])
    result = ToolExecutionResultMessage("c", "t", deep)
    assert limiter.count_message(call) > limiter.count_text(deep)
    assert limiter.count_message(result) > limiter.count_text(deep)


def test_tool_results_count_their_text_without_the_message_overhead() -> None:
    limiter = TokenLimiter(1000)
    assert limiter.count_message(result("tool-9", "weather", "Pretty hot")) == 3.0
    long_json = json.dumps({"forecast": [WORDS] * 5})
    assert limiter.count_message(result("1", "weather", long_json)) == pytest.approx(
        limiter.count_text("tool" + long_json) - 12
    )


def test_thinking_custom_and_empty_messages_are_counted() -> None:
    limiter = TokenLimiter(1000)
    assert limiter.count_message(AiMessage("hi", thinking="hmm")) == pytest.approx(
        limiter.count_text("assistanthmmhi") + 3.8
    )
    thinking_and_call = AiMessage(
        thinking="hmm", tool_execution_requests=[ToolExecutionRequest("1", "f", "x")]
    )
    assert limiter.count_message(thinking_and_call) == pytest.approx(
        limiter.count_text("assistanthmmfx") + 3.8
    )
    assert limiter.count_message(AiMessage()) == pytest.approx(
        limiter.count_text("assistant") + 3.8
    )
    assert limiter.count_message(AiMessage("")) == limiter.count_message(AiMessage())
    custom = CustomMessage({"kind": "note", "items": [1, 2]})
    assert limiter.count_message(custom) == pytest.approx(
        limiter.count_text('custom{"kind": "note", "items": [1, 2]}') + 3.8
    )


def test_media_cost_flat_amounts() -> None:
    limiter = TokenLimiter(1000)
    hello = limiter.count_message(UserMessage("Hello"))
    image = UserMessage(contents=[TextContent("Hello"), ImageContent(url="https://x/cat.png")])
    assert limiter.count_message(image) == pytest.approx(hello + 765)
    audio = UserMessage(contents=[TextContent("Hello"), AudioContent(base64_data="A" * 400)])
    assert limiter.count_message(audio) == pytest.approx(hello + 75)  # 300 bytes / 4
    odd = UserMessage(contents=[TextContent("Hello"), VideoContent(base64_data="AAAA")])
    assert limiter.count_message(odd) == pytest.approx(hello + 1)  # 3 bytes round up to 1
    pdf = UserMessage(contents=[TextContent("Hello"), PdfFileContent(url="https://x/a.pdf")])
    assert limiter.count_message(pdf) == pytest.approx(hello + 258)
    screenshot = ToolExecutionResultMessage(
        "1", "screenshot", contents=[ImageContent(base64_data="iVBOR", mime_type="image/png")]
    )
    assert limiter.count_message(screenshot) == pytest.approx(limiter.count_text("tool") + 765)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_special_token_text_counts_as_plain_text_and_never_raises(encoding: str) -> None:
    limiter = TokenLimiter(1000, encoding)
    text = "x <|endoftext|>"
    assert limiter.count_text(text) == (8 if encoding == "o200k_base" else 7)
    assert limiter.count_text("<|endofprompt|><|fim_prefix|>") > 2
    history = [
        UserMessage(text),
        call("1", "run", '{"cmd": "<|endoftext|>"}'),
        result("1", "run", "<|endoftext|>"),
        AiMessage("<|endoftext|>", thinking="<|endofprompt|>"),
        SystemMessage("<|endoftext|>"),
    ]
    kept = limiter.process(
        history,  # type: ignore[arg-type]
        system_message="<|endoftext|>",
        memory_system_message="<|endofprompt|>",
        new_messages=[UserMessage("<|endoftext|>")],
    )
    assert kept == history


def test_counts_are_cached_per_message_and_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    history = conversation(5, tool_frequency=2)
    limiter = TokenLimiter(100_000)
    limiter.process(history)
    assert all("chatmemory.TokenLimiter:o200k_base" in memo(message) for message in history)
    encoded: list[str] = []

    class Spy(OpenAiTokenCountEstimator):
        def count_text(self, text: str) -> int:
            encoded.append(text)
            return super().count_text(text)

    assert TokenLimiter(100_000, Spy()).process(history) == history  # shares the o200k counts
    assert encoded == []
    TokenLimiter(100_000, Spy(encoding="cl100k_base")).process(history[:1])  # another does not
    assert encoded == ["user" + USER_TEXT]


# --- TokenLimiter: trimming --------------------------------------------------------------


def test_limits_messages_to_the_specified_token_count() -> None:
    # Mastra: 5 pairs, no tools, limit 200 -> exactly [message-8, message-9].
    # 24 + 64.8 + 104.8 = 193.6 fits; one more assistant turn would make 258.4.
    assert ids(TokenLimiter(200).process(conversation(5, NO_TOOLS))) == ["message-8", "message-9"]
    # With a tool step at turn 3 the result is the same: the step is older than the cut.
    assert ids(TokenLimiter(200).process(conversation(5))) == ["message-8", "message-9"]


def test_the_limit_is_inclusive_and_compared_exactly() -> None:
    history = conversation(5, NO_TOOLS)
    assert ids(TokenLimiter(193).process(history)) == ["message-9"]
    assert ids(TokenLimiter(194).process(history)) == ["message-8", "message-9"]
    assert len(TokenLimiter(258).process(history)) == 2
    assert len(TokenLimiter(259).process(history)) == 3
    # 24 + 25 * 5.8 is exactly 169; summing floats would give 169.00000000000006.
    hellos: list[ChatMessage] = [UserMessage("Hello") for _ in range(30)]
    assert len(TokenLimiter(169).process(hellos)) == 25
    assert len(TokenLimiter(168).process(hellos)) == 24


def test_handles_an_empty_message_list() -> None:
    assert TokenLimiter(200).process([]) == []
    assert TokenLimiter(200, trim="best_fit").process([], new_messages=[UserMessage("hi")]) == []


@pytest.mark.parametrize("encoding", [None, "cl100k_base"])
def test_uses_different_encodings_based_on_configuration(encoding: str | None) -> None:
    history = conversation(1)
    limiter = TokenLimiter(1000) if encoding is None else TokenLimiter(1000, encoding)
    assert limiter.process(history) == history


def test_newest_message_alone_over_the_limit_gives_nothing() -> None:
    history = [UserMessage("Hello"), UserMessage(USER_TEXT)]
    assert TokenLimiter(100).process(history) == []
    assert TokenLimiter(24).process(history) == []  # the conversation overhead alone fills it


def test_system_message_consumes_budget() -> None:
    history = conversation(5)
    # System prompt = 100 tokens + 3.8: 24 + 103.8 + 64.8 = 192.6, the user turn no longer fits.
    assert ids(TokenLimiter(200).process(history, system_message=USER_TEXT)) == ["message-9"]
    assert TokenLimiter(127).process(history, system_message=USER_TEXT) == []
    assert TokenLimiter(200).process(history, system_message="") == history[-2:]


def test_memory_system_message_is_not_counted_twice_when_inside_the_system_message() -> None:
    history = conversation(5)
    instructions = "Be brief.\n" + USER_TEXT
    system_cost = TokenLimiter(1).count_text(instructions) + 3.8
    limiter = TokenLimiter(int(24 + system_cost + 64.8) + 1)  # the assistant turn, no more
    with_system = limiter.process(history, system_message=instructions)
    assert ids(with_system) == ["message-9"]
    both = limiter.process(history, system_message=instructions, memory_system_message=USER_TEXT)
    assert both == with_system  # counted once, as part of the system message
    # Not contained in the system message: counted on its own, and then nothing fits.
    other = USER_TEXT.replace("apple", "pear")
    assert limiter.process(history, system_message=instructions, memory_system_message=other) == []
    assert ids(limiter.process(history, memory_system_message=USER_TEXT)) == ["message-9"]
    assert limiter.process(history, system_message="", memory_system_message="") == history[-2:]


def test_new_messages_are_counted_but_never_returned() -> None:
    history = conversation(5)
    new: list[ChatMessage] = [UserMessage(ASSISTANT_TEXT)]  # "user" + 60 words: 61 + 3.8
    kept = TokenLimiter(200).process(history, new_messages=new)
    assert ids(kept) == ["message-9"]  # 24 + 64.8 + 64.8 = 153.6; the user turn would pass 200
    assert new[0] not in kept
    # When the new input alone does not fit, nothing of the history is kept (Mastra too).
    assert TokenLimiter(80).process(history, new_messages=new) == []
    assert TokenLimiter(80, trim="best_fit").process(history, new_messages=new) == []


def test_new_messages_are_mandatory_under_best_fit_too() -> None:
    history: list[ChatMessage] = [UserMessage("Hello")]
    new: list[ChatMessage] = [UserMessage(USER_TEXT)]
    # Best fit must not skip the new message (it will be sent) and fill the budget with history.
    assert TokenLimiter(100, trim="best_fit").process(history, new_messages=new) == []
    assert TokenLimiter(135, trim="best_fit").process(history, new_messages=new) == history


def test_mastra_integration_limit_250_on_10_pairs_with_tools() -> None:
    history = conversation(10)
    kept = TokenLimiter(250).process(history)
    # 24 + 104.8 (last user) + 6.8 (weather call 3.8 + result 3.0) + 104.8 = 240.4 <= 250.
    assert ids(kept) == ["message-18", "tool-call-19", "tool-result-9", "message-25"]
    assert kept[2] == ToolExecutionResultMessage(
        "tool-9", "weather", "Pretty hot", attributes={"id": "tool-result-9"}
    )
    assert TokenLimiter(3000).process(history) == history
    assert len(history) == 24  # 20 turns, 3 of them tool steps (+1 message each), +1 user turn


def test_a_result_never_outlives_its_call() -> None:
    big_call = AiMessage(USER_TEXT, tool_execution_requests=[ToolExecutionRequest("1", "f")])
    history: list[ChatMessage] = [
        UserMessage("Hello"),
        big_call,
        result("1", "f", "Pretty hot"),
        AiMessage("Hello"),
    ]
    # Mastra would keep [result, AiMessage("Hello")]: a tool message without its call.
    assert TokenLimiter(50).process(history) == [history[3]]
    assert TokenLimiter(50, trim="best_fit").process(history) == [history[0], history[3]]
    assert TokenLimiter(300).process(history) == history


def test_a_call_never_outlives_its_results() -> None:
    parallel = AiMessage(
        tool_execution_requests=[ToolExecutionRequest("a", "f"), ToolExecutionRequest("b", "g")]
    )
    history: list[ChatMessage] = [
        UserMessage("Hello"),
        parallel,
        result("a", "f", USER_TEXT),  # too big for the budget
        result("b", "g", "Hello"),
        AiMessage("Hello"),
    ]
    for trim in ("contiguous", "best_fit"):
        kept = TokenLimiter(60, trim=trim).process(history)
        assert parallel not in kept
        assert history[3] not in kept
        assert kept[-1] == history[4]


def test_a_call_answered_in_new_messages_is_kept_with_them() -> None:
    step = call("c1", "weather", '{"location":"Paris"}', text=ASSISTANT_TEXT)
    history: list[ChatMessage] = [UserMessage(USER_TEXT), UserMessage("Hello"), step]
    new: list[ChatMessage] = [result("c1", "weather", "Sunny")]
    limiter = TokenLimiter(1000)
    cost = 24 + limiter.count_message(step) + limiter.count_message(new[0])
    kept = TokenLimiter(int(cost) + 1).process(history, new_messages=new)
    assert kept == [step]  # "Hello" (5.8) would not fit: the call came first
    assert TokenLimiter(int(cost) + 7).process(history, new_messages=new) == history[1:]
    # The call with its new result does not fit: nothing is returned (the caller is over anyway).
    assert TokenLimiter(int(cost) - 1).process(history, new_messages=new) == []


def test_best_fit_keeps_older_messages_that_fit_where_contiguous_stops() -> None:
    history: list[ChatMessage] = [UserMessage("Hello"), UserMessage(USER_TEXT), AiMessage("Hello")]
    limit = 24 + 6 + 6
    assert TokenLimiter(limit).process(history) == [history[2]]
    assert TokenLimiter(limit, trim="best_fit").process(history) == [history[0], history[2]]
    assert TokenLimiter(limit, trim="best_fit").trim == "best_fit"


def test_system_messages_inside_the_history_can_be_dropped() -> None:
    history: list[ChatMessage] = [SystemMessage(USER_TEXT), UserMessage("Hello")]
    assert TokenLimiter(100).process(history) == [history[1]]


def test_limiter_never_mutates_its_input_and_returns_a_new_list() -> None:
    history = conversation(6, tool_frequency=2)
    new: list[ChatMessage] = [UserMessage("next")]
    snapshot, new_snapshot = list(history), list(new)
    for limit in (10, 300, 100_000):
        kept = TokenLimiter(limit).process(history, new_messages=new)
        assert kept is not history
        assert history == snapshot
        assert all(a is b for a, b in zip(history, snapshot, strict=True))
        assert new == new_snapshot
    assert TokenLimiter(100_000).process(tuple(history)) == history


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": -5}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": 10.5}, "limit"),
        ({"limit": "100"}, "limit"),
        ({"limit": 10, "estimator": "gpt2"}, "estimator"),
        ({"limit": 10, "estimator": "p50k_base"}, "estimator"),
        ({"limit": 10, "estimator": object()}, "estimator"),
        ({"limit": 10, "trim": "newest"}, "trim"),
    ],
)
def test_limiter_rejects_invalid_configuration(arguments: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigurationError, match=f"`{problem}`"):
        TokenLimiter(**arguments)


def test_limiter_rejects_invalid_input() -> None:
    limiter = TokenLimiter(100)
    with pytest.raises(ConfigurationError, match="not a chat message"):
        limiter.process(["hello"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match=r"`messages` gave .*, not a list"):
        limiter.process("hello")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="`new_messages`"):
        limiter.process([], new_messages=[{"role": "user"}])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="`system_message` takes a str"):
        limiter.process([], system_message=SystemMessage("x"))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="cannot count"):
        limiter.count_message("hello")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="count_text takes a str, got UserMessage"):
        limiter.count_text(UserMessage("hello"))  # type: ignore[arg-type]


def test_limiter_repr_and_properties() -> None:
    limiter = TokenLimiter(4000, "cl100k_base", trim="best_fit")
    assert repr(limiter) == "TokenLimiter(limit=4000, encoding='cl100k_base', trim='best_fit')"
    assert (limiter.limit, limiter.encoding, limiter.trim) == (4000, "cl100k_base", "best_fit")
    assert (
        repr(TokenLimiter(10)) == "TokenLimiter(limit=10, encoding='o200k_base', trim='contiguous')"
    )
    assert isinstance(limiter, MemoryProcessor)


# --- ToolCallFilter ----------------------------------------------------------------------


def test_excludes_all_tool_calls_when_created_with_no_arguments() -> None:
    # Mastra: 1 pair -> 2 messages, the first being message-0 (its fixture had no tools).
    assert ids(ToolCallFilter().process(conversation(1))) == ["message-0", "message-1"]
    history = conversation(4, tool_frequency=1)  # calculator, search and weather steps
    filtered = ToolCallFilter().process(history)
    assert tool_traffic(filtered) == []
    assert ids(filtered) == [
        "message-0", "message-1", "message-2", "tool-call-3", "message-4", "tool-call-5",
        "message-6", "tool-call-7", "message-13",
    ]  # fmt: skip
    # The assistant's text next to a call is kept, with its attributes (Mastra lost it).
    assert filtered[3] == AiMessage("Using calculator tool:", attributes={"id": "tool-call-3"})


def test_excludes_specific_tool_calls_by_name() -> None:
    history = conversation(4, tool_frequency=1)
    filtered = ToolCallFilter(exclude=["weather"]).process(history)
    assert tool_traffic(filtered) == ["calculator", "calculator", "search", "search"]
    assert "tool-result-3" not in ids(filtered)
    assert filtered[-2] == AiMessage("Using weather tool:", attributes={"id": "tool-call-7"})
    both = ToolCallFilter(exclude=["weather", "calculator"]).process(history)
    assert tool_traffic(both) == ["search", "search"]
    every = ToolCallFilter(exclude=["weather", "calculator", "search"]).process(history)
    assert every == ToolCallFilter().process(history)


def test_keeps_all_messages_when_the_exclude_list_is_empty() -> None:
    history = conversation(7, tool_frequency=2)
    for tool_filter in (ToolCallFilter(exclude=[]), ToolCallFilter(exclude=["unknown"])):
        filtered = tool_filter.process(history)
        assert filtered == history
        assert filtered is not history
        assert all(a is b for a, b in zip(filtered, history, strict=True))


def test_a_call_message_left_empty_is_dropped_and_one_with_other_calls_stays() -> None:
    parallel = AiMessage(
        tool_execution_requests=[
            ToolExecutionRequest("a", "weather", '{"location":"Paris"}'),
            ToolExecutionRequest("b", "search", '{"query":"Paris"}'),
        ],
        attributes={"step": 1},
    )
    history: list[ChatMessage] = [
        UserMessage("Weather and news in Paris?"),
        parallel,
        result("a", "weather", "Sunny"),
        result("b", "search", "Olympics"),
        call("c", "weather", '{"location":"Rome"}'),
        result("c", "weather", "Hot"),
        AiMessage("Sunny in Paris, hot in Rome."),
    ]
    filtered = ToolCallFilter(exclude=["weather"]).process(history)
    assert filtered == [
        history[0],
        AiMessage(
            tool_execution_requests=[ToolExecutionRequest("b", "search", '{"query":"Paris"}')],
            attributes={"step": 1},
        ),
        history[3],
        history[6],
    ]
    assert ToolCallFilter().process(history) == [history[0], history[6]]


def test_thinking_stays_with_text_and_goes_without_it() -> None:
    with_text = AiMessage(
        "Let me check.",
        thinking="need weather",
        tool_execution_requests=[ToolExecutionRequest("1", "w")],
    )
    thinking_only = AiMessage(
        thinking="need more", tool_execution_requests=[ToolExecutionRequest("2", "w")]
    )
    empty_text = AiMessage("", tool_execution_requests=[ToolExecutionRequest("3", "w")])
    history: list[ChatMessage] = [
        with_text,
        result("1", "w"),
        thinking_only,
        result("2", "w"),
        empty_text,
        result("3", "w"),
    ]
    assert ToolCallFilter().process(history) == [
        AiMessage("Let me check.", thinking="need weather")
    ]
    assert ToolCallFilter(exclude=["w"]).process(history) == ToolCallFilter().process(history)


def test_filter_never_leaves_orphan_results() -> None:
    history: list[ChatMessage] = [
        result("gone", "weather", "Pretty hot"),  # its call was evicted from the window
        UserMessage("Hi"),
        result("early", "search", "x"),  # answers a call that comes later: still an orphan
        call("early", "search"),
        result("early", "search", "y"),
        result("nobody", "calculator", "4"),  # an excluded tool's result with no call
    ]
    expected = [history[1], history[3], history[4]]
    assert ToolCallFilter(exclude=["calculator"]).process(history) == expected
    assert ToolCallFilter(exclude=[]).process(history) == expected
    assert ToolCallFilter().process(history) == [history[1]]


def test_filter_drops_unanswered_calls_unless_pending() -> None:
    dangling = call("d", "search", text="Searching...")
    history: list[ChatMessage] = [
        UserMessage("Hi"),
        dangling,  # never answered, and the conversation moved on
        UserMessage("Hello?"),
        call("p", "search"),  # the model just asked: the result is not in yet
    ]
    filtered = ToolCallFilter(exclude=[]).process(history)
    assert filtered == [history[0], AiMessage("Searching..."), history[2], history[3]]
    assert ToolCallFilter().process(history) == [history[0], AiMessage("Searching..."), history[2]]
    # Pending means last: a new user message makes the call dangling too.
    moved_on = ToolCallFilter(exclude=[]).process(history, new_messages=[UserMessage("?")])
    assert moved_on == filtered[:3]
    # Partially answered parallel step at the end: pending, kept whole with its result.
    parallel = AiMessage(
        tool_execution_requests=[ToolExecutionRequest("a", "f"), ToolExecutionRequest("b", "g")]
    )
    step: list[ChatMessage] = [UserMessage("Hi"), parallel, result("a", "f")]
    assert ToolCallFilter(exclude=["h"]).process(step) == step


def test_filter_keeps_a_call_answered_in_new_messages() -> None:
    step = call("c1", "weather", '{"location":"Paris"}')
    history: list[ChatMessage] = [UserMessage("Weather?"), step]
    new: list[ChatMessage] = [result("c1", "weather", "Sunny")]
    for tool_filter in (ToolCallFilter(), ToolCallFilter(exclude=["weather"])):
        assert tool_filter.process(history, new_messages=new) == history
        assert tool_filter.process(history) == [history[0]]


def test_filter_pairs_results_without_ids_by_position() -> None:
    history: list[ChatMessage] = [
        UserMessage("Hi"),
        AiMessage(
            tool_execution_requests=[
                ToolExecutionRequest(None, "f"),
                ToolExecutionRequest(None, "g"),
            ]
        ),
        result(None, "g", "G"),
        result(None, "f", "F"),
        result(None, "f", "again"),  # both f requests answered already: an orphan
    ]
    assert ToolCallFilter(exclude=["g"]).process(history) == [
        history[0],
        AiMessage(tool_execution_requests=[ToolExecutionRequest(None, "f")]),
        history[3],
    ]


def test_filter_never_mutates_its_input_and_ignores_system_context() -> None:
    history = conversation(6, tool_frequency=1)
    snapshot = list(history)
    for tool_filter in (ToolCallFilter(), ToolCallFilter(exclude=["search"])):
        filtered = tool_filter.process(history, system_message="x", memory_system_message="y")
        assert filtered == tool_filter.process(history)
        assert filtered is not history
        assert history == snapshot
        assert all(a is b for a, b in zip(history, snapshot, strict=True))


def test_filter_configuration_and_repr() -> None:
    assert repr(ToolCallFilter()) == "ToolCallFilter()"
    tool_filter = ToolCallFilter(exclude=("weather", "search", "weather"))
    assert repr(tool_filter) == "ToolCallFilter(exclude=['weather', 'search'])"
    assert tool_filter.exclude == ("weather", "search")
    assert ToolCallFilter().exclude is None
    assert ToolCallFilter(exclude=iter(["a"])).exclude == ("a",)
    with pytest.raises(ConfigurationError, match=r"write exclude=\['weather'\]"):
        ToolCallFilter(exclude="weather")
    with pytest.raises(ConfigurationError, match="list of tool names"):
        ToolCallFilter(exclude=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="tool names"):
        ToolCallFilter(exclude=["ok", None])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="not a chat message"):
        ToolCallFilter().process([UserMessage("x"), "y"])  # type: ignore[list-item]
    assert isinstance(tool_filter, MemoryProcessor)


# --- apply_processors --------------------------------------------------------------------


def test_processor_type_alias_is_usable_at_runtime() -> None:
    assert typing.get_args(Processor)[0] is MemoryProcessor


def test_no_processors_return_a_new_equal_list() -> None:
    history = conversation(3)
    processed = apply_processors(history, [])
    assert processed == history
    assert processed is not history
    assert apply_processors(iter(history), ()) == history  # type: ignore[arg-type]


def test_applies_multiple_processors_in_order() -> None:
    history = conversation(10, tool_frequency=1)
    processed = apply_processors(history, [ToolCallFilter(exclude=["weather"]), TokenLimiter(250)])
    assert processed
    assert len(processed) < len(history)
    assert "weather" not in tool_traffic(processed)
    # The limiter measured what the filter left: the same as running them by hand.
    by_hand = TokenLimiter(250).process(ToolCallFilter(exclude=["weather"]).process(history))
    assert processed == by_hand


def test_each_processor_receives_the_previous_output_and_the_context() -> None:
    seen: list[tuple[str, list[ChatMessage], dict[str, Any]]] = []

    def first(messages: list[ChatMessage], **context: Any) -> list[ChatMessage]:
        seen.append(("first", messages, context))
        return messages[1:]

    class Second:
        def process(self, messages: list[ChatMessage], *, new_messages: Any) -> list[ChatMessage]:
            seen.append(("second", messages, {"new_messages": new_messages}))
            return messages[1:]

    def third(messages: list[ChatMessage]) -> list[ChatMessage]:
        seen.append(("third", messages, {}))
        return messages[::-1]

    history = conversation(2)
    new = [UserMessage("now")]
    processed = apply_processors(
        history,
        [first, Second(), third],  # type: ignore[list-item]
        system_message="S",
        new_messages=new,
    )
    assert processed == history[:1:-1]
    assert [name for name, _, _ in seen] == ["first", "second", "third"]
    assert seen[0][1] == history
    assert seen[0][1] is not history  # the first processor gets a copy
    assert seen[0][2] == {
        "system_message": "S",
        "memory_system_message": None,
        "new_messages": (new[0],),
    }
    assert seen[1][1] == history[1:]
    assert seen[1][2] == {"new_messages": (new[0],)}
    assert seen[2][1] == history[2:]


def test_keyword_context_is_passed_by_name() -> None:
    def positional_or_keyword(
        messages: list[ChatMessage], system_message: str | None = None
    ) -> list[ChatMessage]:
        assert system_message == "S"
        return messages

    def positional_only(messages: list[ChatMessage], system_message: Any = "default", /) -> Any:
        assert system_message == "default"
        return messages

    history = conversation(1)
    processors = [positional_or_keyword, positional_only, list]
    assert apply_processors(history, processors, system_message="S") == history  # type: ignore[arg-type]


def test_processors_without_duplicating_new_messages() -> None:
    history = conversation(6, tool_frequency=2)
    new_user = UserMessage("What's the weather?")

    def user_and_assistant_only(messages: list[ChatMessage]) -> list[ChatMessage]:
        return [m for m in messages if isinstance(m, (UserMessage, AiMessage))]

    processed = apply_processors(
        history,
        [ToolCallFilter(), user_and_assistant_only, TokenLimiter(127_000)],
        new_messages=[new_user],
    )
    prompt = [*processed, new_user]
    assert prompt.count(new_user) == 1
    assert processed == ToolCallFilter().process(history)


def test_processor_output_that_is_not_a_list_of_messages_is_a_clear_error() -> None:
    def as_tuple(messages: list[ChatMessage]) -> Any:
        return tuple(messages)

    def with_a_dict(messages: list[ChatMessage]) -> Any:
        return [*messages, {"role": "user", "content": "hi"}]

    history = conversation(1)
    with pytest.raises(ConfigurationError, match=r"as_tuple\(\) returned tuple"):
        apply_processors(history, [as_tuple])
    with pytest.raises(ConfigurationError, match=r"with_a_dict\(\) returned a list holding"):
        apply_processors(history, [with_a_dict])

    class ReturnsNone:
        def process(self, messages: list[ChatMessage], **context: Any) -> None:
            return None

        def __repr__(self) -> str:
            return "ReturnsNone()"

    with pytest.raises(ConfigurationError, match=r"ReturnsNone\(\) returned NoneType"):
        apply_processors(history, [ReturnsNone()])  # type: ignore[list-item]


def test_invalid_processors_are_rejected_before_anything_runs() -> None:
    ran: list[str] = []

    def good(messages: list[ChatMessage]) -> list[ChatMessage]:
        ran.append("good")
        return messages

    def mastra_style(messages: list[ChatMessage], opts: Any) -> list[ChatMessage]:
        return messages

    history = conversation(1)
    with pytest.raises(ConfigurationError, match=r"processor #1 \(.*mastra_style\(\)\) cannot"):
        apply_processors(history, [good, mastra_style])
    with pytest.raises(ConfigurationError, match=r"processor #1 .* not callable"):
        apply_processors(history, [good, "TokenLimiter"])  # type: ignore[list-item]
    assert ran == []
    with pytest.raises(ConfigurationError, match=r"single processor TokenLimiter\(limit=5"):
        apply_processors(history, TokenLimiter(5))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="single processor"):
        apply_processors(history, good)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="list of processors, got NoneType"):
        apply_processors(history, None)  # type: ignore[arg-type]


def test_apply_processors_rejects_invalid_input() -> None:
    with pytest.raises(ConfigurationError, match="`messages` gave 'hi' at index 1, which is not"):
        apply_processors([UserMessage("x"), "hi"], [])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match=r"`messages` gave .*, not a list"):
        apply_processors({"role": "user"}, [])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"`messages` gave .*, not a list"):
        apply_processors(UserMessage("x"), [])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="`memory_system_message` takes a str or None"):
        apply_processors([], [], memory_system_message=3)  # type: ignore[arg-type]


def test_a_misbehaving_processor_cannot_mutate_the_callers_list() -> None:
    def destructive(messages: list[ChatMessage]) -> list[ChatMessage]:
        messages.clear()
        return messages

    history = conversation(2)
    snapshot = list(history)
    assert apply_processors(history, [destructive]) == []
    assert history == snapshot


def test_processors_never_mutate_input_through_a_chain() -> None:
    history = conversation(8, tool_frequency=2)
    new: list[ChatMessage] = [UserMessage("next")]
    snapshot, new_snapshot = list(history), list(new)
    processed = apply_processors(
        history,
        [ToolCallFilter(exclude=["search"]), TokenLimiter(600, trim="best_fit")],
        system_message="You are helpful.",
        new_messages=new,
    )
    assert processed
    assert history == snapshot
    assert new == new_snapshot
    assert all(a is b for a, b in zip(history, snapshot, strict=True))


def test_a_callable_without_a_readable_signature_gets_the_messages_alone() -> None:
    class Opaque:
        __signature__ = "not a signature"  # inspect.signature raises TypeError

        def __call__(self, messages: list[ChatMessage], *extra: Any) -> list[ChatMessage]:
            assert extra == ()
            return messages[:1]

    history = conversation(2)
    assert apply_processors(history, [Opaque()], system_message="S") == history[:1]


def test_filter_ignores_tool_traffic_that_is_entirely_new() -> None:
    history: list[ChatMessage] = [UserMessage("Weather?")]
    new: list[ChatMessage] = [call("n1", "weather"), result("n1", "weather", "Sunny")]
    assert ToolCallFilter().process(history, new_messages=new) == history


# --- tool groups -------------------------------------------------------------------------


def test_tool_groups_pair_calls_with_their_results() -> None:
    parallel = AiMessage(
        tool_execution_requests=[ToolExecutionRequest("a", "f"), ToolExecutionRequest("b", "g")]
    )
    messages: list[ChatMessage] = [
        result("x", "f"),  # 0: orphan
        UserMessage("Hi"),  # 1
        parallel,  # 2
        result("b", "g"),  # 3
        UserMessage("interleaved"),  # 4
        result("a", "f"),  # 5
        call("c", "h"),  # 6: unanswered
        result("a", "f", "again"),  # 7: answers the latest request "a" (in message 2)
    ]
    groups = tool_groups(messages)
    assert groups == [
        ToolGroup(None, (0,)),
        ToolGroup(2, (3, 5, 7), ((5, 7), (3,))),
        ToolGroup(6, (), ((),)),
    ]
    orphan, pair, pending = groups
    assert (orphan.is_orphan, orphan.is_complete, orphan.indices, orphan.unanswered) == (
        True, False, (0,), ()
    )  # fmt: skip
    assert (pair.is_orphan, pair.is_complete, pair.indices) == (False, True, (2, 3, 5, 7))
    assert (pending.is_complete, pending.unanswered, pending.indices) == (False, (0,), (6,))
    assert atomic_units(messages) == [(0,), (1,), (2, 3, 5, 7), (4,), (6,)]
    assert tool_groups([]) == []
    assert atomic_units([]) == []


def test_tool_groups_reuse_of_an_id_answers_the_latest_call() -> None:
    messages: list[ChatMessage] = [
        call("1", "f"),
        result("1", "f"),
        call("1", "f"),
        result("1", "f"),
    ]
    assert tool_groups(messages) == [ToolGroup(0, (1,), ((1,),)), ToolGroup(2, (3,), ((3,),))]


def test_tool_groups_without_ids_pair_by_name_in_the_latest_call() -> None:
    messages: list[ChatMessage] = [
        result(None, "f"),  # 0: no call yet
        AiMessage(
            tool_execution_requests=[
                ToolExecutionRequest(None, "f"),
                ToolExecutionRequest("id", "f"),
                ToolExecutionRequest(None, "f"),
            ]
        ),
        result(None, "f"),  # 2: first id-less f
        result(None, "g"),  # 3: no g request: orphan
        result(None, "f"),  # 4: second id-less f
        result(None, "f"),  # 5: none left: orphan
    ]
    assert tool_groups(messages) == [
        ToolGroup(None, (0,)),
        ToolGroup(1, (2, 4), ((2,), (), (4,))),
        ToolGroup(None, (3,)),
        ToolGroup(None, (5,)),
    ]
