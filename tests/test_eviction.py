"""The pure eviction policy, on its own: hand-picked cases and properties over random windows."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from chatmemory._eviction import arrange, fit, place, plan_replace
from chatmemory._messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)


@dataclass(eq=False)
class Entry:
    message: ChatMessage
    size: int = 1


def entries(*messages: ChatMessage) -> list[Entry]:
    return [Entry(m) for m in messages]


def texts(result: list[Entry]) -> list[str]:
    return [type(e.message).__name__[0] + str(e.size) for e in result]


SYS = SystemMessage("s")
CALL = AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "f", "{}")])
RESULT = ToolExecutionResultMessage("c", "f", "r")


def test_fit_returns_a_new_list_and_never_mutates() -> None:
    given_entries = entries(UserMessage("a"), UserMessage("b"))
    before = list(given_entries)
    kept = fit(given_entries, lambda e: e.size, capacity=10)
    assert kept == given_entries
    assert kept is not given_entries
    assert given_entries == before


def test_fit_keeps_the_system_message_even_alone_over_budget() -> None:
    window = [Entry(SYS, 50), Entry(UserMessage("a"), 1)]
    assert [e.message for e in fit(window, lambda e: e.size, capacity=10)] == [SYS]


def test_fit_counts_the_overhead() -> None:
    window = [Entry(UserMessage("a"), 4), Entry(UserMessage("b"), 4)]
    assert len(fit(window, lambda e: e.size, capacity=8, overhead=0)) == 2
    assert len(fit(window, lambda e: e.size, capacity=8, overhead=3)) == 1


def test_fit_evicts_around_a_system_message_that_is_not_first() -> None:
    a, b = UserMessage("a"), UserMessage("b")
    window = entries(a, SYS, b)
    assert [e.message for e in fit(window, lambda e: e.size, capacity=2)] == [SYS, b]


def test_fit_drops_tool_results_left_at_the_head() -> None:
    window = entries(CALL, RESULT, RESULT, UserMessage("u"))
    assert [e.message for e in fit(window, lambda e: e.size, capacity=3)] == [UserMessage("u")]
    window = entries(SYS, RESULT, UserMessage("u"))
    assert [e.message for e in fit(window, lambda e: e.size, capacity=10)] == [
        SYS,
        UserMessage("u"),
    ]


def test_arrange_keeps_the_latest_system_message_and_moves_it_first_on_request() -> None:
    old, new, u = SystemMessage("old"), SystemMessage("new"), UserMessage("u")
    window = entries(old, u, new)
    assert [e.message for e in arrange(window, system_first=False)] == [u, new]
    assert [e.message for e in arrange(window, system_first=True)] == [new, u]
    single = entries(u, new)
    assert [e.message for e in arrange(single, system_first=True)] == [new, u]
    assert arrange(single, system_first=False) == single


def test_place_ignores_a_repeated_system_message_and_replaces_a_different_one() -> None:
    u = UserMessage("u")
    window = entries(SYS, u)
    assert place(window, Entry(SystemMessage("s")), system_first=False) is None
    replaced = place(window, Entry(SystemMessage("t")), system_first=False)
    assert replaced is not None
    assert [e.message for e in replaced] == [u, SystemMessage("t")]
    first = place(window, Entry(SystemMessage("t")), system_first=True)
    assert first is not None
    assert [e.message for e in first] == [SystemMessage("t"), u]


def test_plan_replace_reuses_a_subsequence_prefix() -> None:
    a, b, c, d = (Entry(UserMessage(x)) for x in "abcd")
    reused = plan_replace([a, b, c], [b.message, c.message, d.message])
    assert reused == [b, c, None]
    reused = plan_replace([a, b, c], [c.message, a.message])
    assert reused == [c, None]
    assert plan_replace([], [a.message]) == [None]


def _message(kind: int, i: int) -> ChatMessage:
    if kind == 0:
        return UserMessage(f"u{i}")
    if kind == 1:
        return AiMessage(f"a{i}")
    if kind == 2:
        return AiMessage(tool_execution_requests=[ToolExecutionRequest(f"c{i}", "f", "{}")])
    if kind == 3:
        return ToolExecutionResultMessage(f"c{i}", "f", "r")
    return SystemMessage(f"s{i}")


windows = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 40)), max_size=30).map(
    lambda items: [Entry(_message(k, i), size) for i, (k, size) in enumerate(items)]
)


@given(windows, st.integers(1, 200), st.integers(0, 5), st.booleans())
def test_fit_properties(window: list[Entry], capacity: int, overhead: int, first: bool) -> None:
    arranged = arrange(window, system_first=first)
    kept = fit(arranged, lambda e: e.size, capacity=capacity, overhead=overhead)
    # a subsequence of its input, never more than one system message, which is never evicted
    positions = [arranged.index(e) for e in kept]
    assert positions == sorted(positions)
    systems = [e for e in arranged if isinstance(e.message, SystemMessage)]
    assert len(systems) <= 1
    assert all(s in kept for s in systems)
    # within budget, unless only the system message is left
    others = [e for e in kept if not isinstance(e.message, SystemMessage)]
    total = overhead + sum(e.size for e in kept)
    assert total <= capacity or not others
    # no tool result heads the window
    assert not others or not isinstance(others[0].message, ToolExecutionResultMessage)
    # the kept non-system messages are a suffix: only the oldest were evicted
    all_others = [e for e in arranged if not isinstance(e.message, SystemMessage)]
    assert all_others[len(all_others) - len(others) :] == others
    # and the longest such suffix: putting back the last evicted one would not fit
    if len(others) < len(all_others):
        evicted = all_others[len(all_others) - len(others) - 1]
        if not isinstance(evicted.message, ToolExecutionResultMessage):
            assert total + evicted.size > capacity
