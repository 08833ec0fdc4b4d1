"""Ports: what carries a turn's effects out, blocking (`SyncPort`) or on asyncio (`AsyncPort`).

A port decides nothing (the turn does, `_turn.py`): each method carries out one effect of
`_effects.py`, named after it, in a few lines. A sync component met by an async call (a sync
memory, model, tool provider or working-memory store) runs on the library's shared pool
(`chatmemory._threads`). What a port opened or started (streams, tool calls run beside the
turn, moderation) it closes or cancels in `close` / `aclose` when the turn ends, however it
ends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from .. import telemetry
from .._memory.window import AsyncChatMemory, ChatMemory
from .._messages import ChatMessage
from .._threads import in_thread, shared_pool
from ..models import (
    AsyncChatModel,
    AsyncModerationModel,
    AsyncStreamingChatModel,
    ChatModel,
    ChatResponse,
    Moderation,
    ModerationModel,
    StreamingChatModel,
    listeners,
)
from ..rag import AugmentationResult, RetrievalAugmentor
from ..rag._augmentor import AsyncRetrievalAugmentor
from ..tools import AsyncToolProvider, Tool, ToolOutput, ToolProvider
from ..working import RecordStore
from . import _effects as fx
from ._memories import is_async_memory
from ._recalling import RecallStep
from ._results import ServiceEvent
from ._tooling import Attempt, begin, ended
from ._working import WorkingStep

__all__ = ["AsyncPort", "SyncPort"]

log = logging.getLogger("chatmemory.services")


@runtime_checkable
class Previewing(Protocol):
    """A memory that shows the window an `add` would leave (every built-in memory)."""

    def preview(self, *messages: Any, reread: bool = True) -> Any: ...


def _previews(memory: object) -> bool:
    """Whether `memory` is `Previewing`, decided once per class (a protocol check is slow)."""
    kind = type(memory)
    known = _PREVIEWING.get(kind)
    if known is None:
        known = _PREVIEWING[kind] = isinstance(memory, Previewing)
    return known


_PREVIEWING: dict[type, bool] = {}


def _window(memory: ChatMemory, effect: fx.Window) -> list[ChatMessage]:
    if _previews(memory):
        previewing = cast(Previewing, memory)
        return cast(list[ChatMessage], previewing.preview(effect.pending, reread=effect.reread))
    return [*memory.messages(), *effect.pending]


async def _awindow(memory: AsyncChatMemory, effect: fx.Window) -> list[ChatMessage]:
    if _previews(memory):
        previewing = cast(Previewing, memory)
        return cast(
            list[ChatMessage], await previewing.preview(effect.pending, reread=effect.reread)
        )
    return [*(await memory.messages()), *effect.pending]


def _run_tool(effect: fx.RunTool | fx.StartTool) -> Attempt:
    instrumentation = telemetry.active()
    if instrumentation is None:
        return _run(effect)
    with instrumentation.opened(*_tool_span(effect)) as span:
        return _failed_on(instrumentation, span, _run(effect))


async def _arun_tool(effect: fx.RunTool | fx.StartTool) -> Attempt:
    instrumentation = telemetry.active()
    if instrumentation is None:
        return await _arun(effect)
    with instrumentation.opened(*_tool_span(effect)) as span:
        return _failed_on(instrumentation, span, await _arun(effect))


def _tool_span(effect: fx.RunTool | fx.StartTool) -> tuple[str, dict[str, object]]:
    request = effect.request
    return f"execute_tool {request.name}", {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": request.name,
        "gen_ai.tool.call.id": request.id or "",
    }


def _failed_on(instrumentation: telemetry.Instrumentation, span: Any, attempt: Attempt) -> Attempt:
    """`attempt`, its failure (the model hears of it and the call goes on) recorded on its
    span: the tool's exception, or ``error.type`` ``unknown_tool``."""
    if attempt.tool is None:
        span.set_attribute("error.type", "unknown_tool")
    elif attempt.error is not None:
        instrumentation.failed(span, attempt.error.__cause__ or attempt.error)
    return attempt


def _run(effect: fx.RunTool | fx.StartTool) -> Attempt:
    started = begin(effect.request, effect.before)
    tool = effect.tool
    if tool is None:
        return ended(effect.request, None, started)
    try:
        if effect.timeout is None:
            output = tool.execute(effect.request.arguments, effect.context)
        else:
            output = _within(effect.timeout, tool.execute, effect.request.arguments, effect.context)
    except Exception as error:
        return ended(effect.request, tool, started, error=error)
    return ended(effect.request, tool, started, output)


