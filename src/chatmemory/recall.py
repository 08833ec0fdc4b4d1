"""Semantic recall: the messages of the history most like what the user just said, brought back
beside the window (Mastra's `semanticRecall`, without its cross-user leaks).

```python
recall = SemanticRecall(HashingEmbeddingModel(), SqliteEmbeddingStore("chat.db"), top_k=2)
recall.index(store, "ann")                    # embed what is new in ann's history
found = recall.recall(store, "ann", "what was my locker code?")
print(recall.block(found))                    # the text a model call gets
```

Every message with text is embedded (tool calls and results are not; long text is split into
chunks), with its memory id, user id and sequence number as metadata. A recall embeds the query
(cached), finds the `top_k` nearest messages that are no longer in the window, and returns each
with `message_range` neighbours on either side (or ``(before, after)``, as Mastra's
``messageRange: {before, after}``), whole tool exchanges only, without repeats. With
`scope="user"` it searches every conversation of the same user; the user id is a filter of the
store query, so one user never sees another's messages.

Indexing is idempotent (ids derive from the memory id, sequence number and chunk) and
incremental (a mark per memory id records how far it went), so `index` after every turn costs
the new messages, and after a crash or an import it catches up.

Nothing kept here outlives what it was read from. A memory id that was deleted and used again
starts a new *life* (`WindowSnapshot.life`) whose sequence numbers start over: what this process
keeps of a conversation (its history, how far it is indexed) is for one life only, index
entries and marks carry the life they were made in, and the first index of a new life removes
what the old one left. Finding entries to remove or marks to read is an exact metadata lookup
(`MetadataSelect.select`), never a nearest-neighbour search.

In a service (`ai_service(..., semantic_recall=recall)`), what is recalled reaches the model as
one delimited block at the end of the system message, for every model call of the turn, and is
never stored: the system message is where context that is not the user's own words belongs (the
user's text is sent verbatim), and providers read it before the conversation. The block is cut
to `recall_budget` tokens, and the window gives up its oldest messages (whole tool groups) until
the request fits the memory's own budget again.
"""

from __future__ import annotations

import asyncio
import bisect
import inspect
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ._contracts import HistoryEntry
from ._errors import ConfigurationError
from ._flow import Flow, arun, call, run
from ._messages import AiMessage, ChatMessage, UserMessage
from ._policies.blocks import with_block
from ._policies.summary import is_summary
from ._policies.tool_groups import atomic_units
from ._tokens import OpenAiTokenCountEstimator, TokenCountEstimator
from .rag import (
    Embedding,
    EmbeddingModel,
    EmbeddingSearchRequest,
    EmbeddingSearchResult,
    EmbeddingStore,
    Filter,
    MetadataSelect,
    TextSegment,
    WordSplitter,
    key,
)
from .rag._documents import Document

__all__ = ["RecalledMessages", "SemanticRecall"]

_SAVE_EVERY = 64
"""Messages indexed between two saves of a conversation's mark (rewriting it every turn would
cost an embedding-store upsert per turn)."""
_NAMESPACE = uuid.UUID("0c7f1b0e-5b7a-4e0c-9a53-9f1f0e4b2d61")
KIND = "chatmemory_recall"
_KEPT = 1_000
"""Conversations whose history and mark a process keeps (the least recently used go first)."""

Rows = list[tuple[int, ChatMessage]]


@dataclass(frozen=True, slots=True)
class _Window:
    """A conversation's window as (seq, message) rows, and the life of the id they belong to."""

    life: str
    rows: Rows


@dataclass(slots=True)
class _Kept:
    """What this process keeps of one conversation, valid for one life of it only."""

    life: str
    mark: int | None = None
    """The last seq indexed (None: not read from the index yet)."""
    saved: int = -1
    """The last seq the stored mark records."""
    history: Rows | None = None
    """The history as (seq, message), read once and extended by later windows."""


class _History(Protocol):
    def history(self, memory_id: str) -> list[HistoryEntry]: ...


class _Io(Protocol):
    """What the recall flows ask for: history rows, embeddings, the index."""

    def history(self, memory_id: str) -> list[HistoryEntry]: ...

    def window(self, memory_id: str) -> _Window | None:
        """The window and its life, when the store has the window contract."""
        ...

    def embed(self, texts: list[str]) -> list[Embedding]: ...

    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult: ...

    def select(self, condition: Filter) -> dict[str, TextSegment | None]: ...

    def add_all(
        self, embeddings: list[Embedding], segments: list[TextSegment], ids: list[str]
    ) -> None: ...

    def remove(self, ids: list[str]) -> None: ...


