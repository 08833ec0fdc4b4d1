"""OpenTelemetry traces and metrics of model calls and service calls, by the GenAI semantic
conventions.

```python
import chatmemory
chatmemory.instrument()  # spans and metrics to the global providers; or tracer_provider=...
```

Off until `instrument()` is called: nothing of OpenTelemetry is imported before (it is the
``otel`` extra, ``pip install 'chatmemory[otel]'``), and a call checks one global. It is one chat
model listener among others (`chatmemory.models.add_chat_model_listener`): every model call made
through the listening functions (`with_listeners` models, the service layer) gets a
``chat {model}`` span (kind CLIENT) with ``gen_ai.operation.name``, ``gen_ai.provider.name``,
``gen_ai.request.*``, ``gen_ai.response.model`` / ``id`` / ``finish_reasons``,
``gen_ai.usage.input_tokens`` / ``output_tokens`` and, inside `invoke_agent`,
``gen_ai.conversation.id``; and the ``gen_ai.client.token.usage`` and
``gen_ai.client.operation.duration`` histograms. The span's parent is whatever span is current
when the call starts (the application's, or `invoke_agent`'s); a stream's span ends when the
stream does. Message contents are recorded only with ``record_content=True`` (they are personal
data), as ``gen_ai.input.messages`` and ``gen_ai.output.messages``.

A service call (`chatmemory.services`) is an ``invoke_agent`` span whose children are its model
calls, tools and memory work; a streaming call's span ends when its stream does, and is current
only while the stream's steps run (`AgentCall`). Beside the GenAI metrics, the same meter feeds
chatmemory's own: ``chatmemory.window.tokens`` (the memory's window in each model request, for
memories that count tokens), ``chatmemory.memory.evicted`` (messages a commit took out of the
window) and ``chatmemory.recall.hits`` (what each recall found), with attributes that do not
name a conversation (``gen_ai.agent.name``, ``chatmemory.store.kind``): a memory id would make
a time series per user.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import threading
import time
from collections.abc import AsyncGenerator, Generator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ._errors import ConfigurationError
from ._messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    TextContent,
    ToolExecutionResultMessage,
    UserMessage,
)
from .models.listeners import (
    CallAbandoned,
    ChatModelErrorContext,
    ChatModelRequestContext,
    ChatModelResponseContext,
    add_chat_model_listener,
    model_name,
    remove_chat_model_listener,
)

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import Meter, MeterProvider
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = [
    "Agent",
    "AgentCall",
    "Instrumentation",
    "active",
    "astepped",
    "instrument",
    "invoke_agent",
    "span",
    "stepped",
    "uninstrument",
]

Y = TypeVar("Y")
R = TypeVar("R")

SCOPE = "chatmemory"
_MISSING = "chatmemory.instrument() needs OpenTelemetry's API: pip install 'chatmemory[otel]'"

_FINISH_REASONS = {
    "STOP": "stop",
    "LENGTH": "length",
    "TOOL_EXECUTION": "tool_call",
    "CONTENT_FILTER": "content_filter",
    "OTHER": "other",
}
_PARAMETERS = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "max_output_tokens": "gen_ai.request.max_tokens",
    "seed": "gen_ai.request.seed",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
}
_SPAN = "chatmemory.telemetry.span"
_STARTED = "chatmemory.telemetry.started"
_METRIC = "chatmemory.telemetry.metric"

# The conventions' bucket boundaries (gen-ai-metrics.md): the SDK's default ones (0 to 10,000)
# would put every duration in seconds into its first bucket.
_DURATION_BUCKETS = tuple(0.01 * 2**i for i in range(14))  # 0.01, 0.02, 0.04, ... 81.92
_TOKEN_BUCKETS = tuple(4**i for i in range(14))  # 1, 4, 16, ... 67,108,864
_HIT_BUCKETS = (0, 1, 2, 3, 4, 5, 10, 20, 50)


class Agent:
    """What every call of one agent (a service method, say) shares, made once: its span's name
    and attributes, and its metrics' attributes per kind of store."""

    __slots__ = ("attributes", "known", "metric", "span_name")

    def __init__(self, name: str | None, attributes: Mapping[str, Any] | None = None) -> None:
        self.span_name = f"invoke_agent {name}" if name else "invoke_agent"
        self.metric: dict[str, Any] = {"gen_ai.agent.name": name} if name else {}
        self.attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            **self.metric,
            **(attributes or {}),
        }
        self.known: dict[str, dict[str, Any]] = {}
        """`metric_for`'s answers so far, by store kind."""

    def metric_for(self, store_kind: str) -> dict[str, Any]:
        """The attributes of chatmemory's metrics for a memory whose store is a `store_kind`:
        the agent's name and the store's kind, never the conversation. Made once per kind
        (kept in `known`, where callers look first)."""
        made = self.known[store_kind] = {**self.metric, "chatmemory.store.kind": store_kind}
        return made

    def call(
        self, conversation_id: str | None = None, *, muted: bool = False, deferred: bool = False
    ) -> AgentCall | None:
        """The span of one call (`AgentCall`), or None while `instrument()` is off.
        `muted`: the call makes no span, and its model calls none either. `deferred`: the span
        starts later (a stream's first item) but is a child of the span current now."""
        instrumentation = _installed
        if instrumentation is None:
            return None
        call = _Call(conversation_id, self, muted)
        if muted:
            return AgentCall(None, self.span_name, self.attributes, call)
        attributes = self.attributes
        if conversation_id is not None:
            attributes = {**attributes, "gen_ai.conversation.id": conversation_id}
        parent = instrumentation.current_context() if deferred else None
        return AgentCall(instrumentation, self.span_name, attributes, call, parent)


