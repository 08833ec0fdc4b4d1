"""One service call, a *turn*, written once as a flow (see `chatmemory._flow`) and driven sync or
async, streaming or not.

The flow asks a `Port` for what it needs: the window the memory would hold with the turn so far
added (`window`), a model answer (`exchange`), the moderation verdict, and at the end one commit
of the whole turn. So a model call always sees the memory as it would be, the store sees the
turn once or not at all, and a failure or an abandoned stream leaves the memory as it was.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from .._errors import (
    ConfigurationError,
    ModelError,
    ModerationError,
    OutputParsingError,
    ToolLoopError,
    shorten,
)
from .._flow import Call, Flow, call
from .._messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from ..models import (
    ChatRequest,
    ChatResponse,
    FinishReason,
    ResponseFormat,
    TokenUsage,
    ToolSpecification,
)
from ..models._events import CompleteToolCall
from ..rag import (
    AugmentationRequest,
    AugmentationResult,
    Content,
    QueryMetadata,
    RetrievalAugmentor,
)
from ..tools import Tool, ToolArgumentsError, ToolContext, ToolOutput, parse_arguments
from ._memories import AnyMemory
from ._output import OutputSpec
from ._recalling import RecallStep
from ._results import Result, Retrieved, ServiceEvent, ToolExecuted, ToolExecution
from ._tooling import (
    Attempt,
    Toolbox,
    ToolOptions,
    ToolRound,
    failed,
    is_immediate,
    now,
    result_message,
    settle,
    without_tools,
)
from ._working import WorkingStep

__all__ = ["AsyncPort", "Outcome", "Port", "SyncPort", "TurnInput", "adrive", "drive", "turn"]

T = TypeVar("T")


class Moderation(Protocol):
    """The part of a moderation verdict a turn reads (`chatmemory.models.Moderation`)."""

    @property
    def flagged(self) -> bool: ...

    @property
    def flagged_text(self) -> str | None: ...


class Port(Protocol):
    """What a turn asks of the world (a memory, a model, a moderation model)."""

    def window(self, pending: list[ChatMessage]) -> list[ChatMessage]: ...

    def exchange(self, request: ChatRequest) -> ChatResponse:
        """The model's answer; a streaming driver forwards the stream's events on the way."""
        ...

    def start_moderation(self, messages: list[ChatMessage]) -> None: ...

    def verdict(self) -> Moderation: ...

    def history(self) -> list[ChatMessage] | None:
        """The memory's messages before this turn (None without memory)."""
        ...

    def augment(self, request: AugmentationRequest) -> AugmentationResult: ...

    def tool_specifications(self, first: bool) -> tuple[ToolSpecification, ...]:
        """The tools of the next model call (providers asked once, dynamic ones each time)."""
        ...

    def call_tools(self, requests: Sequence[ToolExecutionRequest]) -> ToolRound:
        """Run the model's tool calls (in request order, or concurrently) and settle them."""
        ...

    def emit(self, event: ServiceEvent) -> None:
        """Hand an event to a streaming caller (nothing otherwise)."""
        ...

    def commit(self, messages: list[ChatMessage]) -> None: ...


@dataclass(frozen=True, slots=True)
class TurnInput:
    """A call, ready to run: its messages, how to read the answer, and the service options."""

    system: SystemMessage | None
    user: UserMessage
    """The user message as stored in memory."""
    output: OutputSpec[Any] | None
    """How to read the answer's text; None to keep the response as it is."""
    schema: bool
    """Send the output's JSON schema as the response format (else: format instructions)."""
    moderated: bool
    output_retries: int
    keep_user_message_on_error: bool
    build_request: Callable[
        [list[ChatMessage], ResponseFormat | None, tuple[ToolSpecification, ...]], ChatRequest
    ]
    tools: ToolOptions = field(default_factory=ToolOptions)
    retrieval: Retrieval | None = None
    memory_id: str | None = None
    unstored_tools: frozenset[str] = frozenset()
    """Tools whose calls and results the model sees within the turn but the memory does not
    keep (working memory's: the record itself is what remains of them)."""


