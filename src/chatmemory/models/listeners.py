"""Listeners on chat models (LangChain4j's `ChatModelListener`): told of each request, its
response or its error, with a context they can annotate.

```python
class Timing(ChatModelListener):
    def on_request(self, context):
        context.attributes["start"] = time.perf_counter()

    def on_response(self, context):
        print(context.response.token_usage, time.perf_counter() - context.attributes["start"])

model = with_listeners(OpenAiChatModel(model="gpt-4o-mini"), Timing())
```

A call's three contexts share one `attributes` dict, so what `on_request` puts there
`on_response` or `on_error` finds. Listeners are told in the order given, then those added for
every model (`add_chat_model_listener`: OpenTelemetry's instrumentation is one). A listener that
raises is logged (logger ``chatmemory.listeners``) and the call goes on as if it had not been
there. `chat`, `achat`, `stream` and `astream` are each observed: a stream's `on_response`
comes with its final `ChatResponse`, and a stream closed before its end gets `on_error` with
`CallAbandoned`; a stream is observed from when it is first read. The functions `chat`,
`achat`, `stream` and `astream` of this module call a model with listeners (the wrapper uses
them; a service layer may too); with no listener at all they are the model's own call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from ._events import StreamEvent
from ._values import ChatRequest, ChatResponse

__all__ = [
    "CallAbandoned",
    "ChatModelErrorContext",
    "ChatModelListener",
    "ChatModelRequestContext",
    "ChatModelResponseContext",
    "Observation",
    "achat",
    "add_chat_model_listener",
    "arun_observed",
    "astream",
    "chat",
    "model_name",
    "notify",
    "provider_of",
    "remove_chat_model_listener",
    "run_observed",
    "stream",
    "with_listeners",
]

log = logging.getLogger("chatmemory.listeners")

R = TypeVar("R")
R_in = TypeVar("R_in", contravariant=True)
M = TypeVar("M")


class CallAbandoned(Exception):
    """The caller stopped reading a stream before its end (the `on_error` of a closed stream)."""


def notify(listeners: Sequence[object], method: str, context: object) -> None:
    """Call `method` of each listener with `context`; one that raises is logged, never raised."""
    for listener in listeners:
        handler = getattr(listener, method, None)
        if handler is None:
            continue
        try:
            handler(context)
        except Exception:
            log.exception("listener %r raised in %s; the call goes on without it", listener, method)


class Observation(Protocol[R_in]):
    """The contexts of one observed call: made on request, on its result, on its error."""

    @property
    def listeners(self) -> Sequence[object]: ...

    def request(self) -> object: ...

    def response(self, result: R_in) -> object: ...

    def error(self, error: BaseException) -> object: ...


def run_observed(observation: Observation[R], call: Callable[[], R]) -> R:
    """`call()`, with the listeners told of its request, then its result or its error."""
    notify(observation.listeners, "on_request", observation.request())
    try:
        result = call()
    except BaseException as error:
        notify(observation.listeners, "on_error", observation.error(error))
        raise
    notify(observation.listeners, "on_response", observation.response(result))
    return result


async def arun_observed(observation: Observation[R], call: Callable[[], Awaitable[R]]) -> R:
    """`await call()`, observed as `run_observed` observes a sync one."""
    notify(observation.listeners, "on_request", observation.request())
    try:
        result = await call()
    except BaseException as error:
        notify(observation.listeners, "on_error", observation.error(error))
        raise
    notify(observation.listeners, "on_response", observation.response(result))
    return result


# -- chat models ---------------------------------------------------------------------------------

_PROVIDERS = {"OpenAiChatModel": "openai", "AnthropicChatModel": "anthropic"}


def provider_of(model: object) -> str | None:
    """The model's provider (``openai``, ``anthropic``): its `provider` attribute, else known
    from the adapter's class; None for a model that does not tell."""
    provider = getattr(model, "provider", None)
    if isinstance(provider, str):
        return provider
    return _PROVIDERS.get(type(model).__name__)


