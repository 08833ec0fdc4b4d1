"""Conversation titles, made by a model after an answer, off the request path.

A title is a record (``title:<memory id>``) in a working-memory `RecordStore`. It is made after
any call whose conversation has none yet (a conversation the application created first gets
one too), saved only if still absent (compare-and-set), so a title the application set is never
overwritten, and two racing generations store one. In the background by default: on a thread
for sync services, on a task the titles object keeps alive for async ones (so it outlives the
request that started it); `wait()` / `await drain()` wait for the pending ones. A failing
model is logged, never raised into the call.

The records live beside working memory's, in the same kind of store (`chatmemory.working`);
services use this module (``ai_service(..., titles=...)``), it uses no service.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias

from ._errors import ConcurrentUpdateError, ConfigurationError
from ._flow import retry_optimistically
from ._messages import UserMessage
from ._prompts import PromptTemplate
from ._threads import in_thread, shared_pool
from .models import AsyncChatModel, ChatModel, ChatRequest, ChatResponse
from .working import RecordStore

TitleModel: TypeAlias = "ChatModel | AsyncChatModel"

__all__ = ["DEFAULT_TITLE_PROMPT", "ConversationTitles"]

log = logging.getLogger("chatmemory.titles")

DEFAULT_TITLE_PROMPT = (
    "Write a title of at most {{max_length}} characters for the conversation that begins "
    "below. Answer with the title alone: no quotes, no final period.\n\n"
    "User: {{user}}\nAssistant: {{answer}}"
)


class ConversationTitles:
    """Titles of conversations, by memory id: ``ConversationTitles(store, chat_model=model)``
    and ``ai_service(..., titles=titles)``.

    `prompt` is a template with `{{user}}`, `{{answer}}` and `{{max_length}}`;
    `background=False` makes the title before the call returns. The application reads and sets
    titles with `get` / `set` (its title always wins).

    `chat_model` and `prompt` may also be functions of the memory id, chosen for each title
    (a cheaper model for some tenants, a prompt in the user's language).
    """

    def __init__(
        self,
        store: RecordStore,
        *,
        chat_model: TitleModel | Callable[[str], TitleModel],
        prompt: str | Callable[[str], str] = DEFAULT_TITLE_PROMPT,
        max_length: int = 80,
        background: bool = True,
    ) -> None:
        if not _is_model(chat_model) and not callable(chat_model):
            raise ConfigurationError(
                f"{chat_model!r} is not a chat model (chat or achat), nor a function of the "
                f"memory id that gives one"
            )
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 8:
            raise ConfigurationError(
                f"`max_length` must be an int of at least 8, got {max_length!r}"
            )
        self.store = store
        self.chat_model = chat_model
        self.template = PromptTemplate(prompt) if isinstance(prompt, str) else None
        self._prompt = prompt
        self.max_length = max_length
        self.background = bool(background)
        self._futures: set[concurrent.futures.Future[Any]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._lock = threading.Lock()
        self._making: dict[str, int] = {}
        """How many titles are being made per memory id..."""
        self._forgotten: set[str] = set()
        """...and those forgotten meanwhile, whose titles must not be stored when they come."""

    @staticmethod
    def _key(memory_id: str) -> str:
        return f"title:{memory_id}"

    def get(self, memory_id: str) -> str | None:
        """The conversation's title, or None."""
        record = self.store.load(self._key(memory_id))
        return record.text if record else None

    def set(self, memory_id: str, title: str) -> None:
        """Set the title (the application's: replaces any)."""
        if not isinstance(title, str) or not title.strip():
            raise ConfigurationError(f"a title is a non-empty str, got {title!r}")
        key = self._key(memory_id)

        def attempt() -> bool:
            record = self.store.load(key)
            try:
                self.store.save(key, title.strip(), expected=record.version if record else 0)
            except ConcurrentUpdateError:
                return False
            return True

        retry_optimistically(
            attempt, store=self.store, memory_id=memory_id, what=f"the title of {memory_id!r}"
        )

    def forget(self, memory_id: str) -> bool:
        """Remove the conversation's title; whether there was one. A title being made for it
        right now is not stored when it comes (it would bring back the user's first words)."""
        with self._lock:
            if self._making.get(memory_id):
                self._forgotten.add(memory_id)
        return self.store.delete(self._key(memory_id))

    # -- making titles ---------------------------------------------------------------------------

    def _begin(self, memory_id: str) -> None:
        """A title of `memory_id` is being made from now (a background one from when it is
        queued, so a forget before its thread starts still stops it)..."""
        with self._lock:
            self._making[memory_id] = self._making.get(memory_id, 0) + 1

    def _end(self, memory_id: str) -> None:
        """...until this."""
        with self._lock:
            left = self._making.pop(memory_id) - 1
            if left:
                self._making[memory_id] = left
            else:
                self._forgotten.discard(memory_id)

    @contextlib.contextmanager
    def _making_title(self, memory_id: str) -> Iterator[None]:
        self._begin(memory_id)
        try:
            yield
        finally:
            self._end(memory_id)

    def _request(self, memory_id: str, user: str, answer: str) -> ChatRequest:
        template = self.template
        if template is None:
            assert callable(self._prompt)
            template = PromptTemplate(self._prompt(memory_id))
        text = template.apply({"user": user, "answer": answer, "max_length": self.max_length}).text
        return ChatRequest([UserMessage(text)])

    def _model(self, memory_id: str) -> TitleModel:
        """The title model of `memory_id`: the one given, or what the function gives."""
        model = self.chat_model
        if _is_model(model):
            return model  # type: ignore[return-value]
        assert callable(model)
        chosen = model(memory_id)
        if not _is_model(chosen):
            raise ConfigurationError(
                f"the title model function gave {chosen!r} for {memory_id!r}, not a chat model"
            )
        return chosen

    def _keep(self, memory_id: str, text: str | None) -> str | None:
        title = " ".join((text or "").split()).strip("\"'“”«» .")[: self.max_length].strip()
        if not title:
            log.warning("the title model gave no title for %r", memory_id)
            return None
        try:
            self.store.save(self._key(memory_id), title, expected=0)
        except ConcurrentUpdateError:
            return None  # the application (or another generation) set one first
        with self._lock:
            forgotten = memory_id in self._forgotten
        if forgotten:  # forgotten while it was made: stored after the delete, so it goes
            self.store.delete(self._key(memory_id))
            return None
        return title

    def generate(self, memory_id: str, user: str, answer: str) -> str | None:
        """Make and store a title unless there is one; the title stored, or None."""
        model = self._model(memory_id)
        if not isinstance(model, ChatModel):
            return asyncio.run(self.agenerate(memory_id, user, answer))
        with self._making_title(memory_id):
            if self.get(memory_id) is not None:
                return None
            response = model.chat(self._request(memory_id, user, answer))
            return self._keep(memory_id, response.ai_message.text)

    async def agenerate(self, memory_id: str, user: str, answer: str) -> str | None:
        """`generate` without blocking the event loop."""
        with self._making_title(memory_id):
            if await in_thread(self.get, memory_id) is not None:
                return None
            model = self._model(memory_id)
            request = self._request(memory_id, user, answer)
            response: ChatResponse
            if isinstance(model, AsyncChatModel):
                response = await model.achat(request)
            else:
                response = await in_thread(model.chat, request)
            return await in_thread(self._keep, memory_id, response.ai_message.text)

    # -- after a service call ------------------------------------------------------------------

    def after_turn(self, memory_id: str, user: str, answer: str) -> None:
        """What a sync service calls once a turn is stored."""
        self._begin(memory_id)
        if not self.background:
            self._safely(memory_id, user, answer)
            return
        with self._lock:
            try:
                future = shared_pool().submit(self._safely, memory_id, user, answer)
            except RuntimeError:  # the interpreter is shutting down: nothing will run
                self._end(memory_id)
                raise
            self._futures.add(future)
        future.add_done_callback(self._futures.discard)

    async def aafter_turn(self, memory_id: str, user: str, answer: str) -> None:
        """What an async service awaits once a turn is stored."""
        self._begin(memory_id)
        if not self.background:
            await self._asafely(memory_id, user, answer)
            return
        task = asyncio.create_task(self._asafely(memory_id, user, answer))
        self._tasks.add(task)  # a reference, so the task outlives the request
        task.add_done_callback(self._tasks.discard)

    def _safely(self, memory_id: str, user: str, answer: str) -> None:
        """`generate` of a title queued by `after_turn` (which began it), logging failures."""
        try:
            self.generate(memory_id, user, answer)
        except Exception:
            log.exception("could not make a title for %r", memory_id)
        finally:
            self._end(memory_id)

    async def _asafely(self, memory_id: str, user: str, answer: str) -> None:
        """`agenerate` of a title queued by `aafter_turn` (which began it)."""
        try:
            await self.agenerate(memory_id, user, answer)
        except Exception:
            log.exception("could not make a title for %r", memory_id)
        finally:
            self._end(memory_id)

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the titles being made on threads."""
        concurrent.futures.wait(list(self._futures), timeout=timeout)

    async def drain(self) -> None:
        """Wait for the titles being made on tasks of the running loop."""
        await asyncio.gather(*list(self._tasks))


def _is_model(model: object) -> bool:
    return isinstance(model, (ChatModel, AsyncChatModel))