@dataclass(frozen=True, slots=True)
class Retrieval:
    """How a service augments the user message with what it retrieves."""

    store_in_memory: bool = True
    """Store the augmented user message (else the user's own; the model sees the augmented one
    either way, in every model call of the turn)."""
    when_nothing: Callable[[str], str] | None = None
    """The answer (a function of the user's text) when nothing is retrieved: no model call."""


@dataclass(frozen=True, slots=True)
class Outcome:
    content: Any
    responses: tuple[ChatResponse, ...]
    executions: tuple[ToolExecution, ...] = ()
    immediate: bool = False
    """The call ended with a tool's result (immediate return), not with a model answer."""
    sources: tuple[Content, ...] = ()

    def result(self) -> Result[Any]:
        usage = TokenUsage()
        for response in self.responses:
            if response.token_usage is not None:
                usage = usage + response.token_usage
        final = self.responses[-1]
        return Result(
            content=self.content,
            token_usage=usage,
            finish_reason=FinishReason.TOOL_EXECUTION if self.immediate else final.finish_reason,
            final_response=final,
            intermediate_responses=self.responses[:-1],
            tool_executions=self.executions,
            sources=self.sources,
        )


def turn(given: TurnInput) -> Flow[Outcome]:
    """The flow of one call: retrieval, window, model (moderation beside it), tools until the
    model answers, the answer read as declared, then one commit of the whole turn."""
    state = _Turn(given)
    if given.moderated:
        yield from call(Port.start_moderation, [m for m in (given.system, state.to_model) if m])
    try:
        answered = yield from _augment(state)
        immediate = False if answered else (yield from _converse(state))
        content = None if immediate else (yield from _answer(state))
    except ModerationError:
        raise
    except Exception:
        if given.keep_user_message_on_error:
            yield from call(Port.commit, state.opening)
        raise
    if not immediate:
        state.pending.append(state.responses[-1].ai_message)
    yield from call(Port.commit, without_tools(state.pending, given.unstored_tools))
    return Outcome(
        content, tuple(state.responses), tuple(state.executions), immediate, state.sources
    )


class _Turn:
    """What a turn has gathered so far."""

    def __init__(self, given: TurnInput) -> None:
        self.given = given
        self.responses: list[ChatResponse] = []
        self.executions: list[ToolExecution] = []
        self.sources: tuple[Content, ...] = ()
        self.messages: list[ChatMessage] = []
        """The last request's messages."""
        self.specs: tuple[ToolSpecification, ...] = ()
        spec = given.output
        self.response_format = spec.response_format() if spec and given.schema else None
        self.instructions = spec.instructions() if spec and not given.schema else ""
        self.use(given.user, given.user)

    def use(self, stored: UserMessage, sent: UserMessage) -> None:
        """The user message as stored and as sent to the model (augmented, with the format
        instructions)."""
        self.stored = stored
        self.opening: list[ChatMessage] = [m for m in (self.given.system, stored) if m is not None]
        self.pending = list(self.opening)
        """The turn's messages as they will be stored."""
        instructions = self.instructions
        self.to_model = _with_instructions(sent, instructions) if instructions else sent

    def request(self, extra: Sequence[ChatMessage] = ()) -> ChatRequest:
        messages = [*self.messages, *extra]
        return self.given.build_request(messages, self.response_format, self.specs)


def _augment(state: _Turn) -> Flow[bool]:
    """Retrieve for the user message and put what was found into it; True when nothing was
    found and the service answers that without the model."""
    given, retrieval = state.given, state.given.retrieval
    if retrieval is None:
        return False
    history = yield from call(Port.history)
    metadata = QueryMetadata(
        user_message=given.user,
        system_message=given.system,
        chat_memory=history,
        memory_id=given.memory_id,
    )
    result = yield from call(Port.augment, AugmentationRequest(given.user, metadata))
    state.sources = result.contents
    yield from call(Port.emit, Retrieved(result.contents))
    stored = result.user_message if retrieval.store_in_memory else given.user
    state.use(stored, result.user_message)
    if result.contents or retrieval.when_nothing is None:
        return False
    text = retrieval.when_nothing(given.user.text)
    reply = ChatResponse(ai_message=AiMessage(text), finish_reason=FinishReason.STOP)
    state.responses.append(reply)
    return True


