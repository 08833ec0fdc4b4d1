"""Indexing left to run after a turn (`SemanticRecall(index_in_background=True)`): one job at a
time per conversation, on threads of their own; what reads or removes the index waits for the
jobs it could race with."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from .._threads import indexing_pool

__all__ = ["Backlog"]

log = logging.getLogger("chatmemory.recall")


@dataclass(slots=True)
class _Job:
    done: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)
    again: Callable[[], object] | None = None
    """Work asked for while this job ran: run after it, once however often it was asked."""


class Backlog:
    """The conversations whose index is being written in the background."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, _Job] = {}

    def submit(self, memory_id: str, work: Callable[[], object]) -> None:
        """Run `work` (indexing `memory_id`'s new messages) after the conversation's job in
        progress, if any; return at once."""
        work = functools.partial(contextvars.copy_context().run, work)  # (the turn's trace)
        with self._lock:
            job = self._jobs.get(memory_id)
            if job is not None:
                job.again = work  # (it indexes whatever is new when it runs)
                return
            job = self._jobs[memory_id] = _Job()
        try:
            indexing_pool().submit(self._run, memory_id, job, work)
        except RuntimeError:  # the interpreter is exiting: no new thread, the job runs here
            self._run(memory_id, job, work)

    def _run(self, memory_id: str, job: _Job, work: Callable[[], object]) -> None:
        try:
            while True:
                try:
                    work()
                except Exception as error:  # the turn is stored: a later one catches up
                    log.warning(
                        "semantic recall could not index the turn (%s); it will index it on "
                        "a later turn",
                        error,
                    )
                with self._lock:  # (no new work can slip in between this check and the end)
                    if job.again is None:
                        del self._jobs[memory_id]
                        break
                    work, job.again = job.again, None
        finally:
            with self._lock:  # an exit while it ran (the next index catches up): it ends too
                if self._jobs.get(memory_id) is job:  # pragma: no cover
                    del self._jobs[memory_id]
            job.done.set_result(None)  # (whoever waits is never left waiting)

    def _pending(self, memory_id: str | None) -> list[concurrent.futures.Future[None]]:
        with self._lock:
            if memory_id is None:
                return [job.done for job in self._jobs.values()]
            job = self._jobs.get(memory_id)
            return [] if job is None else [job.done]

    def wait(self, memory_id: str | None = None) -> None:
        """Return once the jobs of `memory_id` (of every conversation: None) submitted so far
        are done."""
        for done in self._pending(memory_id):
            done.result()

    async def await_(self, memory_id: str | None = None) -> None:
        """`wait` for asyncio."""
        for done in self._pending(memory_id):
            await asyncio.wrap_future(done)
