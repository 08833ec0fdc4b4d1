"""Conversation titles: made after an answer, off the request path, never over the
application's own title, and never a failure of the call."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Annotated, Protocol

import pytest

from chatmemory import (
    ConcurrentUpdateError,
    ConfigurationError,
    MemoryId,
    MessageWindowChatMemory,
    ModelError,
    UserMessage,
)
from chatmemory.models import Capability, ChatRequest
from chatmemory.services import DEFAULT_TITLE_PROMPT, ConversationTitles, ai_service
from chatmemory.testing import ScriptedChatModel
from chatmemory.working import InMemoryRecordStore


class Assistant(Protocol):
    def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...


class AsyncAssistant(Protocol):
    async def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...


def windows(memory_id: str) -> MessageWindowChatMemory:
    return MessageWindowChatMemory(id=memory_id, max_messages=10)


def test_a_title_is_made_once_after_the_first_answer_in_the_background() -> None:
    release = threading.Event()
    asked: list[ChatRequest] = []

    def slow_title(request: ChatRequest) -> str:
        asked.append(request)
        release.wait(5)
        return '"Trip to Oslo."'

    titles = ConversationTitles(InMemoryRecordStore(), chat_model=ScriptedChatModel(slow_title))
    service = ai_service(
        Assistant,
        chat_model=ScriptedChatModel(["Sure!", "Yes."]),
        chat_memory_provider=windows,
        titles=titles,
    )
    assert service.chat("alice", "Plan my trip to Oslo") == "Sure!"  # returns while titling
    assert titles.get("alice") is None
    release.set()
    titles.wait(5)
    assert titles.get("alice") == "Trip to Oslo"
    prompt = str(asked[0].messages[0].text)  # type: ignore[union-attr]
    assert "User: Plan my trip to Oslo\nAssistant: Sure!" in prompt
    assert "at most 80 characters" in prompt
    assert service.chat("alice", "And Bergen?") == "Yes."
    titles.wait(5)
    assert len(asked) == 1  # the conversation has its title


def test_the_applications_title_is_never_overwritten() -> None:
    titles = ConversationTitles(
        InMemoryRecordStore(), chat_model=ScriptedChatModel(["Model's title"]), background=False
    )
    titles.set("bob", "  Bob's project  ")
    service = ai_service(
        Assistant, chat_model=ScriptedChatModel(["ok"]), chat_memory_provider=windows, titles=titles
    )
    service.chat("bob", "hello")
    assert titles.get("bob") == "Bob's project"
    # a generation that loses the race to the application stores nothing
    racing = ConversationTitles(InMemoryRecordStore(), chat_model=ScriptedChatModel(["Late"]))
    original = racing.store.load

    def load_then_app_sets(key: str):  # type: ignore[no-untyped-def]
        found = original(key)
        if found is None:
            racing.store.save(key, "App", expected=0)
        return found

    racing.store.load = load_then_app_sets  # type: ignore[method-assign]
    assert racing.generate("c", "hi", "hello") is None
    racing.store.load = original  # type: ignore[method-assign]
    assert racing.get("c") == "App"
    racing.set("c", "Renamed")
    assert racing.get("c") == "Renamed"
    with pytest.raises(ConfigurationError, match="a title is a non-empty str"):
        racing.set("c", " ")


def test_an_async_service_keeps_its_title_task_alive_until_drained() -> None:
    titles = ConversationTitles(InMemoryRecordStore(), chat_model=ScriptedChatModel(["Rust plans"]))
    service = ai_service(
        AsyncAssistant,
        chat_model=ScriptedChatModel(["Great!"]),
        chat_memory_provider=windows,
        titles=titles,
    )

    async def main() -> None:
        assert await service.chat("carol", "I want to learn Rust") == "Great!"
        await titles.drain()

    asyncio.run(main())
    assert titles.get("carol") == "Rust plans"


def test_an_async_only_title_model_and_a_foreground_async_title() -> None:
    class AsyncOnly:
        capabilities: frozenset[Capability] = frozenset()

        async def achat(self, request: ChatRequest):  # type: ignore[no-untyped-def]
            return await ScriptedChatModel(["Async title"]).achat(request)

    titles = ConversationTitles(InMemoryRecordStore(), chat_model=AsyncOnly(), background=False)
    assert titles.generate("d", "hi", "hello") == "Async title"
    service = ai_service(
        AsyncAssistant,
        chat_model=ScriptedChatModel(["ok"]),
        chat_memory_provider=windows,
        titles=ConversationTitles(
            InMemoryRecordStore(), chat_model=ScriptedChatModel(["T"]), background=False
        ),
    )
    asyncio.run(service.chat("e", "hi"))


def test_a_failing_or_empty_title_model_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    titles = ConversationTitles(
        InMemoryRecordStore(),
        chat_model=ScriptedChatModel([ModelError("down", retriable=True), '  ""  ']),
        background=False,
    )
    service = ai_service(
        Assistant,
        chat_model=ScriptedChatModel(["a", "b"]),
        chat_memory_provider=windows,
        titles=titles,
    )
    with caplog.at_level(logging.WARNING, logger="chatmemory.titles"):
        assert service.chat("f", "hi") == "a"
        assert service.chat("f", "again") == "b"
    assert titles.get("f") is None
    assert "could not make a title for 'f'" in caplog.text
    assert "gave no title for 'f'" in caplog.text


def test_titles_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="is not a chat model"):
        ConversationTitles(InMemoryRecordStore(), chat_model=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="at least 8"):
        ConversationTitles(InMemoryRecordStore(), chat_model=ScriptedChatModel([]), max_length=3)
    with pytest.raises(ConfigurationError, match="`titles` must be ConversationTitles"):
        ai_service(Assistant, chat_model=ScriptedChatModel([]), titles=object())  # type: ignore[arg-type]
    assert "{{max_length}}" in DEFAULT_TITLE_PROMPT


def test_async_paths_with_a_sync_model_a_failure_and_a_title_already_there(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class SyncOnly:
        capabilities: frozenset[Capability] = frozenset()

        def __init__(self, answer: str | Exception) -> None:
            self.answer = answer

        def chat(self, request: ChatRequest):  # type: ignore[no-untyped-def]
            return ScriptedChatModel([self.answer]).chat(request)

    made = ConversationTitles(InMemoryRecordStore(), chat_model=SyncOnly("Sync title"))
    failing = ConversationTitles(
        InMemoryRecordStore(), chat_model=SyncOnly(ModelError("x", retriable=False))
    )

    async def main() -> None:
        assert await made.agenerate("g", "hi", "hello") == "Sync title"
        assert await made.agenerate("g", "hi", "hello") is None  # it has one
        await failing.aafter_turn("h", "hi", "hello")
        await failing.drain()

    with caplog.at_level(logging.ERROR, logger="chatmemory.titles"):
        asyncio.run(main())
    assert "could not make a title for 'h'" in caplog.text


def test_setting_a_title_retries_when_another_writer_wins() -> None:
    from chatmemory import ConcurrentUpdateError

    store = InMemoryRecordStore()
    titles = ConversationTitles(store, chat_model=ScriptedChatModel([]))
    real_save = store.save
    losses = [1]

    def save(key: str, text: str, *, expected: int) -> int:
        if losses:
            losses.pop()
            real_save(key, "someone else", expected=expected)
            raise ConcurrentUpdateError("lost", store=store)
        return real_save(key, text, expected=expected)

    store.save = save  # type: ignore[method-assign]
    titles.set("i", "Mine")
    assert titles.get("i") == "Mine"


def test_the_title_model_and_prompt_are_chosen_per_conversation() -> None:
    cheap = ScriptedChatModel(["Cheap title"])
    careful = ScriptedChatModel(["Careful title"])
    titles = ConversationTitles(
        InMemoryRecordStore(),
        chat_model=lambda memory_id: careful if memory_id.startswith("vip-") else cheap,
        prompt=lambda memory_id: (
            "Titre en français : {{user}}" if memory_id.endswith("-fr") else DEFAULT_TITLE_PROMPT
        ),
        background=False,
    )
    assert titles.generate("vip-1-fr", "bonjour", "salut") == "Careful title"
    assert titles.generate("u-2", "hello", "hi") == "Cheap title"
    assert careful.requests[0].messages[0] == UserMessage("Titre en français : bonjour")
    assert "Write a title" in str(cheap.requests[0].messages[0])
    wrong = ConversationTitles(
        InMemoryRecordStore(),
        chat_model=lambda _: "gpt",  # type: ignore[arg-type,return-value]
        background=False,
    )
    with pytest.raises(ConfigurationError, match="gave 'gpt' for 'x', not a chat model"):
        wrong.generate("x", "hi", "hello")


def test_setting_a_title_against_busy_writers_gives_up_with_a_clear_error() -> None:
    class Busy(InMemoryRecordStore):
        def save(self, key: str, text: str, *, expected: int) -> int:
            raise ConcurrentUpdateError("busy", store=self, memory_id=key)

    titles = ConversationTitles(Busy(), chat_model=ScriptedChatModel([]))
    with pytest.raises(ConcurrentUpdateError, match="changed the title of 'c' on every one"):
        titles.set("c", "A title")