def _converse(state: _Turn) -> Flow[bool]:
    """Call the model, run the tools it asks for, until it answers; True when a tool's result
    ends the call (immediate return)."""
    given = state.given
    while True:
        state.specs = yield from call(Port.tool_specifications, not state.responses)
        window = yield from call(Port.window, state.pending)
        state.messages = [state.to_model if m is state.stored else m for m in window]
        response = _with_ids((yield from call(Port.exchange, state.request())))
        state.responses.append(response)
        if given.moderated and len(state.responses) == 1:
            _check(moderation=(yield from call(Port.verdict)))
        calls = response.ai_message.tool_execution_requests
        if not calls:
            return False
        _check_not_cut(response)
        if len(state.responses) > given.tools.max_round_trips:
            raise ToolLoopError(
                f"Something is wrong: the model asked for tools more than "
                f"{given.tools.max_round_trips} times in one call (max_tool_calling_round_trips); "
                f"nothing was stored"
            )
        done = yield from call(Port.call_tools, calls)
        state.executions.extend(done.executions)
        state.pending += [response.ai_message, *(result_message(e) for e in done.executions)]
        for execution in done.executions:
            yield from call(Port.emit, ToolExecuted(execution))
        if done.immediate:
            return True


def _with_ids(response: ChatResponse) -> ChatResponse:
    """`response` with an id for each tool call the provider sent without one, so its result
    can answer it (in the memory, and to a provider that matches results by id)."""
    message = response.ai_message
    requests = message.tool_execution_requests
    if all(r.id is not None for r in requests):
        return response
    named = [
        r
        if r.id is not None
        else ToolExecutionRequest(f"call_{uuid.uuid4().hex}", r.name, r.arguments)
        for r in requests
    ]
    message = AiMessage(
        message.text,
        thinking=message.thinking,
        tool_execution_requests=named,
        attributes=message.attributes,
    )
    return dataclasses.replace(response, ai_message=message)


def _check_not_cut(response: ChatResponse) -> None:
    """A tool call the output token limit cut off cannot be run, and asking again at the same
    limit cuts it again: the call ends saying what to raise."""
    if response.finish_reason is not FinishReason.LENGTH:
        return
    for request in response.ai_message.tool_execution_requests:
        try:
            parse_arguments(request.arguments, request.name)
        except ToolArgumentsError:
            raise ModelError(
                f"the model's call of the tool {request.name!r} was cut off at the output token "
                f"limit (finish reason LENGTH), so its arguments are incomplete: "
                f"{shorten(request.arguments)}; raise max_output_tokens (ChatParameters) for "
                f"this service or method; nothing was stored",
                retriable=False,
            ) from None


def _check(*, moderation: Moderation) -> None:
    if moderation.flagged:
        text = moderation.flagged_text or ""
        raise ModerationError(
            f'Text "{shorten(text)}" violates content policy', moderation=moderation
        )


def _answer(state: _Turn) -> Flow[Any]:
    """The final answer read as the method declares, asking again `output_retries` times."""
    retries = state.given.output_retries
    extra: list[ChatMessage] = []
    for attempt in range(retries + 1):
        try:
            return _read(state.given.output, state.responses[-1])
        except OutputParsingError as error:
            if attempt == retries:
                raise
            extra += [state.responses[-1].ai_message, UserMessage(_retry(error))]
            state.responses.append((yield from call(Port.exchange, state.request(extra))))
    raise AssertionError("unreachable")  # pragma: no cover


def _read(spec: OutputSpec[Any] | None, response: ChatResponse) -> Any:
    if spec is None:
        return None
    return spec.parse(response.ai_message.text or "")


