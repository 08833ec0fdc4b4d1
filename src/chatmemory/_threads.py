"""Where blocking work runs when an async caller meets a sync component: one shared pool.

A sync store, model, retriever or tool used from an async service call runs on this pool (the
caller's context variables go with it), and a coroutine run from sync code while this thread
already runs an event loop runs on it too. One pool for the whole library, made on first use and
shut down with the interpreter, instead of a pool per object or per call (and one apart, for
recall's background indexing, which work on the shared pool may wait for).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

__all__ = ["in_thread", "indexing_pool", "run_coroutine", "shared_pool"]

P = ParamSpec("P")
T = TypeVar("T")

WORKERS = 32
"""Threads of the pool: blocking calls of the library are I/O waits (a store, a model, a
tool), so the pool is sized for waits, not for cores."""
INDEXING_WORKERS = 4
"""Threads indexing recall in the background, for all conversations (a job is a few writes)."""

_pools: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
_lock = threading.Lock()


def _pool(name: str, workers: int) -> concurrent.futures.ThreadPoolExecutor:
    with _lock:
        pool = _pools.get(name)
        if pool is None:
            pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix=name)
            _pools[name] = pool
        return pool


def shared_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The library's one worker pool (made on first use)."""
    return _pool("chatmemory", WORKERS)


def indexing_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The one pool apart: recall's background indexing (`SemanticRecall(index_in_background=
    True)`). A recall waiting on the shared pool for a job queued behind it there could wait
    for ever. Its threads are joined when the interpreter exits, after the jobs already
    queued: a process that ends normally indexes what it stored."""
    return _pool("chatmemory-index", INDEXING_WORKERS)


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
