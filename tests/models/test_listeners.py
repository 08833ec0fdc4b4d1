"""Listeners on chat models: told of each request, its response or its error, sync, async and
streaming, with one context they annotate; a listener that raises never breaks the call."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from chatmemory import ModelError, UserMessage
from chatmemory.models import (
    CallAbandoned,
    ChatModelErrorContext,
    ChatModelListener,
    ChatModelRequestContext,
    ChatModelResponseContext,
    ChatParameters,
    ChatRequest,
    ChatResponse,
    StreamEvent,
    add_chat_model_listener,
    remove_chat_model_listener,
    with_listeners,
)
from chatmemory.models import listeners as listening
from chatmemory.testing import ScriptedChatModel

REQUEST = ChatRequest([UserMessage("Hi")])


class Recorder(ChatModelListener):
    """Records what it is told; its request annotation must reach the response or error."""

    def __init__(self, name: str = "r") -> None:
        self.name = name
        self.seen: list[tuple[str, Any]] = []

    def on_request(self, context: ChatModelRequestContext) -> None:
        context.attributes[self.name] = "started"
        self.seen.append(("request", context.request))

    def on_response(self, context: ChatModelResponseContext) -> None:
        self.seen.append(("response", (context.response.ai_message.text, context.attributes)))

    def on_error(self, context: ChatModelErrorContext) -> None:
        self.seen.append(("error", (type(context.error), context.attributes)))


class Raising:
    """A listener with only some methods, each of which raises."""

    def on_request(self, context: object) -> None:
        raise RuntimeError("listener bug")

    def on_response(self, context: object) -> None:
        raise RuntimeError("listener bug")


async def _collect(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


def _all_ways(model: Any) -> Iterator[str | None]:
    """Call `model` each of the four ways; yield each answer's text."""
    yield model.chat(REQUEST).ai_message.text
    yield asyncio.run(model.achat(REQUEST)).ai_message.text
    *_, last = model.stream(REQUEST)
    yield _final(last).ai_message.text
    *_, alast = asyncio.run(_collect(model.astream(REQUEST)))
    yield _final(alast).ai_message.text


def _final(event: StreamEvent) -> ChatResponse:
    assert isinstance(event, ChatResponse)
    return event


def test_each_way_of_calling_tells_request_then_response_with_shared_attributes() -> None:
    recorder = Recorder()
    model = with_listeners(ScriptedChatModel(lambda r: "Hello there"), recorder)
    assert list(_all_ways(model)) == ["Hello there"] * 4
    expected = [("request", REQUEST), ("response", ("Hello there", {"r": "started"}))] * 4
    assert recorder.seen == expected


def test_a_failing_call_tells_on_error_and_raises_the_models_error() -> None:
    recorder = Recorder()
    model = with_listeners(
        ScriptedChatModel(lambda r: ModelError("busy", retriable=True)), recorder
    )
    with pytest.raises(ModelError, match="busy"):
        model.chat(REQUEST)
    with pytest.raises(ModelError, match="busy"):
        asyncio.run(model.achat(REQUEST))
    with pytest.raises(ModelError, match="busy"):
        list(model.stream(REQUEST))
    with pytest.raises(ModelError, match="busy"):
        asyncio.run(_collect(model.astream(REQUEST)))
    errors = [seen for seen in recorder.seen if seen[0] == "error"]
    assert errors == [("error", (ModelError, {"r": "started"}))] * 4
    assert [kind for kind, _ in recorder.seen] == ["request", "error"] * 4


def test_a_stream_closed_early_is_told_as_abandoned_and_closes_the_models_stream() -> None:
    closed: list[str] = []

    class Model:
        capabilities: frozenset[str] = frozenset()

        def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
            try:
                yield from ScriptedChatModel(["one two three"]).stream(request)
            finally:
                closed.append("sync")

        async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
            try:
                for event in ScriptedChatModel(["one two three"]).stream(request):
                    yield event
            finally:
                closed.append("async")

    recorder = Recorder()
    model = with_listeners(Model(), recorder)
    events = model.stream(REQUEST)
    next(events)
    events.close()  # type: ignore[attr-defined]

    async def first_then_close() -> None:
        events = model.astream(REQUEST)
        await events.__anext__()
        await events.aclose()  # type: ignore[attr-defined]

    asyncio.run(first_then_close())
    assert closed == ["sync", "async"]
    assert [seen for seen in recorder.seen if seen[0] == "error"] == [
        ("error", (CallAbandoned, {"r": "started"}))
    ] * 2


def test_a_stream_without_a_final_response_is_an_error_to_listeners() -> None:
    class Nothing:
        """An async iterator that ends at once (and has no aclose to call)."""

        def __aiter__(self) -> Nothing:
            return self

        async def __anext__(self) -> StreamEvent:
            raise StopAsyncIteration

    class Model:
        def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
            return iter([])  # no close either

        def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
            return Nothing()

    recorder = Recorder()
    model = with_listeners(Model(), recorder)
    assert list(model.stream(REQUEST)) == []
    assert asyncio.run(_collect(model.astream(REQUEST))) == []
    assert recorder.seen[1::2] == [("error", (CallAbandoned, {"r": "started"}))] * 2


