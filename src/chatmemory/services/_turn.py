"""One service call, a *turn*, written once as a flow (see `chatmemory._flow`) and driven sync or
async, streaming or not.

The flow asks a `Port` for what it needs: the window the memory would hold with the turn so far
added (`window`), a model answer (`exchange`), the moderation verdict, and at the end one commit
of the whole turn. So a model call always sees the memory as it would be, the store sees the
turn once or not at all, and a failure or an abandoned stream leaves the memory as it was.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .._errors import ModerationError, OutputParsingError, shorten
from .._flow import Call, Flow, call
from .._messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    TextContent,
    ToolExecutionResultMessage,
    UserMessage,
)
from ..models import ChatRequest, ChatResponse, ResponseFormat, TokenUsage
from ._memories import AnyMemory
from ._output import OutputSpec
from ._results import Result, ServiceEvent

__all__ = ["AsyncPort", "Outcome", "Port", "SyncPort", "TurnInput", "adrive", "drive", "turn"]

T = TypeVar("T")


class Moderation(Protocol):
    """The part of a moderation verdict a turn reads (`chatmemory.models.Moderation`)."""

    @property
    def flagged(self) -> bool: ...

    @property
    def flagged_text(self) -> str | None: ...


class Port(Protocol):
    """What a turn asks of the world (a memory, a model, a moderation model)."""

    def window(self, pending: list[ChatMessage]) -> list[ChatMessage]: ...

    def exchange(self, request: ChatRequest) -> ChatResponse:
        """The model's answer; a streaming driver forwards the stream's events on the way."""
        ...

    def start_moderation(self, messages: list[ChatMessage]) -> None: ...

    def verdict(self) -> Moderation: ...

    def commit(self, messages: list[ChatMessage]) -> None: ...


@dataclass(frozen=True, slots=True)
class TurnInput:
    """A call, ready to run: its messages, how to read the answer, and the service options."""

    system: SystemMessage | None
    user: UserMessage
    """The user message as stored in memory."""
    output: OutputSpec[Any] | None
    """How to read the answer's text; None to keep the response as it is."""
    schema: bool
    """Send the output's JSON schema as the response format (else: format instructions)."""
    moderated: bool
    output_retries: int
    keep_user_message_on_error: bool
    build_request: Callable[[list[ChatMessage], ResponseFormat | None], ChatRequest]


@dataclass(frozen=True, slots=True)
class Outcome:
    content: Any
    responses: tuple[ChatResponse, ...]

    def result(self) -> Result[Any]:
        usage = TokenUsage()
        for response in self.responses:
            if response.token_usage is not None:
                usage = usage + response.token_usage
        final = self.responses[-1]
        return Result(
            content=self.content,
            token_usage=usage,
            finish_reason=final.finish_reason,
            final_response=final,
            intermediate_responses=self.responses[:-1],
        )


def turn(given: TurnInput) -> Flow[Outcome]:
    """The flow of one call: window, model (and moderation beside it), answer, one commit."""
    pending: list[ChatMessage] = [m for m in (given.system, given.user) if m is not None]
    spec = given.output
    response_format = spec.response_format() if spec is not None and given.schema else None
    instructions = spec.instructions() if spec is not None and not given.schema else ""
    to_model = _with_instructions(given.user, instructions) if instructions else given.user
    if given.moderated:
        yield from call(Port.start_moderation, [m for m in (given.system, to_model) if m])
    responses: list[ChatResponse] = []
    try:
        window = yield from call(Port.window, pending)
        messages = [to_model if m is given.user else m for m in window]
        response = yield from call(Port.exchange, given.build_request(messages, response_format))
        responses.append(response)
        if given.moderated:
            verdict = yield from call(Port.verdict)
            if verdict.flagged:
                text = verdict.flagged_text or ""
                raise ModerationError(
                    f'Text "{shorten(text)}" violates content policy', moderation=verdict
                )
        content = None
        for attempt in range(given.output_retries + 1):
            try:
                content = _read(spec, responses[-1])
                break
            except OutputParsingError as error:
                if attempt == given.output_retries:
                    raise
                messages = [*messages, responses[-1].ai_message, UserMessage(_retry(error))]
                response = yield from call(
                    Port.exchange, given.build_request(messages, response_format)
                )
                responses.append(response)
    except ModerationError:
        raise
    except Exception:
        if given.keep_user_message_on_error:
            yield from call(Port.commit, pending)
        raise
    yield from call(Port.commit, [*pending, responses[-1].ai_message])
    return Outcome(content, tuple(responses))


