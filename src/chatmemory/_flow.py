"""Write a store interaction once, run it sync or async.

Logic that talks to a store is written as a generator (a *flow*) that yields the store calls it
needs and receives their results, like httpx's auth flows. `run` drives it against a sync object,
`arun` against an asyncio one whose methods have the same names and are awaited. Nothing in a
flow does I/O itself, so the memory and store logic exists exactly once.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

__all__ = ["Call", "Flow", "Sleep", "arun", "backoff", "run"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call:
    """Call `target.<method>(*args, **kwargs)` and send the result back into the flow."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait `seconds` (`time.sleep` or `asyncio.sleep`) before going on."""

    seconds: float


Flow: TypeAlias = Generator["Call | Sleep", Any, T]


def run(flow: Flow[T], target: object) -> T:
    """Drive `flow` with blocking calls on `target`."""
    result: Any = None
    while True:
        try:
            op = flow.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if isinstance(op, Sleep):
            time.sleep(op.seconds)
            result = None
        else:
            result = getattr(target, op.method)(*op.args, **op.kwargs)


async def arun(flow: Flow[T], target: object) -> T:
    """Drive `flow` by awaiting the calls on `target`."""
    result: Any = None
    while True:
        try:
            op = flow.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if isinstance(op, Sleep):
            await asyncio.sleep(op.seconds)
            result = None
        else:
            result = await getattr(target, op.method)(*op.args, **op.kwargs)


def backoff(attempts: int = 200, *, cap: float = 0.05) -> Iterator[float]:
    """Delays between optimistic retries: randomized, growing exponentially up to `cap`.

    Yields `attempts - 1` delays, so a loop over it tries `attempts` times in all.
    """
    for attempt in range(attempts - 1):
        yield random.uniform(0, min(cap, 0.0005 * 2**attempt))
