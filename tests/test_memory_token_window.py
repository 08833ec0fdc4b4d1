"""TokenWindowChatMemory: every line of LangChain4j's TokenWindowChatMemoryTest checklist
(research/langchain4j-memory.md §5), with the exact gpt-4o-mini counts (3 tokens per request)."""

from __future__ import annotations

from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    ChatMessage,
    ConfigurationError,
    OpenAiTokenCountEstimator,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)

from .memory_helpers import CountingStore, Factory

ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o-mini")


def words(n: int) -> str:
    text = " ".join(["hello"] * n)
    assert ESTIMATOR.count_text(text) == n
    return text


def user(tokens: int, tag: str = "") -> UserMessage:
    """A user message of exactly `tokens` tokens (4 of them are the per-message overhead)."""
    message = UserMessage(words(tokens - 4 - (1 if tag else 0)) + (f" {tag}" if tag else ""))
    assert ESTIMATOR.count_message(message) == tokens
    return message


def system(tokens: int) -> SystemMessage:
    message = SystemMessage(" ".join(["rule"] * (tokens - 4)))
    assert ESTIMATOR.count_message(message) == tokens
    return message


def count(messages: list[ChatMessage]) -> int:
    return ESTIMATOR.count_messages(messages)


QUESTION = UserMessage("How much is 2+2?")
CALL = AiMessage(
    tool_execution_requests=[ToolExecutionRequest("call_1", "calculator", '{ "a": 2, "b": 2 }')]
)
RESULT = ToolExecutionResultMessage("call_1", "calculator", "4")
SYS = SystemMessage("Use calculator for math questions")


def test_reference_counts() -> None:
    assert [ESTIMATOR.count_message(m) for m in (QUESTION, CALL, RESULT, SYS)] == [12, 24, 5, 9]


def test_id(make: Factory) -> None:
    assert make.tokens(max_tokens=10, estimator=ESTIMATOR).id == "default"
    assert make.tokens(max_tokens=10, estimator=ESTIMATOR, id="x").id == "x"


def test_store_and_clear(make: Factory) -> None:
    m1, m2, m3 = user(10, "a"), user(10, "b"), user(10, "c")
    memory = make.tokens(max_tokens=3 + 10 + 10, estimator=ESTIMATOR)
    memory.add(m1, m2)
    assert memory.messages() == [m1, m2]
    memory.add(m3)
    assert memory.messages() == [m2, m3]
    memory.clear()
    memory.clear()
    assert memory.messages() == []


def test_keeps_the_specified_number_of_tokens(make: Factory) -> None:
    m = [user(10, "abcdefgh"[i]) for i in range(4)]
    memory = make.tokens(max_tokens=33, estimator=ESTIMATOR)
    memory.add(m[0], m[1], m[2])
    assert memory.messages() == m[:3]
    assert count(memory.messages()) == 33
    memory.add(m[3])
    assert memory.messages() == m[1:]


def test_does_not_evict_the_system_message(make: Factory) -> None:
    sys, m = system(10), [user(10, "abcdefgh"[i]) for i in range(3)]
    memory = make.tokens(max_tokens=33, estimator=ESTIMATOR)
    memory.add(sys, m[0], m[1])
    memory.add(m[2])
    assert memory.messages() == [sys, m[1], m[2]]


def test_keeps_only_the_latest_system_message(make: Factory) -> None:
    first, second = system(10), SystemMessage(" ".join(["law"] * 6))
    m1 = user(10)
    memory = make.tokens(max_tokens=40, estimator=ESTIMATOR)
    memory.add(first, m1)
    memory.add(second)
    assert memory.messages() == [m1, second]


def test_ignores_the_same_system_message(make: Factory) -> None:
    sys, m1 = system(10), user(10)
    memory = make.tokens(max_tokens=40, estimator=ESTIMATOR)
    memory.add(sys, m1)
    memory.add(system(10))
    assert memory.messages() == [sys, m1]


