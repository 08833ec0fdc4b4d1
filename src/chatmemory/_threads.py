"""Where blocking work runs when an async caller meets a sync component: one shared pool.

A sync store, model, retriever or tool used from an async service call runs on this pool (the
caller's context variables go with it), and a coroutine run from sync code while this thread
already runs an event loop runs on it too. One pool for the whole library, made on first use and
shut down with the interpreter, instead of a pool per object or per call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

__all__ = ["in_thread", "run_coroutine", "shared_pool"]

P = ParamSpec("P")
T = TypeVar("T")

WORKERS = 32
"""Threads of the pool: blocking calls of the library are I/O waits (a store, a model, a
tool), so the pool is sized for waits, not for cores."""

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_lock = threading.Lock()


def shared_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The library's one worker pool (made on first use)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=WORKERS, thread_name_prefix="chatmemory"
            )
        return _pool


async def in_thread(function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``await in_thread(f, ...)``: `f` run on the shared pool, in a copy of this context."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, function, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(shared_pool(), call)


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` to its end from sync code: on this thread, or on the shared pool when
    this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    return shared_pool().submit(asyncio.run, coroutine).result()