def _retry(error: OutputParsingError) -> str:
    return (
        f"Your answer could not be read: {error.reason}\n"
        f"Answer again, following the required format exactly."
    )


def _with_instructions(message: UserMessage, instructions: str) -> UserMessage:
    """`message` with the format instructions after its last text (or as a new text)."""
    contents = list(message.contents)
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        if isinstance(content, TextContent):
            contents[index] = TextContent(content.text + instructions)
            break
    else:
        contents.append(TextContent(instructions.lstrip("\n")))
    return UserMessage(contents=contents, name=message.name, attributes=message.attributes)


def moderated_texts(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The messages moderation looks at: tool calls and tool results are not moderated."""
    return [
        m
        for m in messages
        if not isinstance(m, ToolExecutionResultMessage)
        and not (isinstance(m, AiMessage) and m.text is None)
    ]


# -- drivers -------------------------------------------------------------------------------


def _advance(
    flow: Flow[T], result: object, error: Exception | None
) -> tuple[Call[Any] | None, Any]:
    """The flow's next call, given what the last one returned (or raised: the flow may handle
    it); ``(None, value)`` when the flow is done."""
    try:
        op = flow.throw(error) if error is not None else flow.send(result)
    except StopIteration as stop:
        return None, stop.value
    assert isinstance(op, Call)
    return op, None


def drive(flow: Flow[T], port: SyncPort, *, forward: bool) -> Generator[ServiceEvent, None, T]:
    """Run `flow` against `port`, yielding stream events (model and tools) when `forward`."""
    result: Any = None
    error: Exception | None = None
    try:
        while True:
            op, value = _advance(flow, result, error)
            if op is None:
                return value  # type: ignore[no-any-return]
            error = None
            try:
                if op.name == "exchange":
                    result = yield from port.exchange_events(_request(op), forward=forward)
                elif op.name == "emit":
                    result = None
                    if forward:
                        yield op.args[0]  # type: ignore[misc]
                else:
                    result = getattr(port, op.name)(*op.args, **op.kwargs)
            except Exception as failure:
                error = failure
    finally:
        flow.close()
        port.close()


async def adrive(
    flow: Flow[T], port: AsyncPort, *, forward: bool, done: list[T]
) -> AsyncIterator[ServiceEvent]:
    """`drive` for asyncio: an async generator of events; the flow's value lands in `done`."""
    result: Any = None
    error: Exception | None = None
    try:
        while True:
            op, value = _advance(flow, result, error)
            if op is None:
                done.append(value)
                return
            error = None
            try:
                if op.name == "exchange":
                    result = None
                    async for event in port.exchange_events(_request(op)):
                        if isinstance(event, ChatResponse):
                            result = event
                        elif forward:
                            yield event
                    if forward:
                        yield result
                elif op.name == "emit":
                    result = None
                    if forward:
                        yield op.args[0]  # type: ignore[misc]
                else:
                    result = await getattr(port, op.name)(*op.args, **op.kwargs)
            except Exception as failure:
                error = failure
    finally:
        flow.close()
        await port.aclose()


def _request(op: Call[Any]) -> ChatRequest:
    request = op.args[0]
    assert isinstance(request, ChatRequest)
    return request


# -- ports ---------------------------------------------------------------------------------


@dataclass(slots=True)
class TurnTools:
    """A port's tools for one turn: the toolbox, the options, and calls started early (a
    streamed tool call starts as soon as it is complete)."""

    toolbox: Toolbox | None
    options: ToolOptions
    early: dict[str, Any] = field(default_factory=dict)

    def specifications(
        self, provided: list[tuple[Any, Sequence[Tool]]]
    ) -> tuple[ToolSpecification, ...]:
        return self.toolbox.install(provided) if self.toolbox is not None else ()

    def lookup(self, request: ToolExecutionRequest) -> Tool | None:
        return self.toolbox.by_name.get(request.name) if self.toolbox is not None else None

    @property
    def context(self) -> ToolContext:
        assert self.toolbox is not None
        return self.toolbox.context

    def finish(self, attempts: list[Attempt]) -> ToolRound:
        available = self.toolbox.available() if self.toolbox is not None else []
        executions = [settle(a, self.options, available) for a in attempts]
        return ToolRound(tuple(executions), is_immediate(attempts, executions))