def test_evicting_a_call_evicts_its_result(make: Factory) -> None:
    answer = AiMessage("2 + 2 = 4")
    assert ESTIMATOR.count_message(answer) == 11
    memory = make.tokens(max_tokens=39, estimator=ESTIMATOR)
    memory.add(QUESTION, CALL)
    assert count(memory.messages()) == 39
    memory.add(RESULT)
    assert memory.messages() == [CALL, RESULT]
    memory.add(answer)
    assert memory.messages() == [answer]
    assert count([answer]) == 14


def test_evicting_a_call_evicts_its_result_with_a_system_message(make: Factory) -> None:
    answer = AiMessage("2 + 2 = 4")
    memory = make.tokens(max_tokens=48, estimator=ESTIMATOR)
    memory.add(SYS, QUESTION, CALL)
    assert count(memory.messages()) == 48
    memory.add(RESULT)
    assert memory.messages() == [SYS, CALL, RESULT]
    memory.add(answer)
    assert memory.messages() == [SYS, answer]
    assert count([SYS, answer]) == 23


def test_adding_a_result_that_does_not_fit_leaves_the_system_message(make: Factory) -> None:
    memory = make.tokens(max_tokens=36, estimator=ESTIMATOR)
    memory.add(SYS, CALL)
    assert count(memory.messages()) == 36
    memory.add(RESULT)
    assert memory.messages() == [SYS]
    assert count([SYS]) == 12


TWO_CALLS = AiMessage(
    tool_execution_requests=[
        ToolExecutionRequest("call_1", "calculator", '{"a": 2, "b": 2}'),
        ToolExecutionRequest("call_2", "calculator", '{"a": 3, "b": 3}'),
    ]
)
R1 = ToolExecutionResultMessage("call_1", "calculator", "4")
R2 = ToolExecutionResultMessage("call_2", "calculator", "6")
ANSWER2 = AiMessage("2 + 2 = 4, 3 + 3 = 6")


def test_evicting_a_call_evicts_all_its_results(make: Factory) -> None:
    budget = count([QUESTION, TWO_CALLS, R1, R2])
    memory = make.tokens(max_tokens=budget, estimator=ESTIMATOR)
    memory.add(QUESTION, TWO_CALLS, R1, R2)
    assert memory.messages() == [QUESTION, TWO_CALLS, R1, R2]
    memory.add(ANSWER2)
    assert memory.messages() == [ANSWER2]


def test_evicting_a_call_evicts_all_its_results_with_a_system_message(make: Factory) -> None:
    budget = count([SYS, QUESTION, TWO_CALLS, R1, R2])
    memory = make.tokens(max_tokens=budget, estimator=ESTIMATOR)
    memory.add(SYS, QUESTION, TWO_CALLS, R1, R2)
    memory.add(ANSWER2)
    assert memory.messages() == [SYS, ANSWER2]


def test_a_first_message_over_the_budget_empties_the_window(make: Factory) -> None:
    counting = CountingStore()
    memory = make.tokens(max_tokens=2, estimator=ESTIMATOR, store=make.store(counting))
    memory.add(user(25))
    assert memory.messages() == []
    assert counting.data["default"] == []
    memory.add(user(25, "x"))
    assert memory.messages() == []


def test_a_system_message_alone_over_the_budget_stays(make: Factory) -> None:
    sys = system(10)
    memory = make.tokens(max_tokens=2, estimator=ESTIMATOR)
    memory.add(sys)
    assert memory.messages() == [sys]
    memory.add(user(10))
    assert memory.messages() == [sys]


def test_dynamic_max_tokens_per_id(make: Factory) -> None:
    budgets = {"a": 33, "b": 60, "c": 45}
    for memory_id, budget in budgets.items():
        memory = make.tokens(max_tokens=lambda i: budgets[i], estimator=ESTIMATOR, id=memory_id)
        for i in range(8):
            memory.add(user(10, "abcdefgh"[i]))
        window = memory.messages()
        assert count(window) <= budget < count(window) + 10
        assert len(window) == (budget - 3) // 10


