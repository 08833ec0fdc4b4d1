"""A traced service call (`chatmemory.instrument()`): one ``invoke_agent`` span over its model
calls, tools and memory work, streams included (the span ends with the stream, and is current
only while the stream's own work runs); chatmemory's metrics beside the GenAI ones; and
``instrument=False``, which keeps a service out of both. Checked with the SDK's in-memory span
exporter and metric reader."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated, Any, Protocol

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import StatusCode

import chatmemory
from chatmemory import (
    AiMessage,
    ConfigurationError,
    MessageWindowChatMemory,
    ModelError,
    OpenAiTokenCountEstimator,
    SqliteChatMemoryStore,
    StoreError,
    TokenWindowChatMemory,
    ToolExecutionRequest,
)
from chatmemory.models import (
    Capability,
    ChatRequest,
    ChatResponse,
    PartialText,
    StreamEvent,
    TokenUsage,
)
from chatmemory.rag import HashingEmbeddingModel, InMemoryEmbeddingStore
from chatmemory.recall import SemanticRecall
from chatmemory.services import AsyncTokenStream, MemoryId, TokenStream, ai_service, moderate
from chatmemory.testing import ScriptedChatModel, ScriptedModerationModel
from chatmemory.tools import tool
from tests.otel_helpers import Otel, instrumented
from tests.rag.doubles import Fixed

ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o-mini")
AGENT = "invoke_agent Agent"


class Agent(Protocol):
    def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    async def achat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    def tokens(self, user: Annotated[str, MemoryId], text: str) -> TokenStream: ...

    def texts(self, user: Annotated[str, MemoryId], text: str) -> Iterator[str]: ...

    def atokens(self, user: Annotated[str, MemoryId], text: str) -> AsyncTokenStream: ...

    def atexts(self, user: Annotated[str, MemoryId], text: str) -> AsyncIterator[str]: ...


@pytest.fixture
def otel() -> Iterator[Otel]:
    with instrumented() as otel:
        yield otel


@tool
def clock() -> str:
    """The time."""
    return "noon"


@tool
def weather() -> str:
    """The weather."""
    return "sunny"


def ask_tools(*names: str) -> AiMessage:
    return AiMessage(
        tool_execution_requests=[
            ToolExecutionRequest(f"t{i}", name, "{}") for i, name in enumerate(names)
        ]
    )


def service(model: Any = None, **options: Any) -> Any:
    """The `Agent` service with a memory per id, the tools `clock` and `weather`, and `model`."""
    options.setdefault(
        "chat_memory_provider", lambda mid: MessageWindowChatMemory(id=mid, max_messages=20)
    )
    options.setdefault("tools", [clock, weather])
    return ai_service(Agent, chat_model=model, **options)


def the_agent(otel: Otel) -> ReadableSpan:
    [agent] = otel.named(AGENT)
    return agent


def attribute(span: ReadableSpan, key: str) -> Any:
    return (span.attributes or {})[key]


def parent_of(span: ReadableSpan) -> int:
    assert span.parent is not None
    return span.parent.span_id


STREAMED_TURN = ["execute_tool clock", "chat scripted", "chat scripted", "chatmemory commit"]
"""The children of a streamed turn with a tool call, as they end: the tool runs as soon as its
call is complete, before the model's stream ends."""


# -- streams -----------------------------------------------------------------------------------


def test_a_token_stream_is_one_span_ended_when_read_to_its_end(otel: Otel) -> None:
    app = otel.tracer_provider.get_tracer("app")
    agent = service(ScriptedChatModel([ask_tools("clock"), "It is noon now."]))
    with app.start_as_current_span("request") as request:
        stream = agent.tokens("ann", "time?")
        pieces = []
        for event in stream:
            assert otel.named(AGENT) == []  # open while the stream is
            # the caller's own spans between pieces are not the call's children
            assert trace.get_current_span() is request
            with app.start_as_current_span("caller"):
                pass
            if isinstance(event, PartialText):
                pieces.append(event.text)
    assert "".join(pieces) == "It is noon now."
    assert stream.result.content == "It is noon now."
    span = the_agent(otel)
    assert parent_of(span) == request.get_span_context().span_id
    assert otel.children(span) == STREAMED_TURN
    assert all(parent_of(c) == request.get_span_context().span_id for c in otel.named("caller"))
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "Agent",
        "gen_ai.agent.id": "Agent.tokens",
        "gen_ai.conversation.id": "ann",
    }
    assert span.status.status_code == StatusCode.UNSET
    [chat, _] = otel.named("chat scripted")
    assert attribute(chat, "gen_ai.conversation.id") == "ann"


