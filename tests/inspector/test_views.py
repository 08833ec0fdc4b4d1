"""What the inspector's views make of every kind of message, and its import guard."""

from __future__ import annotations

import sys

import pytest

from chatmemory import CustomMessage, ToolExecutionResultMessage, UserMessage
from chatmemory._tokens import OpenAiTokenCountEstimator
from chatmemory.inspector import _views
from chatmemory.stores.in_memory import InMemoryChatMemoryStore

GPT_4O_MINI = OpenAiTokenCountEstimator("gpt-4o-mini")


def test_each_kind_of_message_is_shown_with_its_marks() -> None:
    custom = _views.view(CustomMessage({"kind": "note", "n": 1}), 0, GPT_4O_MINI)
    assert (custom.role, custom.text, custom.tokens) == ("custom", '{"kind": "note", "n": 1}', None)
    named = _views.view(UserMessage("hi", name="ann"), 1, GPT_4O_MINI)
    assert named.text == "ann: hi"
    failed = ToolExecutionResultMessage("c1", "weather", "no such city", is_error=True)
    shown = _views.view(failed, 2, GPT_4O_MINI)
    assert (shown.text, shown.marks) == ("weather: no such city", ("error",))
    assert shown.tokens == GPT_4O_MINI.count_message(failed)


def test_a_custom_message_is_drawn_without_a_token_bar() -> None:
    from starlette.testclient import TestClient

    from chatmemory.inspector import create_app

    store = InMemoryChatMemoryStore()
    store.update_messages("x", [UserMessage("hi"), CustomMessage({"note": "<b>n</b>"})])
    page = TestClient(create_app(store)).get("/c/x", headers={"host": "127.0.0.1"}).text
    assert page.count('<span class="count">') == 2  # "hi" in the window and in the history
    assert page.count('title="application data: not sent to the model">—</span>') == 2
    assert "&lt;b&gt;n&lt;/b&gt;" in page


def test_search_stops_at_its_limit() -> None:
    store = InMemoryChatMemoryStore()
    store.update_messages("a", [UserMessage(f"apple {i}") for i in range(5)])
    store.update_messages("b", [UserMessage("apple pie")])
    assert len(_views.search(store, "APPLE", GPT_4O_MINI)) == 6
    hits = _views.search(store, "apple", GPT_4O_MINI, limit=3)
    assert len(hits) == 3


def test_the_app_without_its_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import chatmemory.inspector as inspector

    monkeypatch.delitem(sys.modules, "chatmemory.inspector._app")
    monkeypatch.setitem(sys.modules, "starlette.applications", None)
    with pytest.raises(ImportError, match=r"pip install 'chatmemory\[inspect\]'"):
        inspector.create_app  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        inspector.nothing  # noqa: B018


def test_another_import_failure_is_not_called_a_missing_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import chatmemory.inspector as inspector

    monkeypatch.delitem(sys.modules, "chatmemory.inspector._app")
    monkeypatch.setitem(sys.modules, "chatmemory.inspector._views", None)
    with pytest.raises(ImportError) as failure:
        inspector.create_app  # noqa: B018
    assert "pip install" not in str(failure.value)
