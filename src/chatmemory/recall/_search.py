"""Recalling: one search request (vectors and words fused, on a store that has both) for the
query, then the budget spent on matches: near-duplicates skipped, matches in the window skipped,
and neighbours added only where they add (the answer to a matched question, the question of a
short matched reply, the rest of a tool exchange), or a fixed `message_range`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from .._errors import ConfigurationError
from .._flow import Flow, call
from .._messages import AiMessage, ChatMessage, ToolExecutionResultMessage, UserMessage
from .._policies.summary import is_summary
from .._policies.tool_groups import atomic_units
from ..rag import Embedding, EmbeddingMatch, EmbeddingSearchRequest
from ..rag._hybrid import fuse
from ..rag._vectors import words
from ._index import text_of
from ._io import Io, Rows, Window

if TYPE_CHECKING:
    from ._semantic import SemanticRecall

SHORT = 6
"""A matched message of at most this many words is a short reply: its question comes with it."""
NEAR_DUPLICATE = 0.85
"""Share of words in common (Jaccard) at which a match repeats one already taken (skipped)."""
DEPTH = 4
"""Candidates read per match wanted (matches in the window or repeated are skipped)."""
EXCHANGE = 64
"""How far from a run the rest of a tool exchange it touches is looked for."""


@dataclass(frozen=True, slots=True)
class RecalledMessages:
    """A run of past messages around one that matched: from `memory_id`, their sequence numbers
    `seqs`, with the match's relevance `score`, and the day (UTC, ISO) the match was said."""

    memory_id: str
    seqs: tuple[int, ...]
    messages: tuple[ChatMessage, ...]
    score: float
    date: str | None = None


def embed_queries(recall: SemanticRecall, texts: list[str]) -> Flow[list[Embedding]]:
    """The embeddings of `texts`: remembered ones again, the others in one request."""
    found = {text: recall.keeping.query(text) for text in texts}
    missing = [text for text, embedding in found.items() if embedding is None]
    if missing:
        embedded = yield from call(Io.embed, missing, "query")
        for text, embedding in zip(missing, embedded, strict=True):
            recall.keeping.remember_query(text, embedding)
            found[text] = embedding
    return [embedding for embedding in found.values() if embedding is not None]


def _searched(
    recall: SemanticRecall, memory_id: str, query: str, user_id: str | None
) -> Flow[list[EmbeddingMatch]]:
    """The matches for `query` (and for the queries the transformer makes of it, fused by
    reciprocal rank), re-ranked by the scoring model when there is one; best first."""
    condition = recall.condition(memory_id, user_id)
    queries = [query]
    if recall.stages.query_transformer is not None:
        made = yield from call(Io.transform, query)
        queries = list(dict.fromkeys([query, *made]))
    rankings = []
    for text, embedding in zip(queries, (yield from embed_queries(recall, queries)), strict=True):
        request = EmbeddingSearchRequest(
            query_embedding=embedding,
            max_results=recall.top_k * DEPTH,
            min_score=recall.min_score,
            filter=condition,
            query=text if recall.hybrid else None,
        )
        rankings.append(list((yield from call(Io.search, request)).matches))
    matches = rankings[0] if len(rankings) == 1 else fuse(rankings)[: recall.top_k * DEPTH]
    if recall.stages.scoring_model is None or not matches:
        return matches
    texts = [m.embedded.text if m.embedded is not None else "" for m in matches]
    scores = yield from call(Io.score, texts, query)
    if len(scores) != len(matches):
        raise ConfigurationError(
            f"the scoring model gave {len(scores)} scores for {len(matches)} segments"
        )
    rescored = [replace(m, score=float(s)) for m, s in zip(matches, scores, strict=True)]
    return sorted(rescored, key=lambda match: match.score, reverse=True)


@dataclass(slots=True)
class _Source:
    """One conversation the matches come from: its window, and the messages read of it."""

    name: str
    window: Window | None
    in_window: set[int]
    read: dict[int, ChatMessage | None] = field(default_factory=dict)
    """Messages read so far, by seq (None: no readable message has that seq)."""

    def message(self, seq: int) -> ChatMessage | None:
        return self.read.get(seq)

    def fill(self, seqs: Iterable[int]) -> Flow[None]:
        """Read those of `seqs` not read yet, in one request."""
        missing = sorted({s for s in seqs if s >= 0 and s not in self.read})
        if missing:
            found = yield from call(Io.history, self.name, missing)
            self.read.update(dict.fromkeys(missing))
            self.read.update((entry.seq, entry.message) for entry in found)


@dataclass(frozen=True, slots=True)
class _Candidate:
    match: EmbeddingMatch
    source: _Source
    seq: int
    date: str | None


def recall(
    recall: SemanticRecall, memory_id: str, query: str, user_id: str | None
) -> Flow[list[RecalledMessages]]:
    if not query.strip():
        return []
    matches = yield from _searched(recall, memory_id, query, user_id)
    candidates = yield from _candidates(matches, memory_id)
    # The neighbourhoods of the first top_k candidates (those normally taken) in one read per
    # conversation; a later candidate's, or a tool exchange's further reach, when needed.
    reach_before, reach_after = _reach(recall)
    wanted: dict[str, set[int]] = {}
    for candidate in candidates[: recall.top_k]:
        span = range(candidate.seq - reach_before, candidate.seq + reach_after + 1)
        wanted.setdefault(candidate.source.name, set()).update(span)
    for candidate in candidates[: recall.top_k]:
        yield from candidate.source.fill(wanted.pop(candidate.source.name, ()))
    taken: set[tuple[str, int]] = set()
    chosen: list[set[str]] = []
    found: list[RecalledMessages] = []
    spent = 0
    for candidate in candidates:
        if len(found) == recall.top_k or spent >= recall.max_messages:
            break
        name, seq = candidate.source.name, candidate.seq
        if (name, seq) in taken or _repeats(candidate.match, chosen):
            continue  # (a match that is not a repeat is in `chosen` now)
        run = yield from _around(recall, candidate, recall.max_messages - spent)
        run = [(s, m) for s, m in run if (name, s) not in taken]
        if not run:
            continue
        taken.update((name, s) for s, _ in run)
        spent += len(run)
        found.append(
            RecalledMessages(
                name,
                tuple(s for s, _ in run),
                tuple(m for _, m in run),
                candidate.match.score,
                candidate.date,
            )
        )
    return found