def test_a_text_stream_closed_early_ends_its_span_as_cancelled(otel: Otel) -> None:
    agent = service(ScriptedChatModel(["one two three four"]))
    texts = agent.texts("ann", "count")
    assert next(texts) == "one "
    texts.close()
    span = the_agent(otel)
    assert attribute(span, "error.type") == "cancelled"
    assert span.status.status_code == StatusCode.UNSET
    [chat] = otel.named("chat scripted")
    assert parent_of(chat) == span.context.span_id
    assert attribute(chat, "error.type") == "cancelled"
    assert agent.get_chat_memory("ann").messages() == []  # nothing stored


def test_an_abandoned_stream_ends_its_span_when_collected(otel: Otel) -> None:
    agent = service(ScriptedChatModel(["one two three four"]))
    stream = iter(agent.tokens("ann", "count"))
    next(stream)
    del stream
    gc.collect()
    assert attribute(the_agent(otel), "error.type") == "cancelled"


class Streams(Protocol):
    def texts(self, text: str) -> Iterator[str]: ...

    def atexts(self, text: str) -> AsyncIterator[str]: ...


class Failing:
    """A streaming model that sends a piece, then fails."""

    capabilities = frozenset({Capability.STREAMING})

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        yield PartialText("Hel")
        raise ModelError("connection reset", retriable=True)

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        yield PartialText("Hel")
        raise ModelError("connection reset", retriable=True)


def test_a_stream_that_raises_records_the_error(otel: Otel) -> None:
    agent = ai_service(Streams, streaming_chat_model=Failing())
    with pytest.raises(ModelError, match="connection reset"):
        list(agent.texts("hi"))
    [span] = otel.named("invoke_agent Streams")
    assert span.status.status_code == StatusCode.ERROR
    assert attribute(span, "error.type") == "ModelError"
    assert [e.name for e in span.events] == ["exception"]
    [chat] = otel.named("chat")
    assert parent_of(chat) == span.context.span_id


def test_tools_run_on_the_pool_keep_the_streaming_call_as_parent(otel: Otel) -> None:
    threads: set[str] = set()

    @tool
    def slow_clock() -> str:
        """The time, slowly."""
        threads.add(threading.current_thread().name)
        return "noon"

    agent = service(
        ScriptedChatModel([ask_tools("slow_clock", "slow_clock"), "Noon."]),
        tools=[slow_clock],
        execute_tools_concurrently=True,
    )
    assert "".join(agent.texts("ann", "time?")) == "Noon."
    assert threads
    assert all(name.startswith("chatmemory") for name in threads)
    span = the_agent(otel)
    tools = otel.named("execute_tool slow_clock")
    assert len(tools) == 2
    assert all(parent_of(t) == span.context.span_id for t in tools)


def test_async_streams_end_their_spans_read_closed_or_collected(otel: Otel) -> None:
    app = otel.tracer_provider.get_tracer("app")
    model = ScriptedChatModel([ask_tools("clock"), "It is noon.", "a b c d", "a b c d"])
    agent = service(model)

    async def main() -> None:
        with app.start_as_current_span("request") as request:
            stream = agent.atokens("ann", "time?")
            async for _ in stream:
                assert trace.get_current_span() is request
                with app.start_as_current_span("caller"):
                    await asyncio.sleep(0)
            assert stream.result.content == "It is noon."
        texts = agent.atexts("bob", "count")
        assert await anext(texts) == "a "
        await texts.aclose()
        dropped = aiter(agent.atokens("cy", "count"))
        await anext(dropped)
        del dropped
        gc.collect()
        for _ in range(5):  # asyncio's finalizer closes it in a task
            await asyncio.sleep(0)
        assert len(otel.named(AGENT)) == 3

    asyncio.run(main())
    read, closed, collected = otel.named(AGENT)
    assert otel.children(read) == STREAMED_TURN
    assert attribute(read, "gen_ai.agent.id") == "Agent.atokens"
    callers = otel.named("caller")
    assert callers
    assert all(parent_of(c) == parent_of(read) for c in callers)
    for span in (closed, collected):
        assert attribute(span, "error.type") == "cancelled"
        assert otel.children(span) == ["chat scripted"]


def test_an_async_stream_that_raises_records_the_error(otel: Otel) -> None:
    agent = ai_service(Streams, streaming_chat_model=Failing())

    async def main() -> list[str]:
        return [piece async for piece in agent.atexts("hi")]

    with pytest.raises(ModelError):
        asyncio.run(main())
    [span] = otel.named("invoke_agent Streams")
    assert span.status.status_code == StatusCode.ERROR
    [chat] = otel.named("chat")
    assert parent_of(chat) == span.context.span_id


def test_streams_cost_nothing_when_tracing_is_off() -> None:
    agent = service(ScriptedChatModel(["Hi there.", "Hi again."]))
    assert "".join(agent.texts("ann", "hi")) == "Hi there."

    async def main() -> str:
        return "".join([piece async for piece in agent.atexts("ann", "hi")])

    assert asyncio.run(main()) == "Hi again."