def test_dynamic_max_tokens_can_change_for_the_same_id(make: Factory) -> None:
    budget = {"value": 33}
    m = [user(10, "abcdefgh"[i]) for i in range(5)]
    memory = make.tokens(max_tokens=lambda _: budget["value"], estimator=ESTIMATOR)
    memory.add(m[0], m[1], m[2])
    budget["value"] = 43
    memory.add(m[3])
    assert memory.messages() == m[:4]
    budget["value"] = 33
    assert memory.messages() == m[1:4]


def test_system_message_first_enabled(make: Factory) -> None:
    sys, m1 = system(10), user(10)
    memory = make.tokens(max_tokens=100, estimator=ESTIMATOR, always_keep_system_message_first=True)
    memory.add(m1)
    memory.add(sys)
    assert memory.messages() == [sys, m1]


def test_system_message_first_disabled(make: Factory) -> None:
    sys, m1 = system(10), user(10)
    memory = make.tokens(max_tokens=100, estimator=ESTIMATOR)
    memory.add(m1)
    memory.add(sys)
    assert memory.messages() == [m1, sys]


def test_system_message_first_with_eviction(make: Factory) -> None:
    sys, m = system(10), [user(10, "abcdefgh"[i]) for i in range(3)]
    memory = make.tokens(max_tokens=35, estimator=ESTIMATOR, always_keep_system_message_first=True)
    memory.add(m[0], m[1])
    memory.add(sys)
    memory.add(m[2])
    assert memory.messages() == [sys, m[1], m[2]]


def test_store_operations_per_call(make: Factory) -> None:
    counting = CountingStore()
    memory = make.tokens(max_tokens=1000, estimator=ESTIMATOR, store=make.store(counting))
    memory.add(user(10, "a"))
    memory.add(user(10, "b"))
    memory.add(user(10, "c"))
    assert counting.hits == (3, 3, 0)
    memory.messages()
    assert counting.hits == (4, 3, 0)
    memory.set([user(10, "d")])
    assert counting.hits == (4, 4, 0)


def test_set_with_varargs_evicts_what_does_not_fit(make: Factory) -> None:
    m = [user(10, "abcdefgh"[i]) for i in range(3)]
    memory = make.tokens(max_tokens=25, estimator=ESTIMATOR)
    memory.set(*m)
    assert memory.messages() == m[1:]


def test_set_neither_mutates_nor_aliases_the_callers_list(make: Factory) -> None:
    m = [user(10, "abcdefgh"[i]) for i in range(3)]
    memory = make.tokens(max_tokens=25, estimator=ESTIMATOR)
    given = list(m)
    memory.set(given)
    assert given == m
    given.clear()
    assert memory.messages() == m[1:]


def test_a_message_is_counted_once(make: Factory) -> None:
    calls = []

    class Spy:
        cache_key = "spy"

        def count_text(self, text: str) -> int:
            return len(text)

        def count_message(self, message: ChatMessage) -> int:
            calls.append(message)
            return 5

        def count_messages(self, messages: object) -> int:
            return 0

    memory = make.tokens(max_tokens=100, estimator=Spy())
    messages = [UserMessage(str(i)) for i in range(10)]
    for message in messages:
        memory.add(message)
    memory.messages()
    memory.messages()
    assert len(calls) == len(messages)


def test_invalid_configuration_is_rejected(make: Factory) -> None:
    with pytest.raises(ConfigurationError, match="max_tokens"):
        make.tokens(max_tokens=0, estimator=ESTIMATOR)
    with pytest.raises(ConfigurationError, match="estimator"):
        make.tokens(max_tokens=10, estimator=object())