def model_name(model: object, request: ChatRequest) -> str | None:
    """The model a request asks for: its parameters' `model`, else the model object's (its
    `model` or `model_name`)."""
    if request.parameters is not None and request.parameters.model:
        return request.parameters.model
    for attribute in ("model", "model_name"):
        name = getattr(model, attribute, None)
        if isinstance(name, str):
            return name
    return None


@dataclass
class ChatModelRequestContext:
    """What `on_request` is told: the request, the model asked, and the call's attributes."""

    request: ChatRequest
    model: object
    provider: str | None
    attributes: dict[Any, Any] = field(default_factory=dict)


@dataclass
class ChatModelResponseContext:
    """What `on_response` is told: the response, and all the request's context was."""

    response: ChatResponse
    request: ChatRequest
    model: object
    provider: str | None
    attributes: dict[Any, Any] = field(default_factory=dict)


@dataclass
class ChatModelErrorContext:
    """What `on_error` is told: the error raised (`CallAbandoned` for a stream closed early)."""

    error: BaseException
    request: ChatRequest
    model: object
    provider: str | None
    attributes: dict[Any, Any] = field(default_factory=dict)


class ChatModelListener:
    """A listener on chat model calls; override what you need (each does nothing here)."""

    def on_request(self, context: ChatModelRequestContext) -> None:
        """Before the request is sent."""

    def on_response(self, context: ChatModelResponseContext) -> None:
        """After the whole response came (a stream's final `ChatResponse`)."""

    def on_error(self, context: ChatModelErrorContext) -> None:
        """After the call failed, or a stream was closed before its end."""


_everywhere: tuple[object, ...] = ()
_lock = threading.Lock()


def add_chat_model_listener(listener: object) -> None:
    """Tell `listener` of every chat model call made through this module's functions (every
    model that `with_listeners` wraps, and the service layer's calls)."""
    global _everywhere
    with _lock:
        if listener not in _everywhere:
            _everywhere = (*_everywhere, listener)


def remove_chat_model_listener(listener: object) -> bool:
    """Stop telling `listener`; whether it was there."""
    global _everywhere
    with _lock:
        kept = tuple(x for x in _everywhere if x is not listener)
        removed = len(kept) != len(_everywhere)
        _everywhere = kept
    return removed


class _ChatObservation:
    """The contexts of one chat model call."""

    __slots__ = ("attributes", "call", "listeners", "model", "provider")

    def __init__(self, listeners: Sequence[object], call: ChatRequest, model: object) -> None:
        self.listeners = listeners
        self.call = call
        self.model = model
        self.provider = provider_of(model)
        self.attributes: dict[Any, Any] = {}

    def request(self) -> ChatModelRequestContext:
        return ChatModelRequestContext(self.call, self.model, self.provider, self.attributes)

    def response(self, result: ChatResponse) -> ChatModelResponseContext:
        return ChatModelResponseContext(
            result, self.call, self.model, self.provider, self.attributes
        )

    def error(self, error: BaseException) -> ChatModelErrorContext:
        return ChatModelErrorContext(error, self.call, self.model, self.provider, self.attributes)


def _observation(
    model: Any, request: ChatRequest, listeners: Sequence[object]
) -> tuple[Any, _ChatObservation | None]:
    """The model to call and the call's observation (None: nobody listens). A `with_listeners`
    model is called unwrapped with its listeners first, so a listener added everywhere is told
    once, not by the wrapper and again by the caller (a service layer)."""
    if type(model) is _Listened:
        model, listeners = model.wrapped, (*model.listeners, *listeners)
    every = (*listeners, *_everywhere) if _everywhere else tuple(listeners)
    return model, (_ChatObservation(every, request, model) if every else None)


def chat(model: Any, request: ChatRequest, listeners: Sequence[object] = ()) -> ChatResponse:
    """`model.chat(request)`, told to `listeners` and to those added everywhere."""
    model, observation = _observation(model, request, listeners)
    if observation is None:
        return cast(ChatResponse, model.chat(request))
    return run_observed(observation, lambda: cast(ChatResponse, model.chat(request)))