# -- metrics and the memory's spans ------------------------------------------------------------


def test_commit_and_window_metrics_name_the_agent_and_store_not_the_conversation(
    otel: Otel, tmp_path: Path
) -> None:
    with SqliteChatMemoryStore(tmp_path / "chat.db") as store:
        agent = service(
            ScriptedChatModel(lambda request: "A short answer."),
            chat_memory_provider=lambda mid: TokenWindowChatMemory(
                id=mid, max_tokens=60, estimator=ESTIMATOR, store=store
            ),
        )
        for i in range(3):
            agent.chat("ann", f"Question {i}, a longer one about the weather today?")
        asyncio.run(agent.achat("bob", "Hi"))
    commits = otel.named("chatmemory commit")
    assert [attribute(c, "chatmemory.messages.written") for c in commits] == [2] * 4
    assert {attribute(c, "chatmemory.store.kind") for c in commits} == {"SqliteChatMemoryStore"}
    evicted = [attribute(c, "chatmemory.messages.evicted") for c in commits]
    assert evicted[0] == 0
    assert evicted[2] > 0  # the window of 60 tokens gave way
    common = {"gen_ai.agent.name": "Agent", "chatmemory.store.kind": "SqliteChatMemoryStore"}
    assert otel.counter("chatmemory.memory.evicted") == [(common, sum(evicted))]
    [(attributes, count, total)] = otel.histogram("chatmemory.window.tokens")
    assert (attributes, count) == (common, 4)
    assert 0 < total <= 4 * 60


def test_a_recall_span_and_metric_count_what_was_found(otel: Otel) -> None:
    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore())
    agent = service(
        ScriptedChatModel(lambda request: "Noted."),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=2),
        semantic_recall=recall,
    )
    agent.chat("ann", "My locker code is 4711.")
    for text in ("Clouds?", "Rain?", "Snow?"):
        agent.chat("ann", text)
    agent.chat("ann", "What was my locker code?")
    recalls = otel.named("chatmemory recall")
    hits = [attribute(r, "chatmemory.recall.hits") for r in recalls]
    assert len(hits) == 5
    assert hits[-1] >= 1
    assert len(otel.named("chatmemory index")) == 5
    [(attributes, count, total)] = otel.histogram("chatmemory.recall.hits")
    assert attributes == {
        "gen_ai.agent.name": "Agent",
        "chatmemory.store.kind": "SingleMemoryStore",
    }
    assert (count, total) == (5, sum(hits))
    assert otel.histogram("chatmemory.window.tokens") == []  # it counts messages


def test_a_failed_tool_marks_its_span_and_an_unknown_one_too(otel: Otel) -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk full")

    agent = service(ScriptedChatModel([ask_tools("broken", "missing"), "Sorry."]), tools=[broken])
    assert agent.chat("ann", "go") == "Sorry."
    [failed] = otel.named("execute_tool broken")
    assert failed.status.status_code == StatusCode.ERROR
    assert attribute(failed, "error.type") == "RuntimeError"
    [unknown] = otel.named("execute_tool missing")
    assert attribute(unknown, "error.type") == "unknown_tool"


def test_the_metrics_use_the_conventions_buckets(otel: Otel) -> None:
    usage = ChatResponse(ai_message=AiMessage("Hi"), token_usage=TokenUsage(12, 3))
    agent = service(
        ScriptedChatModel([usage]),
        chat_memory_provider=lambda mid: TokenWindowChatMemory(
            id=mid, max_tokens=60, estimator=ESTIMATOR
        ),
    )
    agent.chat("ann", "hi")
    assert otel.bounds("gen_ai.client.operation.duration") == tuple(0.01 * 2**i for i in range(14))
    assert otel.bounds("gen_ai.client.token.usage")[:4] == (1, 4, 16, 64)
    assert otel.bounds("gen_ai.client.token.usage")[-1] == 67_108_864
    assert otel.bounds("chatmemory.window.tokens") == otel.bounds("gen_ai.client.token.usage")


# -- instrument=False --------------------------------------------------------------------------


def test_a_service_made_with_instrument_false_makes_no_spans_or_metrics(otel: Otel) -> None:
    quiet = service(
        ScriptedChatModel([ask_tools("clock"), "Noon.", "a b", "c d", "e f"]), instrument=False
    )
    app = otel.tracer_provider.get_tracer("app")
    with app.start_as_current_span("request"):
        assert quiet.chat("ann", "time?") == "Noon."
        assert "".join(quiet.texts("ann", "hi")) == "a b"

        async def main() -> str:
            await quiet.achat("ann", "hi")
            return "".join([piece async for piece in quiet.atexts("ann", "hi")])

        assert asyncio.run(main()) == "e f"
    assert [s.name for s in otel.spans()] == ["request"]
    assert otel.histogram("gen_ai.client.operation.duration") == []
    loud = service(ScriptedChatModel(["Hi."]))
    assert loud.chat("ann", "hi") == "Hi."
    assert the_agent(otel).name == AGENT  # the other services are traced as before


