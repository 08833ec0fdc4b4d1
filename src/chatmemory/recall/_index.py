"""Indexing a conversation's history for recall: what of a message is indexed (its words, with
the speaker's name; the day it was said as metadata), incremental marks, a new life's clean
start, and finding (to forget) what belongs to one conversation or one user."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from .._errors import ConfigurationError
from .._flow import Flow, call
from .._messages import AiMessage, ChatMessage, UserMessage
from .._policies.summary import is_summary
from ..rag import Embedding, Filter, TextSegment, key
from ..rag._documents import Document
from ._io import Io, Window
from ._kept import Kept

if TYPE_CHECKING:
    from ._semantic import SemanticRecall

KIND = "chatmemory_recall"
SAVE_EVERY = 64
"""Messages indexed between two saves of a conversation's mark (one every turn would cost a write
per turn). Each save is a row of its own, the furthest one counting: rewriting one mark would
remove a row from the store, and a removal drops an approximate index's saved graph (it keeps no
removed vector), which the next process then builds again (seconds at 100,000 rows). A
conversation's marks, one per `SAVE_EVERY` messages, go with it when it is forgotten."""
BATCH = 64
_NAMESPACE = uuid.UUID("0c7f1b0e-5b7a-4e0c-9a53-9f1f0e4b2d61")


def text_of(message: ChatMessage) -> str | None:
    """The text worth indexing: user and assistant words (no tool traffic, no summary)."""
    if is_summary(message):
        return None
    if isinstance(message, UserMessage):
        texts = [getattr(c, "text", "") for c in message.contents]
        joined = " ".join(t for t in texts if t)
        return joined or None
    if isinstance(message, AiMessage) and not message.tool_execution_requests:
        return message.text or None
    return None


def speaker(message: ChatMessage) -> str:
    """Who said it: the user's name when the message has one, else the role."""
    if isinstance(message, UserMessage):
        return message.name or "user"
    return "assistant" if isinstance(message, AiMessage) else "tool"


def storable(text: str) -> str:
    """`text` with any lone surrogate (a message may hold one, as LangChain4j can write it)
    replaced by U+FFFD: embedding stores refuse them, and an index must not fail a turn."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def day(moment: datetime) -> str:
    """The UTC day of `moment`, ISO (2026-11-26)."""
    return moment.astimezone(timezone.utc).date().isoformat()


def index(recall: SemanticRecall, memory_id: str, user_id: str | None, full: bool) -> Flow[int]:
    window = yield from call(Io.window, memory_id)
    life = window.life if window is not None else None
    kept = recall.keeping.of(memory_id, life)
    upto = yield from _mark(recall, memory_id, kept)
    if full or window is None:
        new = yield from _read(memory_id, None, upto)
    else:
        new = yield from _new_rows(memory_id, upto, window)
    today = day(datetime.now(timezone.utc))  # a message read from the window was just stored
    segments: list[TextSegment] = []
    ids: list[str] = []
    for seq, message, date in new:
        text = text_of(message)
        if text is None:
            continue
        named = message.name if isinstance(message, UserMessage) else None
        text = storable(f"{named}: {text}" if named else text)
        base = {
            "kind": KIND,
            "memory_id": memory_id,
            "user_id": user_id or "",
            "seq": seq,
            "life": kept.life,
            "speaker": speaker(message),
            "date": date or today,
        }
        for chunk in recall.splitter.split(Document(text)):
            number = chunk.metadata["index"]
            segments.append(TextSegment(chunk.text, {**base, "chunk": number}))
            ids.append(str(uuid.uuid5(_NAMESPACE, f"{memory_id}\0{seq}\0{number}")))
    texts = list(dict.fromkeys(s.text for s in segments))  # the same words embedded once
    embedded: dict[str, Embedding] = {}
    for start in range(0, len(texts), BATCH):
        batch = texts[start : start + BATCH]
        embedded.update(zip(batch, (yield from call(Io.embed, batch, "document")), strict=True))
    for start in range(0, len(segments), BATCH):
        batch_segments = segments[start : start + BATCH]
        vectors = [embedded[s.text] for s in batch_segments]
        yield from call(Io.add_all, vectors, batch_segments, ids[start : start + BATCH])
    if new:
        last = new[-1][0]
        with recall.keeping.lock:
            kept.mark = last
            stale = last - kept.saved >= SAVE_EVERY or full
        if stale or upto < 0:  # the mark is saved now and then: a restart redoes at most
            meta = {"kind": KIND + "_mark", "memory_id": memory_id, "user_id": user_id or ""}
            mark = TextSegment("", {**meta, "upto": last, "life": kept.life})
            yield from call(Io.add_all, [recall.probe()], [mark], [_mark_id(memory_id, last)])
            with recall.keeping.lock:  # SAVE_EVERY messages (same ids)
                kept.saved = last
    return len({s.metadata["seq"] for s in segments})


Dated = list[tuple[int, ChatMessage, str | None]]
"""Messages to index: (seq, message, the day it was stored when read from the history)."""


def _new_rows(memory_id: str, upto: int, window: Window) -> Flow[Dated]:
    """The messages after `upto`: from the window (the cheap read after a turn), with those
    that left it before being indexed read from the history (a catch-up)."""
    newer: Dated = [(seq, message, None) for seq, message in window.rows if seq > upto]
    if not newer:
        return []
    held = {seq for seq, _, _ in newer}
    missed = [seq for seq in range(upto + 1, newer[-1][0]) if seq not in held]
    if not missed:
        return newer
    caught = yield from _read(memory_id, missed, upto)
    return sorted([*caught, *newer], key=lambda row: row[0])


def _read(memory_id: str, seqs: list[int] | None, upto: int) -> Flow[Dated]:
    """The history's messages after `upto` (only `seqs` when given), with their days."""
    found = yield from call(Io.history, memory_id, seqs)
    return [(e.seq, e.message, day(e.created_at)) for e in found if e.seq > upto]


