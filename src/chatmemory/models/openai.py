"""`OpenAiChatModel`: chat completions on the official `openai` SDK, for OpenAI and every server
that speaks its protocol (Azure OpenAI through an injected client, Ollama, vLLM, llama.cpp,
LM Studio...).

Messages are converted by `chatmemory.to_openai` / `from_openai` (one converter for the
library). The SDK does the HTTP work and its own retries; its errors become `ModelError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from .._codec.openai import from_openai, to_openai
from .._errors import ConfigurationError, ModelError
from .._frozen import thaw
from .._messages import AiMessage
from ._assembly import StreamAssembler
from ._events import StreamEvent
from ._openai_clients import OpenAiClients, require_openai
from ._protocols import Capability
from ._refusals import Refusals, refused_feature, without
from ._sdk import SdkErrors, check_request, mapped_errors, provider_message
from ._values import (
    TOOL_CHOICES,
    ChatParameters,
    ChatRequest,
    ChatResponse,
    FinishReason,
    ResponseFormat,
    TokenUsage,
    ToolSpecification,
)
from ._wire import answer_object, count, json_array, json_object, no_events, text

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI

__all__ = ["OpenAiChatModel"]

_FINISH_REASONS = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_EXECUTION,
    "function_call": FinishReason.TOOL_EXECUTION,
    "content_filter": FinishReason.CONTENT_FILTER,
}
ALL_CAPABILITIES = frozenset(Capability)


class OpenAiChatModel:
    """A chat model behind the OpenAI chat-completions API (or a server that speaks it).

    ``OpenAiChatModel(model="gpt-4o-mini")`` reads the key from ``OPENAI_API_KEY``;
    ``OpenAiChatModel(model="llama3.2", base_url="http://localhost:11434/v1", api_key="ollama")``
    talks to a local Ollama. `chat`, `achat`, `stream` and `astream` answer a `ChatRequest`.

    - `timeout` (seconds) and `max_retries` go to the SDK, which retries rate limits, timeouts
      and server errors with backoff; what still fails raises `ModelError`.
    - `parameters` are the defaults every request's own parameters override.
    - `capabilities` defaults to all (tools, JSON schema, streaming); declare fewer for a
      server that lacks some, and requests needing them fail before any call. A server that
      refuses a feature of a request (a JSON-schema response format, strict tools, parallel
      tool calls, stream options) with an error naming it gets the request again without it
      (see `chatmemory.models._refusals`: JSON mode and format instructions instead of a
      schema); what it refused is remembered for its base URL and model and logged once, and
      `capabilities` then leaves out RESPONSE_FORMAT_JSON_SCHEMA when the schema was refused,
      so AI services send format instructions themselves.
    - `max_tokens_field`: OpenAI's current name for the output limit is
      ``max_completion_tokens``; compatible servers want ``max_tokens`` (llama.cpp's Python
      server ignores the other and generates to the end of its context). The default is the
      first for OpenAI (no `base_url`, or api.openai.com) and the second for any other server.
    - `client` / `async_client`: SDK clients to use instead of making them (an
      ``openai.AzureOpenAI``, a client with your own HTTP settings). The model closes only the
      clients it made.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        organization: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        parameters: ChatParameters | None = None,
        capabilities: Iterable[Capability] | None = None,
        max_tokens_field: Literal["max_completion_tokens", "max_tokens"] | None = None,
        client: OpenAI | None = None,
        async_client: AsyncOpenAI | None = None,
    ) -> None:
        require_openai("OpenAiChatModel")
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"`model` must be a non-empty str, got {model!r}")
        if max_tokens_field is None:
            max_tokens_field = "max_completion_tokens" if _is_openai(base_url) else "max_tokens"
        if max_tokens_field not in ("max_completion_tokens", "max_tokens"):
            raise ConfigurationError(
                f"`max_tokens_field` must be 'max_completion_tokens' or 'max_tokens', "
                f"got {max_tokens_field!r}"
            )
        self.model = model
        self.parameters = ChatParameters(model=model).merged(parameters)
        self.declared_capabilities: frozenset[Capability] = (
            ALL_CAPABILITIES if capabilities is None else frozenset(capabilities)
        )
        """The capabilities given (all by default), before any refusal was learned."""
        self._max_tokens_field = max_tokens_field
        self._clients = OpenAiClients(
            model,
            base_url=base_url,
            api_key=api_key,
            organization=organization,
            timeout=timeout,
            max_retries=max_retries,
            client=client,
            async_client=async_client,
        )
        self._errors = self._clients.errors
        self._refusals = Refusals(base_url, model)

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the model can do: the declared capabilities, without a JSON-schema response
        format once the server refused one for this model."""
        if "json_schema" in self._refusals.known(self.model):
            return self.declared_capabilities - {Capability.RESPONSE_FORMAT_JSON_SCHEMA}
        return self.declared_capabilities

    def __repr__(self) -> str:
        base_url = self._clients.base_url
        where = f", base_url={base_url!r}" if base_url else ""
        return f"OpenAiChatModel(model={self.model!r}{where})"

    def close(self) -> None:
        """Closes the sync SDK client this model made (an injected one stays open)."""
        self._clients.close()

    async def aclose(self) -> None:
        """Closes the SDK clients this model made (injected ones stay open)."""
        await self._clients.aclose()

    # --- calls ------------------------------------------------------------------------------

    def chat(self, request: ChatRequest, /) -> ChatResponse:
        """The model's answer to `request`; `ModelError` when the call fails."""
        args = self._arguments(request)
        with mapped_errors(self._errors, args["model"]):
            completion = self._create(args)
            return _response(answer_object(self._errors, args["model"], completion))

    async def achat(self, request: ChatRequest, /) -> ChatResponse:
        """The model's answer to `request`, without blocking the event loop."""
        args = self._arguments(request)
        with mapped_errors(self._errors, args["model"]):
            completion = await self._acreate(args)
            return _response(answer_object(self._errors, args["model"], completion))

    def stream(self, request: ChatRequest, /) -> Iterator[StreamEvent]:
        """The answer as it arrives (see `StreamEvent`); the request is checked at once."""
        args = self._streaming_arguments(request)
        return self._stream(args)

    def astream(self, request: ChatRequest, /) -> AsyncIterator[StreamEvent]:
        """The answer as it arrives, without blocking; the request is checked at once."""
        args = self._streaming_arguments(request)
        return self._astream(args)

    def _stream(self, args: dict[str, Any]) -> Iterator[StreamEvent]:
        state = _StreamState(self._errors, args["model"])
        with mapped_errors(self._errors, args["model"]):
            chunks = self._create(args)
            with chunks:
                for chunk in chunks:
                    yield from state.feed(chunk)
                state.check_fed(chunks)
        yield from state.finish()

    async def _astream(self, args: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        state = _StreamState(self._errors, args["model"])
        with mapped_errors(self._errors, args["model"]):
            chunks = await self._acreate(args)
            async with chunks:
                async for chunk in chunks:
                    for event in state.feed(chunk):
                        yield event
                state.check_fed(chunks)
        for event in state.finish():
            yield event

    def _create(self, args: dict[str, Any]) -> Any:
        """`chat.completions.create(**args)`, sent again without each feature the server
        refuses (the SDK's errors propagate)."""
        while True:
            try:
                return self._clients.sync().chat.completions.create(**args)
            except self._errors.status as error:
                args = self._without_refused(args, error)

    async def _acreate(self, args: dict[str, Any]) -> Any:
        """`_create` without blocking."""
        while True:
            try:
                return await self._clients.async_().chat.completions.create(**args)
            except self._errors.status as error:
                args = self._without_refused(args, error)

    def _without_refused(self, args: dict[str, Any], error: Exception) -> dict[str, Any]:
        """`args` without the feature `error` refuses, learned; `error` raised again when it
        names none."""
        status: int = getattr(error, "status_code", 0)
        message = provider_message(getattr(error, "body", None)) or str(error)
        feature = refused_feature(status, message, args)
        if feature is None:
            raise error
        self._refusals.learn(args["model"], feature, message)
        return without(feature, args)

    # --- the request ------------------------------------------------------------------------

    def _streaming_arguments(self, request: ChatRequest) -> dict[str, Any]:
        if Capability.STREAMING not in self.declared_capabilities:
            raise ConfigurationError(
                f"{self!r} does not declare Capability.STREAMING; call `chat` instead"
            )
        args = self._arguments(request)
        args["stream"] = True
        args["stream_options"] = {"include_usage": True}
        return self._refusals.applied(args)

    def _arguments(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` for `request`."""
        check_request(repr(self), self.declared_capabilities, request)
        params = self.parameters.merged(request.parameters)
        args: dict[str, Any] = {"model": params.model, "messages": to_openai(request.messages)}
        if request.tools:
            args["tools"] = [_tool(spec) for spec in request.tools]
        if request.tool_choice is not None:
            args["tool_choice"] = _tool_choice(request.tool_choice)
        response_format = request.response_format
        if response_format is not None and response_format.type == "json":
            args["response_format"] = _response_format(response_format.schema, response_format)
        for name in ("temperature", "top_p", "seed", "frequency_penalty", "presence_penalty"):
            value = getattr(params, name)
            if value is not None:
                args[name] = value
        if params.stop is not None:
            args["stop"] = list(params.stop)
        if params.max_output_tokens is not None:
            args[self._max_tokens_field] = params.max_output_tokens
        extra: dict[str, Any] = thaw(params.extra_body) if params.extra_body else {}
        if params.top_k is not None:  # not OpenAI's, but vLLM, llama.cpp, LM Studio take it
            extra.setdefault("top_k", params.top_k)
        # The SDK walks every message and tool of `create`'s arguments against its TypedDicts
        # (about 0.25 ms a message: 25 ms of CPU for a 100-message window). Ours are in wire
        # form already, so they travel in `extra_body`, which the SDK merges into the JSON body
        # as given, taking precedence over the arguments.
        extra["messages"] = args["messages"]
        args["messages"] = []
        if "tools" in args:
            extra["tools"] = args.pop("tools")
        args["extra_body"] = extra
        return self._refusals.applied(args)


def _is_openai(base_url: str | None) -> bool:
    return base_url is None or urlsplit(base_url).hostname == "api.openai.com"


def _tool(spec: ToolSpecification) -> dict[str, Any]:
    function: dict[str, Any] = {"name": spec.name, "parameters": thaw(spec.parameters)}
    if spec.description is not None:
        function["description"] = spec.description
    if spec.strict is not None:
        function["strict"] = spec.strict
    return {"type": "function", "function": function}


def _tool_choice(choice: str) -> str | dict[str, Any]:
    """A keyword as is; a tool's name as OpenAI's ``{"type": "function", ...}``."""
    if choice in TOOL_CHOICES:
        return choice
    return {"type": "function", "function": {"name": choice}}


def _response_format(schema: Mapping[str, Any] | None, fmt: ResponseFormat) -> dict[str, Any]:
    if schema is None:
        return {"type": "json_object"}
    json_schema: dict[str, Any] = {"name": fmt.name or "response", "schema": thaw(schema)}
    if fmt.strict is not None:
        json_schema["strict"] = fmt.strict
    return {"type": "json_schema", "json_schema": json_schema}


# --- the response ---------------------------------------------------------------------------


def _response(completion: Mapping[str, Any]) -> ChatResponse:
    choices = json_array(completion.get("choices"), "choices")
    if not choices:
        raise ModelError(
            "OpenAI answered without any choice; try again", retriable=True, provider="openai"
        )
    choice = json_object(choices[0], "choices[0]", required=True)
    given = json_object(choice.get("message"), "choices[0].message", required=True)
    message = from_openai([_assistant(given)])[0]
    assert isinstance(message, AiMessage)
    return ChatResponse(
        ai_message=message,
        token_usage=_usage(completion.get("usage")),
        finish_reason=_finish_reason(choice.get("finish_reason")),
        model_name=text(completion.get("model")),
        id=text(completion.get("id")),
    )


def _assistant(message: Mapping[str, Any]) -> dict[str, Any]:
    """The message as `from_openai` reads it: always an assistant, with `reasoning` (Ollama's
    and newer vLLM's name) read as `reasoning_content`."""
    result = {**message, "role": "assistant"}
    if result.get("reasoning_content") is None and isinstance(result.get("reasoning"), str):
        result["reasoning_content"] = result["reasoning"]
    return result


def _usage(usage: object) -> TokenUsage | None:
    if not isinstance(usage, Mapping):
        return None
    total = usage.get("total_tokens")
    return TokenUsage(
        count(usage.get("prompt_tokens")),
        count(usage.get("completion_tokens")),
        count(total) if isinstance(total, int) else None,
    )


def _finish_reason(reason: object) -> FinishReason | None:
    if reason is None:
        return None
    return _FINISH_REASONS.get(reason, FinishReason.OTHER) if isinstance(reason, str) else None


class _StreamState:
    """Reads `chat.completion.chunk`s into events (sync and async streams share it)."""

    __slots__ = ("assembler", "current", "errors", "fed", "model")

    def __init__(self, errors: SdkErrors, model: str) -> None:
        self.assembler = StreamAssembler()
        self.current: int | None = None  # the tool call being streamed
        self.errors = errors
        self.model = model
        self.fed = False

    def check_fed(self, stream: object) -> None:
        """`ModelError` when the stream held no chunk at all (not an event stream)."""
        if not self.fed:
            raise no_events(self.errors, self.model, stream)

    def feed(self, sdk_chunk: object) -> list[StreamEvent]:
        chunk = answer_object(self.errors, self.model, sdk_chunk)
        self.fed = True
        parts = self.assembler
        parts.id = parts.id or text(chunk.get("id"))
        parts.model_name = text(chunk.get("model")) or parts.model_name
        usage = _usage(chunk.get("usage"))
        if usage is not None:
            parts.token_usage = usage
        events: list[StreamEvent] = []
        for position, item in enumerate(json_array(chunk.get("choices"), "choices")):
            where = f"choices[{position}]"
            choice = json_object(item, where, required=True)
            if choice.get("index", 0) != 0:
                continue  # n > 1 is not supported: the first choice is the answer
            delta = json_object(choice.get("delta"), f"{where}.delta")
            thinking = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thinking, str) and thinking:
                events.append(parts.thinking(thinking))
            content = delta.get("content")
            if isinstance(content, str) and content:
                events.append(parts.text(content))
            calls = json_array(delta.get("tool_calls"), f"{where}.delta.tool_calls")
            for index, call in enumerate(calls):
                events.extend(self._tool_call(index, call, f"{where}.delta.tool_calls[{index}]"))
            reason = choice.get("finish_reason")
            if reason is not None:
                parts.finish_reason = _finish_reason(reason)
        return events

    def _tool_call(self, position: int, given: object, where: str) -> list[StreamEvent]:
        call = json_object(given, where, required=True)
        function = json_object(call.get("function"), f"{where}.function")
        # Some compatible servers send whole calls without `index`: their position tells.
        index = call.get("index")
        if not isinstance(index, int):
            index = position
        events: list[StreamEvent] = []
        if self.current is not None and index != self.current:
            done = self.assembler.complete(self.current)  # OpenAI streams calls one by one
            if done is not None:
                events.append(done)
        self.current = index
        arguments = function.get("arguments")
        events.append(
            self.assembler.tool_call(
                index,
                text(call.get("id")),
                text(function.get("name")),
                arguments if isinstance(arguments, str) else "",
            )
        )
        return events

    def finish(self) -> list[StreamEvent]:
        events: list[StreamEvent] = list(self.assembler.complete_all())
        events.append(self.assembler.response())
        return events