class _SyncIo:
    def __init__(self, history: Any, recall: SemanticRecall) -> None:
        self._history, self._recall = history, recall

    def history(self, memory_id: str) -> list[HistoryEntry]:
        return self._history.history(memory_id)  # type: ignore[no-any-return]

    def window(self, memory_id: str) -> _Window | None:
        load = getattr(self._history, "load_window", None)
        if load is None:
            return None
        snapshot = load(memory_id)
        return _Window(snapshot.life, [(row.seq, row.message) for row in snapshot.rows])

    def embed(self, texts: list[str]) -> list[Embedding]:
        return self._recall.embedding_model.embed_all(texts)

    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
        return self._recall.store.search(request)

    def select(self, condition: Filter) -> dict[str, TextSegment | None]:
        store = self._recall.store
        if isinstance(store, MetadataSelect):
            return store.select(condition)
        # A store of one's own without `select`: its filtered search, as exact as it is.
        request = EmbeddingSearchRequest(
            query_embedding=self._recall.probe(), max_results=100_000, filter=condition
        )
        return {m.embedding_id: m.embedded for m in store.search(request).matches}

    def add_all(
        self, embeddings: list[Embedding], segments: list[TextSegment], ids: list[str]
    ) -> None:
        self._recall.store.add_all(embeddings, segments, ids=ids)

    def remove(self, ids: list[str]) -> None:
        if ids:
            self._recall.store.remove_all(ids)


class _AsyncIo:
    """History read the way the store reads it (awaited for an async store); the embedding model
    and store on a worker thread (`aembed_all` when the model has it)."""

    def __init__(self, history: Any, recall: SemanticRecall) -> None:
        self._sync = _SyncIo(history, recall)
        self._history, self._recall = history, recall

    async def history(self, memory_id: str) -> list[HistoryEntry]:
        if inspect.iscoroutinefunction(self._history.history):
            return await self._history.history(memory_id)  # type: ignore[no-any-return]
        return await asyncio.to_thread(self._sync.history, memory_id)

    async def window(self, memory_id: str) -> _Window | None:
        load = getattr(self._history, "load_window", None)
        if load is None:
            return None
        if not inspect.iscoroutinefunction(load):
            return await asyncio.to_thread(self._sync.window, memory_id)
        snapshot = await load(memory_id)
        return _Window(snapshot.life, [(row.seq, row.message) for row in snapshot.rows])

    async def embed(self, texts: list[str]) -> list[Embedding]:
        aembed = getattr(self._recall.embedding_model, "aembed_all", None)
        if aembed is not None:
            return await aembed(texts)  # type: ignore[no-any-return]
        return await asyncio.to_thread(self._sync.embed, texts)

    async def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
        return await asyncio.to_thread(self._sync.search, request)

    async def select(self, condition: Filter) -> dict[str, TextSegment | None]:
        return await asyncio.to_thread(self._sync.select, condition)

    async def add_all(
        self, embeddings: list[Embedding], segments: list[TextSegment], ids: list[str]
    ) -> None:
        await asyncio.to_thread(self._sync.add_all, embeddings, segments, ids)

    async def remove(self, ids: list[str]) -> None:
        await asyncio.to_thread(self._sync.remove, ids)


@dataclass(frozen=True, slots=True)
class RecalledMessages:
    """A run of past messages around one that matched: from `memory_id`, their sequence numbers
    `seqs`, with the match's relevance `score`."""

    memory_id: str
    seqs: tuple[int, ...]
    messages: tuple[ChatMessage, ...]
    score: float


def _text(message: ChatMessage) -> str | None:
    """The text worth embedding: user and assistant words (no tool traffic, no summary)."""
    if is_summary(message):
        return None
    if isinstance(message, UserMessage):
        texts = [getattr(c, "text", "") for c in message.contents]
        joined = " ".join(t for t in texts if t)
        return joined or None
    if isinstance(message, AiMessage) and not message.tool_execution_requests:
        return message.text or None
    return None