class _Call(NamedTuple):
    """What the spans and metrics made during one call (`invoke_agent`, a service call) are
    told: its conversation, its agent, and whether it is muted (a service made with
    ``instrument=False``)."""

    conversation_id: str | None
    agent: Agent
    muted: bool


_ANONYMOUS = Agent(None)


_current: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "chatmemory_call", default=None
)


def _message_json(message: ChatMessage) -> dict[str, Any]:
    """A message as the conventions' ``gen_ai.*.messages`` entries: role and parts."""
    parts: list[dict[str, Any]] = []
    if isinstance(message, SystemMessage):
        role, parts = "system", [{"type": "text", "content": message.text}]
    elif isinstance(message, UserMessage):
        role = "user"
        parts = [
            {"type": "text", "content": c.text}
            if isinstance(c, TextContent)
            else {"type": type(c).__name__.removesuffix("Content").lower()}
            for c in message.contents
        ]
    elif isinstance(message, AiMessage):
        role = "assistant"
        parts = [{"type": "text", "content": message.text}] if message.text else []
        parts += [
            {"type": "tool_call", "id": r.id, "name": r.name, "arguments": r.arguments}
            for r in message.tool_execution_requests
        ]
    elif isinstance(message, ToolExecutionResultMessage):
        role = "tool"
        text = " ".join(c.text for c in message.contents if isinstance(c, TextContent))
        parts = [{"type": "tool_call_response", "id": message.id, "response": text}]
    else:
        role = "custom"
    return {"role": role, "parts": parts}


def _contents(messages: Any) -> str:
    return json.dumps([_message_json(m) for m in messages], ensure_ascii=False)


