"""What a service turn asks of the world, as values.

The turn (`_turn.py`) decides everything and yields one of these effects at a time, the way
httpx's auth flow yields a `Request`; a driver (`_drivers.py`) hands each to a port
(`_ports.py`), which carries it out and sends back what it produced. Each effect names the type
of that result (`Effect[R]`), and `perform` gives it to the turn with that type, so mypy checks
the flow; the drivers match on the effect's class and `assert_never` the rest, so a new effect
that a port does not carry out is a type error, not a string that matches nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar, cast

from .._messages import ChatMessage, ToolExecutionRequest
from ..models import ChatRequest, ChatResponse, Moderation
from ..rag import AugmentationRequest, AugmentationResult
from ..tools import Tool, ToolContext
from ._results import ServiceEvent
from ._tooling import Attempt

__all__ = [
    "Ask",
    "AwaitTool",
    "Commit",
    "Effect",
    "Emit",
    "Index",
    "Moderate",
    "Moderation",
    "Next",
    "Open",
    "Provide",
    "ReadWorking",
    "Recall",
    "RunTool",
    "StartTool",
    "Suspend",
    "TurnEffect",
    "TurnFlow",
    "Verdict",
    "Window",
    "perform",
]

R = TypeVar("R")


class Effect(Generic[R]):
    """An effect whose result is an `R`."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Window(Effect[list[ChatMessage]]):
    """The window the memory would hold with `pending` (the turn so far) added; `reread` asks
    the store whether it changed, else the memory's last read window is used (the commit checks
    it anyway). Without memory: `pending` itself."""

    pending: Sequence[ChatMessage]
    reread: bool


@dataclass(frozen=True, slots=True)
class ReadWorking(Effect[str]):
    """The working-memory block of the call's record, read now."""


@dataclass(frozen=True, slots=True)
class Recall(Effect[list[Any]]):
    """What semantic recall finds for the user's text (`RecalledMessages`, best first)."""


@dataclass(frozen=True, slots=True)
class Augment(Effect[AugmentationResult]):
    """Retrieval for the user message."""

    request: AugmentationRequest


@dataclass(frozen=True, slots=True)
class Provide(Effect[Sequence[Tool]]):
    """The tools a provider gives for this call."""

    provider: Any
    context: ToolContext


@dataclass(frozen=True, slots=True)
class Ask(Effect[ChatResponse]):
    """The model's whole answer to `request`."""

    request: ChatRequest


@dataclass(frozen=True, slots=True)
class Open(Effect[object]):
    """Start streaming the model's answer to `request`; the result is the stream's handle."""

    request: ChatRequest


@dataclass(frozen=True, slots=True)
class Next(Effect["ServiceEvent | None"]):
    """The stream's next event (None once it ended); a port closes what it opened when the
    turn ends."""

    stream: object


@dataclass(frozen=True, slots=True)
class Emit(Effect[None]):
    """Hand `event` to the caller of a streaming method."""

    event: ServiceEvent


@dataclass(frozen=True, slots=True)
class RunTool(Effect[Attempt]):
    """Run a tool call now and wait for it (`tool` None: the model named no such tool)."""

    tool: Tool | None
    request: ToolExecutionRequest
    context: ToolContext
    before: Callable[[ToolExecutionRequest], None] | None = None
    timeout: float | None = None
    """Seconds the call may take; then the model is told it did not finish."""


@dataclass(frozen=True, slots=True)
class StartTool(Effect[object]):
    """Start a tool call beside the turn; the result is a handle for `AwaitTool`. A port
    cancels what was started and not awaited when the turn ends."""

    tool: Tool | None
    request: ToolExecutionRequest
    context: ToolContext
    before: Callable[[ToolExecutionRequest], None] | None = None
    timeout: float | None = None
    """Seconds the call may take; then the model is told it did not finish."""


@dataclass(frozen=True, slots=True)
class AwaitTool(Effect[Attempt]):
    """The outcome of a tool call `StartTool` began."""

    handle: object


@dataclass(frozen=True, slots=True)
class Moderate(Effect[None]):
    """Start moderating `messages` beside the turn."""

    messages: Sequence[ChatMessage]


@dataclass(frozen=True, slots=True)
class Verdict(Effect[Moderation]):
    """The verdict of the moderation `Moderate` started."""


@dataclass(frozen=True, slots=True)
class Commit(Effect[None]):
    """Store the turn's messages in the memory, in one commit (nothing without memory). Once
    started, a commit is finished even if the call is cancelled meanwhile."""

    messages: Sequence[ChatMessage]


@dataclass(frozen=True, slots=True)
class Suspend(Effect[None]):
    """Keep a call stopped for approval (`text` under `key` in the approvals store)."""

    key: str
    text: str


@dataclass(frozen=True, slots=True)
class Index(Effect[None]):
    """Index what the memory stored since the last index, for semantic recall."""


TurnEffect: TypeAlias = (
    Window
    | ReadWorking
    | Recall
    | Augment
    | Provide
    | Ask
    | Open
    | Next
    | Emit
    | RunTool
    | StartTool
    | AwaitTool
    | Moderate
    | Verdict
    | Commit
    | Suspend
    | Index
)

TurnFlow: TypeAlias = Generator[TurnEffect, Any, R]
"""A generator yielding effects and finally returning an `R`."""


def perform(effect: Effect[R]) -> TurnFlow[R]:
    """``result = yield from perform(Effect(...))``: the effect's result, typed as it says."""
    result = yield cast(TurnEffect, effect)
    return cast(R, result)
