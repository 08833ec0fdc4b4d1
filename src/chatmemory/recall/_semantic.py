"""`SemanticRecall`: the settings, and each operation once as a flow run sync or async."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from .._errors import ConfigurationError
from .._flow import arun, run
from .._tokens import OpenAiTokenCountEstimator, TokenCountEstimator
from ..rag import (
    Embedding,
    EmbeddingModel,
    EmbeddingStore,
    Filter,
    QueryTransformer,
    ScoringModel,
    WordSplitter,
    key,
)
from . import _block, _index, _search
from ._backlog import Backlog
from ._io import AsyncIo, History, Stages, SyncIo
from ._kept import Keeping
from ._search import RecalledMessages


class SemanticRecall:
    """Finds past messages like the newest user text in the history of a conversation
    (`scope="memory"`) or of every conversation of one user (`scope="user"`): at most `top_k`
    matches and `max_messages` messages in all, with their neighbours where they add
    (`message_range="auto"`) or a fixed number (an int, or a pair ``(before, after)``).

    Two optional stages, off by default: a `query_transformer` (as LangChain4j's
    `ExpandingQueryTransformer(chat_model)`) whose queries are searched beside the user's own and
    fused by reciprocal rank; a `scoring_model` (a re-ranker, `RerankScoringModel`) that orders
    the candidates found by its score of their words against the user's text.

    `index_in_background=True` takes the index write out of a service turn (with a sync store:
    an async one is indexed in the turn): the turn returns once its messages are stored, and
    they are embedded and written to the embedding store on a thread of their own, one job at a
    time per conversation. The next recall of that conversation, `index`, `forget` and
    `memory_ids_of` wait for what is pending; `flush()` waits for all of it, and a process that
    exits normally finishes it first."""

    def __init__(
        self,
        embedding_model: EmbeddingModel,
        embedding_store: EmbeddingStore,
        *,
        top_k: int = 10,
        message_range: int | tuple[int, int] | Literal["auto"] = "auto",
        max_messages: int = 10,
        scope: Literal["memory", "user"] = "memory",
        hybrid: bool = True,
        min_score: float = 0.0,
        recall_budget: int = 500,
        estimator: TokenCountEstimator | None = None,
        chunk_size: int = 1_000,
        query_transformer: QueryTransformer | None = None,
        scoring_model: ScoringModel | None = None,
        index_in_background: bool = False,
    ) -> None:
        if not isinstance(embedding_model, EmbeddingModel):
            raise ConfigurationError(
                f"`embedding_model` must be an EmbeddingModel, got {embedding_model!r}"
            )
        if not isinstance(embedding_store, EmbeddingStore):
            raise ConfigurationError(
                f"`embedding_store` must be an EmbeddingStore, got {embedding_store!r}"
            )
        for name, value, low in (
            ("top_k", top_k, 1),
            *_range_parts(message_range),
            ("max_messages", max_messages, 1),
            ("recall_budget", recall_budget, 1),
            ("chunk_size", chunk_size, 50),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigurationError(f"`{name}` must be an int >= {low}, got {value!r}")
        if scope not in ("memory", "user"):
            raise ConfigurationError(f"`scope` is 'memory' or 'user', got {scope!r}")
        for flag, given in (("hybrid", hybrid), ("index_in_background", index_in_background)):
            if not isinstance(given, bool):
                raise ConfigurationError(f"`{flag}` is True or False, got {given!r}")
        if query_transformer is not None and not isinstance(query_transformer, QueryTransformer):
            raise ConfigurationError(
                f"`query_transformer` must be a QueryTransformer (transform(query) -> list of "
                f"queries), e.g. ExpandingQueryTransformer(chat_model); got {query_transformer!r}"
            )
        if scoring_model is not None and not callable(getattr(scoring_model, "score_all", None)):
            raise ConfigurationError(
                f"`scoring_model` must be a ScoringModel (score_all(segments, query) -> scores), "
                f"e.g. RerankScoringModel(...); got {scoring_model!r}"
            )
        self.embedding_model = embedding_model
        self.store = embedding_store
        self.top_k = top_k
        self.message_range = message_range
        self.before: int | None
        self.after: int | None
        if message_range == "auto":
            self.before = self.after = None
        elif isinstance(message_range, tuple):
            self.before, self.after = message_range
        else:
            self.before = self.after = message_range
        self.max_messages = max_messages
        self.scope = scope
        self.hybrid = hybrid
        self.min_score = min_score
        self.recall_budget = recall_budget
        self.estimator = estimator or OpenAiTokenCountEstimator("gpt-4o")
        self.splitter = WordSplitter(chunk_size)
        self.stages = Stages(query_transformer, scoring_model)
        """The optional stages: the query transformed (expanded) into several searched and
        fused; the matches re-ranked by a scoring model."""
        self.keeping = Keeping()
        self.index_in_background = index_in_background
        self._backlog = Backlog()
        self._probe: Embedding | None = None

    def __repr__(self) -> str:
        return (
            f"SemanticRecall(top_k={self.top_k}, message_range={self.message_range!r}, "
            f"max_messages={self.max_messages}, scope={self.scope!r}, hybrid={self.hybrid})"
        )

    def _sync(self, history: Any) -> SyncIo:
        return SyncIo(history, self.embedding_model, self.store, self.probe, self.stages)

    def _async(self, history: Any) -> AsyncIo:
        return AsyncIo(history, self.embedding_model, self.store, self.probe, self.stages)

    def probe(self) -> Embedding:
        """The vector stored with an index mark (a mark is found by its metadata alone)."""
        if self._probe is None:
            self._probe = Embedding((1.0,) + (0.0,) * (self.embedding_model.dimension - 1))
        return self._probe

    def condition(self, memory_id: str, user_id: str | None) -> Filter:
        """The index entries a recall for `memory_id` (and `user_id`) may find."""
        kind = key("kind").eq(_index.KIND)
        if self.scope == "user":
            if not user_id:
                raise ConfigurationError(
                    "SemanticRecall(scope='user') needs the user id: mark a service parameter "
                    "Annotated[str, UserId], or pass user_id="
                )
            return kind & key("user_id").eq(user_id)
        return kind & key("memory_id").eq(memory_id)

    # -- indexing

    def index(
        self, history: History, memory_id: str, *, user_id: str | None = None, full: bool = False
    ) -> int:
        """Embed the messages of `memory_id`'s history not indexed yet; how many were. After a
        turn the window holds them (a cheap read); `full=True` reads the whole history, which
        also catches a message evicted in the very commit that added it."""
        self._backlog.wait(memory_id)
        return run(_index.index(self, memory_id, user_id, full), self._sync(history))

    async def aindex(
        self, history: Any, memory_id: str, *, user_id: str | None = None, full: bool = False
    ) -> int:
        """`index` for asyncio (an async store's reads are awaited)."""
        await self._backlog.await_(memory_id)
        return await arun(_index.index(self, memory_id, user_id, full), self._async(history))

    def index_later(self, history: History, memory_id: str, *, user_id: str | None = None) -> None:
        """`index`, after the conversation's job in progress, on a thread of the background
        indexing (whatever `index_in_background` says); returns at once. A failure is logged:
        the next index catches up."""
        self._backlog.submit(
            memory_id,
            lambda: run(_index.index(self, memory_id, user_id, False), self._sync(history)),
        )

    def flush(self) -> None:
        """Wait until what was left to index in the background is written."""
        self._backlog.wait()

    async def aflush(self) -> None:
        """`flush` for asyncio."""
        await self._backlog.await_()

    def _waited(self, memory_id: str) -> str | None:
        """The conversation whose pending index a recall of `memory_id` waits for (None: all of
        them, for a recall across a user's conversations)."""
        return memory_id if self.scope == "memory" else None

    # -- recalling

    def recall(
        self, history: History, memory_id: str, query: str, *, user_id: str | None = None
    ) -> list[RecalledMessages]:
        """The past messages best matching `query` that are out of `memory_id`'s window, best
        first."""
        self._backlog.wait(self._waited(memory_id))
        return run(_search.recall(self, memory_id, query, user_id), self._sync(history))

    async def arecall(
        self, history: Any, memory_id: str, query: str, *, user_id: str | None = None
    ) -> list[RecalledMessages]:
        """`recall` for asyncio."""
        await self._backlog.await_(self._waited(memory_id))
        return await arun(_search.recall(self, memory_id, query, user_id), self._async(history))

    def block(self, recalled: Sequence[RecalledMessages], *, budget: int | None = None) -> str:
        """The recalled messages as one delimited block of at most `budget` tokens
        (`recall_budget` by default), the best matches first, each run with the day it was
        said; "" when nothing fits."""
        limit = self.recall_budget if budget is None else budget
        return _block.block(recalled, limit, self.estimator)

    # -- what belongs to whom, and forgetting it

    def memory_ids_of(self, user_id: str) -> list[str]:
        """The conversations indexed for `user_id`, found by the metadata of their index entries
        and marks (an exact lookup)."""
        self._backlog.wait()
        return run(_index.memory_ids_of(user_id), self._sync(None))

    async def amemory_ids_of(self, user_id: str) -> list[str]:
        """`memory_ids_of` for asyncio."""
        await self._backlog.await_()
        return await arun(_index.memory_ids_of(user_id), self._async(None))

    def forget(self, *, memory_id: str | None = None, user_id: str | None = None) -> int:
        """Remove the index entries (embedded messages and marks) of one conversation or of one
        user; how many were removed (after what was pending for them is written)."""
        self._backlog.wait(memory_id if user_id is None else None)
        return run(_index.forget(self, memory_id, user_id), self._sync(None))

    async def aforget(self, *, memory_id: str | None = None, user_id: str | None = None) -> int:
        """`forget` for asyncio."""
        await self._backlog.await_(memory_id if user_id is None else None)
        return await arun(_index.forget(self, memory_id, user_id), self._async(None))


def _range_parts(message_range: object) -> list[tuple[str, object, int]]:
    """`message_range`'s numbers, checked with the others: "auto", an int, or a pair
    (before, after)."""
    if message_range == "auto":
        return []
    if not isinstance(message_range, tuple):
        return [("message_range", message_range, 0)]
    if len(message_range) != 2:
        raise ConfigurationError(
            f"`message_range` is 'auto', an int or a pair (before, after), got {message_range!r}"
        )
    return [
        ("message_range[0] (before)", message_range[0], 0),
        ("message_range[1] (after)", message_range[1], 0),
    ]