def _read(spec: OutputSpec[Any] | None, response: ChatResponse) -> Any:
    if spec is None:
        return None
    return spec.parse(response.ai_message.text or "")


def _retry(error: OutputParsingError) -> str:
    return (
        f"Your answer could not be read: {error.reason}\n"
        f"Answer again, following the required format exactly."
    )


def _with_instructions(message: UserMessage, instructions: str) -> UserMessage:
    """`message` with the format instructions after its last text (or as a new text)."""
    contents = list(message.contents)
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        if isinstance(content, TextContent):
            contents[index] = TextContent(content.text + instructions)
            break
    else:
        contents.append(TextContent(instructions.lstrip("\n")))
    return UserMessage(contents=contents, name=message.name, attributes=message.attributes)


def moderated_texts(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The messages moderation looks at: tool calls and tool results are not moderated."""
    return [
        m
        for m in messages
        if not isinstance(m, ToolExecutionResultMessage)
        and not (isinstance(m, AiMessage) and m.text is None)
    ]


# -- drivers -------------------------------------------------------------------------------


def drive(flow: Flow[T], port: SyncPort, *, forward: bool) -> Generator[ServiceEvent, None, T]:
    """Run `flow` against `port`, yielding the model's stream events when `forward`."""
    result: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                op = flow.throw(error) if error is not None else flow.send(result)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            error = None
            assert isinstance(op, Call)
            try:
                if op.name == "exchange":
                    result = yield from port.exchange_events(_request(op), forward=forward)
                else:
                    result = getattr(port, op.name)(*op.args, **op.kwargs)
            except Exception as failure:
                error = failure
    finally:
        flow.close()
        port.close()


async def adrive(
    flow: Flow[T], port: AsyncPort, *, forward: bool, done: list[T]
) -> AsyncIterator[ServiceEvent]:
    """`drive` for asyncio: an async generator of events; the flow's value lands in `done`."""
    result: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                op = flow.throw(error) if error is not None else flow.send(result)
            except StopIteration as stop:
                done.append(stop.value)
                return
            error = None
            assert isinstance(op, Call)
            try:
                if op.name == "exchange":
                    result = None
                    async for event in port.exchange_events(_request(op)):
                        if isinstance(event, ChatResponse):
                            result = event
                        elif forward:
                            yield event
                    if forward:
                        yield result
                else:
                    result = await getattr(port, op.name)(*op.args, **op.kwargs)
            except Exception as failure:
                error = failure
    finally:
        flow.close()
        await port.aclose()


def _request(op: Call[Any]) -> ChatRequest:
    request = op.args[0]
    assert isinstance(request, ChatRequest)
    return request


# -- ports ---------------------------------------------------------------------------------


@dataclass(slots=True)
class SyncPort:
    """A turn's world, blocking: a sync memory (or none), a sync model, moderation on a thread."""

    memory: AnyMemory | None
    chat: Callable[[ChatRequest], ChatResponse] | None
    stream: Callable[[ChatRequest], Iterator[ServiceEvent]] | None
    moderator: Callable[[list[ChatMessage]], Moderation] | None = None
    executor: Callable[[], concurrent.futures.Executor] | None = None
    _moderation: concurrent.futures.Future[Moderation] | None = None

    def window(self, pending: list[ChatMessage]) -> list[ChatMessage]:
        if self.memory is None:
            return list(pending)
        return _preview_sync(self.memory, pending)

    def exchange_events(
        self, request: ChatRequest, *, forward: bool
    ) -> Generator[ServiceEvent, None, ChatResponse]:
        if self.chat is not None and not forward:
            return self.chat(request)
        assert self.stream is not None
        response: ChatResponse | None = None
        events = self.stream(request)
        try:
            for event in events:
                if isinstance(event, ChatResponse):
                    response = event
                if forward:
                    yield event
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
        assert response is not None, "a stream ends with its ChatResponse"
        return response

    def start_moderation(self, messages: list[ChatMessage]) -> None:
        assert self.moderator is not None
        assert self.executor is not None
        self._moderation = self.executor().submit(self.moderator, moderated_texts(messages))

    def verdict(self) -> Moderation:
        assert self._moderation is not None
        return self._moderation.result()

    def commit(self, messages: list[ChatMessage]) -> None:
        if self.memory is not None:
            self.memory.add(messages)

    def close(self) -> None:
        if self._moderation is not None:
            self._moderation.cancel()


@dataclass(slots=True)
class AsyncPort:
    """A turn's world on asyncio; a sync memory or model runs on a worker thread."""

    memory: AnyMemory | None
    memory_is_async: bool
    chat: Callable[[ChatRequest], Any] | None
    """`achat` (awaited) or a sync `chat` (run on a thread)."""
    chat_is_async: bool
    stream: Callable[[ChatRequest], AsyncIterator[ServiceEvent]] | None
    moderator: Callable[[list[ChatMessage]], Any] | None = None
    moderator_is_async: bool = False
    _moderation: asyncio.Future[Moderation] | None = None

    async def window(self, pending: list[ChatMessage]) -> list[ChatMessage]:
        if self.memory is None:
            return list(pending)
        if self.memory_is_async:
            return await _preview_async(self.memory, pending)
        return await asyncio.to_thread(_preview_sync, self.memory, pending)

    async def exchange_events(self, request: ChatRequest) -> AsyncIterator[ServiceEvent]:
        if self.chat is not None:
            if self.chat_is_async:
                yield await self.chat(request)
            else:
                yield await asyncio.to_thread(self.chat, request)
            return
        assert self.stream is not None
        events = self.stream(request)
        try:
            async for event in events:
                yield event
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()

    async def start_moderation(self, messages: list[ChatMessage]) -> None:
        assert self.moderator is not None
        texts = moderated_texts(messages)
        if self.moderator_is_async:
            self._moderation = asyncio.ensure_future(self.moderator(texts))
        else:
            self._moderation = asyncio.ensure_future(asyncio.to_thread(self.moderator, texts))

    async def verdict(self) -> Moderation:
        assert self._moderation is not None
        return await self._moderation

    async def commit(self, messages: list[ChatMessage]) -> None:
        if self.memory is None:
            return
        if self.memory_is_async:
            await self.memory.add(messages)  # type: ignore[misc]
        else:
            await asyncio.to_thread(self.memory.add, messages)

    async def aclose(self) -> None:
        if self._moderation is not None and not self._moderation.done():
            self._moderation.cancel()


def _preview_sync(memory: AnyMemory, pending: list[ChatMessage]) -> list[ChatMessage]:
    preview = getattr(memory, "preview", None)
    if preview is not None:
        return preview(pending)  # type: ignore[no-any-return]
    return [*memory.messages(), *pending]  # type: ignore[misc]


async def _preview_async(memory: AnyMemory, pending: list[ChatMessage]) -> list[ChatMessage]:
    preview = getattr(memory, "preview", None)
    if preview is not None:
        return await preview(pending)  # type: ignore[no-any-return]
    return [*(await memory.messages()), *pending]  # type: ignore[misc]