def _begin(request: ToolExecutionRequest, tools: TurnTools) -> datetime:
    if tools.options.before is not None:
        tools.options.before(request)
    return now()


def _ended(
    request: ToolExecutionRequest,
    tool: Tool,
    started: datetime,
    output: ToolOutput | None = None,
    error: Exception | None = None,
) -> Attempt:
    if error is not None and not isinstance(error, ToolArgumentsError):
        error = failed(tool, request, error)
    return Attempt(request, tool, output, error, started, now())


def _run_sync(tool: Tool | None, request: ToolExecutionRequest, tools: TurnTools) -> Attempt:
    started = _begin(request, tools)
    if tool is None:
        return Attempt(request, None, None, None, started, started)
    try:
        return _ended(request, tool, started, tool.execute(request.arguments, tools.context))
    except Exception as error:
        return _ended(request, tool, started, error=error)


async def _run_async(tool: Tool | None, request: ToolExecutionRequest, tools: TurnTools) -> Attempt:
    started = _begin(request, tools)
    if tool is None:
        return Attempt(request, None, None, None, started, started)
    try:
        output = await tool.aexecute(request.arguments, tools.context)
        return _ended(request, tool, started, output)
    except Exception as error:
        return _ended(request, tool, started, error=error)


@dataclass(slots=True)
class SyncPort:
    """A turn's world, blocking: a sync memory (or none), a sync model, tools and moderation
    on threads when they run beside the caller."""

    memory: AnyMemory | None
    chat: Callable[[ChatRequest], ChatResponse] | None
    stream: Callable[[ChatRequest], Iterator[ServiceEvent]] | None
    moderator: Callable[[list[ChatMessage]], Moderation] | None = None
    executor: Callable[[], concurrent.futures.Executor] | None = None
    tools: TurnTools = field(default_factory=lambda: TurnTools(None, ToolOptions()))
    augmentor: RetrievalAugmentor | None = None
    recall: RecallStep | None = None
    working: WorkingStep | None = None
    _moderation: concurrent.futures.Future[Moderation] | None = None

    def window(self, pending: list[ChatMessage]) -> list[ChatMessage]:
        memory = self.memory
        window = list(pending) if memory is None else _preview_sync(memory, pending)
        if self.working is not None:
            window = self.working.window(window, memory)
        if memory is None or self.recall is None:
            return window
        return self.recall.window(memory, window)

    def exchange_events(
        self, request: ChatRequest, *, forward: bool
    ) -> Generator[ServiceEvent, None, ChatResponse]:
        if self.chat is not None and not forward:
            return self.chat(request)
        assert self.stream is not None
        response: ChatResponse | None = None
        events = self.stream(request)
        try:
            for event in events:
                if isinstance(event, ChatResponse):
                    response = event
                elif isinstance(event, CompleteToolCall):
                    self._start_early(event.request)
                if forward:
                    yield event
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
        assert response is not None, "a stream ends with its ChatResponse"
        return response

    def _start_early(self, request: ToolExecutionRequest) -> None:
        tools = self.tools
        if request.id is None or tools.toolbox is None or request.id in tools.early:
            return
        tool = tools.lookup(request)
        if tools.options.concurrent and self.executor is not None:
            tools.early[request.id] = self.executor().submit(_run_sync, tool, request, tools)
        else:
            tools.early[request.id] = _run_sync(tool, request, tools)

    def history(self) -> list[ChatMessage] | None:
        return None if self.memory is None else self.memory.messages()  # type: ignore[return-value]

    def augment(self, request: AugmentationRequest) -> AugmentationResult:
        assert self.augmentor is not None
        return self.augmentor.augment(request)

    def tool_specifications(self, first: bool) -> tuple[ToolSpecification, ...]:
        toolbox = self.tools.toolbox
        if toolbox is None:
            return ()
        provided = [(p, _provide_sync(p, toolbox.context)) for p in toolbox.to_ask(first)]
        return self.tools.specifications(provided)

    def call_tools(self, requests: Sequence[ToolExecutionRequest]) -> ToolRound:
        tools = self.tools
        attempts: list[Attempt | concurrent.futures.Future[Attempt]] = []
        waiting = [r for r in requests if r.id is None or r.id not in tools.early]
        run_beside = tools.options.concurrent and len(waiting) > 1 and self.executor is not None
        for request in requests:
            started = tools.early.pop(request.id, None) if request.id is not None else None
            if started is not None:
                attempts.append(started)
            elif run_beside:
                assert self.executor is not None
                attempts.append(
                    self.executor().submit(_run_sync, tools.lookup(request), request, tools)
                )
            else:
                attempts.append(_run_sync(tools.lookup(request), request, tools))
        done = [a.result() if isinstance(a, concurrent.futures.Future) else a for a in attempts]
        return tools.finish(done)

    def emit(self, event: ServiceEvent) -> None:  # pragma: no cover - the driver handles it
        pass

    def start_moderation(self, messages: list[ChatMessage]) -> None:
        assert self.moderator is not None
        assert self.executor is not None
        self._moderation = self.executor().submit(self.moderator, moderated_texts(messages))

    def verdict(self) -> Moderation:
        assert self._moderation is not None
        return self._moderation.result()

    def commit(self, messages: list[ChatMessage]) -> None:
        if self.memory is not None:
            self.memory.add(messages)
            if self.recall is not None:
                self.recall.index(self.memory)

    def close(self) -> None:
        if self._moderation is not None:
            self._moderation.cancel()


