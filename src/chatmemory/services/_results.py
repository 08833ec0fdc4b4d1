"""What a service method can return beyond plain values: `Result` and the token streams."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeAlias, TypeVar

from .._messages import Content, ToolExecutionRequest
from ..models import ChatResponse, FinishReason, TokenUsage
from ..models._events import CompleteToolCall, PartialText, PartialThinking, PartialToolCall

__all__ = [
    "AsyncTokenStream",
    "Finished",
    "Result",
    "Retrieved",
    "ServiceEvent",
    "TokenStream",
    "ToolExecuted",
    "ToolExecution",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecution:
    """One tool call the model asked for during a service call, and how it went.

    `result` is the text the model received (an error's text when `is_error`; the text parts
    when the tool returned `contents`), `result_object` what the tool returned (None when it
    failed).
    """

    request: ToolExecutionRequest
    result: str
    result_object: object = None
    is_error: bool = False
    contents: tuple[Content, ...] = ()
    """What the model received when the tool returned more than text (an image...)."""
    started_at: datetime
    finished_at: datetime


@dataclass(frozen=True, slots=True)
class ToolExecuted:
    """Stream event: a tool ran (its request and result)."""

    execution: ToolExecution


@dataclass(frozen=True, slots=True)
class Retrieved:
    """Stream event: what retrieval found for the call (before the first model call)."""

    contents: tuple[Any, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Result(Generic[T]):
    """A service call's answer with what it took to get it.

    `content` is the answer as the method declares it (`Result[Person]` parses a `Person`);
    `token_usage` adds up every model call of the turn (tool loop and output retries too);
    `finish_reason` and `final_response` are the last model call's; `intermediate_responses`
    the ones before it; `tool_executions` the tools that ran; `sources` what retrieval found.
    """

    content: T
    token_usage: TokenUsage
    finish_reason: FinishReason | None
    final_response: ChatResponse
    intermediate_responses: tuple[ChatResponse, ...] = ()
    tool_executions: tuple[ToolExecution, ...] = ()
    sources: tuple[Any, ...] = ()


ServiceEvent: TypeAlias = (
    PartialText
    | PartialThinking
    | PartialToolCall
    | CompleteToolCall
    | Retrieved
    | ToolExecuted
    | ChatResponse
)
"""What a token stream yields: the model's stream events (each model call ends with its
`ChatResponse`) and, between model calls, the tools that ran."""


@dataclass(frozen=True, slots=True)
class Finished(Generic[T]):
    """The last item of an async stream of a turn: what it produced."""

    value: T


class TokenStream:
    """The events of a streaming service call; once iterated to the end, `result` is the
    call's `Result[str]`.

    Nothing runs before iteration starts. The turn is stored before the last text and the
    final response are handed on (reading them means the call is complete and the memory id
    free again); a stream abandoned earlier (a `break`, `close()`) stores nothing.
    """

    def __init__(self, events: Callable[[], Generator[ServiceEvent, None, Result[str]]]) -> None:
        self._events = events
        self._started = False
        self._result: Result[str] | None = None

    def __iter__(self) -> Iterator[ServiceEvent]:
        if self._started:
            raise RuntimeError("a TokenStream can be iterated once; call the method again")
        self._started = True
        return self._run()

    def _run(self) -> Iterator[ServiceEvent]:
        self._result = yield from self._events()

    def text(self) -> Iterator[str]:
        """Only the answer's text, piece by piece."""
        for event in self:
            if isinstance(event, PartialText):
                yield event.text

    @property
    def result(self) -> Result[str]:
        """The call's `Result`, available once the stream is complete."""
        if self._result is None:
            raise RuntimeError("the TokenStream has not completed: iterate it to the end first")
        return self._result


class AsyncTokenStream:
    """`TokenStream` for ``async for``."""

    def __init__(
        self, events: Callable[[], AsyncIterator[ServiceEvent | Finished[Result[str]]]]
    ) -> None:
        self._events = events
        self._started = False
        self._result: Result[str] | None = None

    def __aiter__(self) -> AsyncIterator[ServiceEvent]:
        if self._started:
            raise RuntimeError("an AsyncTokenStream can be iterated once; call the method again")
        self._started = True
        return self._run()

    async def _run(self) -> AsyncIterator[ServiceEvent]:
        async for item in self._events():
            if isinstance(item, Finished):
                self._result = item.value
            else:
                yield item

    async def text(self) -> AsyncIterator[str]:
        """Only the answer's text, piece by piece."""
        async for event in self:
            if isinstance(event, PartialText):
                yield event.text

    @property
    def result(self) -> Result[str]:
        """The call's `Result`, available once the stream is complete."""
        if self._result is None:
            raise RuntimeError(
                "the AsyncTokenStream has not completed: iterate it to the end first"
            )
        return self._result
