"""chatmemory.instrument(): GenAI spans and metrics of model calls, checked with the SDK's
in-memory exporter and reader; nothing of OpenTelemetry imported while it is off."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import chatmemory
from chatmemory import (
    AiMessage,
    CustomMessage,
    ImageContent,
    ModelError,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.models import (
    ChatModelErrorContext,
    ChatModelRequestContext,
    ChatModelResponseContext,
    ChatParameters,
    ChatRequest,
    ChatResponse,
    FinishReason,
    StreamEvent,
    TokenUsage,
    with_listeners,
)
from chatmemory.models import listeners as listening
from chatmemory.telemetry import Instrumentation, invoke_agent, span
from chatmemory.testing import ScriptedChatModel
from tests.otel_helpers import Otel, instrumented

REQUEST = ChatRequest(
    [SystemMessage("Be brief."), UserMessage("Hi")],
    parameters=ChatParameters(model="gpt-4o-mini", temperature=0.2, max_output_tokens=50),
)
ANSWER = ChatResponse(
    ai_message=AiMessage("Hello"),
    token_usage=TokenUsage(12, 3),
    finish_reason=FinishReason.STOP,
    model_name="gpt-4o-mini-2024-07-18",
    id="resp-1",
)


@pytest.fixture
def otel() -> Iterator[Otel]:
    with instrumented() as otel:
        yield otel


def model(*answers: Any) -> Any:
    return with_listeners(ScriptedChatModel(list(answers) or [ANSWER] * 4))


async def _drain(events: AsyncIterator[StreamEvent]) -> None:
    async for _ in events:
        pass


def test_a_chat_span_carries_the_genai_attributes(otel: Otel) -> None:
    model().chat(REQUEST)
    [span] = otel.spans()
    assert span.name == "chat gpt-4o-mini"
    assert span.kind == SpanKind.CLIENT
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 50,
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": "resp-1",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 3,
    }
    assert span.status.status_code == StatusCode.UNSET


def test_metrics_record_token_usage_and_duration(otel: Otel) -> None:
    model().chat(REQUEST)
    asyncio.run(model().achat(REQUEST))
    common = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    }
    usage = sorted(otel.histogram("gen_ai.client.token.usage"), key=lambda p: str(p[0]))
    assert usage == [
        ({**common, "gen_ai.token.type": "input"}, 2, 24),
        ({**common, "gen_ai.token.type": "output"}, 2, 6),
    ]
    [(attributes, count, total)] = otel.histogram("gen_ai.client.operation.duration")
    assert (attributes, count) == (common, 2)
    assert 0 < total < 5


def test_sync_async_and_streaming_calls_each_make_one_span(otel: Otel) -> None:
    m = model()
    m.chat(REQUEST)
    asyncio.run(m.achat(REQUEST))
    events = m.stream(REQUEST)
    next(events)
    assert len(otel.spans()) == 2  # a stream's span ends when the stream does
    list(events)
    asyncio.run(_drain(m.astream(REQUEST)))
    spans = otel.spans()
    assert [s.name for s in spans] == ["chat gpt-4o-mini"] * 4
    assert all(s.attributes["gen_ai.usage.output_tokens"] == 3 for s in spans)  # type: ignore[index]


def test_a_failed_call_is_an_error_span_and_an_abandoned_stream_is_cancelled(otel: Otel) -> None:
    busy = ModelError("busy", retriable=True)
    with pytest.raises(ModelError):
        model(busy).chat(REQUEST)
    events = model().stream(REQUEST)
    next(events)
    events.close()
    failed, abandoned = otel.spans()
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes["error.type"] == "ModelError"  # type: ignore[index]
    assert [e.name for e in failed.events] == ["exception"]
    assert abandoned.status.status_code == StatusCode.UNSET
    assert abandoned.attributes["error.type"] == "cancelled"  # type: ignore[index]
    errors = {p[0]["error.type"] for p in otel.histogram("gen_ai.client.operation.duration")}
    assert errors == {"ModelError", "cancelled"}


def test_chat_spans_are_children_of_the_current_span_and_of_invoke_agent(otel: Otel) -> None:
    tracer = otel.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("request") as app_span:
        with invoke_agent("Assistant", conversation_id="ann:trip") as agent:
            assert agent is not None
            model().chat(REQUEST)
        model().chat(REQUEST)
    chat_inside, agent_span, chat_outside, app = otel.spans()
    assert agent_span.name == "invoke_agent Assistant"
    assert dict(agent_span.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "Assistant",
        "gen_ai.conversation.id": "ann:trip",
    }
    assert chat_inside.parent is not None
    assert chat_inside.parent.span_id == agent_span.context.span_id
    assert chat_inside.attributes["gen_ai.conversation.id"] == "ann:trip"  # type: ignore[index]
    assert agent_span.parent is not None
    assert agent_span.parent.span_id == app_span.get_span_context().span_id
    assert chat_outside.parent is not None
    assert chat_outside.parent.span_id == app.context.span_id
    assert "gen_ai.conversation.id" not in (chat_outside.attributes or {})


def test_an_error_in_invoke_agent_marks_its_span(otel: Otel) -> None:
    with pytest.raises(ValueError, match="bad"), invoke_agent(conversation_id="c"):
        raise ValueError("bad")
    [span] = otel.spans()
    assert span.name == "invoke_agent"
    assert span.status.status_code == StatusCode.ERROR


def test_calls_in_threads_and_tasks_get_their_own_parents(otel: Otel) -> None:
    def call(conversation: str) -> None:
        with invoke_agent("A", conversation_id=conversation):
            model().chat(REQUEST)

    threads = [threading.Thread(target=call, args=(f"c{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    async def acall(conversation: str) -> None:
        with invoke_agent("A", conversation_id=conversation):
            await model().achat(REQUEST)

    async def main() -> None:
        await asyncio.gather(*(acall(f"t{i}") for i in range(4)))

    asyncio.run(main())
    spans = otel.spans()
    agents = {s.context.span_id: s for s in spans if s.name == "invoke_agent A"}
    chats = [s for s in spans if s.name.startswith("chat")]
    assert len(chats) == 8
    for chat in chats:
        assert chat.parent is not None
        parent = agents[chat.parent.span_id]
        conversation = parent.attributes["gen_ai.conversation.id"]  # type: ignore[index]
        assert chat.attributes["gen_ai.conversation.id"] == conversation  # type: ignore[index]


def test_contents_are_recorded_only_when_asked(otel: Otel) -> None:
    call = ToolExecutionRequest("c1", "weather", '{"city": "Lisbon"}')
    model().chat(REQUEST)
    assert "gen_ai.input.messages" not in (otel.spans()[0].attributes or {})
    chatmemory.instrument(
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        record_content=True,
    )
    answer = ChatResponse(ai_message=AiMessage("Let me look.", tool_execution_requests=[call]))
    model(answer).chat(REQUEST)
    attributes = otel.spans()[1].attributes or {}
    assert json.loads(str(attributes["gen_ai.input.messages"])) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Hi"}]},
    ]
    assert json.loads(str(attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Let me look."},
                {"type": "tool_call", "id": "c1", "name": "weather", "arguments": call.arguments},
            ],
        }
    ]


def test_uninstrument_stops_spans_and_invoke_agent_costs_nothing_when_off() -> None:
    otel = Otel()
    chatmemory.instrument(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    assert chatmemory.uninstrument()
    assert not chatmemory.uninstrument()
    with invoke_agent("A", conversation_id="c") as span:
        assert span is None
        listening.chat(ScriptedChatModel([ANSWER]), REQUEST)
    assert otel.spans() == []


def test_nothing_of_opentelemetry_is_imported_while_off() -> None:
    code = (
        "import sys, chatmemory, chatmemory.telemetry\n"
        "from chatmemory.models import with_listeners\n"
        "from chatmemory.testing import ScriptedChatModel\n"
        "from chatmemory.models import ChatRequest\n"
        "from chatmemory import UserMessage\n"
        "with chatmemory.telemetry.invoke_agent('A', conversation_id='c'):\n"
        "    with_listeners(ScriptedChatModel(['x'])).chat(ChatRequest([UserMessage('hi')]))\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_without_the_api_installed_instrument_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(chatmemory.ConfigurationError, match=r"pip install 'chatmemory\[otel\]'"):
        chatmemory.instrument()


def test_contents_of_every_kind_of_message(otel: Otel) -> None:
    instrumentation = chatmemory.instrument(
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        record_content=True,
    )
    call = ToolExecutionRequest("c1", "weather", "{}")
    messages = [
        UserMessage(contents=[ImageContent(url="https://x.test/a.png")]),
        AiMessage(tool_execution_requests=[call]),
        ToolExecutionResultMessage("c1", "weather", "sunny"),
        CustomMessage({"note": 1}),
    ]
    request = ChatRequest.__new__(ChatRequest)  # a custom message is never a valid request
    object.__setattr__(request, "messages", tuple(messages))
    object.__setattr__(request, "parameters", None)
    context = ChatModelRequestContext(request, object(), None)
    instrumentation.on_request(context)
    instrumentation.on_response(
        ChatModelResponseContext(ANSWER, request, object(), None, context.attributes)
    )
    [span] = otel.spans()
    assert span.name == "chat"
    assert [
        m["parts"] for m in json.loads(str((span.attributes or {})["gen_ai.input.messages"]))
    ] == [
        [{"type": "image"}],
        [{"type": "tool_call", "id": "c1", "name": "weather", "arguments": "{}"}],
        [{"type": "tool_call_response", "id": "c1", "response": "sunny"}],
        [],
    ]


def test_provider_and_stop_sequences_are_attributes(otel: Otel) -> None:
    class Named:
        provider = "openai"

        def chat(self, request: ChatRequest) -> ChatResponse:
            return ChatResponse(ai_message=AiMessage("ok"))

    asked = ChatRequest([UserMessage("Hi")], parameters=ChatParameters(stop=["END"]))
    with invoke_agent("A"):
        with_listeners(Named()).chat(asked)
    chat, agent = otel.spans()
    assert dict(chat.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.stop_sequences": ("END",),
    }
    assert "gen_ai.conversation.id" not in (agent.attributes or {})
    [(attributes, _, _)] = otel.histogram("gen_ai.client.operation.duration")
    assert attributes == {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}
    assert otel.histogram("gen_ai.client.token.usage") == []  # no usage reported


def test_a_call_whose_request_was_not_seen_ends_nothing(otel: Otel) -> None:
    instrumentation = chatmemory.instrument(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    )
    assert isinstance(instrumentation, Instrumentation)
    instrumentation.on_response(ChatModelResponseContext(ANSWER, REQUEST, object(), None))
    instrumentation.on_error(ChatModelErrorContext(ValueError("x"), REQUEST, object(), None))
    assert otel.spans() == []


def test_a_services_own_span_is_current_and_off_costs_nothing(otel: Otel) -> None:
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather"}
    with invoke_agent("A", conversation_id="c"), span("execute_tool weather", tool) as opened:
        assert opened is not None
        model().chat(REQUEST)
    chat, tool_span, agent = otel.spans()
    assert dict(tool_span.attributes or {}) == tool
    assert chat.parent is not None
    assert chat.parent.span_id == tool_span.context.span_id
    assert tool_span.parent is not None
    assert tool_span.parent.span_id == agent.context.span_id
    chatmemory.uninstrument()
    with span("execute_tool weather", tool) as off:
        assert off is None


def test_a_service_call_is_one_invoke_agent_span_over_its_steps(otel: Otel) -> None:
    from typing import Annotated, Protocol

    from chatmemory import AiMessage, MessageWindowChatMemory, ToolExecutionRequest
    from chatmemory.services import MemoryId, ai_service
    from chatmemory.tools import tool

    class Agent(Protocol):
        def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

        async def achat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    @tool
    def clock() -> str:
        """The time."""
        return "noon"

    call = AiMessage(tool_execution_requests=[ToolExecutionRequest("t1", "clock", "{}")])
    service = ai_service(
        Agent,
        chat_model=ScriptedChatModel([call, "It is noon.", call, "Still noon."]),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=20),
        tools=[clock],
    )
    assert service.chat("conv-1", "time?") == "It is noon."
    assert asyncio.run(service.achat("conv-2", "time?")) == "Still noon."
    spans = otel.spans()
    agents = [s for s in spans if s.name == "invoke_agent Agent"]
    assert len(agents) == 2
    for agent, conversation in zip(agents, ("conv-1", "conv-2"), strict=True):
        assert (agent.attributes or {})["gen_ai.conversation.id"] == conversation
        children = [
            s.name
            for s in spans
            if s.parent is not None and s.parent.span_id == agent.context.span_id
        ]
        assert children == [
            "chat scripted",
            "execute_tool clock",
            "chat scripted",
            "chatmemory commit",
        ]
        tool_span = next(s for s in spans if s.name == "execute_tool clock")
        assert (tool_span.attributes or {})["gen_ai.tool.call.id"] == "t1"