class Instrumentation:
    """The listener `instrument()` adds (a span and metrics per chat model call), with the
    tracer and meter instruments a service's own spans and metrics use."""

    def __init__(self, tracer: Tracer, meter: Meter, *, record_content: bool) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self.tracer = tracer
        """The tracer of chatmemory's spans."""
        self.record_content = record_content
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.window_tokens = meter.create_histogram(
            "chatmemory.window.tokens",
            unit="{token}",
            description="Tokens of the memory's window in a model request, by the memory's "
            "estimator",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self.evicted = meter.create_counter(
            "chatmemory.memory.evicted",
            unit="{message}",
            description="Messages a commit took out of the memory's window",
        )
        self.recall_hits = meter.create_histogram(
            "chatmemory.recall.hits",
            unit="{hit}",
            description="Past messages (runs of them) a semantic recall found",
            explicit_bucket_boundaries_advisory=_HIT_BUCKETS,
        )
        self._client = SpanKind.CLIENT
        self._error_code = StatusCode.ERROR
        self._status = Status
        self.attach = context.attach
        self.detach = context.detach
        self.current_context = context.get_current
        self.in_context = trace.set_span_in_context

    # -- spans of our own ----------------------------------------------------------------------

    def opened(self, name: str, attributes: Mapping[str, Any] | None = None) -> _Opened:
        """A span named `name`, current while a ``with`` block runs and ended when it leaves."""
        return _Opened(self, self.tracer.start_span(name, attributes=attributes))

    def failed(self, span: Span, error: BaseException) -> None:
        """`error` recorded on `span`: ``error.type``, the exception event, the error status."""
        if not span.is_recording():
            return
        span.set_attribute("error.type", type(error).__qualname__)
        span.record_exception(error)
        span.set_status(self._status(self._error_code, str(error) or None))

    def metric(self, store_kind: str) -> dict[str, Any]:
        """The attributes of chatmemory's metrics in the call running here (`Agent.metric_for`)."""
        call = _current.get()
        agent = call.agent if call is not None else _ANONYMOUS
        return agent.known.get(store_kind) or agent.metric_for(store_kind)

    # -- the listener --------------------------------------------------------------------------

    def on_request(self, context: ChatModelRequestContext) -> None:
        call = _current.get()
        if call is not None and call.muted:
            return
        request = context.request
        model = model_name(context.model, request)
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if context.provider:
            attributes["gen_ai.provider.name"] = context.provider
        if model:
            attributes["gen_ai.request.model"] = model
        context.attributes[_METRIC] = attributes.copy()  # the metrics' share: the above only
        if call is not None and call.conversation_id is not None:
            attributes["gen_ai.conversation.id"] = call.conversation_id
        if request.parameters is not None:
            for name, key in _PARAMETERS.items():
                value = getattr(request.parameters, name)
                if value is not None:
                    attributes[key] = value
            if request.parameters.stop:
                attributes["gen_ai.request.stop_sequences"] = list(request.parameters.stop)
        opened = self.tracer.start_span(
            f"chat {model}" if model else "chat", kind=self._client, attributes=attributes
        )
        if self.record_content and opened.is_recording():
            opened.set_attribute("gen_ai.input.messages", _contents(request.messages))
        context.attributes[_SPAN] = opened
        context.attributes[_STARTED] = time.perf_counter()

    def on_response(self, context: ChatModelResponseContext) -> None:
        span: Span | None = context.attributes.get(_SPAN)
        if span is None:  # on_request failed, or the call was muted: nothing to end
            return
        response = context.response
        metric = context.attributes[_METRIC]
        if response.model_name:
            metric = {**metric, "gen_ai.response.model": response.model_name}
        usage = response.token_usage
        if span.is_recording():
            span.set_attributes(_response_attributes(response))
            if self.record_content:
                span.set_attribute("gen_ai.output.messages", _contents([response.ai_message]))
        if usage is not None:
            self.token_usage.record(usage.input_tokens, {**metric, "gen_ai.token.type": "input"})
            self.token_usage.record(usage.output_tokens, {**metric, "gen_ai.token.type": "output"})
        self._end(context.attributes, span, metric)

    def on_error(self, context: ChatModelErrorContext) -> None:
        span: Span | None = context.attributes.get(_SPAN)
        if span is None:
            return
        error = context.error
        if isinstance(error, CallAbandoned):
            kind = "cancelled"
            span.set_attribute("error.type", kind)
        else:
            kind = type(error).__qualname__
            self.failed(span, error)
        self._end(context.attributes, span, {**context.attributes[_METRIC], "error.type": kind})

    def _end(self, attributes: dict[Any, Any], span: Span, metric: dict[str, Any]) -> None:
        self.duration.record(time.perf_counter() - attributes[_STARTED], metric)
        span.end()


def _response_attributes(response: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    if response.model_name:
        attributes["gen_ai.response.model"] = response.model_name
    if response.id:
        attributes["gen_ai.response.id"] = response.id
    if response.finish_reason is not None:
        attributes["gen_ai.response.finish_reasons"] = [
            _FINISH_REASONS[response.finish_reason.value]
        ]
    usage = response.token_usage
    if usage is not None:
        attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
        attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
    return attributes


class _Opened:
    """A started span, made current by ``with`` and ended when the block leaves (an error
    leaving it is recorded). A class, not a generator: a span costs no generator frames."""

    __slots__ = ("_instrumentation", "_token", "span")

    def __init__(self, instrumentation: Instrumentation, span: Span) -> None:
        self._instrumentation = instrumentation
        self.span = span

    def __enter__(self) -> Span:
        instrumentation = self._instrumentation
        self._token = instrumentation.attach(instrumentation.in_context(self.span))
        return self.span

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        self._instrumentation.detach(self._token)
        if error is not None:
            self._instrumentation.failed(self.span, error)
        self.span.end()


class AgentCall:
    """An ``invoke_agent`` span over one call, and what the call's spans and metrics are told
    (`_Call`). As a ``with`` block it is started, current, and ended with the block. A stream
    uses the parts: `start` when its first item is asked for, `enter` / `exit` around each
    step (so the span is current only while the call's own work runs, never in the caller's
    code between items), `end` when the stream ends however it ends. A muted call
    (``instrument=False``) has no span: entering it only tells the listener to stay quiet."""

    __slots__ = (
        "_attributes",
        "_call",
        "_context",
        "_instrumentation",
        "_name",
        "_parent",
        "_tokens",
        "span",
    )

    def __init__(
        self,
        instrumentation: Instrumentation | None,
        name: str,
        attributes: Mapping[str, Any],
        call: _Call,
        parent: Context | None = None,
    ) -> None:
        self._instrumentation = instrumentation
        self._name = name
        self._attributes = attributes
        self._call = call
        self._parent = parent
        self._context: Context | None = None
        self.span: Span | None = None

    def start(self) -> None:
        instrumentation = self._instrumentation
        if instrumentation is None:
            return
        self.span = instrumentation.tracer.start_span(
            self._name, context=self._parent, attributes=self._attributes
        )
        self._context = instrumentation.in_context(self.span, self._parent)

    def enter(self) -> tuple[object, contextvars.Token[_Call | None]]:
        told = _current.set(self._call)
        if self._context is None:
            return None, told
        assert self._instrumentation is not None
        return self._instrumentation.attach(self._context), told

    def exit(self, tokens: tuple[object, contextvars.Token[_Call | None]]) -> None:
        attached, told = tokens
        _current.reset(told)
        if attached is not None:
            assert self._instrumentation is not None
            self._instrumentation.detach(attached)  # type: ignore[arg-type]

    def end(self, error: BaseException | None = None, *, cancelled: bool = False) -> None:
        span = self.span
        if span is None:
            return
        assert self._instrumentation is not None
        if cancelled:
            span.set_attribute("error.type", "cancelled")
        elif error is not None:
            self._instrumentation.failed(span, error)
        span.end()

    def __enter__(self) -> Span | None:
        self.start()
        self._tokens = self.enter()
        return self.span

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        self.exit(self._tokens)
        self.end(error)


def stepped(call: AgentCall, events: Generator[Y, None, R]) -> Generator[Y, None, R]:
    """`events` (a stream of `call`'s work, not started) with `call` started at the first
    item asked for, current while each item is made, and ended when the stream ends: read to
    its end, closed (or dropped and collected: ``error.type`` is ``cancelled``), or raising
    (the error is recorded). Its value is `events`'s."""
    call.start()
    error: BaseException | None = None
    cancelled = False
    try:
        while True:
            tokens = call.enter()
            try:
                item = next(events)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            finally:
                call.exit(tokens)
            yield item
    except GeneratorExit:
        cancelled = True
        raise
    except BaseException as failure:
        error = failure
        raise
    finally:
        tokens = call.enter()
        try:
            events.close()  # the work's own cleanup runs inside the call too
        finally:
            call.exit(tokens)
            call.end(error, cancelled=cancelled)


async def astepped(call: AgentCall, events: AsyncGenerator[Y, None]) -> AsyncGenerator[Y, None]:
    """`stepped` for an async stream (one dropped is closed by asyncio's finalizer)."""
    call.start()
    error: BaseException | None = None
    cancelled = False
    try:
        while True:
            tokens = call.enter()
            try:
                item = await anext(events)
            except StopAsyncIteration:
                return
            finally:
                call.exit(tokens)
            yield item
    except GeneratorExit:
        cancelled = True
        raise
    except BaseException as failure:
        error = failure
        raise
    finally:
        tokens = call.enter()
        try:
            await events.aclose()
        finally:
            call.exit(tokens)
            call.end(error, cancelled=cancelled)


_installed: Instrumentation | None = None
_lock = threading.Lock()


def instrument(
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    record_content: bool = False,
) -> Instrumentation:
    """Turn tracing and metrics of model and service calls on (the global providers unless
    given); a second call replaces the first. `record_content=True` records message contents
    too."""
    global _installed
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        raise ConfigurationError(_MISSING) from None
    from importlib.metadata import version

    release = version("chatmemory")
    instrumentation = Instrumentation(
        trace.get_tracer(SCOPE, release, tracer_provider=tracer_provider),
        metrics.get_meter(SCOPE, release, meter_provider=meter_provider),
        record_content=bool(record_content),
    )
    with _lock:
        if _installed is not None:
            remove_chat_model_listener(_installed)
        _installed = instrumentation
        add_chat_model_listener(instrumentation)
    return instrumentation


def uninstrument() -> bool:
    """Turn it off again; whether it was on."""
    global _installed
    with _lock:
        was, _installed = _installed, None
    return was is not None and remove_chat_model_listener(was)


def active() -> Instrumentation | None:
    """The instrumentation, while `instrument()` is on and the call running here is not muted
    (a global read when off: callers skip building spans then)."""
    instrumentation = _installed
    if instrumentation is None:
        return None
    call = _current.get()
    return None if call is not None and call.muted else instrumentation


_OFF: contextlib.nullcontext[None] = contextlib.nullcontext()


def span(
    name: str, attributes: Mapping[str, Any] | None = None
) -> contextlib.AbstractContextManager[Span | None]:
    """A span named `name` with `attributes`, current while a ``with`` block runs (its model
    calls' ``chat`` spans are its children), when tracing is on; when it is off, nothing (the
    block gets None, and it costs a global read). For a service's own operations, by the
    conventions' names: ``span("execute_tool weather", {"gen_ai.operation.name":
    "execute_tool", "gen_ai.tool.name": "weather", "gen_ai.tool.call.id": call.id})``. An error
    raised in the block is recorded on the span and marks it failed."""
    instrumentation = active()
    if instrumentation is None:
        return _OFF
    return instrumentation.opened(name, attributes)


def invoke_agent(
    name: str | None = None, *, conversation_id: str | None = None, **attributes: Any
) -> contextlib.AbstractContextManager[Span | None]:
    """An ``invoke_agent {name}`` span around a block (see `span`), so the ``chat`` spans of
    its model calls are its children and carry ``gen_ai.conversation.id``. Extra keyword
    `attributes` are set on the span as given (``gen_ai.*`` names with dots go in a dict:
    ``**{"gen_ai.agent.id": ...}``)."""
    return Agent(name, attributes).call(conversation_id) or _OFF