def _provide_sync(provider: Any, context: ToolContext) -> Sequence[Tool]:
    provide = getattr(provider, "provide", None)
    if provide is None:
        raise ConfigurationError(
            f"the tool provider {provider!r} is async only: call the service from an async "
            f"method, or give it a provider with provide()"
        )
    return provide(context)  # type: ignore[no-any-return]


@dataclass(slots=True)
class AsyncPort:
    """A turn's world on asyncio; a sync memory, model or tool runs on a worker thread."""

    memory: AnyMemory | None
    memory_is_async: bool
    chat: Callable[[ChatRequest], Any] | None
    """`achat` (awaited) or a sync `chat` (run on a thread)."""
    chat_is_async: bool
    stream: Callable[[ChatRequest], AsyncIterator[ServiceEvent]] | None
    moderator: Callable[[list[ChatMessage]], Any] | None = None
    moderator_is_async: bool = False
    tools: TurnTools = field(default_factory=lambda: TurnTools(None, ToolOptions()))
    augmentor: RetrievalAugmentor | None = None
    recall: RecallStep | None = None
    working: WorkingStep | None = None
    _moderation: asyncio.Future[Moderation] | None = None
    _tasks: list[asyncio.Task[Attempt]] = field(default_factory=list)

    async def window(self, pending: list[ChatMessage]) -> list[ChatMessage]:
        memory = self.memory
        if memory is None:
            window = list(pending)
        elif self.memory_is_async:
            window = await _preview_async(memory, pending)
        else:
            window = await asyncio.to_thread(_preview_sync, memory, pending)
        if self.working is not None:
            window = await self.working.awindow(window, memory)
        if memory is None or self.recall is None:
            return window
        return await self.recall.awindow(memory, window)

    async def exchange_events(self, request: ChatRequest) -> AsyncIterator[ServiceEvent]:
        if self.chat is not None:
            if self.chat_is_async:
                yield await self.chat(request)
            else:
                yield await asyncio.to_thread(self.chat, request)
            return
        assert self.stream is not None
        events = self.stream(request)
        try:
            async for event in events:
                if isinstance(event, CompleteToolCall):
                    self._start_early(event.request)
                yield event
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()

    def _start_early(self, request: ToolExecutionRequest) -> None:
        tools = self.tools
        if request.id is None or tools.toolbox is None or request.id in tools.early:
            return
        task = asyncio.ensure_future(_run_async(tools.lookup(request), request, tools))
        self._tasks.append(task)
        tools.early[request.id] = task

    async def history(self) -> list[ChatMessage] | None:
        if self.memory is None:
            return None
        if self.memory_is_async:
            return await self.memory.messages()  # type: ignore[no-any-return,misc]
        return await asyncio.to_thread(self.memory.messages)  # type: ignore[arg-type]

    async def augment(self, request: AugmentationRequest) -> AugmentationResult:
        assert self.augmentor is not None
        aaugment = getattr(self.augmentor, "aaugment", None)
        if aaugment is not None:
            return await aaugment(request)  # type: ignore[no-any-return]
        return await asyncio.to_thread(self.augmentor.augment, request)

    async def tool_specifications(self, first: bool) -> tuple[ToolSpecification, ...]:
        toolbox = self.tools.toolbox
        if toolbox is None:
            return ()
        provided = [(p, await _provide_async(p, toolbox.context)) for p in toolbox.to_ask(first)]
        return self.tools.specifications(provided)

    async def call_tools(self, requests: Sequence[ToolExecutionRequest]) -> ToolRound:
        tools = self.tools
        started: list[Any] = []
        for request in requests:
            early = tools.early.pop(request.id, None) if request.id is not None else None
            started.append(early if early is not None else None)
        waiting = sum(1 for s in started if s is None)
        if tools.options.concurrent and waiting > 1:
            for index, request in enumerate(requests):
                if started[index] is None:
                    task = asyncio.ensure_future(_run_async(tools.lookup(request), request, tools))
                    self._tasks.append(task)
                    started[index] = task
        attempts = []
        for request, begun in zip(requests, started, strict=True):
            if begun is None:
                attempts.append(await _run_async(tools.lookup(request), request, tools))
            else:
                attempts.append(await begun)
        return tools.finish(attempts)

    async def emit(self, event: ServiceEvent) -> None:  # pragma: no cover - the driver does it
        pass

    async def start_moderation(self, messages: list[ChatMessage]) -> None:
        assert self.moderator is not None
        texts = moderated_texts(messages)
        if self.moderator_is_async:
            self._moderation = asyncio.ensure_future(self.moderator(texts))
        else:
            self._moderation = asyncio.ensure_future(asyncio.to_thread(self.moderator, texts))

    async def verdict(self) -> Moderation:
        assert self._moderation is not None
        return await self._moderation

    async def commit(self, messages: list[ChatMessage]) -> None:
        if self.memory is None:
            return
        if self.memory_is_async:
            await self.memory.add(messages)  # type: ignore[misc]
        else:
            await asyncio.to_thread(self.memory.add, messages)
        if self.recall is not None:
            await self.recall.aindex(self.memory, self.memory_is_async)

    async def aclose(self) -> None:
        if self._moderation is not None and not self._moderation.done():
            self._moderation.cancel()
        for task in self._tasks:
            if not task.done():
                task.cancel()


async def _provide_async(provider: Any, context: ToolContext) -> Sequence[Tool]:
    aprovide = getattr(provider, "aprovide", None)
    if aprovide is not None:
        return await aprovide(context)  # type: ignore[no-any-return]
    return await asyncio.to_thread(provider.provide, context)


def _preview_sync(memory: AnyMemory, pending: list[ChatMessage]) -> list[ChatMessage]:
    preview = getattr(memory, "preview", None)
    if preview is not None:
        return preview(pending)  # type: ignore[no-any-return]
    return [*memory.messages(), *pending]  # type: ignore[misc]


async def _preview_async(memory: AnyMemory, pending: list[ChatMessage]) -> list[ChatMessage]:
    preview = getattr(memory, "preview", None)
    if preview is not None:
        return await preview(pending)  # type: ignore[no-any-return]
    return [*(await memory.messages()), *pending]  # type: ignore[misc]
