"""`SummarizingChatMemory`: a token window that folds what it would evict into a running summary.

When an `add` would push messages out of the window, the oldest of them (a tool call with all its
results is one unit; the `keep_last` newest messages never) are given to a chat model with the
running summary, and the answer becomes the new summary: one message right after the system
message, marked as the summary (an attribute stored with it), so a restart finds it and does not
summarize again. The folded messages leave the window and stay in the history. The fold is
written once, as a flow (`_flow`), for the sync and the async memory.

A turn's model calls (`preview`) see the window as plain eviction would leave it; the fold happens
when the turn is committed. When the summarizing model fails, the memory evicts as a token window
does (`on_summary_error="evict"`, the default: the conversation goes on, the history keeps
everything) or raises and writes nothing (`"raise"`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from .._errors import ChatMemoryError, ConfigurationError
from .._flow import Flow, arun, call, run
from .._messages import ChatMessage, UserMessage
from .._policies.summary import (
    is_summary,
    ordered,
    plan_fold,
    summary_message,
    summary_text,
    transcript,
)
from .._prompts import PromptTemplate
from .._threads import in_thread
from .._tokens import TokenCountEstimator
from ..models import AsyncChatModel, ChatModel, ChatRequest, ChatResponse
from .window import (
    AsyncStoreLike,
    AsyncTokenWindowChatMemory,
    Messages,
    StoreLike,
    TokenWindowChatMemory,
    _flatten,
)

__all__ = ["DEFAULT_SUMMARY_PROMPT", "AsyncSummarizingChatMemory", "SummarizingChatMemory"]

DEFAULT_SUMMARY_PROMPT = PromptTemplate(
    "Progressively summarize the conversation below: add the new lines to the previous summary "
    "and write the new summary. Keep every name, number, date, decision, preference and open "
    "question the assistant will need later; drop greetings and small talk. Write at most "
    "{{max_words}} words, in the language of the conversation, as plain text.\n\n"
    "Previous summary:\n{{summary}}\n\nNew lines of the conversation:\n{{messages}}\n\n"
    "New summary:"
)
"""Variables: `summary` (the previous summary, or "(none)"), `messages` (the folded lines as
"user: ...", "assistant: ...", "assistant called tool(args)", "tool x returned: ...") and
`max_words`."""

OnError = Literal["evict", "raise"]


class _Port(Protocol):
    """What a fold needs: the inner window memory and the summarizing model."""

    def messages(self) -> list[ChatMessage]: ...

    def add(self, messages: list[ChatMessage]) -> None: ...

    def set(self, messages: list[ChatMessage]) -> None: ...

    def chat(self, request: ChatRequest) -> ChatResponse | ChatMemoryError:
        """The model's answer, or the error it failed with (drivers do not throw into flows)."""
        ...


