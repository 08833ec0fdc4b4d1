"""The values a retrieval pipeline passes along: text segments, queries and retrieved contents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import ConfigurationError
from .._frozen import FrozenDict
from .._messages import ChatMessage, SystemMessage, UserMessage

__all__ = ["Content", "ContentKey", "Query", "QueryMetadata", "TextSegment"]


def _frozen(value: Mapping[str, Any] | None, name: str) -> FrozenDict:
    if value is None:
        return FrozenDict()
    if type(value) is dict:  # the usual case: FrozenDict checks the keys as it copies them
        try:
            return FrozenDict(value)
        except TypeError as error:
            if all(isinstance(k, str) for k in value):
                raise ConfigurationError(f"`{name}` holds {error}") from None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ConfigurationError(f"`{name}` must be a mapping with str keys, got {value!r}")
    if isinstance(value, FrozenDict):
        return value
    try:
        return FrozenDict(value)
    except TypeError as error:  # a value that is not JSON-like
        raise ConfigurationError(f"`{name}` holds {error}") from None


@dataclass(frozen=True, slots=True, init=False)
class TextSegment:
    """A piece of a document: its text and metadata (source, page, index...)."""

    text: str
    metadata: Mapping[str, Any] = field(default_factory=FrozenDict)

    def __init__(self, text: str, metadata: Mapping[str, Any] | None = None) -> None:
        # Each field set once, through its slot (an ingest makes one segment per row).
        if not isinstance(text, str):
            raise ConfigurationError(f"`TextSegment.text` must be a str, got {text!r}")
        _set_text(self, text)
        _set_metadata(self, _frozen(metadata, "TextSegment.metadata"))


_set_text = TextSegment.__dict__["text"].__set__
_set_metadata = TextSegment.__dict__["metadata"].__set__


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryMetadata:
    """Where a query comes from: the user message, the system message, the memory's messages
    before this turn (None without memory) and the memory id."""

    user_message: UserMessage
    system_message: SystemMessage | None = None
    chat_memory: Sequence[ChatMessage] | None = None
    memory_id: str | None = None

    def __post_init__(self) -> None:
        if self.chat_memory is not None:  # a tuple: queries are dict keys during aggregation
            object.__setattr__(self, "chat_memory", tuple(self.chat_memory))


@dataclass(frozen=True, slots=True)
class Query:
    """What to retrieve for: non-blank text, and the turn it comes from."""

    text: str
    metadata: QueryMetadata | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ConfigurationError(f"a Query needs non-blank text, got {self.text!r}")


class ContentKey:
    """Keys of `Content.metadata`."""

    SCORE = "score"
    """The retriever's relevance score (0..1 for embedding stores); in a list fused from
    several, the fused score (reciprocal rank), on one scale for the whole list."""
    SOURCE_SCORES = "source_scores"
    """In a list fused from several: the score the content had in each of them, in their order
    (None where it was not found): the full-text score and the vector one of a hybrid search."""
    RERANKED_SCORE = "reranked_score"
    """The scoring model's score, after re-ranking."""
    EMBEDDING_ID = "embedding_id"
    """The id of the stored embedding the content came from."""


@dataclass(frozen=True, slots=True, eq=False)
class Content:
    """A retrieved segment with retrieval metadata (`ContentKey`). Two contents are equal when
    their segments are (text and metadata), whatever their scores: fusion relies on it."""

    segment: TextSegment
    metadata: Mapping[str, Any] = field(default_factory=FrozenDict)

    def __post_init__(self) -> None:
        if not isinstance(self.segment, TextSegment):
            raise ConfigurationError(
                f"`Content.segment` must be a TextSegment, got {self.segment!r}"
            )
        object.__setattr__(self, "metadata", _frozen(self.metadata, "Content.metadata"))

    @property
    def text(self) -> str:
        return self.segment.text

    @property
    def score(self) -> float | None:
        value = self.metadata.get(ContentKey.SCORE)
        return float(value) if isinstance(value, (int, float)) else None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Content) and other.segment == self.segment

    def __hash__(self) -> int:
        return hash(self.segment)
