"""What the inspector shows, read from a store: plain values, no web framework.

Every read here only reads: the store's `summaries`, `history` and `load_window`, and semantic
recall indexed into memory (the hashing model), so looking at a conversation changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from .._cli.render import contents_text, role
from .._contracts import HistoryEntry, HistoryStore, WindowStore
from .._frozen import thaw
from .._messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    ToolExecutionResultMessage,
    UserMessage,
)
from .._policies.summary import is_summary
from .._policies.tool_groups import atomic_units
from .._tokens import TokenCountEstimator
from ..recall import RecalledMessages

__all__ = [
    "Conversation",
    "ConversationRow",
    "Hit",
    "MessageView",
    "RecallRun",
    "Unit",
    "conversation",
    "conversations",
    "preview_recall",
    "recall_runs",
    "search",
]

_BLOCK_TAGS = {"<recalled>": "recalled", "<working_memory>": "working memory"}
"""Context blocks a service adds to the system message, and how the page names them."""


class Inspectable(WindowStore, HistoryStore, Protocol):
    """What the inspector reads: the window and history contracts."""


@dataclass(frozen=True)
class ConversationRow:
    """A line of the conversations page."""

    memory_id: str
    title: str | None
    user: str | None
    messages: int
    in_window: int
    updated_at: datetime | None


@dataclass(frozen=True)
class MessageView:
    """One message as the page draws it: its role, text, tokens and marks."""

    seq: int
    role: str
    text: str
    tokens: int | None
    """None for a `CustomMessage`: application data, never sent to a model as it is."""
    created_at: datetime | None
    in_window: bool
    marks: tuple[str, ...] = ()
    """"summary", "recalled", "working memory", "error" (a failed tool result)."""
    tool_calls: tuple[str, ...] = ()
    """An AI message's tool calls, as `name(arguments)`."""


@dataclass(frozen=True)
class Unit:
    """A message, or a tool call with its results folded under it."""

    head: MessageView
    results: tuple[MessageView, ...] = ()

    @property
    def in_window(self) -> bool:
        return self.head.in_window


@dataclass(frozen=True)
class Conversation:
    """One conversation: its window (what the model is sent now) and its whole history."""

    memory_id: str
    title: str | None
    user: str | None
    window: list[Unit]
    history: list[Unit]
    window_tokens: int
    history_tokens: int
    max_tokens: int
    """The largest message's count: the full width of a token bar."""
    unreadable: int = 0
    """History rows that could not be decoded (left out)."""
    recall_query: str | None = None
    recalled: list[RecallRun] = field(default_factory=list)


@dataclass(frozen=True)
class RecallRun:
    """What semantic recall brings back for a query: a run of messages and its score."""

    score: float
    messages: list[MessageView]


@dataclass(frozen=True)
class Hit:
    """A message of some conversation whose text holds the searched words."""

    memory_id: str
    message: MessageView


def text_of(message: ChatMessage) -> str:
    """The message's words as the page shows them (a tool call's are listed apart)."""
    if isinstance(message, SystemMessage):
        return message.text
    if isinstance(message, UserMessage):
        text = contents_text(message.contents, "\n")
        return f"{message.name}: {text}" if message.name is not None else text
    if isinstance(message, AiMessage):
        return message.text or ""
    if isinstance(message, ToolExecutionResultMessage):
        return f"{message.tool_name or '?'}: " + contents_text(message.contents, "\n")
    assert isinstance(message, CustomMessage)
    return json.dumps(thaw(message.attributes), ensure_ascii=False, default=str)


def _marks(message: ChatMessage, text: str) -> tuple[str, ...]:
    marks = ["summary"] if is_summary(message) else []
    if isinstance(message, SystemMessage):
        marks += [name for tag, name in _BLOCK_TAGS.items() if tag in text]
    if isinstance(message, ToolExecutionResultMessage) and message.is_error:
        marks.append("error")
    return tuple(marks)


def view(
    message: ChatMessage,
    seq: int,
    estimator: TokenCountEstimator,
    *,
    created_at: datetime | None = None,
    in_window: bool = True,
) -> MessageView:
    text = text_of(message)
    calls = (
        tuple(f"{c.name}({c.arguments})" for c in message.tool_execution_requests)
        if isinstance(message, AiMessage)
        else ()
    )
    return MessageView(
        seq,
        role(message),
        text,
        None if isinstance(message, CustomMessage) else estimator.count_message(message),
        created_at,
        in_window,
        _marks(message, text),
        calls,
    )