def _candidates(matches: Sequence[EmbeddingMatch], memory_id: str) -> Flow[list[_Candidate]]:
    """The matches that may be recalled, best first: not an entry of an earlier life of its
    conversation, not a message still in the answered conversation's window."""
    sources: dict[str, _Source] = {}
    candidates: list[_Candidate] = []
    for match in matches:
        if match.embedded is None:
            continue
        meta = match.embedded.metadata
        name, seq = str(meta["memory_id"]), int(meta["seq"])
        source = sources.get(name)
        if source is None:
            window = yield from call(Io.window, name)
            # Only the answered conversation's window is in the request: the messages still
            # in another conversation's window may be recalled.
            in_window = (
                {s for s, _ in window.rows} if window is not None and name == memory_id else set()
            )
            source = sources[name] = _Source(name, window, in_window)
        if source.window is not None and meta.get("life", source.window.life) != source.window.life:
            continue  # an entry of an earlier life of that conversation: not its words now
        if seq in source.in_window:
            continue
        date = meta.get("date")
        candidates.append(_Candidate(match, source, seq, date if isinstance(date, str) else None))
    return candidates


def _reach(recall: SemanticRecall) -> tuple[int, int]:
    """How many messages before and after a match its run may hold (tool exchanges aside)."""
    if recall.before is None or recall.after is None:
        return 1, 1  # "auto": a short reply's question, a question's answer
    return recall.before, recall.after


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


def _around(recall: SemanticRecall, candidate: _Candidate, budget: int) -> Flow[Rows]:
    """The run recalled for the match at `seq`: with its neighbours (fixed, or where they add),
    whole tool exchanges, never what is in the window or a summary, at most `budget` messages
    (the nearest the match kept). A message the history does not hold (a store that keeps the
    window only) comes back alone, as it was indexed."""
    source, seq = candidate.source, candidate.seq
    before, after = _reach(recall)
    yield from source.fill(range(seq - before, seq + after + 1))
    matched = source.message(seq)
    if matched is None:
        return [(seq, _as_indexed(candidate.match))]
    if recall.before is None or recall.after is None:  # "auto": neighbours where they add
        low, high = seq, seq + 1
        text = text_of(matched) or ""
        if text.rstrip().endswith("?") and source.message(seq + 1) is not None:
            high += 1  # a question: its answer
        if len(words(text)) <= SHORT and source.message(seq - 1) is not None:
            low -= 1  # a short reply: what it answers
    else:
        low, high = seq - before, seq + after + 1
    if _cuts_exchange(source, low, high):
        yield from source.fill(range(low - EXCHANGE, high + EXCHANGE))
        low, high = _exchanges(source, low, high)
    run = [
        (s, message)
        for s in range(low, high)
        if (message := source.message(s)) is not None
        and s not in source.in_window
        and not is_summary(message)
    ]
    if len(run) > budget:
        nearest = sorted(run, key=lambda row: abs(row[0] - seq))[:budget]
        run = sorted(nearest, key=lambda row: row[0])
    return run


def _cuts_exchange(source: _Source, low: int, high: int) -> bool:
    """Whether the run [low, high) may cut a tool exchange in two."""
    first, last = source.message(low), source.message(high - 1)
    return (first is not None and _in_exchange(first)) or (last is not None and _in_exchange(last))


def _exchanges(source: _Source, low: int, high: int) -> tuple[int, int]:
    """[low, high) widened to the whole tool exchanges it touches, among the messages read up
    to `EXCHANGE` away."""
    rows = [
        (s, message)
        for s in range(low - EXCHANGE, high + EXCHANGE)
        if (message := source.message(s)) is not None
    ]
    for unit in atomic_units([m for _, m in rows]):
        unit_first, unit_last = rows[unit[0]][0], rows[unit[-1]][0]
        if unit_first < high and unit_last >= low and len(unit) > 1:
            low, high = min(low, unit_first), max(high, unit_last + 1)
    return low, high


def _in_exchange(message: ChatMessage) -> bool:
    """Whether a run ending (or starting) at `message` may cut a tool exchange in two."""
    return isinstance(message, ToolExecutionResultMessage) or (
        isinstance(message, AiMessage) and bool(message.tool_execution_requests)
    )


def _as_indexed(match: EmbeddingMatch) -> ChatMessage:
    """A matched message rebuilt from its index entry: its words, by whom (the speaker's name
    for a named user, whose words were indexed after "name: ")."""
    assert match.embedded is not None
    text, said_by = match.embedded.text, str(match.embedded.metadata.get("speaker", "user"))
    if said_by == "assistant":
        return AiMessage(text)
    if said_by == "user":
        return UserMessage(text)
    return UserMessage(text.removeprefix(f"{said_by}: "), name=said_by)
