"""What a traced service call records of its turn's effects (`chatmemory.telemetry`): a span
over the memory's commit, retrieval, recall, recall's indexing and the moderation verdict, and
chatmemory's metrics of the window, the eviction and the recall.

A driver carries an effect out inside ``with seen.opened`` (its span, if it has one) and hands
the result to ``seen.saw``, blocking or awaited alike (an effect not observed is None: carried
out as is).
The model's spans come from its listener and the tools' from the port that runs them (on the
pool's threads too).
"""

from __future__ import annotations

from typing import Any, TypeVar

from ..telemetry import Instrumentation
from . import _effects as fx

__all__ = ["observed"]

R = TypeVar("R")


class _Observed:
    """An effect with a span named `name` (None: metrics only), `opened` before it runs."""

    __slots__ = ("instrumentation", "kind", "memory", "opened")
    name: str | None = None

    def __init__(
        self,
        instrumentation: Instrumentation,
        memory: Any,
        kind: str = "",
        attributes: dict[str, Any] | None = None,
    ) -> None:
        self.instrumentation = instrumentation
        self.memory = memory
        self.kind = kind
        """The kind of the memory's store (for an effect with metrics)."""
        self.opened = instrumentation.opened(self.name, attributes) if self.name else None

    def saw(self, result: R) -> R:
        """`result`, what it tells recorded."""
        return result


class _Window(_Observed):
    def saw(self, result: R) -> R:
        tokens = getattr(self.memory, "last_window_tokens", None)
        if tokens is not None:
            self.instrumentation.window_tokens.record(
                tokens, self.instrumentation.metric(self.kind)
            )
        return result


class _Commit(_Observed):
    name = "chatmemory commit"

    def saw(self, result: R) -> R:
        evicted = getattr(self.memory, "last_evicted", None)
        if evicted is not None:
            assert self.opened is not None
            self.opened.span.set_attribute("chatmemory.messages.evicted", evicted)
            if evicted:  # a counter's zero adds nothing but its cost
                self.instrumentation.evicted.add(evicted, self.instrumentation.metric(self.kind))
        return result


class _Recall(_Observed):
    name = "chatmemory recall"

    def saw(self, result: R) -> R:
        hits = len(result)  # type: ignore[arg-type]
        assert self.opened is not None
        self.opened.span.set_attribute("chatmemory.recall.hits", hits)
        self.instrumentation.recall_hits.record(hits, self.instrumentation.metric(self.kind))
        return result


class _Retrieve(_Observed):
    name = "chatmemory retrieve"


class _Index(_Observed):
    name = "chatmemory index"


class _Moderation(_Observed):
    name = "chatmemory moderation"


def _store_kind(memory: object) -> str:
    """Where `memory` keeps its messages: its store's class (a memory of one's own without a
    `store`: its own class)."""
    return type(getattr(memory, "store", memory)).__name__


def observed(
    instrumentation: Instrumentation, effect: fx.TurnEffect, memory: object
) -> _Observed | None:
    """How a traced call observes `effect`, carried out for a call whose memory is `memory`;
    None for an effect it does not (the model's and the tools' have their own spans)."""
    match effect:
        case fx.Window() if memory is not None:
            return _Window(instrumentation, memory, _store_kind(memory))
        case fx.Commit() if memory is not None:
            kind = _store_kind(memory)
            attributes = {
                "chatmemory.store.kind": kind,
                "chatmemory.messages.written": len(effect.messages),
            }
            return _Commit(instrumentation, memory, kind, attributes)
        case fx.Recall():
            return _Recall(instrumentation, memory, _store_kind(memory))
        case fx.Augment():
            return _Retrieve(instrumentation, memory)
        case fx.Index():
            return _Index(instrumentation, memory)
        case fx.Verdict():
            return _Moderation(instrumentation, memory)
        case _:
            return None