class _Words:
    """A word-count estimator, with or without a `cache_key`."""

    def __init__(self, cache_key: str | None) -> None:
        if cache_key is not None:
            self.cache_key = cache_key
        self.counted: list[ChatMessage] = []

    def count_text(self, text: str) -> int:
        return len(text.split())

    def count_message(self, message: ChatMessage) -> int:
        self.counted.append(message)
        return 1 + self.count_text(getattr(message, "text", "") or "")

    def count_messages(self, messages: object) -> int:
        return sum(self.count_message(m) for m in messages)  # type: ignore[attr-defined,misc]


def test_stored_counts_are_used_only_when_the_same_estimator_made_them() -> None:
    from chatmemory import InMemoryChatMemoryStore, TokenWindowChatMemory
    from chatmemory._codec.langchain4j import message_from_json, message_to_json
    from chatmemory.stores import NewMessage

    def fresh(text: str) -> UserMessage:  # a new object, like a row read from a database
        message = message_from_json(message_to_json(UserMessage(text)))
        assert isinstance(message, UserMessage)
        return message

    store = InMemoryChatMemoryStore()
    rows = [
        NewMessage(fresh("one two"), token_count=3, counted_by="words:v1"),
        NewMessage(fresh("three four"), token_count=99, counted_by="someone-else"),
    ]
    assert store.commit_window("m", version=0, append=rows, evict=[])
    keyed = _Words("words:v1")
    TokenWindowChatMemory(max_tokens=100, estimator=keyed, id="m", store=store).messages()
    assert [m.text for m in keyed.counted if isinstance(m, UserMessage)] == ["three four"]
    anonymous = _Words(None)
    TokenWindowChatMemory(max_tokens=100, estimator=anonymous, id="m", store=store).messages()
    assert len([m for m in anonymous.counted if isinstance(m, UserMessage)]) == 2


def test_async_memories_count_long_messages_off_the_event_loop() -> None:
    import asyncio
    import threading

    from chatmemory import AsyncTokenWindowChatMemory, OpenAiTokenCountEstimator

    counted_on: list[str] = []

    class Watching(OpenAiTokenCountEstimator):
        def count_message(self, message: Any) -> int:
            counted_on.append(threading.current_thread().name)
            return super().count_message(message)

    async def main() -> None:
        memory = AsyncTokenWindowChatMemory(max_tokens=100_000, estimator=Watching())
        await memory.add(UserMessage("short"))
        await memory.add(UserMessage("long text " * 10_000))
        main_thread = threading.main_thread().name
        assert counted_on[0] == main_thread  # a short message is not worth a thread hop
        assert counted_on[1] != main_thread
        assert len(await memory.messages()) == 2

    asyncio.run(main())


def test_the_last_write_tells_how_many_messages_it_evicted(make: Factory) -> None:
    m = [user(10, "abcdefgh"[i]) for i in range(4)]
    memory = make.tokens(max_tokens=33, estimator=ESTIMATOR)
    assert memory.last_evicted == 0
    memory.add(m[0], m[1], m[2])
    assert memory.last_evicted == 0
    memory.add(m[3])
    assert memory.last_evicted == 1
    memory.add(user(40, "z"))  # larger than the window: history only, and the rest leaves
    assert (memory.messages(), memory.last_evicted) == ([], 4)
    basic = make.tokens(max_tokens=33, estimator=ESTIMATOR, store=make.store(CountingStore()))
    basic.add(m[0], m[1], m[2], m[3])
    assert basic.last_evicted == 1


def test_a_preview_tells_the_tokens_of_its_window(make: Factory) -> None:
    m = [user(10, "abcdefgh"[i]) for i in range(4)]
    memory = make.tokens(max_tokens=33, estimator=ESTIMATOR)
    assert memory.last_window_tokens is None
    memory.add(m[0], m[1])
    window = memory.preview(m[2], m[3])
    assert window == m[1:]
    assert memory.last_window_tokens == count(window) == 33
    assert memory.preview() == m[:2]  # nothing added: the window as it is
    assert memory.last_window_tokens == count([m[0], m[1]]) == 23
    assert make.messages(max_messages=3).last_window_tokens is None  # it counts messages
