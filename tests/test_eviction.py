"""The pure eviction policy, on its own: hand-picked cases and properties over random windows."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from chatmemory import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory._policies.eviction import (
    _ends_pending,
    arrange,
    fit,
    fit_appended,
    place,
    plan_replace,
)
from chatmemory._policies.tool_groups import atomic_units, has_tool_traffic, unsendable


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
    kept = fit(given_entries, lambda e: e.size, capacity=10).kept
    assert kept == given_entries
    assert kept is not given_entries
    assert given_entries == before


def test_fit_keeps_the_system_message_even_alone_over_budget() -> None:
    window = [Entry(SYS, 50), Entry(UserMessage("a"), 1)]
    assert [e.message for e in fit(window, lambda e: e.size, capacity=10).kept] == [SYS]


def test_fit_counts_the_overhead() -> None:
    window = [Entry(UserMessage("a"), 4), Entry(UserMessage("b"), 4)]
    assert len(fit(window, lambda e: e.size, capacity=8, overhead=0).kept) == 2
    assert len(fit(window, lambda e: e.size, capacity=8, overhead=3).kept) == 1


def test_fit_evicts_around_a_system_message_that_is_not_first() -> None:
    a, b = UserMessage("a"), UserMessage("b")
    window = entries(a, SYS, b)
    assert [e.message for e in fit(window, lambda e: e.size, capacity=2).kept] == [SYS, b]


def test_fit_drops_tool_results_left_at_the_head() -> None:
    window = entries(CALL, RESULT, RESULT, UserMessage("u"))
    assert [e.message for e in fit(window, lambda e: e.size, capacity=3).kept] == [UserMessage("u")]
    window = entries(SYS, RESULT, UserMessage("u"))
    assert [e.message for e in fit(window, lambda e: e.size, capacity=10).kept] == [
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


def _message(kind: int, n: int) -> ChatMessage:
    """Messages whose tool calls and results pair up through the shared ids c0..c5, so a window
    can hold complete groups, interleaved ones, calls missing results and orphan results."""
    if kind == 0:
        return UserMessage(f"u{n}")
    if kind == 1:
        return AiMessage(f"a{n}")
    if kind == 2:
        requests = [ToolExecutionRequest(f"c{(n + k) % 6}", "f", "{}") for k in range(1 + n % 2)]
        return AiMessage(tool_execution_requests=requests)
    if kind == 3:
        return ToolExecutionResultMessage(f"c{n % 6}", "f", "r")
    return SystemMessage(f"s{n % 2}")


windows = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 11), st.integers(0, 40)), max_size=30
).map(lambda items: [Entry(_message(k, n), size) for k, n, size in items])


@given(windows, st.integers(1, 200), st.integers(0, 5), st.booleans())
def test_fit_properties(window: list[Entry], capacity: int, overhead: int, first: bool) -> None:
    arranged = arrange(window, system_first=first)
    fitted = fit(arranged, lambda e: e.size, capacity=capacity, overhead=overhead)
    kept = fitted.kept
    # kept and evicted partition the input, each in input order; one system message at most,
    # never evicted
    positions = [arranged.index(e) for e in kept]
    assert positions == sorted(positions)
    assert sorted(positions + [arranged.index(e) for e in fitted.evicted]) == list(
        range(len(arranged))
    )
    systems = [e for e in arranged if isinstance(e.message, SystemMessage)]
    assert len(systems) <= 1
    assert all(s in kept for s in systems)
    # within budget, unless only the system message is left; the total is what it says
    others = [e for e in kept if not isinstance(e.message, SystemMessage)]
    total = overhead + sum(e.size for e in kept)
    assert fitted.total == total
    assert total <= capacity or not others
    # the tool rule: no result without its call, no call without its results (but the pending
    # last step), whatever the input held
    assert unsendable([e.message for e in kept]) == set()
    # whole units only, oldest first: every sendable unit evicted is older than every kept
    # one, and the newest of them would not fit back
    messages = [e.message for e in arranged]
    broken = unsendable(messages)
    units = [u for u in atomic_units(messages) if u[0] not in broken]
    kept_at = set(positions)
    evicted_units = [u for u in units if not kept_at & set(u)]
    kept_units = [u for u in units if set(u) <= kept_at]
    assert len(evicted_units) + len(kept_units) == len(units)  # no unit is split
    kept_others = [u[0] for u in kept_units if not isinstance(messages[u[0]], SystemMessage)]
    if evicted_units and kept_others:
        assert max(u[0] for u in evicted_units) < min(kept_others)
    if evicted_units:
        newest = max(evicted_units, key=lambda u: u[0])
        assert total + sum(arranged[i].size for i in newest) > capacity


def test_a_result_whose_call_was_evicted_goes_with_it_wherever_it_stands() -> None:
    call = AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "f", "{}")])
    window = entries(
        UserMessage("u1"), call, UserMessage("u2"), ToolExecutionResultMessage("c", "f", "r")
    )
    kept = fit(window, lambda e: e.size, capacity=2).kept
    assert [e.message for e in kept] == [UserMessage("u2")]


def test_a_call_left_without_results_is_dropped_unless_it_is_the_last_step() -> None:
    call = AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "f", "{}")])
    pending = entries(UserMessage("u1"), call)
    assert [e.message for e in fit(pending, lambda e: e.size, capacity=10).kept] == [
        UserMessage("u1"),
        call,
    ]
    stale = entries(UserMessage("u1"), call, UserMessage("u2"))
    assert [e.message for e in fit(stale, lambda e: e.size, capacity=10).kept] == [
        UserMessage("u1"),
        UserMessage("u2"),
    ]


@given(
    windows,
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 11), st.integers(0, 40)), max_size=4),
    st.integers(1, 200),
    st.integers(1, 200),
)
def test_fit_appended_is_fit_on_a_fitted_window(
    window: list[Entry], more: list[tuple[int, int, int]], first: int, second: int
) -> None:
    """The shortcut a memory takes when it adds plain messages to the window it kept."""
    size = lambda e: e.size  # noqa: E731
    kept = fit(arrange(window, system_first=False), size, capacity=first).kept
    added = [Entry(_message(k, n), s) for k, n, s in more]
    total = sum(e.size for e in [*kept, *added])
    shortcut = fit_appended(kept, added, size, capacity=second, total=total)
    full = fit([*kept, *added], size, capacity=second)
    if not any(has_tool_traffic(e.message) for e in kept):  # what a window without tools says
        assert fit_appended(kept, added, size, capacity=second, total=total, tools=False) == (
            shortcut
        )
    if shortcut is not None:
        assert shortcut == full
    else:  # it declines only for a pending call at the end, or a call it cannot pair by id
        assert _ends_pending(kept) or any(has_tool_traffic(e.message) for e in kept)


def test_fit_appended_evicts_around_a_system_message_inside_the_window() -> None:
    """The one-message-per-unit shortcut stops at a system message that is not first and the
    general loop evicts on both sides of it, as `fit` does."""
    size = lambda e: e.size  # noqa: E731
    kept = [Entry(UserMessage("u1"), 3), Entry(SYS, 1), Entry(UserMessage("u2"), 3)]
    added = [Entry(UserMessage("u3"), 3)]
    shortcut = fit_appended(kept, added, size, capacity=4, total=10, tools=False)
    assert shortcut == fit([*kept, *added], size, capacity=4)
    assert shortcut is not None
    assert [e.message for e in shortcut.kept] == [SYS, UserMessage("u3")]
    assert [e.message for e in shortcut.evicted] == [UserMessage("u1"), UserMessage("u2")]
