"""The drivers of a turn: one per mode (blocking or asyncio, a whole answer or a stream).

Each runs the turn's flow, hands every effect to its port by the effect's class (a `match`
that mypy checks is complete) and sends the result back, or the exception the port raised (the
turn may handle it). `fx.Emit` is the one effect a driver handles itself: a streaming driver hands
the event to its caller, the others drop it. However the flow ends, the flow and the port are
closed (streams closed, tools and moderation started beside the turn cancelled). While tracing
is on, each effect is carried out as `_observed` says (its span, its metrics); while it is off,
that costs a global read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Generic, TypeVar

from typing_extensions import assert_never

from .. import telemetry
from . import _effects as fx
from ._observed import observed
from ._ports import AsyncPort, SyncPort
from ._results import Finished, ServiceEvent

__all__ = ["Finished", "arun", "astream", "run", "stream"]

T = TypeVar("T")


class _Steps(Generic[T]):
    """A flow stepped by a driver: the next effect, given what the last one produced (or the
    exception it raised, which the flow may handle), or `Finished` with the flow's value."""

    __slots__ = ("error", "flow", "result")

    def __init__(self, flow: fx.TurnFlow[T]) -> None:
        self.flow = flow
        self.result: object = None
        self.error: Exception | None = None

    def take(
        self,
        carry_out: Callable[[fx.TurnEffect, SyncPort], object],
        effect: fx.TurnEffect,
        port: SyncPort,
    ) -> None:
        """What carrying `effect` out produced, or the exception it raised, for the flow."""
        try:
            self.result = carry_out(effect, port)
        except Exception as error:
            self.error = error

    async def atake(
        self,
        carry_out: Callable[[fx.TurnEffect, AsyncPort], Awaitable[object]],
        effect: fx.TurnEffect,
        port: AsyncPort,
    ) -> None:
        """`take` for asyncio."""
        try:
            self.result = await carry_out(effect, port)
        except Exception as error:
            self.error = error

    def next(self) -> fx.TurnEffect | Finished[T]:
        result, error = self.result, self.error
        self.result = self.error = None
        try:
            return self.flow.throw(error) if error is not None else self.flow.send(result)
        except StopIteration as stop:
            return Finished(stop.value)


def _sync(effect: fx.TurnEffect, port: SyncPort) -> object:
    instrumentation = telemetry.active()
    seen = None if instrumentation is None else observed(instrumentation, effect, port.memory)
    if seen is None:
        return _carry_out(effect, port)
    if seen.opened is None:
        return seen.saw(_carry_out(effect, port))
    with seen.opened:
        return seen.saw(_carry_out(effect, port))


async def _async(effect: fx.TurnEffect, port: AsyncPort) -> object:
    instrumentation = telemetry.active()
    seen = None if instrumentation is None else observed(instrumentation, effect, port.memory)
    if seen is None:
        return await _acarry_out(effect, port)
    if seen.opened is None:
        return seen.saw(await _acarry_out(effect, port))
    with seen.opened:
        return seen.saw(await _acarry_out(effect, port))


def _carry_out(effect: fx.TurnEffect, port: SyncPort) -> object:  # noqa: C901 - a case an effect
    match effect:
        case fx.Window():
            return port.window(effect)
        case fx.ReadWorking():
            return port.read_working(effect)
        case fx.Recall():
            return port.recall(effect)
        case fx.Augment():
            return port.augment(effect)
        case fx.Provide():
            return port.provide(effect)
        case fx.Ask():
            return port.ask(effect)
        case fx.Open():
            return port.open(effect)
        case fx.Next():
            return port.next(effect)
        case fx.RunTool():
            return port.run_tool(effect)
        case fx.StartTool():
            return port.start_tool(effect)
        case fx.AwaitTool():
            return port.await_tool(effect)
        case fx.Moderate():
            port.moderate(effect)
            return None
        case fx.Verdict():
            return port.verdict(effect)
        case fx.Commit():
            port.commit(effect)
            return None
        case fx.Index():
            port.index(effect)
            return None
        case fx.Suspend():
            port.suspend(effect)
            return None
        case fx.Emit():
            return None
        case _:
            assert_never(effect)


async def _acarry_out(effect: fx.TurnEffect, port: AsyncPort) -> object:  # noqa: C901 - as above
    match effect:
        case fx.Window():
            return await port.window(effect)
        case fx.ReadWorking():
            return await port.read_working(effect)
        case fx.Recall():
            return await port.recall(effect)
        case fx.Augment():
            return await port.augment(effect)
        case fx.Provide():
            return await port.provide(effect)
        case fx.Ask():
            return await port.ask(effect)
        case fx.Open():
            return await port.open(effect)
        case fx.Next():
            return await port.next(effect)
        case fx.RunTool():
            return await port.run_tool(effect)
        case fx.StartTool():
            return await port.start_tool(effect)
        case fx.AwaitTool():
            return await port.await_tool(effect)
        case fx.Moderate():
            await port.moderate(effect)
            return None
        case fx.Verdict():
            return await port.verdict(effect)
        case fx.Commit():
            await port.commit(effect)
            return None
        case fx.Index():
            await port.index(effect)
            return None
        case fx.Suspend():
            await port.suspend(effect)
            return None
        case fx.Emit():
            return None
        case _:
            assert_never(effect)


def run(flow: fx.TurnFlow[T], port: SyncPort) -> T:
    """Run the turn blocking; its value."""
    steps = _Steps(flow)
    try:
        while not isinstance(effect := steps.next(), Finished):
            steps.take(_sync, effect, port)
        return effect.value
    finally:
        flow.close()
        port.close()


def stream(flow: fx.TurnFlow[T], port: SyncPort) -> Generator[ServiceEvent, None, T]:
    """Run the turn blocking, yielding what it emits; its value is the generator's."""
    steps = _Steps(flow)
    try:
        while not isinstance(effect := steps.next(), Finished):
            if isinstance(effect, fx.Emit):
                yield effect.event
                continue
            steps.take(_sync, effect, port)
        return effect.value
    finally:
        flow.close()
        port.close()


async def arun(flow: fx.TurnFlow[T], port: AsyncPort) -> T:
    """Run the turn on asyncio; its value."""
    steps = _Steps(flow)
    try:
        while not isinstance(effect := steps.next(), Finished):
            await steps.atake(_async, effect, port)
        return effect.value
    finally:
        flow.close()
        await port.aclose()


async def astream(
    flow: fx.TurnFlow[T], port: AsyncPort
) -> AsyncIterator[ServiceEvent | Finished[T]]:
    """Run the turn on asyncio, yielding what it emits, and last `Finished` with its value."""
    steps = _Steps(flow)
    try:
        while not isinstance(effect := steps.next(), Finished):
            if isinstance(effect, fx.Emit):
                yield effect.event
                continue
            await steps.atake(_async, effect, port)
        yield effect
    finally:
        flow.close()
        await port.aclose()
