"""`AnthropicChatModel`: the Messages API on the official `anthropic` SDK.

Messages are converted by `chatmemory.to_anthropic` / `from_anthropic`: the system prompt goes
apart, tool calls and results become `tool_use` / `tool_result` blocks, and thinking comes back
with its signature in the AI message's attributes, so that the next turn (a tool loop with
extended thinking) sends it back as Anthropic requires.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .._codec.anthropic import REDACTED_THINKING, THINKING_SIGNATURE, read_assistant, to_anthropic
from .._codec.invalid import Invalid
from .._errors import ConfigurationError
from .._frozen import thaw
from ._assembly import StreamAssembler
from ._events import StreamEvent
from ._protocols import Capability
from ._sdk import SdkErrors, check_request, mapped_errors, missing_sdk
from ._values import (
    ChatParameters,
    ChatRequest,
    ChatResponse,
    FinishReason,
    ResponseFormat,
    TokenUsage,
    ToolSpecification,
)
from ._wire import answer_object, count, json_array, json_index, json_object, no_events, text

try:
    import anthropic
except ImportError:  # the optional extra is not installed: the model says so when constructed
    _anthropic_missing = True
else:
    _anthropic_missing = False

if TYPE_CHECKING:
    from anthropic import Anthropic, AsyncAnthropic

__all__ = ["AnthropicChatModel"]

_STOP_REASONS = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_EXECUTION,
    "refusal": FinishReason.CONTENT_FILTER,
}
_TOOL_CHOICES = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
_UNSUPPORTED = ("seed", "frequency_penalty", "presence_penalty")


class AnthropicChatModel:
    """A Claude model behind Anthropic's Messages API.

    ``AnthropicChatModel(model="claude-sonnet-4-5")`` reads the key from ``ANTHROPIC_API_KEY``.
    `chat`, `achat`, `stream` and `astream` answer a `ChatRequest`.

    - `max_tokens` is the output limit Anthropic requires on every call (a request's
      `max_output_tokens` overrides it).
    - `timeout` (seconds) and `max_retries` go to the SDK, which retries rate limits, overloads,
      timeouts and server errors; what still fails raises `ModelError`.
    - `parameters` are the defaults every request's own parameters override. `temperature`,
      `top_p` and `top_k` are sent in the body (whatever the SDK version names); `seed` and the
      penalties do not exist at Anthropic and raise `ConfigurationError`. Turn on extended
      thinking with ``extra_body={"thinking": {"type": "enabled", "budget_tokens": 2048}}``.
    - A JSON-schema response format is sent as ``output_config.format`` (structured outputs).
    - `client` / `async_client`: SDK clients to use instead of making them (Bedrock, Vertex,
      your own HTTP settings); the model closes only the clients it made.
    """

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 4096,
        timeout: float = 60.0,
        max_retries: int = 2,
        parameters: ChatParameters | None = None,
        capabilities: Iterable[Capability] | None = None,
        client: Anthropic | None = None,
        async_client: AsyncAnthropic | None = None,
    ) -> None:
        if _anthropic_missing:
            raise missing_sdk("AnthropicChatModel", "anthropic", "anthropic")
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"`model` must be a non-empty str, got {model!r}")
        defaults = ChatParameters(model=model, max_output_tokens=max_tokens).merged(parameters)
        for name in _UNSUPPORTED:
            if getattr(defaults, name) is not None:
                raise ConfigurationError(f"Anthropic has no `{name}`; leave it unset")
        self.model = model
        self.parameters = defaults
        self.capabilities: frozenset[Capability] = (
            frozenset(Capability) if capabilities is None else frozenset(capabilities)
        )
        self._settings: dict[str, Any] = {
            "api_key": api_key,
            "base_url": base_url,
            "timeout": timeout,
            "max_retries": max_retries,
        }
        self._client = client
        self._async_client = async_client
        self._owns_client = client is None
        self._owns_async_client = async_client is None
        self._errors = SdkErrors(
            "Anthropic",
            anthropic.AnthropicError,
            anthropic.APIStatusError,
            anthropic.APIConnectionError,
            anthropic.APITimeoutError,
        )
        if client is None and async_client is None:
            self._sync()

    def __repr__(self) -> str:
        base_url = self._settings["base_url"]
        where = f", base_url={base_url!r}" if base_url else ""
        return f"AnthropicChatModel(model={self.model!r}{where})"

    # --- clients ----------------------------------------------------------------------------

    def _sync(self) -> Anthropic:
        if self._client is None:
            with mapped_errors(self._errors, self.model):
                self._client = anthropic.Anthropic(**self._settings)
        return self._client

    def _async(self) -> AsyncAnthropic:
        if self._async_client is None:
            with mapped_errors(self._errors, self.model):
                self._async_client = anthropic.AsyncAnthropic(**self._settings)
        return self._async_client

    def close(self) -> None:
        """Closes the sync SDK client this model made (an injected one stays open)."""
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Closes the SDK clients this model made (injected ones stay open)."""
        self.close()
        if self._owns_async_client and self._async_client is not None:
            await self._async_client.close()
            self._async_client = None

    # --- calls ------------------------------------------------------------------------------

    def chat(self, request: ChatRequest, /) -> ChatResponse:
        """The model's answer to `request`; `ModelError` when the call fails."""
        args = self._arguments(request)
        with mapped_errors(self._errors, args["model"]):
            message = self._sync().messages.create(**args)
            return _response(answer_object(self._errors, args["model"], message))

    async def achat(self, request: ChatRequest, /) -> ChatResponse:
        """The model's answer to `request`, without blocking the event loop."""
        args = self._arguments(request)
        with mapped_errors(self._errors, args["model"]):
            message = await self._async().messages.create(**args)
            return _response(answer_object(self._errors, args["model"], message))

    def stream(self, request: ChatRequest, /) -> Iterator[StreamEvent]:
        """The answer as it arrives (see `StreamEvent`); the request is checked at once."""
        return self._stream(self._streaming_arguments(request))

    def astream(self, request: ChatRequest, /) -> AsyncIterator[StreamEvent]:
        """The answer as it arrives, without blocking; the request is checked at once."""
        return self._astream(self._streaming_arguments(request))

    def _stream(self, args: dict[str, Any]) -> Iterator[StreamEvent]:
        state = _StreamState(self._errors, args["model"])
        with mapped_errors(self._errors, args["model"]):
            events = self._sync().messages.create(**args)
            with events:
                for event in events:
                    yield from state.feed(event)
                state.check_fed(events)
        yield from state.finish()

    async def _astream(self, args: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        state = _StreamState(self._errors, args["model"])
        with mapped_errors(self._errors, args["model"]):
            events = await self._async().messages.create(**args)
            async with events:
                async for event in events:
                    for item in state.feed(event):
                        yield item
                state.check_fed(events)
        for item in state.finish():
            yield item

    # --- the request ------------------------------------------------------------------------

    def _streaming_arguments(self, request: ChatRequest) -> dict[str, Any]:
        if Capability.STREAMING not in self.capabilities:
            raise ConfigurationError(
                f"{self!r} does not declare Capability.STREAMING; call `chat` instead"
            )
        args = self._arguments(request)
        args["stream"] = True
        return args

    def _arguments(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments of `messages.create` for `request`."""
        check_request(repr(self), self.capabilities, request)
        params = self.parameters.merged(request.parameters)
        for name in _UNSUPPORTED:
            if getattr(params, name) is not None:
                raise ConfigurationError(f"Anthropic has no `{name}`; leave it unset")
        system, messages = to_anthropic(request.messages)
        if not messages:
            raise ConfigurationError(
                "Anthropic needs at least one user or assistant message besides the system prompt"
            )
        args: dict[str, Any] = {
            "model": params.model,
            "max_tokens": params.max_output_tokens,
            "messages": messages,
        }
        if system is not None:
            args["system"] = system
        if request.tools:
            args["tools"] = [_tool(spec) for spec in request.tools]
        if request.tool_choice is not None:
            args["tool_choice"] = _TOOL_CHOICES.get(
                request.tool_choice, {"type": "tool", "name": request.tool_choice}
            )
        if params.stop is not None:
            args["stop_sequences"] = list(params.stop)
        extra = _extra_body(params, request.response_format)
        if extra:
            args["extra_body"] = extra
        return args


def _extra_body(params: ChatParameters, response_format: ResponseFormat | None) -> dict[str, Any]:
    """What goes into the body beside the SDK's named arguments: sampling (named differently,
    or not at all, across SDK versions), structured output, and the user's own `extra_body`."""
    extra: dict[str, Any] = {}
    for name in ("temperature", "top_p", "top_k"):
        value = getattr(params, name)
        if value is not None:
            extra[name] = value
    if response_format is not None and response_format.type == "json":
        if response_format.schema is None:
            raise ConfigurationError(
                "Anthropic has no JSON mode without a schema; use `ResponseFormat.json_schema(...)`"
            )
        schema = thaw(response_format.schema)
        extra["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
    if params.extra_body:
        extra.update(thaw(params.extra_body))
    return extra


def _tool(spec: ToolSpecification) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": spec.name, "input_schema": thaw(spec.parameters)}
    if spec.description is not None:
        tool["description"] = spec.description
    if spec.strict is not None:
        tool["strict"] = spec.strict
    return tool


# --- the response ---------------------------------------------------------------------------


def _response(message: Mapping[str, Any]) -> ChatResponse:
    content = json_array(message.get("content"), "content", required=True)
    blocks = [json_object(block, f"content[{i}]", required=True) for i, block in enumerate(content)]
    try:
        ai_message = read_assistant(blocks, {})
    except Invalid as invalid:
        raise invalid.error("cannot read the Anthropic answer") from None
    return ChatResponse(
        ai_message=ai_message,
        token_usage=_usage(message.get("usage")),
        finish_reason=_stop_reason(message.get("stop_reason")),
        model_name=text(message.get("model")),
        id=text(message.get("id")),
    )


def _usage(usage: object, input_tokens: int = 0) -> TokenUsage | None:
    if not isinstance(usage, Mapping):
        return None
    given = usage.get("input_tokens")
    return TokenUsage(
        count(given) if isinstance(given, int) else input_tokens,
        count(usage.get("output_tokens")),
    )


def _stop_reason(reason: object) -> FinishReason | None:
    if not isinstance(reason, str):
        return None
    return _STOP_REASONS.get(reason, FinishReason.OTHER)


class _StreamState:
    """Reads the Messages API's stream events into our events (sync and async share it)."""

    def __init__(self, errors: SdkErrors, model: str) -> None:
        self.errors = errors
        self.model = model
        self.fed = False
        self.assembler = StreamAssembler()
        self.blocks: dict[int, str] = {}  # content block index -> its type
        self.tool_index: dict[int, int] = {}  # content block index -> tool call index
        self.signatures: dict[int, list[str]] = {}
        self.redacted: list[str] = []
        self.text_blocks = 0
        self.thinking_blocks = 0
        self.input_tokens = 0

    def check_fed(self, stream: object) -> None:
        """`ModelError` when the stream held no event at all (not an event stream)."""
        if not self.fed:
            raise no_events(self.errors, self.model, stream)

    def feed(self, sdk_event: object) -> list[StreamEvent]:
        event = answer_object(self.errors, self.model, sdk_event)
        self.fed = True
        kind = event.get("type")
        if kind == "message_start":
            message = json_object(event.get("message"), "message")
            self.assembler.id = text(message.get("id"))
            self.assembler.model_name = text(message.get("model"))
            usage = _usage(message.get("usage"))
            if usage is not None:
                self.input_tokens = usage.input_tokens
                self.assembler.token_usage = usage
        elif kind == "content_block_start":
            block = json_object(event.get("content_block"), "content_block")
            return self._start(json_index(event.get("index"), "index"), block)
        elif kind == "content_block_delta":
            delta = json_object(event.get("delta"), "delta")
            return self._delta(json_index(event.get("index"), "index"), delta)
        elif kind == "content_block_stop":
            tool = self.tool_index.get(json_index(event.get("index"), "index"))
            done = None if tool is None else self.assembler.complete(tool)
            return [] if done is None else [done]
        elif kind == "message_delta":
            delta = json_object(event.get("delta"), "delta")
            if delta.get("stop_reason") is not None:
                self.assembler.finish_reason = _stop_reason(delta.get("stop_reason"))
            usage = _usage(event.get("usage"), self.input_tokens)
            if usage is not None:
                self.assembler.token_usage = usage
        return []

    def _start(self, index: int, block: Mapping[str, Any]) -> list[StreamEvent]:
        kind = block.get("type")
        self.blocks[index] = kind if isinstance(kind, str) else ""
        events: list[StreamEvent] = []
        if kind == "text":
            if self.text_blocks:
                events.append(self.assembler.text("\n"))  # blocks join with a newline
            self.text_blocks += 1
            if given := text(block.get("text")):
                events.append(self.assembler.text(given))
        elif kind == "thinking":
            if self.thinking_blocks:
                events.append(self.assembler.thinking("\n"))
            self.thinking_blocks += 1
            if given := text(block.get("thinking")):
                events.append(self.assembler.thinking(given))
            if signature := text(block.get("signature")):
                self.signatures.setdefault(index, []).append(signature)
        elif kind == "redacted_thinking" and isinstance(block.get("data"), str):
            self.redacted.append(block["data"])
        elif kind == "tool_use":
            tool = self.tool_index[index] = len(self.tool_index)
            given = block.get("input")
            start = json.dumps(given, ensure_ascii=False, separators=(",", ":")) if given else ""
            name = text(block.get("name"))
            events.append(self.assembler.tool_call(tool, text(block.get("id")), name, start))
        return events

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[StreamEvent]:
        kind = delta.get("type")
        if kind == "text_delta" and (given := text(delta.get("text"))):
            return [self.assembler.text(given)]
        if kind == "thinking_delta" and (given := text(delta.get("thinking"))):
            return [self.assembler.thinking(given)]
        if kind == "signature_delta" and (signature := text(delta.get("signature"))):
            self.signatures.setdefault(index, []).append(signature)
        elif kind == "input_json_delta" and index in self.tool_index:
            piece = text(delta.get("partial_json")) or ""
            return [self.assembler.tool_call(self.tool_index[index], None, None, piece)]
        return []

    def finish(self) -> list[StreamEvent]:
        attributes: dict[str, Any] = {}
        signatures = ["".join(parts) for _, parts in sorted(self.signatures.items())]
        if signatures:
            attributes[THINKING_SIGNATURE] = "\n".join(signatures)
        if self.redacted:
            attributes[REDACTED_THINKING] = self.redacted
        events: list[StreamEvent] = list(self.assembler.complete_all())
        events.append(self.assembler.response(attributes))
        return events
