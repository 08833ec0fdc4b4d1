"""Work for child processes in the reliability tests, importable by name (multiprocessing's
"spawn" start method imports the target's module in the child).

A store crosses the process boundary as a spec, ``("package.module:ClassName", {kwargs})``
(the form `benchmarks/stores.py` uses), so every built-in store (SQLite, Redis, PostgreSQL)
can be driven the same way: ``("chatmemory.stores.sqlite:SqliteChatMemoryStore",
{"path": "/tmp/x.db"})``.
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any, Protocol

from chatmemory import MemoryId, MessageWindowChatMemory, UserMessage, ai_service
from chatmemory.models import ChatRequest
from chatmemory.testing import ScriptedChatModel

StoreSpec = tuple[str, dict[str, Any]]


class Signal(Protocol):
    """What a child needs of a `multiprocessing` Event or Barrier."""

    def wait(self, timeout: float | None = None) -> Any: ...


class Flag(Protocol):
    def set(self) -> None: ...


def open_store(spec: StoreSpec) -> Any:
    """A new store from its spec."""
    target, kwargs = spec
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)(**kwargs)


def text_of(prefix: str, index: int, padding: int = 0) -> str:
    """The text of message `index` of a writer: ``"<prefix>#<index>:<padding dots>$"``.

    The end marker lets a reader check that a message is whole (`parse_text`).
    """
    return f"{prefix}#{index}:" + "." * padding + "$"


def parse_text(text: str) -> tuple[str, int]:
    """(prefix, index) of a `text_of` text; ValueError if the text is not a whole one."""
    head, _, tail = text.partition(":")
    prefix, _, index = head.rpartition("#")
    if not tail.endswith("$") or tail.strip(".") != "$" or not index.isdigit():
        raise ValueError(f"not a whole message: {text[:40]!r}...")
    return prefix, int(index)


def add_many(
    store_spec: StoreSpec,
    memory_id: str,
    prefix: str,
    count: int,
    *,
    max_messages: int = 20,
    padding: int = 0,
    start: Signal | None = None,
    started: Flag | None = None,
) -> None:
    """Add `count` user messages `text_of(prefix, i, padding)` one `add` at a time to a
    `MessageWindowChatMemory(max_messages)` on a store of its own, reading the window after
    each as a chat turn does.

    `start` (a Barrier or Event) is waited for before the first add, so writers begin together;
    `started` is set after the first add (a parent waiting to kill a writer mid-loop).
    """
    with open_store(store_spec) as store:
        memory = MessageWindowChatMemory(id=memory_id, max_messages=max_messages, store=store)
        if start is not None:
            start.wait()
        for i in range(count):
            memory.add(UserMessage(text_of(prefix, i, padding)))
            memory.messages()  # what a chat turn reads for its model call
            if i == 0 and started is not None:
                started.set()


def open_and_add(store_spec: StoreSpec, memory_id: str, text: str, start: Signal) -> None:
    """Wait for `start`, open the store (so that many processes open it at once), add `text`."""
    start.wait()
    with open_store(store_spec) as store:
        MessageWindowChatMemory(id=memory_id, max_messages=1_000, store=store).add(
            UserMessage(text)
        )


class Assistant(Protocol):
    """The service of `service_turns`."""

    def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...


def _echo(request: ChatRequest) -> str:
    return "re " + str(getattr(request.messages[-1], "text", ""))


def service_turns(
    store_spec: StoreSpec, memory_id: str, prefix: str, count: int, start: Signal
) -> None:
    """Run `count` AI-service calls on `memory_id`, each asking `text_of(prefix, i)` of a scripted
    model that answers ``"re " + question``, on a store of its own."""
    with open_store(store_spec) as store:
        service = ai_service(
            Assistant,
            chat_model=ScriptedChatModel(_echo),
            chat_memory_provider=lambda mid: MessageWindowChatMemory(
                id=mid, max_messages=6, store=store
            ),
        )
        start.wait()
        for i in range(count):
            service.chat(memory_id, text_of(prefix, i))


class Stop(Protocol):
    def is_set(self) -> bool: ...


def write_through_failover(
    store_spec: StoreSpec, writer: str, memory_ids: list[str], stop: Stop, out: str
) -> None:
    """Add chat turns (a user and an AI message, one `add`) to `memory_ids` in turn until
    `stop` is set, each turn's text new (`text_of(f"{writer}/{memory id}", n)`).

    A turn whose `add` returned is acknowledged; one that raised is not (and is not retried:
    its text is never written again). Writes `out`, a JSON list of
    ``[memory id, n, acknowledged, time.time() when the call ended]``.
    """
    import json
    import time

    from chatmemory import AiMessage, StoreError

    log: list[list[object]] = []
    with open_store(store_spec) as store:
        memories = [
            MessageWindowChatMemory(id=memory_id, max_messages=10, store=store)
            for memory_id in memory_ids
        ]
        n = 0
        while not stop.is_set():
            memory = memories[n % len(memories)]
            text = text_of(f"{writer}/{memory.id}", n)
            try:
                memory.add(UserMessage(text), AiMessage(text))
                acknowledged = True
            except StoreError:
                acknowledged = False
            log.append([memory.id, n, acknowledged, time.time()])
            n += 1
    with open(out, "w") as file:
        json.dump(log, file)