def test_a_traced_service_inside_a_quiet_ones_tool_is_traced(otel: Otel) -> None:
    inner = service(ScriptedChatModel(["inner answer"]))

    @tool
    def consult() -> str:
        """Ask the other agent."""
        return str(inner.chat("bob", "what?"))

    outer = service(
        ScriptedChatModel([ask_tools("consult"), "Done."]), tools=[consult], instrument=False
    )
    assert outer.chat("ann", "go") == "Done."
    span = the_agent(otel)
    assert attribute(span, "gen_ai.conversation.id") == "bob"
    assert otel.children(span) == ["chat scripted", "chatmemory commit"]
    assert [s.name for s in otel.spans()] == ["chat scripted", "chatmemory commit", AGENT]


def test_instrument_takes_a_bool() -> None:
    with pytest.raises(ConfigurationError, match=r"`instrument` is True .* or False"):
        service(ScriptedChatModel([]), instrument="no")


def test_result_streams_hold_the_span_over_the_whole_result(otel: Otel) -> None:
    agent = service(ScriptedChatModel(["Hi."]))
    stream = agent.tokens("ann", "hi")
    assert otel.spans() == []  # nothing runs before the stream is read
    for _ in stream:
        pass
    assert stream.result.content == "Hi."
    assert otel.children(the_agent(otel)) == ["chat scripted", "chatmemory commit"]


class OwnMemory:
    """A memory written by hand: the ChatMemory protocol only (no store, no counts)."""

    broken = False

    def __init__(self, memory_id: str) -> None:
        self.id = memory_id
        self.kept: list[Any] = []

    def messages(self) -> list[Any]:
        return list(self.kept)

    def add(self, *messages: Any) -> None:
        if OwnMemory.broken:
            raise StoreError("disk full", store=self)
        self.kept.extend(messages[0] if len(messages) == 1 else messages)

    def set(self, *messages: Any) -> None:
        self.kept = []
        self.add(*messages)

    def clear(self) -> None:
        self.kept = []


def test_a_memory_of_ones_own_is_its_own_kind_and_a_failed_commit_an_error(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = service(ScriptedChatModel(["Hi.", "Hi again."]), chat_memory_provider=OwnMemory)
    assert agent.chat("ann", "hi") == "Hi."
    monkeypatch.setattr(OwnMemory, "broken", True)
    with pytest.raises(StoreError, match="disk full"):
        agent.chat("ann", "hi")
    stored, failed = otel.named("chatmemory commit")
    assert dict(stored.attributes or {}) == {  # no eviction it could tell of
        "chatmemory.store.kind": "OwnMemory",
        "chatmemory.messages.written": 2,
    }
    assert failed.status.status_code == StatusCode.ERROR
    assert attribute(failed, "error.type") == "StoreError"
    assert otel.named(AGENT)[1].status.status_code == StatusCode.ERROR
    assert otel.histogram("chatmemory.window.tokens") == []
    assert otel.counter("chatmemory.memory.evicted") == []


def test_retrieval_and_moderation_are_spans_of_the_call(otel: Otel) -> None:
    class Checked(Protocol):
        @moderate
        def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    agent = ai_service(
        Checked,
        chat_model=ScriptedChatModel(["Refunds take a week."]),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=20),
        content_retriever=Fixed("Refunds take 7 days."),
        moderation_model=ScriptedModerationModel(flag=["bomb"]),
    )
    assert agent.chat("ann", "refunds?") == "Refunds take a week."
    [span] = otel.named("invoke_agent Checked")
    assert sorted(otel.children(span)) == [
        "chat scripted",
        "chatmemory commit",
        "chatmemory moderation",
        "chatmemory retrieve",
    ]


def test_a_call_not_sampled_records_metrics_and_builds_no_span() -> None:
    sampled_out = Otel(sampler=ALWAYS_OFF)
    chatmemory.instrument(
        tracer_provider=sampled_out.tracer_provider,
        meter_provider=sampled_out.meter_provider,
        record_content=True,
    )
    try:
        agent = service(
            ScriptedChatModel([ask_tools("clock"), "Noon.", ModelError("busy", retriable=True)])
        )
        assert agent.chat("ann", "time?") == "Noon."
        with pytest.raises(ModelError, match="busy"):
            agent.chat("ann", "again?")
    finally:
        chatmemory.uninstrument()
    assert sampled_out.spans() == []
    durations = sampled_out.histogram("gen_ai.client.operation.duration")
    assert sorted((a.get("error.type", ""), count) for a, count, _ in durations) == [
        ("", 2),
        ("ModelError", 1),
    ]
