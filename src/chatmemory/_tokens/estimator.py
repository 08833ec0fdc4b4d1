"""The `TokenCountEstimator` protocol, and the per-message count cache every estimator shares."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

from .._messages import ChatMessage, memo

__all__ = ["TokenCountEstimator", "cache_key_of", "cached_count"]


@runtime_checkable
class TokenCountEstimator(Protocol):
    """Counts tokens the way a model will see them.

    `count_messages` is the cost of a whole request: the messages plus any fixed per-request
    overhead, so `count_messages([])` is that overhead alone. Estimators may also define a
    `cache_key` string attribute naming what they count (for example
    `"openai:o200k_base:gpt-4o-mini"`); memories then store per-message counts under that key and
    a restarted process does not tokenize the window again.
    """

    def count_text(self, text: str) -> int: ...

    def count_message(self, message: ChatMessage) -> int: ...

    def count_messages(self, messages: Iterable[ChatMessage]) -> int: ...


def cache_key_of(estimator: object) -> object:
    """The key under which `estimator`'s per-message counts are cached: its `cache_key` if it
    has one (a string, shared by equal estimators and persisted by stores), else the object."""
    key = getattr(estimator, "cache_key", None)
    return key if isinstance(key, str) else estimator


def cached_count(key: object, message: ChatMessage, count: Callable[[ChatMessage], int]) -> int:
    """`count(message)`, computed once per message instance and `key`.

    Messages are immutable, so a count never goes stale; the cache lives on the message itself
    and is freed with it.
    """
    cache = memo(message)
    try:
        return cache[key]  # type: ignore[no-any-return]
    except KeyError:
        value = cache[key] = count(message)
        return value