async def _arun(effect: fx.RunTool | fx.StartTool) -> Attempt:
    started = begin(effect.request, effect.before)
    tool = effect.tool
    if tool is None:
        return ended(effect.request, None, started)
    try:
        running = tool.aexecute(effect.request.arguments, effect.context)
        if effect.timeout is None:
            output = await running
        else:
            try:
                output = await asyncio.wait_for(running, effect.timeout)
            except asyncio.TimeoutError:
                raise _late(effect.timeout) from None
    except Exception as error:
        return ended(effect.request, tool, started, error=error)
    return ended(effect.request, tool, started, output)


def _within(seconds: float, function: Callable[..., ToolOutput], *args: object) -> ToolOutput:
    """`function(*args)` on a thread of its own, waited for `seconds` at most. A blocking call
    cannot be stopped: past the limit it is left to finish (its result is dropped) and the
    model is told it did not."""
    done: list[ToolOutput] = []
    failed: list[BaseException] = []
    context = contextvars.copy_context()

    def target() -> None:
        try:
            done.append(context.run(function, *args))
        except BaseException as error:  # handed to the caller below
            failed.append(error)

    thread = threading.Thread(target=target, name="chatmemory-tool", daemon=True)
    thread.start()
    thread.join(seconds)
    if failed:
        raise failed[0]
    if not done:
        raise _late(seconds)
    return done[0]


def _late(seconds: float) -> TimeoutError:
    return TimeoutError(f"the tool did not finish within {seconds:g} s (its timeout)")


@dataclass(slots=True)
class SyncPort:
    """A turn's world, blocking: tools started beside the turn and moderation run on the
    shared pool."""

    memory: ChatMemory | None
    model: ChatModel | None
    streamer: StreamingChatModel | None
    moderator: ModerationModel | None = None
    augmentor: RetrievalAugmentor | None = None
    recalling: RecallStep | None = None
    working: WorkingStep | None = None
    approvals: RecordStore | None = None
    _moderation: concurrent.futures.Future[Moderation] | None = None
    _opened: list[Iterator[ServiceEvent]] = field(default_factory=list)
    _started: list[concurrent.futures.Future[Attempt]] = field(default_factory=list)

    def window(self, effect: fx.Window) -> list[ChatMessage]:
        return list(effect.pending) if self.memory is None else _window(self.memory, effect)

    def read_working(self, _: fx.ReadWorking) -> str:
        assert self.working is not None
        return self.working.block()

    def recall(self, _: fx.Recall) -> list[Any]:
        assert self.recalling is not None
        return list(self.recalling.found())

    def augment(self, effect: fx.Augment) -> AugmentationResult:
        assert self.augmentor is not None
        return self.augmentor.augment(effect.request)

    def provide(self, effect: fx.Provide) -> Sequence[Tool]:
        provider = cast(ToolProvider, effect.provider)
        return provider.provide(effect.context)

    def ask(self, effect: fx.Ask) -> ChatResponse:
        assert self.model is not None
        return listeners.chat(self.model, effect.request)

    def open(self, effect: fx.Open) -> object:
        assert self.streamer is not None
        stream = iter(cast(Iterator[ServiceEvent], listeners.stream(self.streamer, effect.request)))
        self._opened.append(stream)
        return stream

    def next(self, effect: fx.Next) -> ServiceEvent | None:
        return next(cast(Iterator[ServiceEvent], effect.stream), None)

    def run_tool(self, effect: fx.RunTool) -> Attempt:
        return _run_tool(effect)

    def start_tool(self, effect: fx.StartTool) -> object:
        context = contextvars.copy_context()
        future = shared_pool().submit(context.run, _run_tool, effect)
        self._started.append(future)
        return future

    def await_tool(self, effect: fx.AwaitTool) -> Attempt:
        return cast(concurrent.futures.Future[Attempt], effect.handle).result()

    def moderate(self, effect: fx.Moderate) -> None:
        assert self.moderator is not None
        context = contextvars.copy_context()
        moderate = self.moderator.moderate
        self._moderation = shared_pool().submit(context.run, moderate, list(effect.messages))

    def verdict(self, _: fx.Verdict) -> Moderation:
        assert self._moderation is not None
        return self._moderation.result()

    def commit(self, effect: fx.Commit) -> None:
        if self.memory is not None:
            self.memory.add(effect.messages)

    def index(self, _: fx.Index) -> None:
        assert self.recalling is not None
        self.recalling.index()

    def suspend(self, effect: fx.Suspend) -> None:
        assert self.approvals is not None
        self.approvals.save(effect.key, effect.text, expected=0)

    def close(self) -> None:
        for stream in self._opened:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        for future in self._started:
            future.cancel()
        if self._moderation is not None:
            self._moderation.cancel()