def _storable(text: str) -> str:
    """`text` with any lone surrogate (a message may hold one, as LangChain4j can write it)
    replaced by U+FFFD: embedding stores refuse them, and an index must not fail a turn."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


class SemanticRecall:
    """Finds past messages like the newest user text in the history of a conversation
    (`scope="memory"`) or of every conversation of one user (`scope="user"`)."""

    def __init__(
        self,
        embedding_model: EmbeddingModel,
        embedding_store: EmbeddingStore,
        *,
        top_k: int = 2,
        message_range: int | tuple[int, int] = 2,
        scope: Literal["memory", "user"] = "memory",
        min_score: float = 0.0,
        recall_budget: int = 500,
        estimator: TokenCountEstimator | None = None,
        chunk_size: int = 1_000,
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
            ("recall_budget", recall_budget, 1),
            ("chunk_size", chunk_size, 50),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigurationError(f"`{name}` must be an int >= {low}, got {value!r}")
        if scope not in ("memory", "user"):
            raise ConfigurationError(f"`scope` is 'memory' or 'user', got {scope!r}")
        self.embedding_model = embedding_model
        self.store = embedding_store
        self.top_k = top_k
        self.message_range = message_range
        self._before, self._after = (
            message_range if isinstance(message_range, tuple) else (message_range, message_range)
        )
        self.scope = scope
        self.min_score = min_score
        self.recall_budget = recall_budget
        self.estimator = estimator or OpenAiTokenCountEstimator("gpt-4o")
        self.splitter = WordSplitter(chunk_size)
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._queries: OrderedDict[str, Embedding] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"SemanticRecall(top_k={self.top_k}, message_range={self.message_range}, "
            f"scope={self.scope!r})"
        )

    # -- what this process keeps, per conversation and life

    def _keeping(self, memory_id: str, life: str | None) -> _Kept:
        """What is kept of `memory_id` for `life` (None: a store that does not tell lives, whose
        history is then never kept); anything kept for another life is dropped."""
        with self._lock:
            kept = self._kept.get(memory_id)
            if kept is None or life is None or kept.life != life:
                kept = _Kept(life or "")
                if life is not None:
                    self._kept[memory_id] = kept
                    while len(self._kept) > _KEPT:
                        self._kept.popitem(last=False)
                else:
                    self._kept.pop(memory_id, None)
            else:
                self._kept.move_to_end(memory_id)
            return kept

    # -- indexing

    def index(
        self, history: _History, memory_id: str, *, user_id: str | None = None, full: bool = False
    ) -> int:
        """Embed the messages of `memory_id`'s history not indexed yet; how many were. After a
        turn the window holds them (a cheap read); `full=True` reads the whole history, which
        also catches a message evicted in the very commit that added it."""
        return run(self._index(memory_id, user_id, full), _SyncIo(history, self))

    async def aindex(
        self, history: Any, memory_id: str, *, user_id: str | None = None, full: bool = False
    ) -> int:
        """`index` for asyncio (an async store's reads are awaited)."""
        return await arun(self._index(memory_id, user_id, full), _AsyncIo(history, self))

    def _index(self, memory_id: str, user_id: str | None, full: bool) -> Flow[int]:
        window = yield from call(_Io.window, memory_id)
        life = window.life if window is not None else None
        kept = self._keeping(memory_id, life)
        upto = yield from self._mark(memory_id, kept)
        if full or window is None:
            rows = yield from self._history_rows(memory_id, kept, reload=True)
            new = [row for row in rows if row[0] > upto]
        else:
            new = yield from self._new_rows(memory_id, upto, window, kept)
        segments: list[TextSegment] = []
        ids: list[str] = []
        for seq, message in new:
            text = _text(message)
            if text is None:
                continue
            text = _storable(text)
            base = {
                "kind": KIND,
                "memory_id": memory_id,
                "user_id": user_id or "",
                "seq": seq,
                "life": kept.life,
            }
            for chunk in self.splitter.split(Document(text)):
                index = chunk.metadata["index"]
                segments.append(TextSegment(chunk.text, {**base, "chunk": index}))
                ids.append(str(uuid.uuid5(_NAMESPACE, f"{memory_id}\0{seq}\0{index}")))
        texts = list(dict.fromkeys(s.text for s in segments))  # the same words embedded once
        embedded: dict[str, Embedding] = {}
        for start in range(0, len(texts), 64):
            batch = texts[start : start + 64]
            embedded.update(zip(batch, (yield from call(_Io.embed, batch)), strict=True))
        for start in range(0, len(segments), 64):
            batch_segments = segments[start : start + 64]
            vectors = [embedded[s.text] for s in batch_segments]
            yield from call(_Io.add_all, vectors, batch_segments, ids[start : start + 64])
        if new:
            last = new[-1][0]
            with self._lock:
                kept.mark = last
                stale = last - kept.saved >= _SAVE_EVERY or full
            if stale or upto < 0:  # the mark is saved now and then: a restart redoes at most
                meta = {"kind": KIND + "_mark", "memory_id": memory_id, "user_id": user_id or ""}
                mark = TextSegment("", {**meta, "upto": last, "life": kept.life})
                yield from call(_Io.add_all, [self.probe()], [mark], [self._mark_id(memory_id)])
                with self._lock:  # _SAVE_EVERY messages (same ids)
                    kept.saved = last
        return len({s.metadata["seq"] for s in segments})

    def _new_rows(self, memory_id: str, upto: int, window: _Window, kept: _Kept) -> Flow[Rows]:
        """The messages after `upto`: from the window when it holds every one of them (the
        cheap read after a turn), else from the history (a catch-up)."""
        newer = [row for row in window.rows if row[0] > upto]
        if newer and len(newer) == newer[-1][0] - upto:  # no gap: none left the window
            with self._lock:
                cached = kept.history
                if cached is not None and (not cached or cached[-1][0] < newer[0][0]):
                    cached.extend(newer)
            return newer
        if not newer:
            return []
        rows = yield from self._history_rows(memory_id, kept, reload=True)
        return [row for row in rows if row[0] > upto]

    def _history_rows(self, memory_id: str, kept: _Kept, *, reload: bool = False) -> Flow[Rows]:
        """`memory_id`'s history as (seq, message), kept for the life `kept` is for (it only
        grows within one life)."""
        with self._lock:
            cached = kept.history
        if cached is None or reload:
            entries = yield from call(_Io.history, memory_id)
            cached = [(e.seq, e.message) for e in entries]
            with self._lock:
                kept.history = cached
        return cached

    def probe(self) -> Embedding:
        """The vector stored with an index mark (a mark is found by its metadata alone)."""
        return Embedding((1.0,) + (0.0,) * (self.embedding_model.dimension - 1))

    def _mark_id(self, memory_id: str) -> str:
        return str(uuid.uuid5(_NAMESPACE, f"mark\0{memory_id}"))

    def _mark(self, memory_id: str, kept: _Kept) -> Flow[int]:
        """How far `memory_id` is indexed in the life `kept` is for: kept, else read from its
        mark. A mark of an earlier life means the index holds what that life said: it goes
        (the entries and the mark) and indexing starts over. A mark written before marks
        carried a life is taken as this life's."""
        with self._lock:
            if kept.mark is not None:
                return kept.mark
        condition = key("kind").eq(KIND + "_mark") & key("memory_id").eq(memory_id)
        found = yield from call(_Io.select, condition)
        upto = -1
        for segment in found.values():
            if segment is None:
                continue
            life = segment.metadata.get("life", kept.life)
            if life == kept.life:
                upto = max(upto, int(segment.metadata.get("upto", -1)))
        if upto < 0 and found:
            stale = yield from call(_Io.select, self._entries(memory_id=memory_id))
            yield from call(_Io.remove, sorted(stale))
        with self._lock:
            kept.mark = upto if kept.mark is None else kept.mark
            kept.saved = upto
        return kept.mark

    # -- recalling

    def _embed_query(self, text: str) -> Flow[Embedding]:
        with self._lock:
            found = self._queries.get(text)
            if found is not None:
                self._queries.move_to_end(text)
                return found
        [embedding] = yield from call(_Io.embed, [text])
        with self._lock:
            self._queries[text] = embedding
            while len(self._queries) > 256:
                self._queries.popitem(last=False)
        return embedding

    def _filter(self, memory_id: str, user_id: str | None) -> Filter:
        kind = key("kind").eq(KIND)
        if self.scope == "user":
            if not user_id:
                raise ConfigurationError(
                    "SemanticRecall(scope='user') needs the user id: mark a service parameter "
                    "Annotated[str, UserId], or pass user_id="
                )
            return kind & key("user_id").eq(user_id)
        return kind & key("memory_id").eq(memory_id)

    def recall(
        self, history: _History, memory_id: str, query: str, *, user_id: str | None = None
    ) -> list[RecalledMessages]:
        """The past messages nearest `query` that are out of `memory_id`'s window, best first."""
        return run(self._recall(memory_id, query, user_id), _SyncIo(history, self))

    async def arecall(
        self, history: Any, memory_id: str, query: str, *, user_id: str | None = None
    ) -> list[RecalledMessages]:
        """`recall` for asyncio."""
        return await arun(self._recall(memory_id, query, user_id), _AsyncIo(history, self))

    def _recall(
        self, memory_id: str, query: str, user_id: str | None
    ) -> Flow[list[RecalledMessages]]:
        if not query.strip():
            return []
        condition = self._filter(memory_id, user_id)
        request = EmbeddingSearchRequest(
            query_embedding=(yield from self._embed_query(query)),
            max_results=self.top_k * 4,
            min_score=self.min_score,
            filter=condition,
        )
        matches = (yield from call(_Io.search, request)).matches
        taken: set[tuple[str, int]] = set()
        found: list[RecalledMessages] = []
        sources: dict[str, tuple[_Window | None, set[int], _Kept]] = {}
        for match in matches:
            if len(found) == self.top_k or match.embedded is None:
                break
            meta = match.embedded.metadata
            source, seq = str(meta["memory_id"]), int(meta["seq"])
            if source not in sources:
                window = yield from call(_Io.window, source)
                kept = self._keeping(source, window.life if window is not None else None)
                # Only the answered conversation's window is in the request: the messages
                # still in another conversation's window may be recalled.
                in_window = (
                    {s for s, _ in window.rows}
                    if window is not None and source == memory_id
                    else set()
                )
                sources[source] = (window, in_window, kept)
            window, in_window, kept = sources[source]
            if window is not None and meta.get("life", window.life) != window.life:
                continue  # an entry of an earlier life of that conversation: not its words now
            if seq in in_window:
                continue
            history = yield from self._history_rows(source, kept)
            if not history or seq > history[-1][0]:
                history = yield from self._history_rows(source, kept, reload=True)
            around = self._around(history, seq, taken, source, in_window)
            if around is not None:
                seqs = tuple(s for s, _ in around)
                messages = tuple(m for _, m in around)
                found.append(RecalledMessages(source, seqs, messages, match.score))
        return found

    def _around(
        self,
        history: Rows,
        seq: int,
        taken: set[tuple[str, int]],
        source: str,
        in_window: set[int],
    ) -> Rows | None:
        position = _position(history, seq)
        if position is None:
            return None
        low = max(0, position - self._before)
        high = min(len(history), position + self._after + 1)
        wide_low, wide_high = max(0, low - 64), min(len(history), high + 64)
        messages = [m for _, m in history[wide_low:wide_high]]
        for unit in atomic_units(messages):  # whole tool exchanges only
            first, last = unit[0] + wide_low, unit[-1] + wide_low
            if first < high and last >= low and len(unit) > 1:
                low, high = min(low, first), max(high, last + 1)
        run = [
            (s, m)
            for s, m in history[low:high]
            if s not in in_window and (source, s) not in taken and not is_summary(m)
        ]
        if not run:
            return None
        taken.update((source, s) for s, _ in run)
        return run

    def block(self, recalled: Sequence[RecalledMessages], *, budget: int | None = None) -> str:
        """The recalled messages as one delimited block of at most `budget` tokens
        (`recall_budget` by default), the best matches first; "" when nothing fits."""
        limit = self.recall_budget if budget is None else budget
        parts: list[str] = []
        for found in recalled:
            lines = [f"[from conversation {found.memory_id}, message {found.seqs[0]}]"]
            lines.extend(_line(m) for m in found.messages)
            candidate = "\n".join(lines)
            text = _framed([*parts, candidate])
            if self.estimator.count_text(text) > limit:
                continue
            parts.append(candidate)
        return _framed(parts) if parts else ""

    # -- what belongs to whom, and forgetting it

    def memory_ids_of(self, user_id: str) -> list[str]:
        """The conversations indexed for `user_id`, found by the metadata of their index entries
        and marks (an exact lookup)."""
        return run(self._memory_ids_of(user_id), _SyncIo(None, self))

    async def amemory_ids_of(self, user_id: str) -> list[str]:
        """`memory_ids_of` for asyncio."""
        return await arun(self._memory_ids_of(user_id), _AsyncIo(None, self))

    def _memory_ids_of(self, user_id: str) -> Flow[list[str]]:
        if not isinstance(user_id, str) or not user_id:
            raise ConfigurationError(f"memory_ids_of() needs a non-empty user id, got {user_id!r}")
        marks = yield from call(_Io.select, self._entries(user_id=user_id))
        found = {str(s.metadata["memory_id"]) for s in marks.values() if s is not None}
        return sorted(found)

    def forget(self, *, memory_id: str | None = None, user_id: str | None = None) -> int:
        """Remove the index entries (embedded messages and marks) of one conversation or of one
        user; how many were removed."""
        return run(self._forget(memory_id, user_id), _SyncIo(None, self))

    async def aforget(self, *, memory_id: str | None = None, user_id: str | None = None) -> int:
        """`forget` for asyncio."""
        return await arun(self._forget(memory_id, user_id), _AsyncIo(None, self))

    def _forget(self, memory_id: str | None, user_id: str | None) -> Flow[int]:
        if (memory_id is None) == (user_id is None):
            raise ConfigurationError("forget() takes memory_id= or user_id=, one of them")
        for given in (memory_id, user_id):
            if given is not None and (not isinstance(given, str) or not given):
                raise ConfigurationError(f"forget() needs a non-empty id, got {given!r}")
        doomed = yield from call(_Io.select, self._entries(memory_id=memory_id, user_id=user_id))
        yield from call(_Io.remove, sorted(doomed))
        with self._lock:
            if memory_id is not None:
                self._kept.pop(memory_id, None)
            else:
                for mid in {str(s.metadata["memory_id"]) for s in doomed.values() if s}:
                    self._kept.pop(mid, None)
        return len(doomed)

    def _entries(self, *, memory_id: str | None = None, user_id: str | None = None) -> Filter:
        """Index entries and marks of one conversation or one user."""
        kinds = key("kind").in_([KIND, KIND + "_mark"])
        if memory_id is not None:
            return kinds & key("memory_id").eq(memory_id)
        return kinds & key("user_id").eq(user_id or "")


def _range_parts(message_range: object) -> list[tuple[str, object, int]]:
    """`message_range`'s numbers, checked with the others: an int, or a pair (before, after)."""
    if not isinstance(message_range, tuple):
        return [("message_range", message_range, 0)]
    if len(message_range) != 2:
        raise ConfigurationError(
            f"`message_range` is an int or a pair (before, after), got {message_range!r}"
        )
    return [
        ("message_range[0] (before)", message_range[0], 0),
        ("message_range[1] (after)", message_range[1], 0),
    ]


def _position(history: Rows, seq: int) -> int | None:
    """Where `seq` is in the history (seqs ascend): a binary search."""
    index = bisect.bisect_left(history, seq, key=lambda row: row[0])
    return index if index < len(history) and history[index][0] == seq else None


def _line(message: ChatMessage) -> str:
    role = (
        "user"
        if isinstance(message, UserMessage)
        else "assistant"
        if isinstance(message, AiMessage)
        else "tool"
    )
    text = _text(message)
    if text is None and isinstance(message, AiMessage):
        text = ", ".join(f"called {r.name}({r.arguments})" for r in message.tool_execution_requests)
    if text is None:
        text = " ".join(getattr(c, "text", "") for c in getattr(message, "contents", ()))
    return f"{role}: {text}"


def _framed(parts: Sequence[str]) -> str:
    return (
        "<recalled>\nEarlier messages that may be relevant (recalled from the history, not part "
        "of the current exchange):\n\n" + "\n\n".join(parts) + "\n</recalled>"
    )


def with_recall(
    window: list[ChatMessage],
    block: str,
    *,
    fits: Callable[[list[ChatMessage]], bool] | None = None,
    keep: int = 0,
) -> list[ChatMessage]:
    """`window` with `block` at the end of its system message, first (or as one), giving up its
    oldest messages (whole tool groups, never the last, never one of the last `keep`) while
    `fits` says the request is too large."""
    if not block:
        return window
    return with_block(window, block, fits, first=True, keep=keep)