async def achat(model: Any, request: ChatRequest, listeners: Sequence[object] = ()) -> ChatResponse:
    """`await model.achat(request)`, told as `chat` tells."""
    model, observation = _observation(model, request, listeners)
    if observation is None:
        return cast(ChatResponse, await model.achat(request))
    return await arun_observed(
        observation, lambda: cast(Awaitable[ChatResponse], model.achat(request))
    )


class _Stream:
    """What a stream's events tell the listeners: its end, or its failure."""

    def __init__(self, observation: _ChatObservation) -> None:
        self.observation = observation
        self.response: ChatResponse | None = None
        notify(observation.listeners, "on_request", observation.request())

    def saw(self, event: StreamEvent) -> None:
        if isinstance(event, ChatResponse):
            self.response = event

    def ended(self, error: BaseException | None) -> None:
        o = self.observation
        if error is None and self.response is not None:
            notify(o.listeners, "on_response", o.response(self.response))
        else:
            notify(o.listeners, "on_error", o.error(error or CallAbandoned()))


def stream(
    model: Any, request: ChatRequest, listeners: Sequence[object] = ()
) -> Iterator[StreamEvent]:
    """`model.stream(request)`, told as `chat` tells: the response when the stream ends."""
    model, observation = _observation(model, request, listeners)
    if observation is None:
        return cast(Iterator[StreamEvent], model.stream(request))
    return _observed_stream(observation, model, request)


def _observed_stream(
    observation: _ChatObservation, model: Any, request: ChatRequest
) -> Iterator[StreamEvent]:
    seen = _Stream(observation)
    error: BaseException | None = None
    events: Iterator[StreamEvent] | None = None
    try:
        events = model.stream(request)
        for event in events:
            seen.saw(event)
            yield event
    except GeneratorExit:
        error = CallAbandoned()
        raise
    except BaseException as failure:
        error = failure
        raise
    finally:
        close = getattr(events, "close", None)  # the model's connection goes with the stream
        if close is not None:
            close()
        seen.ended(error)


def astream(
    model: Any, request: ChatRequest, listeners: Sequence[object] = ()
) -> AsyncIterator[StreamEvent]:
    """`model.astream(request)`, told as `stream` tells."""
    model, observation = _observation(model, request, listeners)
    if observation is None:
        return cast(AsyncIterator[StreamEvent], model.astream(request))
    return _aobserved_stream(observation, model, request)


async def _aobserved_stream(
    observation: _ChatObservation, model: Any, request: ChatRequest
) -> AsyncIterator[StreamEvent]:
    seen = _Stream(observation)
    error: BaseException | None = None
    events: AsyncIterator[StreamEvent] | None = None
    try:
        events = model.astream(request)
        async for event in events:
            seen.saw(event)
            yield event
    except GeneratorExit:
        error = CallAbandoned()
        raise
    except BaseException as failure:
        error = failure
        raise
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
        seen.ended(error)


_CALLS: dict[str, Callable[..., Any]] = {
    "chat": chat,
    "achat": achat,
    "stream": stream,
    "astream": astream,
}


class _Listened:
    """A model whose calls its listeners are told of; everything else is the model's own. It
    has exactly the call methods the model has (code that picks `achat` when present still
    picks right)."""

    def __init__(self, model: object, listeners: tuple[object, ...]) -> None:
        self.wrapped = model
        self.listeners = listeners

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.wrapped, name)
        call = _CALLS.get(name)
        if call is None or not callable(value):
            return value
        return lambda request, /: call(self.wrapped, request, self.listeners)

    def __repr__(self) -> str:
        return f"with_listeners({self.wrapped!r}, {', '.join(map(repr, self.listeners))})"


def with_listeners(model: M, *listeners: object) -> M:
    """`model`, its `chat`, `achat`, `stream` and `astream` calls told to `listeners` (objects
    with any of `on_request`, `on_response`, `on_error`; see `ChatModelListener`)."""
    if isinstance(model, _Listened):
        return cast(M, _Listened(model.wrapped, (*model.listeners, *listeners)))
    return cast(M, _Listened(model, listeners))
