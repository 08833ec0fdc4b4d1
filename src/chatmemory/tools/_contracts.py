"""What the tool loop of a service needs of a tool, and of a tool provider.

A `Tool` is a specification the model sees and a way to run a call of it: `execute` /
`aexecute` take the model's raw JSON arguments and return a `ToolOutput` (the text the model gets
back, the raw value, whether it is an error). A tool that cannot read its arguments raises
`ToolArgumentsError`; one whose code fails raises `ToolExecutionError` wrapping the exception.
The service's strategies decide what the model hears about either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from .._errors import ChatMemoryError, ConfigurationError
from .._messages import Content, UserMessage
from ..models import ToolSpecification

__all__ = [
    "AsyncToolProvider",
    "ReturnBehavior",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolExecutionError",
    "ToolLimits",
    "ToolOutput",
    "ToolProvider",
]

ReturnBehavior: TypeAlias = Literal["to_model", "immediate", "immediate_if_last"]
"""What happens after a tool ran: its result goes back to the model (`to_model`, the default), or
the call ends with the tool's result (`immediate`; `immediate_if_last`: when it is the last tool
of the model's response)."""


@dataclass(frozen=True, slots=True)
class ToolLimits:
    """How a service may run a tool: `retries`, how many times in one service call the model
    may be sent back to it (the tool raised `ModelRetry`, or the arguments did not fit) before
    the call fails; `timeout`, the seconds a call of it may take before the model is told it
    did not finish. None: the service's own setting (`ai_service(tool_retries=...,
    tool_timeout=...)`), unlimited by default. A `Tool` offers them as its `limits` attribute
    (`@tool(retries=..., timeout=...)` sets it); a tool without one has none of its own."""

    retries: int | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        retries, timeout = self.retries, self.timeout
        if retries is not None and (
            isinstance(retries, bool) or not isinstance(retries, int) or retries < 0
        ):
            raise ConfigurationError(f"`retries` must be an int >= 0 or None, got {retries!r}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
        ):
            raise ConfigurationError(
                f"`timeout` must be a positive number of seconds or None, got {timeout!r}"
            )


def limits_of(tool: object) -> ToolLimits:
    """A tool's own limits (none for a tool that declares no `limits`)."""
    found = getattr(tool, "limits", None)
    return found if isinstance(found, ToolLimits) else _NO_LIMITS


_NO_LIMITS = ToolLimits()


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may know about the call that runs it: its memory id, the user's id when the
    service method has a parameter marked `UserId`, the call's user message, and the
    invocation parameters the caller passed (`InvocationParameters`). A tool provider gets it
    too; an `@tool` function gets it in a parameter typed `ToolContext`."""

    memory_id: str
    user_id: str | None = None
    user_message: UserMessage | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool call produced: `text` for the model, the raw `value` for the caller.

    `contents` is what the model gets when the result is more than text (an image, a list of
    contents): `text` is then their text parts. Providers that take such results get them whole
    (Anthropic); OpenAI's tool messages hold text, so the media follow in a user message."""

    text: str
    value: object = None
    is_error: bool = False
    contents: tuple[Content, ...] = ()


class ToolArgumentsError(ChatMemoryError):
    """The model's arguments for a tool are not valid JSON or do not fit its parameters.

    The message is written for the model (which parameter, what was wrong), so the default
    strategy sends it back as an error result and the model can correct its call.
    """

    def __init__(self, message: str, *, tool: str, arguments: str) -> None:
        super().__init__(message)
        self.tool = tool
        self.arguments = arguments


class ToolExecutionError(ChatMemoryError):
    """A tool's own code raised `cause` (kept as `__cause__` too)."""

    def __init__(self, message: str, *, tool: str, cause: BaseException) -> None:
        super().__init__(message)
        self.tool = tool
        self.cause = cause


@runtime_checkable
class Tool(Protocol):
    """A tool a service can offer the model and run."""

    @property
    def specification(self) -> ToolSpecification: ...

    @property
    def return_behavior(self) -> ReturnBehavior: ...

    def execute(self, arguments: str, context: ToolContext) -> ToolOutput:
        """Run one call on this thread (an async tool runs on an event loop of its own)."""
        ...

    async def aexecute(self, arguments: str, context: ToolContext) -> ToolOutput:
        """Run one call on the running loop (a sync tool runs on a worker thread)."""
        ...


@runtime_checkable
class ToolProvider(Protocol):
    """Tools decided per call: asked once per service call, or before every model call of the
    turn when `dynamic`. May return other tools for other memory ids."""

    @property
    def dynamic(self) -> bool: ...

    def provide(self, context: ToolContext) -> Sequence[Tool]: ...


@runtime_checkable
class AsyncToolProvider(Protocol):
    """`ToolProvider` for asyncio (an MCP server's tools, for instance)."""

    @property
    def dynamic(self) -> bool: ...

    async def aprovide(self, context: ToolContext) -> Sequence[Tool]: ...
