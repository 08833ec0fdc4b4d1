"""The stages of retrieval augmentation as protocols, and the model-backed query stages.

Each stage that talks to a model or a store has a sync method and an async one (`a`-prefixed);
the ones written here build the model request and read the answer once, so both share them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import Literal, Protocol, runtime_checkable

from .._errors import ConfigurationError, ModelBehaviourError, shorten
from .._messages import AiMessage, ChatMessage, UserMessage
from .._prompts import PromptTemplate
from .._threads import in_thread
from ..models import ChatRequest, ChatResponse
from ._filters import Filter
from ._values import Content, Query

__all__ = [
    "CompressingQueryTransformer",
    "ContentAggregator",
    "ContentInjector",
    "ContentRetriever",
    "DefaultQueryRouter",
    "DefaultQueryTransformer",
    "ExpandingQueryTransformer",
    "LanguageModelFilterBuilder",
    "LanguageModelQueryRouter",
    "QueryRouter",
    "QueryTransformer",
]


@runtime_checkable
class QueryTransformer(Protocol):
    """Turns the user's query into the queries to retrieve for."""

    def transform(self, query: Query) -> list[Query]: ...


@runtime_checkable
class ContentRetriever(Protocol):
    """Finds contents relevant to a query."""

    def retrieve(self, query: Query) -> list[Content]: ...


@runtime_checkable
class QueryRouter(Protocol):
    """Chooses the retrievers a query goes to."""

    def route(self, query: Query) -> list[ContentRetriever]: ...


@runtime_checkable
class ContentAggregator(Protocol):
    """Merges what every retriever found for every query into one ranked list."""

    def aggregate(self, found: Mapping[Query, Sequence[list[Content]]]) -> list[Content]: ...


@runtime_checkable
class ContentInjector(Protocol):
    """Puts the contents into the user message."""

    def inject(self, contents: Sequence[Content], message: UserMessage) -> UserMessage: ...


class _ModelStage:
    """A stage that asks a chat model one question: `chat_model` has `chat` and/or `achat`."""

    def __init__(self, chat_model: object, prompt: str | PromptTemplate, name: str) -> None:
        if not callable(getattr(chat_model, "chat", None)) and not callable(
            getattr(chat_model, "achat", None)
        ):
            raise ConfigurationError(f"{name} needs a chat model with chat() or achat()")
        self.chat_model = chat_model
        self.prompt = prompt if isinstance(prompt, PromptTemplate) else PromptTemplate(prompt)

    def _request(self, values: Mapping[str, object]) -> ChatRequest:
        return ChatRequest([UserMessage(self.prompt.apply(values).text)])

    def _ask(self, request: ChatRequest) -> str:
        chat = getattr(self.chat_model, "chat", None)
        if chat is None:
            raise ConfigurationError(
                f"{self.chat_model!r} is async only: use the async pipeline (aaugment)"
            )
        return _text(chat(request))

    async def _aask(self, request: ChatRequest) -> str:
        achat = getattr(self.chat_model, "achat", None)
        if achat is not None:
            return _text(await achat(request))

        return _text(await in_thread(self.chat_model.chat, request))  # type: ignore[attr-defined]


def _text(response: ChatResponse) -> str:
    return response.ai_message.text or ""


class DefaultQueryTransformer:
    """The query as it is."""

    def transform(self, query: Query) -> list[Query]:
        return [query]

    async def atransform(self, query: Query) -> list[Query]:
        return [query]


COMPRESSING_PROMPT = """\
Read the conversation below and the user's new query. The query may lean on the conversation \
("it", "that one", "the second option"). Rewrite it as one short, self-contained query that \
carries every detail from the conversation needed to search for documents about it.
Answer with the rewritten query alone, with nothing before or after it.

Conversation:
{{chat_memory}}

New query: {{query}}"""


class CompressingQueryTransformer(_ModelStage):
    """Rewrites a follow-up query into a self-contained one with the conversation so far; does
    nothing when there is no conversation yet (or no memory)."""

    def __init__(self, chat_model: object, prompt: str | PromptTemplate = COMPRESSING_PROMPT):
        super().__init__(chat_model, prompt, "CompressingQueryTransformer")

    def _prepare(self, query: Query) -> ChatRequest | None:
        history = query.metadata.chat_memory if query.metadata is not None else None
        lines = _conversation(history or ())
        if not lines:
            return None
        return self._request({"chat_memory": "\n".join(lines), "query": query.text})

    def _read(self, query: Query, answer: str) -> list[Query]:
        text = answer.strip()
        return [Query(text, query.metadata)] if text else [query]

    def transform(self, query: Query) -> list[Query]:
        request = self._prepare(query)
        return [query] if request is None else self._read(query, self._ask(request))

    async def atransform(self, query: Query) -> list[Query]:
        request = self._prepare(query)
        return [query] if request is None else self._read(query, await self._aask(request))