def _units(views: Sequence[MessageView], messages: Sequence[ChatMessage]) -> list[Unit]:
    """Tool calls and their results folded together (the units eviction keeps whole)."""
    units = []
    for indices in atomic_units(messages):
        first, rest = views[indices[0]], tuple(views[i] for i in indices[1:])
        units.append(Unit(first, rest))
    return units


def conversations(
    store: Inspectable,
    *,
    titles: Mapping[str, str] | None = None,
    users: Mapping[str, str] | None = None,
    user: str | None = None,
) -> list[ConversationRow]:
    """Every conversation, the most recent first; only `user`'s when given."""
    rows = [
        ConversationRow(
            s.memory_id,
            (titles or {}).get(s.memory_id),
            (users or {}).get(s.memory_id),
            s.messages,
            s.in_window,
            s.updated_at,
        )
        for s in store.summaries()
    ]
    if user:
        rows = [r for r in rows if r.user == user]
    return sorted(
        rows, key=lambda r: r.updated_at.timestamp() if r.updated_at else 0.0, reverse=True
    )


def conversation(
    store: Inspectable,
    memory_id: str,
    estimator: TokenCountEstimator,
    *,
    titles: Mapping[str, str] | None = None,
    users: Mapping[str, str] | None = None,
    recall_query: str | None = None,
    top_k: int = 3,
) -> Conversation | None:
    """The window and history of `memory_id`; None when nothing is stored for it."""
    entries = store.history(memory_id, errors="skip")
    if not entries:
        return None
    rows = next((s.messages for s in store.summaries() if s.memory_id == memory_id), 0)
    messages = [e.message for e in entries]
    views = [
        view(e.message, e.seq, estimator, created_at=e.created_at, in_window=e.in_window)
        for e in entries
    ]
    window_at = [i for i, e in enumerate(entries) if e.in_window]
    window_views = [views[i] for i in window_at]
    recalled = (
        recall_runs(store, memory_id, recall_query, estimator, top_k=top_k) if recall_query else []
    )
    return Conversation(
        memory_id,
        (titles or {}).get(memory_id),
        (users or {}).get(memory_id),
        _units(window_views, [messages[i] for i in window_at]),
        _units(views, messages),
        sum(v.tokens or 0 for v in window_views),
        sum(v.tokens or 0 for v in views),
        max((v.tokens or 0 for v in views), default=0),
        max(rows - len(entries), 0),
        recall_query,
        recalled,
    )


def preview_recall(store: Any, memory_id: str, query: str, *, top_k: int) -> list[RecalledMessages]:
    """What semantic recall brings back for `query` from the history of `memory_id`, indexed
    into memory with the hashing model: nothing is written anywhere."""
    from ..rag import HashingEmbeddingModel, InMemoryEmbeddingStore
    from ..recall import SemanticRecall

    recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), top_k=top_k)
    recall.index(store, memory_id)
    return recall.recall(store, memory_id, query)


def recall_runs(
    store: Inspectable,
    memory_id: str,
    query: str,
    estimator: TokenCountEstimator,
    *,
    top_k: int,
) -> list[RecallRun]:
    return [
        RecallRun(
            run.score,
            [
                view(m, seq, estimator, in_window=False)
                for seq, m in zip(run.seqs, run.messages, strict=True)
            ],
        )
        for run in preview_recall(store, memory_id, query, top_k=top_k)
    ]


def search(
    store: Inspectable, query: str, estimator: TokenCountEstimator, *, limit: int = 200
) -> list[Hit]:
    """Messages of every conversation whose text (or tool calls) holds `query`, ignoring case:
    the newest conversations first, at most `limit`."""
    needle = query.casefold()
    hits: list[Hit] = []
    for row in conversations(store):
        for entry in _matching(store.history(row.memory_id, errors="skip"), needle):
            hits.append(Hit(row.memory_id, _entry_view(entry, estimator)))
            if len(hits) >= limit:
                return hits
    return hits


def _matching(entries: Iterable[HistoryEntry], needle: str) -> Iterable[HistoryEntry]:
    for entry in entries:
        message = entry.message
        text = text_of(message)
        if isinstance(message, AiMessage):
            text += " ".join(f" {c.name} {c.arguments}" for c in message.tool_execution_requests)
        if needle in text.casefold():
            yield entry


def _entry_view(entry: HistoryEntry, estimator: TokenCountEstimator) -> MessageView:
    return view(
        entry.message,
        entry.seq,
        estimator,
        created_at=entry.created_at,
        in_window=entry.in_window,
    )