class _Folding:
    """The settings and the flow shared by both memories."""

    def __init__(
        self,
        *,
        max_tokens: int,
        estimator: TokenCountEstimator,
        keep_last: int,
        prompt: PromptTemplate,
        max_summary_tokens: int | None,
        on_summary_error: OnError,
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigurationError(f"`max_tokens` must be a positive int, got {max_tokens!r}")
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
            raise ConfigurationError(f"`keep_last` must be an int >= 0, got {keep_last!r}")
        if not isinstance(prompt, PromptTemplate):
            raise ConfigurationError(f"`prompt` must be a PromptTemplate, got {prompt!r}")
        if on_summary_error not in ("evict", "raise"):
            raise ConfigurationError(
                f"`on_summary_error` is 'evict' or 'raise', got {on_summary_error!r}"
            )
        reserve = max_summary_tokens if max_summary_tokens is not None else max_tokens // 4
        if (
            isinstance(reserve, bool)
            or not isinstance(reserve, int)
            or not 0 < reserve < max_tokens
        ):
            raise ConfigurationError(
                f"`max_summary_tokens` must be a positive int below max_tokens, got {reserve!r}"
            )
        self.max_tokens = max_tokens
        self.estimator = estimator
        self.keep_last = keep_last
        self.prompt = prompt
        self.reserve = reserve
        self.on_summary_error = on_summary_error

    def _count(self, messages: Sequence[ChatMessage]) -> int:
        return self.estimator.count_messages(messages) if messages else 0

    def add(self, messages: list[ChatMessage]) -> Flow[None]:
        window = yield from call(_Port.messages)
        fold = plan_fold(
            window,
            messages,
            count=self._count,
            capacity=self.max_tokens,
            keep_last=self.keep_last,
            reserve=self.reserve,
        )
        if fold is None:
            yield from call(_Port.add, messages)
            return
        request = ChatRequest([UserMessage(self._prompt(fold.summary, fold.folded))])
        response = yield from call(_Port.chat, request)
        if isinstance(response, ChatResponse) and not (response.ai_message.text or "").strip():
            response = ChatMemoryError("the summarizing model answered with no text")
        if isinstance(response, ChatMemoryError):
            if self.on_summary_error == "raise":
                raise response
            yield from call(_Port.add, messages)  # plain eviction: the history keeps it all
            return
        text = response.ai_message.text or ""
        head = [m for m in (fold.system,) if m is not None]
        yield from call(_Port.set, [*head, summary_message(text), *fold.kept])

    def _prompt(self, summary: ChatMessage | None, folded: Sequence[ChatMessage]) -> str:
        words = max(20, self.reserve * 3 // 4)
        return self.prompt.apply(
            {
                "summary": summary_text(summary) or "(none)",
                "messages": transcript(folded),
                "max_words": words,
            }
        ).text


class _SyncPort:
    def __init__(self, inner: TokenWindowChatMemory, model: Any) -> None:
        self.inner, self.model = inner, model

    def messages(self) -> list[ChatMessage]:
        return self.inner.messages()

    def add(self, messages: list[ChatMessage]) -> None:
        self.inner.add(messages)

    def set(self, messages: list[ChatMessage]) -> None:
        self.inner.set(messages)

    def chat(self, request: ChatRequest) -> ChatResponse | ChatMemoryError:
        try:
            return self.model.chat(request)  # type: ignore[no-any-return]
        except ChatMemoryError as error:
            return error


class _AsyncPort:
    def __init__(self, inner: AsyncTokenWindowChatMemory, model: Any) -> None:
        self.inner, self.model = inner, model

    async def messages(self) -> list[ChatMessage]:
        return await self.inner.messages()

    async def add(self, messages: list[ChatMessage]) -> None:
        await self.inner.add(messages)

    async def set(self, messages: list[ChatMessage]) -> None:
        await self.inner.set(messages)

    async def chat(self, request: ChatRequest) -> ChatResponse | ChatMemoryError:
        model = self.model
        try:
            if isinstance(model, AsyncChatModel):
                return await model.achat(request)
            return await in_thread(model.chat, request)
        except ChatMemoryError as error:
            return error


def _check_model(model: object, *, async_: bool) -> None:
    """A model that answers (`ChatModel`, or `AsyncChatModel` for the async memory): its
    protocols say so, never its attribute names."""
    if not isinstance(model, ChatModel) and not (async_ and isinstance(model, AsyncChatModel)):
        raise ConfigurationError(
            f"`chat_model` must answer chat(request){' or achat(request)' if async_ else ''}, "
            f"got {model!r}"
        )


class _Summarizing:
    """What both memories share: the fold's settings, the inner token window, the model port."""

    def __init__(
        self,
        inner: Any,
        port: _SyncPort | _AsyncPort,
        *,
        max_tokens: int,
        estimator: TokenCountEstimator,
        keep_last: int,
        prompt: PromptTemplate,
        max_summary_tokens: int | None,
        on_summary_error: OnError,
    ) -> None:
        self._folding = _Folding(
            max_tokens=max_tokens,
            estimator=estimator,
            keep_last=keep_last,
            prompt=prompt,
            max_summary_tokens=max_summary_tokens,
            on_summary_error=on_summary_error,
        )
        self._inner = inner
        self._port = port

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(id={self.id!r}, max_tokens={self._folding.max_tokens}, "
            f"store={self._inner.store!r})"
        )

    @property
    def id(self) -> str:
        return str(self._inner.id)

    @property
    def store(self) -> Any:
        return self._inner.store

    def fits(self, messages: Sequence[ChatMessage]) -> bool:
        return bool(self._inner.fits(messages))

    @property
    def last_evicted(self) -> int:
        """How many messages the last `add` took out of the window (folded ones too)."""
        return int(self._inner.last_evicted)

    @property
    def last_window_tokens(self) -> int | None:
        """The tokens of the window the last `preview` returned (its summary too)."""
        return self._inner.last_window_tokens  # type: ignore[no-any-return]


class SummarizingChatMemory(_Summarizing):
    """A token window (`max_tokens` by `estimator`) whose evicted messages are folded by
    `chat_model` into a running summary kept right after the system message.

    `keep_last` newest messages are never folded; `prompt` replaces the summarization prompt
    (`DEFAULT_SUMMARY_PROMPT`'s variables); `max_summary_tokens` (a quarter of the window by
    default) is the room kept for the summary. Every store works, as for `TokenWindowChatMemory`.
    """

    def __init__(
        self,
        *,
        chat_model: Any,
        max_tokens: int,
        estimator: TokenCountEstimator,
        id: str = "default",
        store: StoreLike | None = None,
        keep_last: int = 2,
        prompt: PromptTemplate = DEFAULT_SUMMARY_PROMPT,
        max_summary_tokens: int | None = None,
        on_summary_error: OnError = "evict",
    ) -> None:
        _check_model(chat_model, async_=False)
        inner = TokenWindowChatMemory(
            max_tokens=max_tokens, estimator=estimator, id=id, store=store
        )
        super().__init__(
            inner,
            _SyncPort(inner, chat_model),
            max_tokens=max_tokens,
            estimator=estimator,
            keep_last=keep_last,
            prompt=prompt,
            max_summary_tokens=max_summary_tokens,
            on_summary_error=on_summary_error,
        )

    def messages(self) -> list[ChatMessage]:
        """The window: the system message, the running summary, then the newest messages."""
        return ordered(self._inner.messages())

    def preview(self, *messages: Messages, reread: bool = True) -> list[ChatMessage]:
        return ordered(self._inner.preview(_flatten(messages), reread=reread))

    def add(self, *messages: Messages) -> None:
        run(self._folding.add(_flatten(messages)), self._port)

    def set(self, *messages: Messages) -> None:
        self._inner.set(_flatten(messages))

    def clear(self) -> None:
        self._inner.clear()

    def summary(self) -> str | None:
        """The running summary's text, None before the first fold."""
        found = next((m for m in self._inner.messages() if is_summary(m)), None)
        return summary_text(found) if found is not None else None


class AsyncSummarizingChatMemory(_Summarizing):
    """`SummarizingChatMemory` for asyncio: the same fold, awaited store and model calls
    (`achat`, or `chat` on a worker thread)."""

    def __init__(
        self,
        *,
        chat_model: Any,
        max_tokens: int,
        estimator: TokenCountEstimator,
        id: str = "default",
        store: AsyncStoreLike | None = None,
        keep_last: int = 2,
        prompt: PromptTemplate = DEFAULT_SUMMARY_PROMPT,
        max_summary_tokens: int | None = None,
        on_summary_error: OnError = "evict",
    ) -> None:
        _check_model(chat_model, async_=True)
        inner = AsyncTokenWindowChatMemory(
            max_tokens=max_tokens, estimator=estimator, id=id, store=store
        )
        super().__init__(
            inner,
            _AsyncPort(inner, chat_model),
            max_tokens=max_tokens,
            estimator=estimator,
            keep_last=keep_last,
            prompt=prompt,
            max_summary_tokens=max_summary_tokens,
            on_summary_error=on_summary_error,
        )

    async def messages(self) -> list[ChatMessage]:
        return ordered(await self._inner.messages())

    async def preview(self, *messages: Messages, reread: bool = True) -> list[ChatMessage]:
        return ordered(await self._inner.preview(_flatten(messages), reread=reread))

    async def add(self, *messages: Messages) -> None:
        await arun(self._folding.add(_flatten(messages)), self._port)

    async def set(self, *messages: Messages) -> None:
        await self._inner.set(_flatten(messages))

    async def clear(self) -> None:
        await self._inner.clear()

    async def summary(self) -> str | None:
        found = next((m for m in await self._inner.messages() if is_summary(m)), None)
        return summary_text(found) if found is not None else None