def _conversation(messages: Sequence[ChatMessage]) -> list[str]:
    """The conversation as lines "User: ..." and "AI: ...": tool calls, tool results and
    system messages are left out."""
    lines = []
    for message in messages:
        if isinstance(message, UserMessage) and message.has_single_text():
            lines.append(f"User: {message.text}")
        elif (
            isinstance(message, AiMessage) and message.text and not message.tool_execution_requests
        ):
            lines.append(f"AI: {message.text}")
    return lines


EXPANDING_PROMPT = """\
Write {{n}} different versions of the user query below, each worded differently (other words, \
another sentence structure) but meaning the same, to search for documents with.
Put each version on its own line, with no numbers, dashes or other formatting.

User query: {{query}}"""


class ExpandingQueryTransformer(_ModelStage):
    """Asks the model for `n` rewordings of the query (the original is not among them)."""

    def __init__(
        self, chat_model: object, *, n: int = 3, prompt: str | PromptTemplate = EXPANDING_PROMPT
    ) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ConfigurationError(f"n must be greater than zero, but is: {n!r}")
        super().__init__(chat_model, prompt, "ExpandingQueryTransformer")
        self.n = n

    def _read(self, query: Query, answer: str) -> list[Query]:
        return [Query(line, query.metadata) for line in answer.split("\n") if line.strip()]

    def transform(self, query: Query) -> list[Query]:
        return self._read(query, self._ask(self._request({"n": self.n, "query": query.text})))

    async def atransform(self, query: Query) -> list[Query]:
        request = self._request({"n": self.n, "query": query.text})
        return self._read(query, await self._aask(request))


class DefaultQueryRouter:
    """Every query goes to every retriever, in the order given."""

    def __init__(self, *retrievers: ContentRetriever) -> None:
        if not retrievers:
            raise ConfigurationError("DefaultQueryRouter needs at least one content retriever")
        for retriever in retrievers:
            if not isinstance(retriever, ContentRetriever):
                raise ConfigurationError(f"{retriever!r} is not a content retriever")
        self.retrievers = tuple(retrievers)

    def route(self, query: Query) -> list[ContentRetriever]:
        return list(self.retrievers)

    async def aroute(self, query: Query) -> list[ContentRetriever]:
        return list(self.retrievers)


ROUTING_PROMPT = """\
Which of these sources should be searched to answer the user query?
{{options}}
Answer with the number of one source, or several numbers separated by commas, and nothing else.

User query: {{query}}"""

Fallback = Literal["do_not_route", "route_to_all", "fail"]


class LanguageModelQueryRouter(_ModelStage):
    """Lets the model choose retrievers by their descriptions; when its answer is unusable (an
    error, not numbers, an unknown number), `fallback` decides: no retrieval (the default), every
    retriever, or the error."""

    def __init__(
        self,
        chat_model: object,
        retrievers: Mapping[ContentRetriever, str],
        *,
        fallback: Fallback = "do_not_route",
        prompt: str | PromptTemplate = ROUTING_PROMPT,
    ) -> None:
        super().__init__(chat_model, prompt, "LanguageModelQueryRouter")
        if not retrievers:
            raise ConfigurationError("LanguageModelQueryRouter needs at least one retriever")
        for retriever, description in retrievers.items():
            if not isinstance(description, str) or not description.strip():
                raise ConfigurationError(f"the description of {retriever!r} must be non-blank")
        if fallback not in ("do_not_route", "route_to_all", "fail"):
            raise ConfigurationError(
                f"`fallback` is 'do_not_route', 'route_to_all' or 'fail', got {fallback!r}"
            )
        self.retrievers = list(retrievers)
        self.options = "\n".join(
            f"{number}: {description}"
            for number, description in enumerate(retrievers.values(), start=1)
        )
        self.fallback = fallback

    def _prepare(self, query: Query) -> ChatRequest:
        return self._request({"options": self.options, "query": query.text})

    def _read(self, answer: str) -> list[ContentRetriever]:
        chosen = []
        for part in answer.split(","):
            try:
                number = int(part.strip())
            except ValueError:
                raise ModelBehaviourError(
                    f"the model answered {shorten(answer)!r}, not source numbers"
                ) from None
            if not 1 <= number <= len(self.retrievers):
                raise ModelBehaviourError(
                    f"the model answered an unknown source number: {number}; the numbers are "
                    f"1 to {len(self.retrievers)}"
                )
            retriever = self.retrievers[number - 1]
            if retriever not in chosen:
                chosen.append(retriever)
        return chosen

    def _fall_back(self, error: Exception) -> list[ContentRetriever]:
        if self.fallback == "fail":
            raise error
        return list(self.retrievers) if self.fallback == "route_to_all" else []

    def route(self, query: Query) -> list[ContentRetriever]:
        try:
            return self._read(self._ask(self._prepare(query)))
        except Exception as error:
            return self._fall_back(error)

    async def aroute(self, query: Query) -> list[ContentRetriever]:
        try:
            return self._read(await self._aask(self._prepare(query)))
        except Exception as error:
            return self._fall_back(error)


