"""Optimistic concurrency: a lost race is retried, an endless one is a clear error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chatmemory import (
    AsyncInMemoryChatMemoryStore,
    AsyncMessageWindowChatMemory,
    ConcurrentUpdateError,
    ConfigurationError,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    UserMessage,
)
from chatmemory.stores import Committed, NewMessage


class Racing(InMemoryChatMemoryStore):
    """Another writer commits just before each of our first `losses` commits."""

    def __init__(self, losses: int) -> None:
        super().__init__()
        self.losses = losses
        self.commits = 0

    def commit_window(self, memory_id: str, **kwargs: Any) -> Committed | None:
        self.commits += 1
        if self.losses:
            self.losses -= 1
            rival = super().load_window(memory_id)
            assert super().commit_window(
                memory_id,
                version=rival.version,
                append=[NewMessage(UserMessage(f"rival {self.commits}"))],
                evict=[],
            )
        return super().commit_window(memory_id, **kwargs)


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    def few(attempts: int = 5, *, cap: float = 0.0) -> Iterator[float]:
        return iter([0.0] * (attempts - 1))

    monkeypatch.setattr("chatmemory._flow.backoff", few)


def test_add_retries_after_losing_a_race_and_keeps_both_writes() -> None:
    store = Racing(losses=2)
    memory = MessageWindowChatMemory(max_messages=10, store=store)
    memory.add(UserMessage("mine"))
    texts = [h.message.text for h in store.history("default")]  # type: ignore[union-attr]
    assert texts == ["rival 1", "rival 2", "mine"]
    assert store.commits == 3


def test_set_retries_after_losing_a_race() -> None:
    store = Racing(losses=1)
    memory = MessageWindowChatMemory(max_messages=10, store=store)
    memory.set([UserMessage("a"), UserMessage("b")])
    assert memory.messages() == [UserMessage("a"), UserMessage("b")]
    assert [h.in_window for h in store.history("default")] == [False, True, True]


def test_update_messages_retries_after_losing_a_race() -> None:
    store = Racing(losses=1)
    store.update_messages("m", [UserMessage("a")])
    assert store.get_messages("m") == [UserMessage("a")]


@pytest.mark.parametrize("operation", ["add", "set", "update"])
def test_losing_every_race_is_a_clear_error_and_writes_nothing(operation: str) -> None:
    store = Racing(losses=1000)
    memory = MessageWindowChatMemory(max_messages=10, id="busy", store=store)
    write: Callable[[], None] = {
        "add": lambda: memory.add(UserMessage("mine")),
        "set": lambda: memory.set([UserMessage("mine")]),
        "update": lambda: store.update_messages("busy", [UserMessage("mine")]),
    }[operation]
    with pytest.raises(ConcurrentUpdateError, match="memory id 'busy'") as caught:
        write()
    assert caught.value.memory_id == "busy"
    assert caught.value.store is store
    assert "mine" not in [h.message.text for h in store.history("busy")]  # type: ignore[union-attr]


def test_backoff_yields_growing_capped_delays() -> None:
    from chatmemory._flow import backoff

    delays = list(backoff(12, cap=0.01))
    assert len(delays) == 11
    assert all(0 <= d <= 0.01 for d in delays)


def test_set_keeps_the_rows_it_can_reuse() -> None:
    store = InMemoryChatMemoryStore()
    memory = MessageWindowChatMemory(max_messages=10, store=store)
    memory.add(UserMessage("a"), UserMessage("b"))
    memory.set([UserMessage("b"), UserMessage("c")])
    assert memory.messages() == [UserMessage("b"), UserMessage("c")]
    history = store.history("default")
    assert [(h.message.text, h.in_window) for h in history] == [  # type: ignore[union-attr]
        ("a", False),
        ("b", True),
        ("c", True),
    ]


def test_update_messages_with_the_same_window_writes_nothing() -> None:
    store = InMemoryChatMemoryStore()
    store.update_messages("m", [UserMessage("a")])
    version = store.load_window("m").version
    store.update_messages("m", [UserMessage("a")])
    assert store.load_window("m").version == version


def test_async_memories_retry_too() -> None:
    class AsyncRacing(AsyncInMemoryChatMemoryStore):
        pass

    async def main() -> None:
        sync = Racing(losses=2)
        store = AsyncRacing(store=sync)
        memory = AsyncMessageWindowChatMemory(max_messages=10, store=store)
        await memory.add(UserMessage("mine"))
        assert [h.message.text for h in await store.history("default")] == [  # type: ignore[union-attr]
            "rival 1",
            "rival 2",
            "mine",
        ]

    asyncio.run(main())


def test_in_memory_store_checks_ids_and_can_hold_windows_only() -> None:
    store = InMemoryChatMemoryStore(keep_history=False)
    with pytest.raises(ConfigurationError, match="non-empty str"):
        store.get_messages("")
    store.update_messages("m", [UserMessage("a"), UserMessage("b")])
    store.update_messages("m", [UserMessage("b")])
    assert [(h.seq, h.message.text, h.in_window) for h in store.history("m")] == [(1, "b", True)]  # type: ignore[union-attr]
    assert [h.seq for h in store.history("m", seqs=[0, 1, 2])] == [1]
    assert repr(store) == "InMemoryChatMemoryStore(memory_ids=1)"
