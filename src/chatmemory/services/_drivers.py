"""The drivers of a turn: one per mode (blocking or asyncio, a whole answer or a stream).

Each runs the turn's flow, hands every effect to its port by the effect's class (a `match`
that mypy checks is complete) and sends the result back, or the exception the port raised (the
turn may handle it). `Emit` is the one effect a driver handles itself: a streaming driver hands
the event to its caller, the others drop it. However the flow ends, the flow and the port are
closed (streams closed, tools and moderation started beside the turn cancelled).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from typing import Generic, TypeVar

from typing_extensions import assert_never

from .. import telemetry
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
    TurnEffect,
    TurnFlow,
    Verdict,
    Window,
)
from ._ports import AsyncPort, SyncPort
from ._results import Finished, ServiceEvent

__all__ = ["Finished", "arun", "astream", "run", "stream"]

T = TypeVar("T")


class _Steps(Generic[T]):
    """A flow stepped by a driver: the next effect, given what the last one produced (or the
    exception it raised, which the flow may handle), or `Finished` with the flow's value."""

    __slots__ = ("error", "flow", "result")

    def __init__(self, flow: TurnFlow[T]) -> None:
        self.flow = flow
        self.result: object = None
        self.error: Exception | None = None

    def next(self) -> TurnEffect | Finished[T]:
        result, error = self.result, self.error
        self.result = self.error = None
        try:
            return self.flow.throw(error) if error is not None else self.flow.send(result)
        except StopIteration as stop:
            return Finished(stop.value)


def _spanned(effect: TurnEffect) -> tuple[str, dict[str, object]] | None:
    """The span a traced call gives an effect (the model's and the tools' have their own)."""
    match effect:
        case Commit():
            return "chatmemory commit", {"chatmemory.messages.written": len(effect.messages)}
        case Augment():
            return "chatmemory retrieve", {}
        case Recall():
            return "chatmemory recall", {}
        case Index():
            return "chatmemory index", {}
        case Verdict():
            return "chatmemory moderation", {}
        case _:
            return None


def _sync(effect: TurnEffect, port: SyncPort) -> object:
    named = _spanned(effect) if telemetry.tracing() else None
    if named is None:
        return _carry_out(effect, port)
    with telemetry.span(*named):
        return _carry_out(effect, port)


async def _async(effect: TurnEffect, port: AsyncPort) -> object:
    named = _spanned(effect) if telemetry.tracing() else None
    if named is None:
        return await _acarry_out(effect, port)
    with telemetry.span(*named):
        return await _acarry_out(effect, port)


def _carry_out(effect: TurnEffect, port: SyncPort) -> object:  # noqa: C901 - a case an effect
    match effect:
        case Window():
            return port.window(effect)
        case ReadWorking():
            return port.read_working(effect)
        case Recall():
            return port.recall(effect)
        case Augment():
            return port.augment(effect)
        case Provide():
            return port.provide(effect)
        case Ask():
            return port.ask(effect)
        case Open():
            return port.open(effect)
        case Next():
            return port.next(effect)
        case RunTool():
            return port.run_tool(effect)
        case StartTool():
            return port.start_tool(effect)
        case AwaitTool():
            return port.await_tool(effect)
        case Moderate():
            port.moderate(effect)
            return None
        case Verdict():
            return port.verdict(effect)
        case Commit():
            port.commit(effect)
            return None
        case Index():
            port.index(effect)
            return None
        case Suspend():
            port.suspend(effect)
            return None
        case Emit():
            return None
        case _:
            assert_never(effect)


async def _acarry_out(effect: TurnEffect, port: AsyncPort) -> object:  # noqa: C901 - as above
    match effect:
        case Window():
            return await port.window(effect)
        case ReadWorking():
            return await port.read_working(effect)
        case Recall():
            return await port.recall(effect)
        case Augment():
            return await port.augment(effect)
        case Provide():
            return await port.provide(effect)
        case Ask():
            return await port.ask(effect)
        case Open():
            return await port.open(effect)
        case Next():
            return await port.next(effect)
        case RunTool():
            return await port.run_tool(effect)
        case StartTool():
            return await port.start_tool(effect)
        case AwaitTool():
            return await port.await_tool(effect)
        case Moderate():
            await port.moderate(effect)
            return None
        case Verdict():
            return await port.verdict(effect)
        case Commit():
            await port.commit(effect)
            return None
        case Index():
            await port.index(effect)
            return None
        case Suspend():
            await port.suspend(effect)
            return None
        case Emit():
            return None
        case _:
            assert_never(effect)


def run(flow: TurnFlow[T], port: SyncPort) -> T:
    """Run the turn blocking; its value."""
    steps = _Steps(flow)
    try:
        while not isinstance(effect := steps.next(), Finished):
            try:
                steps.result = _sync(effect, port)
            except Exception as error:
                steps.error = error
        return effect.value
    finally:
        flow.close()
        port.close()


def stream(flow: TurnFlow[T], port: SyncPort) -> Generator[ServiceEvent, None, T]:
    """Run the turn blocking, yielding what it emits; its value is the generator's."""
    steps = _Steps(flow)
    try:
        while not isinstance(effect := steps.next(), Finished):
            if isinstance(effect, Emit):
                yield effect.event
                continue
            try:
                steps.result = _sync(effect, port)
            except Exception as error:
                steps.error = error
        return effect.value
    finally:
        flow.close()
        port.close()


async def arun(flow: TurnFlow[T], port: AsyncPort) -> T:
    """Run the turn on asyncio; its value."""
    steps = _Steps(flow)
    try:
        while not isinstance(effect := steps.next(), Finished):
            try:
                steps.result = await _async(effect, port)
            except Exception as error:
                steps.error = error
        return effect.value
    finally:
        flow.close()
        await port.aclose()


async def astream(flow: TurnFlow[T], port: AsyncPort) -> AsyncIterator[ServiceEvent | Finished[T]]:
    """Run the turn on asyncio, yielding what it emits, and last `Finished` with its value."""
    steps = _Steps(flow)
    try:
        while not isinstance(effect := steps.next(), Finished):
            if isinstance(effect, Emit):
                yield effect.event
                continue
            try:
                steps.result = await _async(effect, port)
            except Exception as error:
                steps.error = error
        yield effect
    finally:
        flow.close()
        await port.aclose()