FILTER_PROMPT = """\
Write a SQL query on this table whose WHERE condition keeps only the rows the question is about.
{{create_table_statement}}
Use only these columns; strings in single quotes; the operators =, !=, <, <=, >, >=, IN,
NOT IN, BETWEEN, LIKE '%text%', AND, OR, NOT. When the question names no condition on these
columns, answer NONE. Answer with the SQL query only.

Question: {{query}}"""

OnError = Literal["no_filter", "fail"]


class LanguageModelFilterBuilder(_ModelStage):
    """Lets the model state the metadata filter a query implies, as SQL (LangChain4j's
    `LanguageModelSqlFilterBuilder`, "self-querying"): give it as a retriever's `filter`,
    ``EmbeddingStoreContentRetriever(store, model, filter=builder)``, and "how do I brighten my
    iPhone?" searches only ``product = 'iPhone'``.

    `columns` describes the metadata as table columns: ``{"product": ("VARCHAR", "one of
    iPhone, iPad, MacBook")}``. The answer is read by `SqlFilterParser`, after taking it out of
    a code fence or the prose around a ``SELECT ... WHERE`` when needed. An answer of NONE
    means no filter; an answer that cannot be read (or a model error) means no filter too,
    unless `on_error` is ``"fail"``.

    The model is asked once per query: the answer for the last query is kept, so a hybrid
    retriever's two searches (full text and vectors) share one call. Called as a filter
    setting, the model is asked synchronously, also by `aretrieve`; call `abuild` yourself
    where blocking the event loop matters."""

    def __init__(
        self,
        chat_model: object,
        columns: Mapping[str, tuple[str, str] | str],
        *,
        table: str = "segments",
        on_error: OnError = "no_filter",
        prompt: str | PromptTemplate = FILTER_PROMPT,
    ) -> None:
        super().__init__(chat_model, prompt, "LanguageModelFilterBuilder")
        if not isinstance(columns, Mapping) or not columns:
            raise ConfigurationError(
                "LanguageModelFilterBuilder needs the metadata keys as columns: "
                "{'product': ('VARCHAR', 'one of iPhone, iPad')}"
            )
        if on_error not in ("no_filter", "fail"):
            raise ConfigurationError(f"`on_error` is 'no_filter' or 'fail', got {on_error!r}")
        lines = []
        for name, column in columns.items():
            kind, comment = (column, "") if isinstance(column, str) else column
            lines.append(f"    {name} {kind}," + (f" -- {comment}" if comment else ""))
        self.create_table_statement = f"CREATE TABLE {table} (\n" + "\n".join(lines) + "\n)"
        self.on_error = on_error
        self._last: tuple[Query, Filter | None] | None = None
        self._lock = threading.Lock()

    def __call__(self, query: Query) -> Filter | None:
        return self.build(query)

    def _prepare(self, query: Query) -> ChatRequest:
        return self._request(
            {"create_table_statement": self.create_table_statement, "query": query.text}
        )

    def _read(self, answer: str) -> Filter | None:
        from ._filter_parser import parse_filter

        cleaned = _FENCE.sub("", answer).strip().rstrip(";").strip()
        if cleaned.upper() in ("NONE", ""):
            return None
        try:
            return parse_filter(cleaned)
        except ConfigurationError as error:
            found = _SELECT.search(answer)
            if found is None:
                raise ModelBehaviourError(
                    f"the model answered {shorten(answer)!r}, not a SQL condition: {error}"
                ) from None
            return parse_filter(found.group().strip())

    def _fall_back(self, error: Exception) -> Filter | None:
        if self.on_error == "fail":
            raise error
        return None

    def _known(self, query: Query) -> tuple[bool, Filter | None]:
        last = self._last
        return (True, last[1]) if last is not None and last[0] == query else (False, None)

    def build(self, query: Query) -> Filter | None:
        """The filter the model states for `query` (None for no filter)."""
        with self._lock:  # a hybrid retriever's searches may ask at once: one call
            known, condition = self._known(query)
            if not known:
                try:
                    condition = self._read(self._ask(self._prepare(query)))
                except Exception as error:
                    condition = self._fall_back(error)
                self._last = (query, condition)
            return condition

    async def abuild(self, query: Query) -> Filter | None:
        known, condition = self._known(query)
        if not known:
            try:
                condition = self._read(await self._aask(self._prepare(query)))
            except Exception as error:
                condition = self._fall_back(error)
            self._last = (query, condition)
        return condition


_FENCE = re.compile(r"```(?:sql)?", re.IGNORECASE)
_SELECT = re.compile(r"SELECT\b[^`;]*?\bWHERE\b[^`;\n]*", re.IGNORECASE)