def _mark_id(memory_id: str, upto: int) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"mark\0{memory_id}\0{upto}"))


def _mark(recall: SemanticRecall, memory_id: str, kept: Kept) -> Flow[int]:
    """How far `memory_id` is indexed in the life `kept` is for: kept, else read from its marks
    (the furthest of this life). Marks of earlier lives only mean the index holds what those
    said: it goes (the entries and the marks) and indexing starts over. A mark written before
    marks carried a life is taken as this life's."""
    with recall.keeping.lock:
        if kept.mark is not None:
            return kept.mark
    condition = key("kind").eq(KIND + "_mark") & key("memory_id").eq(memory_id)
    found = yield from call(Io.select, condition)
    upto = -1
    for segment in found.values():
        if segment is None:
            continue
        life = segment.metadata.get("life", kept.life)
        if life == kept.life:
            upto = max(upto, int(segment.metadata.get("upto", -1)))
    if upto < 0 and found:
        stale = yield from call(Io.select, entries(memory_id=memory_id))
        yield from call(Io.remove, sorted(stale))
    with recall.keeping.lock:
        kept.mark = upto if kept.mark is None else kept.mark
        kept.saved = upto
    return kept.mark


def entries(*, memory_id: str | None = None, user_id: str | None = None) -> Filter:
    """Index entries and marks of one conversation or one user."""
    kinds = key("kind").in_([KIND, KIND + "_mark"])
    if memory_id is not None:
        return kinds & key("memory_id").eq(memory_id)
    return kinds & key("user_id").eq(user_id or "")


def memory_ids_of(user_id: str) -> Flow[list[str]]:
    if not isinstance(user_id, str) or not user_id:
        raise ConfigurationError(f"memory_ids_of() needs a non-empty user id, got {user_id!r}")
    marks = yield from call(Io.select, entries(user_id=user_id))
    return sorted({str(s.metadata["memory_id"]) for s in marks.values() if s is not None})


def forget(recall: SemanticRecall, memory_id: str | None, user_id: str | None) -> Flow[int]:
    if (memory_id is None) == (user_id is None):
        raise ConfigurationError("forget() takes memory_id= or user_id=, one of them")
    for given in (memory_id, user_id):
        if given is not None and (not isinstance(given, str) or not given):
            raise ConfigurationError(f"forget() needs a non-empty id, got {given!r}")
    doomed = yield from call(Io.select, entries(memory_id=memory_id, user_id=user_id))
    yield from call(Io.remove, sorted(doomed))
    if memory_id is not None:
        recall.keeping.drop({memory_id})
    else:
        recall.keeping.drop({str(s.metadata["memory_id"]) for s in doomed.values() if s})
    return len(doomed)
