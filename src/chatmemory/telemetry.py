"""OpenTelemetry traces and metrics of model calls, by the GenAI semantic conventions.

```python
import chatmemory
chatmemory.instrument()  # spans and metrics to the global providers; or tracer_provider=...
```

Off until `instrument()` is called: nothing of OpenTelemetry is imported before (it is the
``otel`` extra, ``pip install 'chatmemory[otel]'``). It is one chat model listener among others
(`chatmemory.models.add_chat_model_listener`): every model call made through the listening
functions (`with_listeners` models, the service layer) gets a ``chat {model}`` span (kind
CLIENT) with ``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.*``,
``gen_ai.response.model`` / ``id`` / ``finish_reasons``, ``gen_ai.usage.input_tokens`` /
``output_tokens`` and, inside `invoke_agent`, ``gen_ai.conversation.id``; and the
``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration`` histograms. The span's
parent is whatever span is current when the call starts (the application's, or `invoke_agent`'s);
a stream's span ends when the stream does. Message contents are recorded only with
``record_content=True`` (they are personal data), as ``gen_ai.input.messages`` and
``gen_ai.output.messages``.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

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
    from opentelemetry.metrics import Histogram, MeterProvider
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = ["Instrumentation", "instrument", "invoke_agent", "span", "uninstrument"]

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
_METRIC_KEYS = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model")

_conversation: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "chatmemory_conversation", default=None
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
    """The listener `instrument()` adds: a span and metrics per chat model call."""

    def __init__(
        self,
        tracer: Tracer,
        token_usage: Histogram,
        duration: Histogram,
        *,
        record_content: bool,
    ) -> None:
        self.tracer = tracer
        """The tracer of chatmemory's spans (a service layer opens its own spans with it)."""
        self.token_usage = token_usage
        self.duration = duration
        self.record_content = record_content

    # -- the listener ------------------------------------------------------------------------

    def on_request(self, context: ChatModelRequestContext) -> None:
        from opentelemetry.trace import SpanKind

        request = context.request
        model = model_name(context.model, request)
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if context.provider:
            attributes["gen_ai.provider.name"] = context.provider
        if model:
            attributes["gen_ai.request.model"] = model
        conversation = _conversation.get()
        if conversation is not None:
            attributes["gen_ai.conversation.id"] = conversation
        if request.parameters is not None:
            for name, key in _PARAMETERS.items():
                value = getattr(request.parameters, name)
                if value is not None:
                    attributes[key] = value
            if request.parameters.stop:
                attributes["gen_ai.request.stop_sequences"] = list(request.parameters.stop)
        if self.record_content:
            attributes["gen_ai.input.messages"] = _contents(request.messages)
        context.attributes[_METRIC] = {k: attributes[k] for k in _METRIC_KEYS if k in attributes}
        name = f"chat {model}" if model else "chat"
        context.attributes[_SPAN] = self.tracer.start_span(
            name, kind=SpanKind.CLIENT, attributes=attributes
        )
        context.attributes[_STARTED] = time.perf_counter()

    def on_response(self, context: ChatModelResponseContext) -> None:
        span: Span | None = context.attributes.get(_SPAN)
        if span is None:  # on_request failed: nothing to end
            return
        response = context.response
        if response.model_name:
            span.set_attribute("gen_ai.response.model", response.model_name)
        if response.id:
            span.set_attribute("gen_ai.response.id", response.id)
        if response.finish_reason is not None:
            reason = _FINISH_REASONS[response.finish_reason.value]
            span.set_attribute("gen_ai.response.finish_reasons", [reason])
        metric = dict(context.attributes[_METRIC])
        if response.model_name:
            metric["gen_ai.response.model"] = response.model_name
        usage = response.token_usage
        if usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            for kind, count in (("input", usage.input_tokens), ("output", usage.output_tokens)):
                self.token_usage.record(count, {**metric, "gen_ai.token.type": kind})
        if self.record_content:
            span.set_attribute("gen_ai.output.messages", _contents([response.ai_message]))
        self._end(context.attributes, span, metric)

    def on_error(self, context: ChatModelErrorContext) -> None:
        from opentelemetry.trace import Status, StatusCode

        span: Span | None = context.attributes.get(_SPAN)
        if span is None:
            return
        error = context.error
        kind = "cancelled" if isinstance(error, CallAbandoned) else type(error).__qualname__
        span.set_attribute("error.type", kind)
        if not isinstance(error, CallAbandoned):
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, str(error)))
        metric = {**context.attributes[_METRIC], "error.type": kind}
        self._end(context.attributes, span, metric)

    def _end(self, attributes: dict[Any, Any], span: Span, metric: dict[str, Any]) -> None:
        self.duration.record(time.perf_counter() - attributes[_STARTED], metric)
        span.end()


_installed: Instrumentation | None = None
_lock = threading.Lock()


def instrument(
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    record_content: bool = False,
) -> Instrumentation:
    """Turn tracing and metrics of model calls on (the global providers unless given); a
    second call replaces the first. `record_content=True` records message contents too."""
    global _installed
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        raise ConfigurationError(_MISSING) from None
    from importlib.metadata import version

    release = version("chatmemory")
    tracer = trace.get_tracer(SCOPE, release, tracer_provider=tracer_provider)
    meter = metrics.get_meter(SCOPE, release, meter_provider=meter_provider)
    instrumentation = Instrumentation(
        tracer,
        meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
        ),
        meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
        ),
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


def tracing() -> bool:
    """Whether `instrument()` is on (a global read: callers skip building spans when off)."""
    return _installed is not None


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Span | None]:
    """A span named `name` with `attributes`, current while the block runs (its model calls'
    ``chat`` spans are its children), when tracing is on; when it is off, nothing (yields None,
    and costs a global read). For a service's own operations, by the conventions' names:
    ``span("execute_tool weather", {"gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "weather", "gen_ai.tool.call.id": call.id})``. An error raised in the
    block is recorded on the span and marks it failed."""
    instrumentation = _installed
    if instrumentation is None:
        yield None
        return
    with instrumentation.tracer.start_as_current_span(name, attributes=attributes) as opened:
        yield opened


@contextlib.contextmanager
def invoke_agent(
    name: str | None = None, *, conversation_id: str | None = None, **attributes: Any
) -> Iterator[Span | None]:
    """An ``invoke_agent {name}`` span around a service call (see `span`), so the ``chat``
    spans of its model calls are its children and carry ``gen_ai.conversation.id``. Extra
    keyword `attributes` are set on the span as given (``gen_ai.*`` names with dots go in a
    dict: ``**{"gen_ai.agent.id": ...}``)."""
    given: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", **attributes}
    if name:
        given["gen_ai.agent.name"] = name
    if conversation_id is not None:
        given["gen_ai.conversation.id"] = conversation_id
    token = _conversation.set(conversation_id)
    try:
        with span(f"invoke_agent {name}" if name else "invoke_agent", given) as opened:
            yield opened
    finally:
        _conversation.reset(token)
