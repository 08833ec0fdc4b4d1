"""`preview`: the window an `add` would leave, computed without writing (AI services use it for
every model request of a turn and commit the turn once)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chatmemory import (
    AiMessage,
    ChatMessage,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    OpenAiTokenCountEstimator,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from tests.memory_helpers import CountingStore, Factory
from tests.strategies import message_lists

ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o")


def test_preview_is_the_window_add_would_leave_and_writes_nothing(make: Factory) -> None:
    memory = make.messages(max_messages=3, id="u")
    memory.add(SystemMessage("be brief"), UserMessage("one"), AiMessage("1"))
    before = memory.messages()

    seen = memory.preview(UserMessage("two"), AiMessage("2"))

    assert seen == [SystemMessage("be brief"), UserMessage("two"), AiMessage("2")]
    assert memory.messages() == before  # nothing was written
    memory.add(UserMessage("two"), AiMessage("2"))
    assert memory.messages() == seen


def test_preview_of_a_repeated_system_message_is_the_window(make: Factory) -> None:
    memory = make.tokens(max_tokens=200, estimator=ESTIMATOR, id="u")
    memory.add(SystemMessage("s"), UserMessage("hi"))
    assert memory.preview(SystemMessage("s")) == memory.messages()
    assert memory.preview(SystemMessage("other")) == [UserMessage("hi"), SystemMessage("other")]


def test_preview_keeps_a_pending_tool_call_of_the_last_step(make: Factory) -> None:
    memory = make.messages(max_messages=10, id="u")
    call = AiMessage(tool_execution_requests=[ToolExecutionRequest("c1", "weather", "{}")])
    assert memory.preview(UserMessage("weather?"), call) == [UserMessage("weather?"), call]
    done = ToolExecutionResultMessage("c1", "weather", "sunny")
    assert memory.preview(UserMessage("weather?"), call, done) == [
        UserMessage("weather?"),
        call,
        done,
    ]


def test_preview_on_a_basic_store_reads_and_never_writes(make: Factory) -> None:
    store = CountingStore()
    memory = make.messages(max_messages=2, id="u", store=make.store(store))
    memory.add(UserMessage("a"))
    writes = store.updates
    assert memory.preview(UserMessage("b"), AiMessage("c")) == [UserMessage("b"), AiMessage("c")]
    assert store.updates == writes


@given(
    history=message_lists(max_size=8),
    turn=message_lists(max_size=4),
    limit=st.integers(min_value=1, max_value=6),
)
def test_preview_equals_add_then_messages(
    history: list[ChatMessage], turn: list[ChatMessage], limit: int
) -> None:
    store = InMemoryChatMemoryStore()
    previewing = MessageWindowChatMemory(max_messages=limit, id="p", store=store)
    adding = MessageWindowChatMemory(max_messages=limit, id="a", store=store)
    for memory in (previewing, adding):
        memory.add(history)
    written = store.history("p")
    seen = previewing.preview(turn)
    adding.add(turn)
    assert seen == adding.messages()
    assert store.history("p") == written
