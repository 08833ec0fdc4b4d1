"""One service call, a *turn*, decided in one place.

`turn` is a flow (a generator) that makes every decision of a call, in the order they are made:
retrieval, the window of each model call (what is read, where working memory and recalled
messages go, that the call's own messages are never evicted from its own requests), the model
call, tools (asked of providers, started early from a stream, run in order or beside each
other), moderation, output retries, the one commit of the whole turn and the index after it.
It yields typed effects (`_effects.py`) and never does I/O; the drivers (`_drivers.py`) hand
each effect to a port (`_ports.py`) that carries it out, sync or async. So the store sees the
turn once or not at all, and a failure or an abandoned stream leaves the memory as it was.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from .._errors import (
    ConfigurationError,
    GuardrailError,
    ModelBehaviourError,
    ModelError,
    ModelRetry,
    ModerationError,
    OutputParsingError,
    ToolLoopError,
    shorten,
)
from .._messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from .._policies.blocks import with_block
from ..models import (
    ChatParameters,
    ChatRequest,
    ChatResponse,
    FinishReason,
    Moderation,
    ResponseFormat,
    TokenUsage,
    ToolSpecification,
)
from ..models._events import CompleteToolCall, PartialText
from ..models._values import ToolChoice
from ..rag import AugmentationRequest, Content, QueryMetadata
from ..tools import (
    Tool,
    ToolArgumentsError,
    ToolContext,
    ToolOutput,
    ToolProvider,
    parse_arguments,
)
from ..tools._contracts import AsyncToolProvider
from ._approval import ApprovalRequired, Decisions, Resumed, Suspension, denial
from ._effects import (
    Ask,
    Augment,
    AwaitTool,
    Commit,
    Emit,
    Index,
    Moderate,
    Next,
    Open,
    Provide,
    ReadWorking,
    Recall,
    RunTool,
    StartTool,
    Suspend,
    TurnFlow,
    Verdict,
    Window,
    perform,
)
from ._invocation import InvocationContext
from ._output import OutputSpec
from ._results import Result, Retrieved, ServiceEvent, ToolExecuted, ToolExecution
from ._tooling import (
    Attempt,
    Toolbox,
    ToolOptions,
    ToolRound,
    now,
    result_message,
    sent_back,
    turn_tool_choice,
    without_tools,
)

__all__ = [
    "InputGuardrail",
    "Outcome",
    "OutputGuardrail",
    "Retrieval",
    "TurnInput",
    "moderated_texts",
    "turn",
]

InputGuardrail: TypeAlias = Callable[[UserMessage], "UserMessage | str | None"]
"""Checks a call's user message before anything else: None passes it, a text or a
`UserMessage` replaces it, `GuardrailError` refuses the call."""
OutputGuardrail: TypeAlias = Callable[[Any], Any]
"""Checks the answer (as the method returns it): None passes it, another value replaces it,
`ModelRetry` asks the model again, `GuardrailError` refuses the call."""

log = logging.getLogger("chatmemory.services")


@dataclass(frozen=True, slots=True)
class Retrieval:
    """How a service augments the user message with what it retrieves."""

    store_in_memory: bool = True
    """Store the augmented user message (else the user's own; the model sees the augmented one
    either way, in every model call of the turn)."""
    when_nothing: Callable[[str], str] | None = None
    """The answer (a function of the user's text) when nothing is retrieved: no model call."""


@dataclass(frozen=True, slots=True)
class TurnInput:
    """A call, ready to run: its messages, what the service does around the model, and how."""

    system: SystemMessage | None
    user: UserMessage
    """The user message as stored in memory."""
    memory_id: str
    output: OutputSpec[Any] | None = None
    """How to read the answer's text; None to keep the response as it is."""
    schema: bool = False
    """Send the output's JSON schema as the response format (else: format instructions)."""
    parameters: ChatParameters | None = None
    streaming: bool = False
    """Ask the model for a stream (`Open`/`Next`) rather than a whole answer (`Ask`)."""
    forward: bool = False
    """Hand the stream's events (and the tools' runs) to the caller (`Emit`)."""
    moderated: bool = False
    output_retries: int = 0
    keep_user_message_on_error: bool = False
    memory: bool = False
    """The call has a memory (a `Window` is read from it, `Commit` stores into it)."""
    fits: Callable[[list[ChatMessage]], bool] | None = None
    """Whether a request is within the memory's budget (blocks make room by it)."""
    window_of: object = None
    """The memory (its repr names its limit, for the error when the call's own messages
    exceed it; made only then)."""
    tools: tuple[Tool, ...] = ()
    providers: tuple[ToolProvider | AsyncToolProvider, ...] = ()
    tool_context: ToolContext | None = None
    tool_options: ToolOptions = field(default_factory=ToolOptions)
    unstored_tools: frozenset[str] = frozenset()
    """Tools whose calls and results the model sees within the turn but the memory does not
    keep (working memory's: the record itself is what remains of them)."""
    retrieval: Retrieval | None = None
    working: bool = False
    """Read the working-memory block before each model call."""
    recall: Callable[[Sequence[Any]], str] | None = None
    """Renders what semantic recall found as a block (recall on); found once per turn."""
    input_guardrails: tuple[InputGuardrail, ...] = ()
    output_guardrails: tuple[OutputGuardrail, ...] = ()
    guardrail_retries: int = 2
    """How many times output guardrails may ask the model again (`ModelRetry`)."""
    method: str = ""
    """The method's name (a call stopped for approval names it, to be resumed)."""
    user_id: str | None = None
    needs_approval: Callable[[ToolExecutionRequest, Tool | None], bool] | None = None
    """Whether a tool call waits for someone's approval (the call stops before it runs)."""
    resumed: Resumed | None = None
    """A call stopped for approval, continued with the decisions."""
    transform_request: Callable[[ChatRequest, InvocationContext], ChatRequest] | None = None
    """The service's `chat_request_transformer`: the request each model call gets."""
    invocation: InvocationContext | None = None
    tool_choice: ToolChoice | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    content: Any
    responses: tuple[ChatResponse, ...]
    executions: tuple[ToolExecution, ...] = ()
    immediate: bool = False
    """The call ended with a tool's result (immediate return), not with a model answer."""
    sources: tuple[Content, ...] = ()
    tail: tuple[ServiceEvent, ...] = ()
    """The stream's last events, held back until the turn was stored: a caller that reads
    them has a call that is complete (and a memory id that is free again)."""

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


def turn(given: TurnInput) -> TurnFlow[Outcome]:
    """The flow of one call: input guardrails, retrieval, window, model (moderation beside it),
    tools until the model answers, the answer read as declared and checked by the output
    guardrails, then one commit of the whole turn, and the recall index after it."""
    state = _Turn(given)
    resumed = given.resumed
    if resumed is None:
        _guard_input(state)
    if given.moderated and resumed is None:
        opening = [m for m in (given.system, state.to_model) if m is not None]
        yield from perform(Moderate(moderated_texts(opening)))
    try:
        if resumed is not None:
            answered, immediate = False, (yield from _resume(state, resumed))
        else:
            answered, immediate = (yield from _augment(state)), False
        if not answered and not immediate:
            immediate = yield from _converse(state)
        content = None if immediate else (yield from _answer(state))
    except (ModerationError, GuardrailError, ApprovalRequired):
        raise  # a refusal (or a stop) stores nothing, whatever keep_user_message_on_error says
    except Exception:
        if given.keep_user_message_on_error and given.memory:
            yield from perform(Commit(state.opening))
        raise
    if not immediate:
        state.pending.append(state.responses[-1].ai_message)
    yield from perform(Commit(without_tools(state.pending, given.unstored_tools)))
    if given.recall is not None:
        yield from _index()
    return Outcome(
        content,
        tuple(state.responses),
        tuple(state.executions),
        immediate,
        state.sources,
        tuple(state.held),
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
        self.read = False
        """Whether the memory's window was read in this turn (later model calls use it)."""
        self.found: list[Any] | None = None
        """What recall found, once asked."""
        self.held: list[ServiceEvent] = []
        """Stream events not yet handed on (see `Outcome.tail`)."""
        self.sent_back: dict[str, int] = {}
        """How many times each tool sent the model back (`ModelRetry`, arguments) so far."""
        self.early: dict[str, object] = {}
        """Tool calls started while the model was still streaming, by call id."""
        self.toolbox = (
            Toolbox(given.tools, given.providers, given.tool_context)
            if given.tool_context is not None and (given.tools or given.providers)
            else None
        )
        spec = given.output
        self.response_format: ResponseFormat | None = (
            spec.response_format() if spec and given.schema else None
        )
        self.instructions = spec.instructions() if spec and not given.schema else ""
        self.use(given.user, given.user)

    def use(self, stored: UserMessage, sent: UserMessage) -> None:
        """The user message as stored and as sent to the model (augmented, with the format
        instructions)."""
        self.stored = stored
        self.sent = sent
        self.opening: list[ChatMessage] = [m for m in (self.given.system, stored) if m is not None]
        self.pending = list(self.opening)
        """The turn's messages as they will be stored."""
        instructions = self.instructions
        self.to_model = _with_instructions(sent, instructions) if instructions else sent

    def request(self, extra: Sequence[ChatMessage] = ()) -> ChatRequest:
        request = self._request(extra)
        transform, invocation = self.given.transform_request, self.given.invocation
        if transform is None or invocation is None:
            return request
        changed = transform(request, invocation)
        if not isinstance(changed, ChatRequest):
            raise ConfigurationError(
                f"chat_request_transformer returns a ChatRequest, got {changed!r}"
            )
        return changed

    def _request(self, extra: Sequence[ChatMessage]) -> ChatRequest:
        return ChatRequest(
            [*self.messages, *extra],
            tools=self.specs,
            tool_choice=turn_tool_choice(self.given.tool_choice, self.specs, self.executions),
            response_format=self.response_format,
            parameters=self.given.parameters,
        )


# -- retrieval -------------------------------------------------------------------------------


def _augment(state: _Turn) -> TurnFlow[bool]:
    """Retrieve for the user message and put what was found into it; True when nothing was
    found and the service answers that without the model."""
    given, retrieval = state.given, state.given.retrieval
    if retrieval is None:
        return False
    history = (yield from _window(state, ())) if given.memory else None
    metadata = QueryMetadata(
        user_message=given.user,
        system_message=given.system,
        chat_memory=history,
        memory_id=given.memory_id,
    )
    result = yield from perform(Augment(AugmentationRequest(given.user, metadata)))
    state.sources = result.contents
    yield from _emit(state, Retrieved(result.contents))
    stored = result.user_message if retrieval.store_in_memory else given.user
    state.use(stored, result.user_message)
    if result.contents or retrieval.when_nothing is None:
        return False
    text = retrieval.when_nothing(given.user.text)
    reply = ChatResponse(ai_message=AiMessage(text), finish_reason=FinishReason.STOP)
    state.responses.append(reply)
    return True


# -- the request's messages ----------------------------------------------------------------


def _window(state: _Turn, pending: Sequence[ChatMessage]) -> TurnFlow[list[ChatMessage]]:
    """The memory's window with `pending` added; the store is asked once per turn (later model
    calls plan on the window read then: the commit checks it)."""
    window = yield from perform(Window(pending, reread=not state.read))
    state.read = True
    return window


def _messages(state: _Turn) -> TurnFlow[list[ChatMessage]]:
    """The messages of the next model call: the window with the turn so far, the turn kept
    whole, working memory and recalled messages placed, the user message as the model sees it."""
    given = state.given
    window = _own_turn(state, (yield from _window(state, state.pending)))
    keep = sum(1 for m in state.pending if not isinstance(m, SystemMessage))
    if given.working:
        block = yield from perform(ReadWorking())
        window = with_block(window, block, given.fits, keep=keep)
    if given.recall is not None:
        if state.found is None:
            state.found = yield from perform(Recall())
        window = _with_recalled(window, state.found, given.recall, given.fits, keep)
    return [state.to_model if m is state.stored else m for m in window]


def _own_turn(state: _Turn, window: list[ChatMessage]) -> list[ChatMessage]:
    """`window`, checked to hold every message of the turn so far: the memory's rules never
    evict a call's own messages from its own requests. When the user message itself does not
    fit, the call fails before the model is asked; when tool results pushed the turn past the
    limit, the turn is kept whole and the history gives way."""
    own = [m for m in state.pending if not isinstance(m, SystemMessage)]
    tail = window[len(window) - len(own) :] if len(own) <= len(window) else []
    if len(tail) == len(own) and all(a is b for a, b in zip(tail, own, strict=True)):
        return window  # the memory placed the turn last, whole: the usual case, checked in O(turn)
    held = {id(m) for m in window}
    if all(id(m) in held for m in own):
        return window
    if len(own) <= 1:
        given = state.given
        raise ConfigurationError(
            f"the call's user message does not fit in the memory of {given.memory_id!r}"
            + (f" ({given.window_of!r})" if given.window_of is not None else "")
            + ", so the model would not see it: raise the memory's limit (max_messages or "
            "max_tokens), or send less; nothing was stored"
        )
    system = next((m for m in window if isinstance(m, SystemMessage)), None)
    return [*([system] if system is not None else []), *own]


def _with_recalled(
    window: list[ChatMessage],
    found: Sequence[Any],
    render: Callable[[Sequence[Any]], str],
    fits: Callable[[list[ChatMessage]], bool] | None,
    keep: int,
) -> list[ChatMessage]:
    """The window with the recalled block; the window gives up its oldest messages for it, and
    when even that is not enough, the weakest recalled runs go."""
    for count in range(len(found), 0, -1):
        block = render(found[:count])
        if not block:
            return window
        placed = with_block(window, block, fits, first=True, keep=keep)
        if fits is None or fits(placed):
            return placed
    return window


# -- the model and its tools ---------------------------------------------------------------


def _converse(state: _Turn) -> TurnFlow[bool]:
    """Call the model, run the tools it asks for, until it answers; True when a tool's result
    ends the call (immediate return)."""
    given = state.given
    while True:
        state.specs = yield from _specifications(state)
        state.messages = yield from _messages(state)
        response = _with_ids((yield from _exchange(state, state.request())))
        state.responses.append(response)
        if given.moderated and len(state.responses) == 1:
            _check(moderation=(yield from perform(Verdict())))
        calls = response.ai_message.tool_execution_requests
        if not calls:
            return False
        _check_not_cut(response)
        if len(state.responses) > given.tool_options.max_round_trips:
            raise ToolLoopError(
                f"Something is wrong: the model asked for tools more than "
                f"{given.tool_options.max_round_trips} times in one call "
                f"(max_tool_calling_round_trips); nothing was stored"
            )
        waiting = [r for r in calls if _waits(state, r)]
        if waiting:
            yield from _suspend(state, response.ai_message, waiting)
        yield from _flush(state)
        done = yield from _run_tools(state, calls)
        if (yield from _ran(state, response.ai_message, done)):
            return True


def _ran(state: _Turn, message: AiMessage, done: ToolRound) -> TurnFlow[bool]:
    """A round of tool calls ran: the turn keeps the calls and their results, a streaming
    caller hears of each; True when the round ends the call (immediate return)."""
    state.executions.extend(done.executions)
    state.pending += [message, *(result_message(e) for e in done.executions)]
    for execution in done.executions:
        yield from _emit(state, ToolExecuted(execution))
    return done.immediate


# -- approval ------------------------------------------------------------------------------


def _waits(state: _Turn, request: ToolExecutionRequest) -> bool:
    """Whether a tool call waits for approval before it runs."""
    needs = state.given.needs_approval
    if needs is None or state.toolbox is None:
        return False
    return needs(request, state.toolbox.by_name.get(request.name))


def _suspend(
    state: _Turn, message: AiMessage, waiting: Sequence[ToolExecutionRequest]
) -> TurnFlow[None]:
    """Stop the call before its tools run: the turn so far is kept in the approvals store (not
    in the memory), and the caller is told what waits for a decision."""
    given = state.given
    suspension = Suspension(
        uuid.uuid4().hex,
        given.method,
        given.memory_id,
        given.user_id,
        given.system,
        state.stored,
        state.sent,
        (*state.pending, message),
        tuple(r.id for r in waiting if r.id is not None),
    )
    yield from _flush(state)
    yield from perform(Suspend(suspension.key, suspension.dumps()))
    raise ApprovalRequired(suspension.approval())


def _resume(state: _Turn, resumed: Resumed) -> TurnFlow[bool]:
    """Continue a call stopped for approval: its round of tool calls runs (a denied call's
    result tells the model it was not approved), then the call goes on as any other."""
    state.use(state.given.user, resumed.sent)
    state.pending = list(resumed.messages[:-1])
    message = resumed.messages[-1]
    assert isinstance(message, AiMessage)
    state.specs = yield from _specifications(state)
    done = yield from _run_tools(state, resumed.calls, resumed.decisions)
    return (yield from _ran(state, message, done))


def _specifications(state: _Turn) -> TurnFlow[tuple[ToolSpecification, ...]]:
    """The tools of the next model call: providers asked once per call, dynamic ones before
    every model call; nothing is asked (or installed again) when no provider is due."""
    toolbox = state.toolbox
    if toolbox is None:
        return ()
    first = not state.responses
    due = toolbox.to_ask(first)
    if not first and not due:
        return state.specs
    provided = []
    for provider in due:
        provided.append((provider, (yield from perform(Provide(provider, toolbox.context)))))
    return toolbox.install(provided)


def _exchange(state: _Turn, request: ChatRequest) -> TurnFlow[ChatResponse]:
    """The model's answer: whole, or streamed (its events handed on, a tool call started as
    soon as it is complete)."""
    if not state.given.streaming:
        return (yield from perform(Ask(request)))
    stream = yield from perform(Open(request))
    response: ChatResponse | None = None
    while True:
        event = yield from perform(Next(stream))
        if event is None:
            break
        if isinstance(event, ChatResponse):
            response = event
        elif isinstance(event, CompleteToolCall):
            yield from _start_early(state, event.request)
        yield from _hold(state, event)
    if response is None:
        raise ModelError(
            "the model's stream ended without its final response; try again", retriable=True
        )
    return response


def _start_early(state: _Turn, request: ToolExecutionRequest) -> TurnFlow[None]:
    """A streamed tool call, complete before the model's answer is: started now, beside the
    stream when the service runs tools concurrently, else right away."""
    if request.id is None or state.toolbox is None or request.id in state.early:
        return
    if _waits(state, request):
        return  # it runs once approved, if it is
    concurrent = state.given.tool_options.concurrent
    state.early[request.id] = yield from _tool(state, request, beside=concurrent)


def _run_tools(
    state: _Turn, calls: Sequence[ToolExecutionRequest], decisions: Decisions | None = None
) -> TurnFlow[ToolRound]:
    """Run the model's tool calls and settle them, results in the calls' order. Calls started
    early are awaited; of the others, with `concurrent` and more than one, all start beside
    each other first, else each runs in turn. A call denied approval does not run."""
    toolbox = state.toolbox
    assert toolbox is not None, "a model calls tools only when it was offered some"
    started: list[object] = [
        state.early.pop(r.id, None) if r.id is not None else None for r in calls
    ]
    for index, request in enumerate(calls):
        told = denial(decisions.get(request.id or "", True)) if decisions is not None else None
        if told is not None:
            at = now()
            output = ToolOutput(told, None, is_error=True)
            tool = toolbox.by_name.get(request.name)
            started[index] = Attempt(request, tool, output, None, at, at)
    waiting = [i for i, s in enumerate(started) if s is None]
    if state.given.tool_options.concurrent and len(waiting) > 1:
        for i in waiting:
            started[i] = yield from _tool(state, calls[i], beside=True)
    attempts: list[Attempt] = []
    for request, begun in zip(calls, started, strict=True):
        if begun is None:
            begun = yield from _tool(state, request, beside=False)
        if not isinstance(begun, Attempt):
            begun = yield from perform(AwaitTool(begun))
        attempts.append(begun)
    _count_sent_back(state, attempts)
    return toolbox.finish(attempts, state.given.tool_options)


def _tool(state: _Turn, request: ToolExecutionRequest, *, beside: bool) -> TurnFlow[object]:
    """Run a tool call now (its `Attempt`), or start it `beside` the turn (a handle)."""
    toolbox = state.toolbox
    assert toolbox is not None
    tool = toolbox.by_name.get(request.name)
    options = state.given.tool_options
    timeout = options.limits(tool).timeout
    if beside:
        handle = yield from perform(
            StartTool(tool, request, toolbox.context, options.before, timeout)
        )
        return handle
    attempt = yield from perform(RunTool(tool, request, toolbox.context, options.before, timeout))
    return attempt


def _count_sent_back(state: _Turn, attempts: Sequence[Attempt]) -> None:
    """Count the calls that sent the model back to their tool; past a tool's `retries` the
    call fails (the model is not getting it right)."""
    options = state.given.tool_options
    for attempt in attempts:
        if attempt.tool is None or not sent_back(attempt):
            continue
        name = attempt.request.name
        count = state.sent_back[name] = state.sent_back.get(name, 0) + 1
        limit = options.limits(attempt.tool).retries
        if limit is not None and count > limit:
            raise ModelBehaviourError(
                f"the model was sent back to the tool {name!r} {count} times in one call "
                f"(its retries allow {limit}): {attempt.error}; nothing was stored"
            )


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


# -- the answer ----------------------------------------------------------------------------


def _answer(state: _Turn) -> TurnFlow[Any]:
    """The final answer read as the method declares and passed by the output guardrails; the
    model is asked again, told what was wrong, `output_retries` times for an answer that does
    not read and `guardrail_retries` times for one a guardrail sends back (`ModelRetry`)."""
    given = state.given
    unread, refused = given.output_retries, given.guardrail_retries
    extra: list[ChatMessage] = []
    while True:
        response = state.responses[-1]
        try:
            return _guard_output(given, _read(given.output, response), response)
        except OutputParsingError as error:
            if not unread:
                raise
            unread -= 1
            told = _retry(error)
        except ModelRetry as retry:
            if not refused:
                raise GuardrailError(
                    f"an output guardrail refused the answer after {given.guardrail_retries} "
                    f"tries ({retry}); nothing was stored",
                    stage="output",
                ) from retry
            refused -= 1
            told = str(retry)
        yield from _flush(state)
        extra += [response.ai_message, UserMessage(told)]
        state.responses.append((yield from _exchange(state, state.request(extra))))


def _guard_input(state: _Turn) -> None:
    """The input guardrails, in order: each passes (None), rewrites the user message (a text or
    a `UserMessage`, which is stored and sent), or refuses (`GuardrailError`)."""
    for guardrail in state.given.input_guardrails:
        given = state.stored
        verdict = guardrail(given)
        if verdict is None:
            continue
        if isinstance(verdict, str):
            verdict = UserMessage(verdict, name=given.name)
        if not isinstance(verdict, UserMessage):
            raise ConfigurationError(
                f"an input guardrail returns None, a text or a UserMessage, got {verdict!r}"
            )
        state.use(verdict, verdict)


def _guard_output(given: TurnInput, value: Any, response: ChatResponse) -> Any:
    """The output guardrails, in order, on the answer as the method returns it (its text when
    the method returns the message itself): each passes (None), replaces the value, sends the
    model back (`ModelRetry`) or refuses (`GuardrailError`)."""
    for guardrail in given.output_guardrails:
        seen = value if given.output is not None else response.ai_message.text
        replaced = guardrail(seen)
        if replaced is not None and given.output is not None:
            value = replaced
    return value


def _read(spec: OutputSpec[Any] | None, response: ChatResponse) -> Any:
    if spec is None:
        return None
    return spec.read(response)


def _retry(error: OutputParsingError) -> str:
    return (
        f"Your answer could not be read: {error.reason}\n"
        f"Answer again, following the required format exactly."
    )


def _index() -> TurnFlow[None]:
    """Index the stored turn for recall. The turn is stored already, so a failure here does not
    fail the call: the index catches up with the history on the next turn."""
    try:
        yield from perform(Index())
    except Exception as error:
        log.warning(
            "semantic recall could not index the turn (%s); it will index it on a later turn",
            error,
        )


# -- events --------------------------------------------------------------------------------


def _emit(state: _Turn, event: ServiceEvent) -> TurnFlow[None]:
    """Hand `event` on now (after what is held), when the caller streams."""
    if state.given.forward:
        yield from _flush(state)
        yield from perform(Emit(event))


def _hold(state: _Turn, event: ServiceEvent) -> TurnFlow[None]:
    """Hand a stream event on, but from the last text of a model call on, wait: the last text
    and the response reach the caller of the final model call after the turn is stored."""
    if not state.given.forward:
        return
    if isinstance(event, PartialText):
        yield from _flush(state)
        state.held.append(event)
    elif isinstance(event, ChatResponse) or state.held:
        state.held.append(event)
    else:
        yield from perform(Emit(event))


def _flush(state: _Turn) -> TurnFlow[None]:
    held, state.held = state.held, []
    for event in held:
        yield from perform(Emit(event))


# -- small pure parts ----------------------------------------------------------------------


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
