"""Write a store interaction once, run it sync or async.

Logic that talks to a store is written as a generator (a *flow*) that yields the store calls it
needs and receives their results, like httpx's auth flows. `run` drives it against a sync object,
`arun` against an asyncio one whose methods have the same names and are awaited. Nothing in a
flow does I/O itself, so the memory and store logic exists exactly once.

A flow never yields a bare `Call`: it writes ``result = yield from call(Protocol.method, *args)``,
naming the method through the sync protocol that declares it. mypy then checks the method's name,
its arguments and the type of its result, as httpx's typed ``Generator[Request, Response, None]``
does for an auth flow; the one unchecked step (a driver sending back what the method returned)
is in `call` alone.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any, Concatenate, Generic, ParamSpec, TypeAlias, TypeVar, cast

from ._errors import ConcurrentUpdateError

__all__ = [
    "Call",
    "Flow",
    "Sleep",
    "arun",
    "backoff",
    "call",
    "optimistic",
    "retry_optimistically",
    "run",
    "sleep",
]

T = TypeVar("T")
P = ParamSpec("P")


class Call(Generic[T]):
    """Call the method named like `method` on the flow's target; its result goes back in."""

    __slots__ = ("args", "kwargs", "name")

    def __init__(
        self, method: Callable[Concatenate[Any, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> None:
        self.name: str = method.__name__
        self.args: tuple[object, ...] = args
        self.kwargs: Mapping[str, object] = kwargs

    def __repr__(self) -> str:
        return f"Call({self.name}, {self.args!r}, {dict(self.kwargs)!r})"


class Sleep:
    """Wait `seconds` (`time.sleep` or `asyncio.sleep`) before going on."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


Flow: TypeAlias = Generator["Call[Any] | Sleep", Any, T]
"""A generator yielding store calls (and sleeps) that finally returns a `T`."""


def call(method: Callable[Concatenate[Any, P], T], /, *args: P.args, **kwargs: P.kwargs) -> Flow[T]:
    """``yield from call(Store.method, ...)``: the method's result, typed as the method says."""
    result = yield Call(method, *args, **kwargs)
    return cast(T, result)


def sleep(seconds: float) -> Flow[None]:
    """``yield from sleep(s)``: wait, blocking or awaiting as the driver does."""
    yield Sleep(seconds)


def run(flow: Flow[T], target: object) -> T:
    """Drive `flow` with blocking calls on `target`."""
    result: Any = None
    while True:
        try:
            op = flow.send(result)
        except StopIteration as stop:
            return cast(T, stop.value)
        if isinstance(op, Sleep):
            time.sleep(op.seconds)
            result = None
        else:
            result = getattr(target, op.name)(*op.args, **op.kwargs)


async def arun(flow: Flow[T], target: object) -> T:
    """Drive `flow` by awaiting the calls on `target`."""
    result: Any = None
    while True:
        try:
            op = flow.send(result)
        except StopIteration as stop:
            return cast(T, stop.value)
        if isinstance(op, Sleep):
            await asyncio.sleep(op.seconds)
            result = None
        else:
            result = await getattr(target, op.name)(*op.args, **op.kwargs)


def optimistic(
    attempt: Callable[[], Flow[bool]],
    *,
    store: object,
    memory_id: str,
    attempts: int | None = None,
    what: str = "this memory",
) -> Flow[None]:
    """Run `attempt` (read, plan, versioned commit) until it commits, backing off in between.

    The one optimistic-commit loop of the library: an attempt returns False when another writer
    committed first, and nothing of it was written; it is then tried again on a fresh read.
    After `attempts` (`ATTEMPTS` by default) lost races it raises `ConcurrentUpdateError`
    (nothing written); `what` names what kept changing.
    """
    tries = ATTEMPTS if attempts is None else attempts
    delays = backoff(tries)
    while not (yield from attempt()):
        delay = next(delays, None)
        if delay is None:
            raise ConcurrentUpdateError(
                f"other writers changed {what} on every one of {tries} tries; nothing was "
                f"written. Retry later, or give hot memory ids fewer concurrent writers",
                store=store,
                memory_id=memory_id,
            )
        yield from sleep(delay)


def retry_optimistically(
    attempt: Callable[[], bool],
    *,
    store: object,
    memory_id: str,
    attempts: int | None = None,
    what: str = "this memory",
) -> None:
    """`optimistic` for blocking code whose `attempt` does its own I/O (a record store's
    load and versioned save): the same loop, backoff and error."""

    def flow() -> Flow[bool]:
        return attempt()
        yield  # pragma: no cover - a flow that asks nothing of its driver

    run(optimistic(flow, store=store, memory_id=memory_id, attempts=attempts, what=what), None)


ATTEMPTS = 200
"""Why 200: each lost race means another writer committed, so with w writers on one memory id an
attempt fails at most w - 1 times in a row without contention from new arrivals; 200 covers far
more concurrent writers of one conversation than any application has (a conversation has one
speaker at a time), while the backoff (at most 50 ms each, 0.5 ms doubling) bounds the total
wait to about 10 s, the order of a database lock timeout, before the caller is told."""


def backoff(attempts: int = ATTEMPTS, *, cap: float = 0.05) -> Iterator[float]:
    """Delays between optimistic retries: randomized, growing exponentially up to `cap`.

    Yields `attempts - 1` delays, so a loop over it tries `attempts` times in all.
    """
    for attempt in range(attempts - 1):
        yield random.uniform(0, min(cap, 0.0005 * 2**attempt))
