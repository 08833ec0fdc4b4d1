"""The tool side of a turn, apart from I/O: which tools a model call offers, how a tool call's
outcome becomes the text the model reads (the service's strategies), and when a round of tool
calls ends the turn (immediate return)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal, TypeAlias

from .._errors import ConfigurationError, ModelBehaviourError, ModelRetry, shorten
from .._messages import (
    AiMessage,
    ChatMessage,
    Content,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
)
from ..models import ToolSpecification
from ..models._values import ToolChoice
from ..tools import (
    AsyncToolProvider,
    Tool,
    ToolArgumentsError,
    ToolContext,
    ToolExecutionError,
    ToolLimits,
    ToolOutput,
    ToolProvider,
)
from ..tools._contracts import limits_of
from ._results import ToolExecution

__all__ = [
    "Attempt",
    "ToolOptions",
    "ToolRound",
    "Toolbox",
    "begin",
    "ended",
    "failed",
    "is_immediate",
    "now",
    "result_message",
    "sent_back",
    "settle",
]

ArgumentsHandler: TypeAlias = Callable[[ToolArgumentsError, ToolExecutionRequest], str]
ErrorHandler: TypeAlias = Callable[[ToolExecutionError, ToolExecutionRequest], str]
UnknownToolHandler: TypeAlias = Callable[[ToolExecutionRequest, Sequence[str]], str]


def now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """How a service runs the tools the model calls."""

    max_round_trips: int = 100
    concurrent: bool = False
    on_invalid_arguments: ArgumentsHandler | None = None
    on_tool_error: ErrorHandler | None = None
    on_unknown_tool: UnknownToolHandler | Literal["raise"] | None = None
    before: Callable[[ToolExecutionRequest], None] | None = None
    after: Callable[[ToolExecution], None] | None = None
    retries: int | None = None
    """How many times per tool one call may send the model back (a tool's own limit wins)."""
    timeout: float | None = None
    """Seconds a tool call may take (a tool's own limit wins)."""

    def limits(self, tool: Tool | None) -> ToolLimits:
        """The limits a call of `tool` runs under: its own, else the service's."""
        own = limits_of(tool)
        return ToolLimits(
            own.retries if own.retries is not None else self.retries,
            own.timeout if own.timeout is not None else self.timeout,
        )


@dataclass(frozen=True, slots=True)
class Attempt:
    """One tool call as it ran: its output, or the error it raised, or no tool at all."""

    request: ToolExecutionRequest
    tool: Tool | None
    output: ToolOutput | None
    error: ToolArgumentsError | ToolExecutionError | None
    started_at: datetime
    finished_at: datetime


@dataclass(frozen=True, slots=True)
class ToolRound:
    executions: tuple[ToolExecution, ...]
    immediate: bool


def failed(tool: Tool, request: ToolExecutionRequest, error: Exception) -> ToolExecutionError:
    """`error` as a `ToolExecutionError` (a hand-written tool may raise anything)."""
    if isinstance(error, ToolExecutionError):
        return error
    message = str(error) or type(error).__name__
    wrapped = ToolExecutionError(message, tool=request.name, cause=error)
    wrapped.__cause__ = error
    return wrapped


def settle(attempt: Attempt, options: ToolOptions, available: Sequence[str]) -> ToolExecution:
    """The execution the model hears about: the tool's output, or what the strategy for its
    failure says. A strategy that raises ends the service call (nothing stored)."""
    request, output = attempt.request, attempt.output
    error = attempt.error
    contents: tuple[Content, ...] = ()
    if attempt.tool is None:
        text, is_error, value = _unknown(request, options, available), True, None
    elif isinstance(error, ToolArgumentsError):
        handler = options.on_invalid_arguments
        text = handler(error, request) if handler is not None else _invalid(error, request)
        is_error, value = True, None
    elif isinstance(error, ToolExecutionError) and isinstance(error.cause, ModelRetry):
        text, is_error, value = str(error.cause), True, None
    elif error is not None:
        handler_ = options.on_tool_error
        text = handler_(error, request) if handler_ is not None else str(error)
        is_error, value = True, None
    else:
        assert output is not None
        text, is_error, value = output.text, output.is_error, output.value
        contents = output.contents
    if not isinstance(text, str):
        raise ConfigurationError(
            f"a tool strategy must return the text for the model, got {text!r}"
        )
    execution = ToolExecution(
        request=request,
        result=text,
        result_object=value,
        is_error=is_error,
        contents=contents,
        started_at=attempt.started_at,
        finished_at=attempt.finished_at,
    )
    if options.after is not None:
        options.after(execution)
    return execution


def _unknown(request: ToolExecutionRequest, options: ToolOptions, available: Sequence[str]) -> str:
    handler = options.on_unknown_tool
    if handler == "raise":
        raise ModelBehaviourError(
            f"the model called the tool {request.name!r}, but there is no such tool (it has "
            f"{', '.join(available) or 'no tools'}); set on_unknown_tool to let it try again"
        )
    if handler is not None:
        return handler(request, available)
    names = ", ".join(available)
    return (
        f"There is no tool named {json.dumps(request.name)}. "
        + (f"The tools are: {names}." if names else "No tools are available.")
        + " Call one of them, or answer without a tool."
    )


def _invalid(error: ToolArgumentsError, request: ToolExecutionRequest) -> str:
    """What the model hears of its invalid arguments: the error, shortened (a hand-written
    tool's message may quote all of them), so they are never stored whole as the result."""
    told = shorten(str(error), _TOLD)
    return f"Invalid arguments for the tool {json.dumps(request.name)}: {told}. Call it again."


_TOLD = 1000


def sent_back(attempt: Attempt) -> bool:
    """Whether a tool call sent the model back to it: arguments that did not fit, or the tool
    raising `ModelRetry` (what a tool's `retries` limit counts)."""
    error = attempt.error
    return isinstance(error, ToolArgumentsError) or (
        isinstance(error, ToolExecutionError) and isinstance(error.cause, ModelRetry)
    )


def is_immediate(attempts: Sequence[Attempt], executions: Sequence[ToolExecution]) -> bool:
    """§3.6: no tool failed, and the last tool returns `immediate_if_last` or every tool
    returns immediately."""
    if not attempts or any(e.is_error for e in executions):
        return False
    behaviors = [a.tool.return_behavior if a.tool is not None else "to_model" for a in attempts]
    return behaviors[-1] == "immediate_if_last" or all(b != "to_model" for b in behaviors)


def turn_tool_choice(
    choice: ToolChoice | None, specs: Sequence[ToolSpecification], ran: Sequence[object]
) -> ToolChoice | None:
    """The tool choice of a model call of the turn: none without tools (OpenAI refuses one);
    ``"auto"`` once tools `ran` for a choice that forces a call (``"required"``, a tool's name),
    so the model can answer; else the service's or method's."""
    if choice is None or not specs:
        return None
    if ran and choice not in ("auto", "none"):
        return "auto"
    return choice


def result_message(execution: ToolExecution) -> ToolExecutionResultMessage:
    request = execution.request
    if execution.contents:
        return ToolExecutionResultMessage(
            request.id,
            request.name,
            contents=execution.contents,
            is_error=True if execution.is_error else None,
        )
    return ToolExecutionResultMessage(
        request.id,
        request.name,
        execution.result,
        is_error=True if execution.is_error else None,
    )


def without_tools(messages: Sequence[ChatMessage], names: frozenset[str]) -> list[ChatMessage]:
    """`messages` without the calls of the tools named `names` and their results: an AI message
    keeps its text, thinking and other calls, and goes when nothing else is left of it."""
    if not names:
        return list(messages)
    kept: list[ChatMessage] = []
    for message in messages:
        if isinstance(message, ToolExecutionResultMessage) and message.tool_name in names:
            continue
        if isinstance(message, AiMessage) and any(
            r.name in names for r in message.tool_execution_requests
        ):
            others = [r for r in message.tool_execution_requests if r.name not in names]
            if not others and not message.text:
                continue
            message = AiMessage(
                message.text,
                thinking=message.thinking,
                tool_execution_requests=others,
                attributes=message.attributes,
            )
        kept.append(message)
    return kept


@dataclass(slots=True)
class Toolbox:
    """The tools of one service call: the service's own, and what its providers give.

    Providers that are not dynamic are asked once per call; dynamic ones before every model
    call. A provided tool may not reuse the name of another tool.
    """

    static: tuple[Tool, ...]
    providers: tuple[ToolProvider | AsyncToolProvider, ...]
    context: ToolContext
    _once: list[Tool] | None = None
    by_name: dict[str, Tool] = field(default_factory=dict)

    def to_ask(self, first: bool) -> list[ToolProvider | AsyncToolProvider]:
        return [p for p in self.providers if first or p.dynamic]

    def install(
        self, provided: Iterable[tuple[ToolProvider | AsyncToolProvider, Sequence[Tool]]]
    ) -> tuple[ToolSpecification, ...]:
        fresh: list[Tool] = []
        once: list[Tool] = []
        for provider, tools in provided:
            (fresh if provider.dynamic else once).extend(_check_tools(tools, provider))
        if self._once is None:
            self._once = once
        by_name: dict[str, Tool] = {}
        for tool in (*self.static, *self._once, *fresh):
            name = tool.specification.name
            if name in by_name:
                raise ConfigurationError(
                    f"two tools are named {name!r} (a tool provider gave one that exists "
                    f"already); tool names must be unique"
                )
            by_name[name] = tool
        self.by_name = by_name
        return tuple(tool.specification for tool in by_name.values())

    def available(self) -> list[str]:
        return list(self.by_name)

    def finish(self, attempts: Sequence[Attempt], options: ToolOptions) -> ToolRound:
        """The round's executions as the model hears of them, and whether they end the call."""
        available = self.available()
        executions = [settle(a, options, available) for a in attempts]
        return ToolRound(tuple(executions), is_immediate(attempts, executions))


def begin(
    request: ToolExecutionRequest, before: Callable[[ToolExecutionRequest], None] | None
) -> datetime:
    """A tool call starts: the service's hook sees it first."""
    if before is not None:
        before(request)
    return now()


def ended(
    request: ToolExecutionRequest,
    tool: Tool | None,
    started: datetime,
    output: ToolOutput | None = None,
    error: Exception | None = None,
) -> Attempt:
    """How a tool call went: its output, or its error as the model hears of it."""
    if tool is None:
        return Attempt(request, None, None, None, started, started)
    if error is not None and not isinstance(error, ToolArgumentsError):
        error = failed(tool, request, error)
    return Attempt(request, tool, output, error, started, now())


def _check_tools(tools: object, provider: object) -> list[Tool]:
    items = list(tools) if isinstance(tools, (list, tuple)) else None
    if items is None or not all(isinstance(t, Tool) for t in items):
        raise ConfigurationError(f"the tool provider {provider!r} must return a list of tools")
    return items