def test_a_listener_that_raises_is_logged_and_the_call_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = Recorder()
    model = with_listeners(ScriptedChatModel(lambda r: "fine"), Raising(), recorder)
    with caplog.at_level(logging.ERROR, logger="chatmemory.listeners"):
        assert list(_all_ways(model)) == ["fine"] * 4
    assert len(recorder.seen) == 8  # the listener after the raising one is still told
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 8
    assert "raised in on_request; the call goes on without it" in messages[0]
    assert caplog.records[0].exc_info is not None


def test_the_wrapper_has_the_models_methods_only_and_its_other_attributes() -> None:
    class SyncOnly:
        capabilities: frozenset[str] = frozenset()
        model = "tiny"

        def chat(self, request: ChatRequest) -> ChatResponse:
            return ScriptedChatModel(["ok"]).chat(request)

    wrapped = with_listeners(SyncOnly(), Recorder())
    assert callable(getattr(wrapped, "chat", None))
    assert getattr(wrapped, "achat", None) is None  # code that prefers achat still picks chat
    assert wrapped.model == "tiny"
    assert wrapped.capabilities == frozenset()
    again = with_listeners(wrapped, Recorder("second"))
    assert again.listeners[1].name == "second"  # type: ignore[attr-defined]
    assert "with_listeners(" in repr(again)


def test_listeners_added_everywhere_hear_every_listened_call() -> None:
    everywhere = Recorder("global")
    own = Recorder("own")
    add_chat_model_listener(everywhere)
    add_chat_model_listener(everywhere)  # once only
    try:
        with_listeners(ScriptedChatModel(["a"]), own).chat(REQUEST)
        listening.chat(ScriptedChatModel(["b"]), REQUEST)  # the service layer's way
    finally:
        assert remove_chat_model_listener(everywhere)
    assert not remove_chat_model_listener(everywhere)
    assert [kind for kind, _ in everywhere.seen] == ["request", "response"] * 2
    assert own.seen[1] == ("response", ("a", {"own": "started", "global": "started"}))
    listening.chat(ScriptedChatModel(["c"]), REQUEST)
    assert len(everywhere.seen) == 4  # removed: told of nothing more


def test_a_wrapped_model_called_through_the_functions_is_told_once() -> None:
    """A service calls its model through the listening functions: a `with_listeners` model
    there must not tell the listeners added everywhere twice (once per layer)."""
    everywhere = Recorder("global")
    own = Recorder("own")
    model = with_listeners(ScriptedChatModel(["a", "b", "c", "d"]), own)
    add_chat_model_listener(everywhere)
    try:
        listening.chat(model, REQUEST)
        asyncio.run(listening.achat(model, REQUEST))
        list(listening.stream(model, REQUEST))
        asyncio.run(_collect(listening.astream(model, REQUEST)))
    finally:
        remove_chat_model_listener(everywhere)
    assert [kind for kind, _ in everywhere.seen] == ["request", "response"] * 4
    assert [kind for kind, _ in own.seen] == ["request", "response"] * 4
    assert own.seen[1] == ("response", ("a", {"own": "started", "global": "started"}))


def test_without_listeners_the_functions_are_the_models_own_calls() -> None:
    model = ScriptedChatModel(["a", "b", "c", "d"])
    assert listening.chat(model, REQUEST).ai_message.text == "a"
    assert asyncio.run(listening.achat(model, REQUEST)).ai_message.text == "b"
    assert _final(list(listening.stream(model, REQUEST))[-1]).ai_message.text == "c"
    events = asyncio.run(_collect(listening.astream(model, REQUEST)))
    assert _final(events[-1]).ai_message.text == "d"


def test_context_names_the_provider_and_the_model() -> None:
    scripted = ScriptedChatModel(["x"], model_name="scripted-1")
    assert listening.provider_of(scripted) is None
    assert listening.model_name(scripted, REQUEST) == "scripted-1"
    asked = ChatRequest([UserMessage("Hi")], parameters=ChatParameters(model="gpt-4o"))
    assert listening.model_name(scripted, asked) == "gpt-4o"

    class Named:
        provider = "ollama"
        model = 3

    assert listening.provider_of(Named()) == "ollama"
    assert listening.model_name(Named(), REQUEST) is None


def test_a_service_over_a_listened_model_tells_each_way_of_calling() -> None:
    from typing import Protocol

    from chatmemory import MessageWindowChatMemory, ai_service

    class Assistant(Protocol):
        def chat(self, text: str) -> str: ...

        def stream(self, text: str) -> Iterator[str]: ...

        async def achat(self, text: str) -> str: ...

        def astream(self, text: str) -> AsyncIterator[str]: ...

    recorder = Recorder()
    model = with_listeners(ScriptedChatModel(lambda r: "Hi there"), recorder)
    service = ai_service(
        Assistant,
        chat_model=model,
        streaming_chat_model=model,
        chat_memory=MessageWindowChatMemory(max_messages=10),
    )
    assert service.chat("hello") == "Hi there"
    assert "".join(service.stream("hello")) == "Hi there"
    assert asyncio.run(service.achat("hello")) == "Hi there"

    async def streamed() -> str:
        return "".join([piece async for piece in service.astream("hello")])

    assert asyncio.run(streamed()) == "Hi there"
    assert [kind for kind, _ in recorder.seen] == ["request", "response"] * 4
    assert all(
        request.messages[-1] == UserMessage("hello")
        for kind, request in recorder.seen
        if kind == "request"
    )