@dataclass(slots=True)
class AsyncPort:
    """A turn's world on asyncio; what is sync runs on the shared pool."""

    memory: ChatMemory | AsyncChatMemory | None
    model: AsyncChatModel | ChatModel | None
    streamer: AsyncStreamingChatModel | None
    moderator: AsyncModerationModel | ModerationModel | None = None
    augmentor: RetrievalAugmentor | None = None
    recalling: RecallStep | None = None
    working: WorkingStep | None = None
    approvals: RecordStore | None = None
    _moderation: asyncio.Future[Moderation] | None = None
    _opened: list[AsyncIterator[ServiceEvent]] = field(default_factory=list)
    _started: list[asyncio.Task[Attempt]] = field(default_factory=list)

    async def window(self, effect: fx.Window) -> list[ChatMessage]:
        memory = self.memory
        if memory is None:
            return list(effect.pending)
        if is_async_memory(memory):
            return await _awindow(cast(AsyncChatMemory, memory), effect)
        return await in_thread(_window, cast(ChatMemory, memory), effect)

    async def read_working(self, _: fx.ReadWorking) -> str:
        assert self.working is not None
        return await self.working.ablock()

    async def recall(self, _: fx.Recall) -> list[Any]:
        assert self.recalling is not None
        return list(await self.recalling.afound())

    async def augment(self, effect: fx.Augment) -> AugmentationResult:
        augmentor = self.augmentor
        assert augmentor is not None
        if isinstance(augmentor, AsyncRetrievalAugmentor):
            return await augmentor.aaugment(effect.request)
        return await in_thread(augmentor.augment, effect.request)

    async def provide(self, effect: fx.Provide) -> Sequence[Tool]:
        provider = effect.provider
        if isinstance(provider, AsyncToolProvider):
            return await provider.aprovide(effect.context)
        return await in_thread(cast(ToolProvider, provider).provide, effect.context)

    async def ask(self, effect: fx.Ask) -> ChatResponse:
        model = self.model
        if isinstance(model, AsyncChatModel):
            return await listeners.achat(model, effect.request)
        assert model is not None
        return await in_thread(listeners.chat, model, effect.request)

    async def open(self, effect: fx.Open) -> object:
        assert self.streamer is not None
        stream = cast(AsyncIterator[ServiceEvent], listeners.astream(self.streamer, effect.request))
        self._opened.append(stream)
        return stream

    async def next(self, effect: fx.Next) -> ServiceEvent | None:
        return await anext(cast(AsyncIterator[ServiceEvent], effect.stream), None)

    async def run_tool(self, effect: fx.RunTool) -> Attempt:
        return await _arun_tool(effect)

    async def start_tool(self, effect: fx.StartTool) -> object:
        task = asyncio.ensure_future(_arun_tool(effect))
        self._started.append(task)
        return task

    async def await_tool(self, effect: fx.AwaitTool) -> Attempt:
        return await cast("asyncio.Task[Attempt]", effect.handle)

    async def moderate(self, effect: fx.Moderate) -> None:
        moderator = self.moderator
        messages = list(effect.messages)
        if isinstance(moderator, AsyncModerationModel):
            self._moderation = asyncio.ensure_future(moderator.amoderate(messages))
        else:
            assert moderator is not None
            self._moderation = asyncio.ensure_future(in_thread(moderator.moderate, messages))

    async def verdict(self, _: fx.Verdict) -> Moderation:
        assert self._moderation is not None
        return await self._moderation

    async def commit(self, effect: fx.Commit) -> None:
        """Once started, the commit finishes: a cancel arriving meanwhile waits for it, and
        the call then returns (the turn is stored) or raises the store's error (it is not)."""
        memory = self.memory
        if memory is None:
            return
        if is_async_memory(memory):
            adding = asyncio.ensure_future(cast(AsyncChatMemory, memory).add(effect.messages))
        else:
            adding = asyncio.ensure_future(in_thread(cast(ChatMemory, memory).add, effect.messages))
        try:
            await asyncio.shield(adding)
        except asyncio.CancelledError:
            if adding.cancelled():  # pragma: no cover - nothing cancels it but the loop's end
                raise
            await adding

    async def index(self, _: fx.Index) -> None:
        """The turn is stored: a cancel now leaves the index to finish beside the caller."""
        assert self.recalling is not None
        indexing = asyncio.ensure_future(self.recalling.aindex())
        try:
            await asyncio.shield(indexing)
        except asyncio.CancelledError:
            indexing.add_done_callback(_logged)

    async def suspend(self, effect: fx.Suspend) -> None:
        assert self.approvals is not None
        await in_thread(self.approvals.save, effect.key, effect.text, expected=0)

    async def aclose(self) -> None:
        for stream in self._opened:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        for task in self._started:
            task.cancel()
        if self._moderation is not None:
            self._moderation.cancel()


def _logged(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning(
            "semantic recall could not index the turn (%s); it will index it on a later turn",
            task.exception(),
        )
