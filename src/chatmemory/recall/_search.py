"""Recalling: one search request (vectors and words fused, on a store that has both) for the
query, then the budget spent on matches: near-duplicates skipped, matches in the window skipped,
and neighbours added only where they add (the answer to a matched question, the question of a
short matched reply, the rest of a tool exchange), or a fixed `message_range`."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._flow import Flow, call
from .._messages import AiMessage, ChatMessage, ToolExecutionResultMessage
from .._policies.summary import is_summary
from .._policies.tool_groups import atomic_units
from ..rag import Embedding, EmbeddingMatch, EmbeddingSearchRequest
from ..rag._vectors import words
from ._index import history_rows, text_of
from ._io import Io, Rows, Window
from ._kept import Kept

if TYPE_CHECKING:
    from ._semantic import SemanticRecall

SHORT = 6
"""A matched message of at most this many words is a short reply: its question comes with it."""
NEAR_DUPLICATE = 0.85
"""Share of words in common (Jaccard) at which a match repeats one already taken (skipped)."""
DEPTH = 4
"""Candidates read per match wanted (matches in the window or repeated are skipped)."""


@dataclass(frozen=True, slots=True)
class RecalledMessages:
    """A run of past messages around one that matched: from `memory_id`, their sequence numbers
    `seqs`, with the match's relevance `score`, and the day (UTC, ISO) the match was said."""

    memory_id: str
    seqs: tuple[int, ...]
    messages: tuple[ChatMessage, ...]
    score: float
    date: str | None = None


def embed_query(recall: SemanticRecall, text: str) -> Flow[Embedding]:
    found = recall.keeping.query(text)
    if found is not None:
        return found
    [embedding] = yield from call(Io.embed, [text], "query")
    recall.keeping.remember_query(text, embedding)
    return embedding


@dataclass(slots=True)
class _Source:
    window: Window | None
    in_window: set[int]
    kept: Kept


def recall(
    recall: SemanticRecall, memory_id: str, query: str, user_id: str | None
) -> Flow[list[RecalledMessages]]:
    if not query.strip():
        return []
    request = EmbeddingSearchRequest(
        query_embedding=(yield from embed_query(recall, query)),
        max_results=recall.top_k * DEPTH,
        min_score=recall.min_score,
        filter=recall.condition(memory_id, user_id),
        query=query if recall.hybrid else None,
    )
    matches = (yield from call(Io.search, request)).matches
    taken: set[tuple[str, int]] = set()
    chosen: list[set[str]] = []
    found: list[RecalledMessages] = []
    sources: dict[str, _Source] = {}
    spent = 0
    for match in matches:
        if len(found) == recall.top_k or spent >= recall.max_messages:
            break
        if match.embedded is None:
            continue
        meta = match.embedded.metadata
        name, seq = str(meta["memory_id"]), int(meta["seq"])
        if name not in sources:
            window = yield from call(Io.window, name)
            kept = recall.keeping.of(name, window.life if window is not None else None)
            # Only the answered conversation's window is in the request: the messages still
            # in another conversation's window may be recalled.
            in_window = (
                {s for s, _ in window.rows} if window is not None and name == memory_id else set()
            )
            sources[name] = _Source(window, in_window, kept)
        source = sources[name]
        if source.window is not None and meta.get("life", source.window.life) != source.window.life:
            continue  # an entry of an earlier life of that conversation: not its words now
        if seq in source.in_window or (name, seq) in taken or _repeats(match, chosen):
            continue  # (a match that is not a repeat is in `chosen` now)
        history = yield from history_rows(recall, name, source.kept)
        if not history or seq > history[-1][0]:
            history = yield from history_rows(recall, name, source.kept, reload=True)
        run = _around(recall, history, seq, source.in_window, recall.max_messages - spent)
        run = [(s, m) for s, m in run if (name, s) not in taken]
        if not run:
            continue
        taken.update((name, s) for s, _ in run)
        spent += len(run)
        date = meta.get("date")
        found.append(
            RecalledMessages(
                name,
                tuple(s for s, _ in run),
                tuple(m for _, m in run),
                match.score,
                date if isinstance(date, str) else None,
            )
        )
    return found


def _repeats(match: EmbeddingMatch, chosen: list[set[str]]) -> bool:
    """Whether `match` says what a match already taken said (nearly the same words: a Jaccard
    similarity of `NEAR_DUPLICATE` or more): a second copy would spend the budget on nothing
    new. Else its words join `chosen`."""
    assert match.embedded is not None
    said = set(words(match.embedded.text))
    for other in chosen:
        if said == other or len(said & other) >= NEAR_DUPLICATE * len(said | other):
            return True
    chosen.append(said)
    return False


def _around(
    recall: SemanticRecall, history: Rows, seq: int, in_window: set[int], budget: int
) -> Rows:
    """The run recalled for the match at `seq`: with its neighbours (fixed, or where they add),
    whole tool exchanges, never what is in the window or a summary, at most `budget` messages
    (the nearest the match kept)."""
    position = _position(history, seq)
    if position is None:
        return []
    if recall.before is None or recall.after is None:  # "auto": neighbours where they add
        low, high = position, position + 1
        text = text_of(history[position][1]) or ""
        if text.rstrip().endswith("?") and high < len(history):
            high += 1  # a question: its answer
        if len(words(text)) <= SHORT and low > 0:
            low -= 1  # a short reply: what it answers
    else:
        low = max(0, position - recall.before)
        high = min(len(history), position + recall.after + 1)
    if _in_exchange(history[low][1]) or _in_exchange(history[high - 1][1]):
        wide_low, wide_high = max(0, low - 64), min(len(history), high + 64)
        messages = [m for _, m in history[wide_low:wide_high]]
        for unit in atomic_units(messages):  # whole tool exchanges only
            first, last = unit[0] + wide_low, unit[-1] + wide_low
            if first < high and last >= low and len(unit) > 1:
                low, high = min(low, first), max(high, last + 1)
    run = [(s, m) for s, m in history[low:high] if s not in in_window and not is_summary(m)]
    if len(run) > budget:
        nearest = sorted(run, key=lambda row: abs(row[0] - seq))[:budget]
        run = sorted(nearest, key=lambda row: row[0])
    return run


def _in_exchange(message: ChatMessage) -> bool:
    """Whether a run ending (or starting) at `message` may cut a tool exchange in two."""
    return isinstance(message, ToolExecutionResultMessage) or (
        isinstance(message, AiMessage) and bool(message.tool_execution_requests)
    )


def _position(history: Rows, seq: int) -> int | None:
    """Where `seq` is in the history (seqs ascend): a binary search."""
    index = bisect.bisect_left(history, seq, key=lambda row: row[0])
    return index if index < len(history) and history[index][0] == seq else None
