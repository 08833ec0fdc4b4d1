"""Embeddings, the models that make them and the stores that search them (LangChain4j's
`EmbeddingModel` / `EmbeddingStore` contracts, in Python)."""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from .._errors import ConfigurationError
from .._frozen import FrozenDict, held
from ._filters import Filter
from ._values import TextSegment

__all__ = [
    "AsyncEmbeddingModel",
    "Embedding",
    "EmbeddingMatch",
    "EmbeddingModel",
    "EmbeddingSearchRequest",
    "EmbeddingSearchResult",
    "EmbeddingStore",
    "FullTextSearch",
    "MetadataSelect",
    "SingleWrites",
    "cosine_similarity",
    "relevance_score",
]


class _Unset(enum.Enum):
    UNSET = enum.auto()


UNSET: Final = _Unset.UNSET
"""The default of `remove_all`'s arguments: told apart from an explicit None, which is refused
(a ported ``removeAll(null)`` must not wipe a store)."""


class Embedding:
    """A vector of floats, held as one read-only numpy array (float64: the numbers a model gave,
    unchanged). Build it from a sequence of numbers or a 1-D array; `array` is that array (no
    copy), `vector` the same numbers as a tuple. Stores take `(n, d)` arrays too: see
    `add_all`."""

    __slots__ = ("_array",)
    _array: npt.NDArray[np.float64]

    def __init__(self, vector: Sequence[float] | npt.NDArray[Any]) -> None:
        try:
            given = vector if isinstance(vector, np.ndarray) else np.asarray(vector)
            if given.dtype.kind not in "fiub":  # text, None, objects: float() says what is wrong
                given = np.array([float(x) for x in vector], dtype=np.float64)
            array = np.array(given, dtype=np.float64)
        except (TypeError, ValueError):
            raise ConfigurationError(
                f"an Embedding is a sequence of numbers, got {vector!r}"
            ) from None
        if array.ndim != 1:
            raise ConfigurationError(
                f"an Embedding is one vector (a 1-D sequence of numbers), got an array of shape "
                f"{array.shape}; give a store several at once as add_all(matrix)"
            )
        if not array.size:
            raise ConfigurationError("an Embedding needs at least one number")
        array.flags.writeable = False
        object.__setattr__(self, "_array", array)

    @classmethod
    def trusted(cls, values: Sequence[float] | npt.NDArray[Any]) -> Embedding:
        """An embedding of floats a store read back or a model made (no checks)."""
        embedding = object.__new__(cls)
        array = np.array(values, dtype=np.float64)
        array.flags.writeable = False
        object.__setattr__(embedding, "_array", array)
        return embedding

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("an Embedding cannot be changed")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Embedding.trusted, (self._array,))

    @property
    def array(self) -> npt.NDArray[np.float64]:
        """The numbers as a read-only 1-D float64 array."""
        return self._array

    @property
    def vector(self) -> tuple[float, ...]:
        """The numbers as a tuple of floats."""
        return tuple(self._array.tolist())

    @property
    def dimension(self) -> int:
        return int(self._array.shape[0])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Embedding):
            return NotImplemented
        return bool(np.array_equal(self._array, other._array))

    def __hash__(self) -> int:
        return hash(self.vector)

    def __repr__(self) -> str:
        return f"Embedding(vector={self.vector!r})"

    def normalized(self) -> Embedding:
        norm = float(np.linalg.norm(self._array))
        return self if norm == 0 else Embedding.trusted(self._array / norm)


def trusted_rows(matrix: npt.NDArray[Any]) -> list[Embedding]:
    """An embedding per row of a matrix a store read back (no checks, as `Embedding.trusted`;
    one copy for all, each embedding's array a row of it)."""
    array = matrix.astype(np.float64)  # a copy, always
    array.flags.writeable = False
    made = []
    for row in array:
        embedding = object.__new__(Embedding)
        object.__setattr__(embedding, "_array", row)
        made.append(embedding)
    return made


def cosine_similarity(a: Embedding, b: Embedding) -> float:
    """Cosine of the angle between `a` and `b` (the denominator floored at 1e-8)."""
    if a.dimension != b.dimension:
        raise ConfigurationError(
            f"cannot compare embeddings of dimension {a.dimension} and {b.dimension}"
        )
    norms = float(np.linalg.norm(a.array)) * float(np.linalg.norm(b.array))
    return float(a.array @ b.array) / max(norms, 1e-8)


def relevance_score(cosine: float) -> float:
    """LangChain4j's relevance: the cosine mapped from [-1, 1] to [0, 1]."""
    return (cosine + 1) / 2


@runtime_checkable
class EmbeddingModel(Protocol):
    """Turns texts into embeddings of `dimension` numbers."""

    @property
    def dimension(self) -> int: ...

    def embed_all(self, texts: Sequence[str]) -> list[Embedding]: ...


@runtime_checkable
class AsyncEmbeddingModel(Protocol):
    """`EmbeddingModel` for asyncio."""

    @property
    def dimension(self) -> int: ...

    async def aembed_all(self, texts: Sequence[str]) -> list[Embedding]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddingSearchRequest:
    """The `max_results` stored embeddings nearest `query_embedding` with a relevance score of at
    least `min_score` among those whose segment's metadata passes `filter`. `query` is the text
    the embedding was made from (LangChain4j's `query`): a store that also searches words
    (`FullTextSearch`) then answers with both rankings fused (hybrid search); others ignore it."""

    query_embedding: Embedding
    max_results: int = 3
    min_score: float = 0.0
    filter: Filter | None = None
    query: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.query_embedding, Embedding):
            raise ConfigurationError(
                f"`query_embedding` must be an Embedding, got {self.query_embedding!r}"
            )
        if isinstance(self.max_results, bool) or not isinstance(self.max_results, int):
            raise ConfigurationError(f"`max_results` must be an int, got {self.max_results!r}")
        if self.max_results < 1:
            raise ConfigurationError(f"`max_results` must be at least 1, got {self.max_results}")
        if not isinstance(self.min_score, (int, float)) or not 0 <= self.min_score <= 1:
            raise ConfigurationError(f"`min_score` must be in [0, 1], got {self.min_score!r}")
        if self.filter is not None and not isinstance(self.filter, Filter):
            raise ConfigurationError(f"`filter` must be a Filter, got {self.filter!r}")
        if self.query is not None and not isinstance(self.query, str):
            raise ConfigurationError(f"`query` must be a str (the query text), got {self.query!r}")
        if self.query is not None and not self.query.strip():
            object.__setattr__(self, "query", None)  # no words: a vector search alone


@dataclass(frozen=True, slots=True)
class EmbeddingMatch:
    """One stored embedding a search found, with its relevance `score` (0..1)."""

    score: float
    embedding_id: str
    embedding: Embedding | None
    embedded: TextSegment | None


@dataclass(frozen=True, slots=True)
class EmbeddingSearchResult:
    """The matches of a search, best first."""

    matches: tuple[EmbeddingMatch, ...]


@runtime_checkable
class EmbeddingStore(Protocol):
    """Stores embeddings (with the segment each was made from) and finds the nearest ones."""

    def add(
        self, embedding: Embedding, segment: TextSegment | None = None, *, id: str | None = None
    ) -> str:
        """Store one embedding; returns its id (a new UUID unless `id` is given)."""
        ...

    def add_all(
        self,
        embeddings: Sequence[Embedding],
        segments: Sequence[TextSegment] | None = None,
        *,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        """Store several at once (one transaction where the store has them); their ids."""
        ...

    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult: ...

    def remove(self, id: str) -> None: ...

    def remove_all(self, ids: Sequence[str] = ..., *, filter: Filter = ...) -> None:
        """Remove these ids, or what passes `filter`, or (called with no argument) everything.
        The built-in stores refuse None (a ported ``removeAll(null)`` must not wipe a store)."""
        ...


@runtime_checkable
class MetadataSelect(Protocol):
    """A store that finds entries by their metadata alone, exactly: what recall and
    `forget_user` use to find what to delete (never an approximate nearest-neighbour search)."""

    def select(self, filter: Filter) -> dict[str, TextSegment | None]:
        """Every stored entry whose segment's metadata passes `filter`: its segment, by id."""
        ...


def removal(ids: object, filter: object) -> list[str] | Filter | None:
    """What `EmbeddingStore.remove_all` was asked to remove, checked alike by every store: a
    list of ids, a filter, or None for everything (only when called with no argument)."""
    if isinstance(ids, Filter) and filter is UNSET:
        ids, filter = UNSET, ids  # remove_all(filter) positionally, as LangChain4j's removeAll
    if ids is None or filter is None:
        raise ConfigurationError(
            "remove_all() got None: pass a list of ids or a filter= to remove those, or call "
            "remove_all() with no argument to remove everything"
        )
    if ids is not UNSET and filter is not UNSET:
        raise ConfigurationError("remove_all() takes ids or a filter, not both")
    if filter is not UNSET:
        if not isinstance(filter, Filter):
            raise ConfigurationError(f"`filter` must be a Filter, got {filter!r}")
        return filter
    if ids is UNSET:
        return None
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise ConfigurationError(
            f"remove_all() takes a list of ids, got {ids!r}; use remove(id) for one"
        )
    return [check_id(one, "remove_all()") for one in ids]


def check_filter(filter: object) -> Filter:
    """`filter` if it is a Filter (what `MetadataSelect.select` takes), else a sentence."""
    if not isinstance(filter, Filter):
        raise ConfigurationError(
            f"select() takes a Filter (key('user_id').eq('ann'), ...), got {filter!r}"
        )
    return filter


def check_metadata(segments: Iterable[TextSegment | None], ids: Iterable[object] = ()) -> None:
    """Refuses, alike on every store, metadata holding NaN or an infinity (nested too): JSON
    (pgvector's jsonb column, LangChain4j's file) has no form for them, and NaN never equals
    itself, so it could neither come back equal nor be found by a filter. Refuses as well text,
    metadata and `ids` holding a lone surrogate (text decoded with errors='surrogateescape'):
    no database stores it as UTF-8."""
    segments, ids = list(segments), list(ids)
    if _plain(segments, ids):
        return
    for given in ids:
        if isinstance(given, str) and _unencodable(given):
            raise ConfigurationError(_SURROGATE.format(what="an id", value=given))
    for segment in (s for s in segments if s is not None):
        if _unencodable(segment.text):
            raise ConfigurationError(_SURROGATE.format(what="a segment's text", value=segment.text))
        if _unencodable(segment.metadata):
            raise ConfigurationError(_SURROGATE.format(what="metadata", value=segment.metadata))
    for metadata in (s.metadata for s in segments if s is not None):
        odd = _not_finite(metadata)
        if odd is not None:
            raise ConfigurationError(
                f"metadata numbers must be finite, got {odd!r} in {metadata!r}: no "
                f"store keeps NaN or an infinity (JSON has no form for them); store None or a "
                f"str instead"
            )


def _plain(segments: list[TextSegment | None], ids: list[object]) -> bool:
    """Whether the ids and texts are ASCII and every metadata value is ASCII text, an int, a
    bool, None or a finite float (the usual case, checked a batch at a time at C speed: text
    joined and tested once, the values' types gathered in a set)."""
    if not "".join([i for i in ids if type(i) is str]).isascii():
        return False
    given = [s for s in segments if s is not None]
    if not "".join([s.text for s in given]).isascii():
        return False
    metadata = [s.metadata for s in given]
    if not _FROZEN.issuperset(map(type, metadata)):
        return False  # (TextSegment makes every one a FrozenDict)
    held_dicts = list(map(held, metadata))
    names: list[str] = list(chain.from_iterable(held_dicts))
    values: list[Any] = list(chain.from_iterable(map(dict.values, held_dicts)))
    kinds = set(map(type, values))
    if not kinds <= _PLAIN or not "".join(names).isascii():
        return False
    if str in kinds and not "".join([v for v in values if type(v) is str]).isascii():
        return False
    return float not in kinds or all(map(math.isfinite, [v for v in values if type(v) is float]))


_PLAIN = frozenset({str, int, float, bool, type(None)})
_FROZEN = frozenset({FrozenDict})


_SURROGATE = (
    "{what} must be valid Unicode text, but {value!r} holds a lone surrogate (text decoded "
    "with errors='surrogateescape'?); decode it with errors='replace' or store it otherwise; "
    "nothing was stored"
)


def _unencodable(value: Any) -> bool:
    """Whether a str, or any key or value of a (frozen) metadata value, cannot be UTF-8."""
    if isinstance(value, str):
        if value.isascii():
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, Mapping):
        return any(_unencodable(k) or _unencodable(v) for k, v in value.items())
    if isinstance(value, tuple):
        return any(map(_unencodable, value))
    return False


def _not_finite(value: Any) -> float | None:
    """The first NaN or infinity in a (frozen) metadata value, or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else value
    if isinstance(value, Mapping):
        items: Iterable[Any] = value.values()
    elif isinstance(value, tuple):  # a frozen list
        items = value
    else:
        return None
    return next((odd for odd in map(_not_finite, items) if odd is not None), None)


def check_finite(embeddings: Iterable[Embedding]) -> None:
    """Refuses, alike on every store, an embedding holding NaN or an infinity: no search can
    rank it, and a store could not read it back as a vector."""
    for embedding in embeddings:
        if not np.isfinite(embedding.array).all():
            raise ConfigurationError(NOT_FINITE)


NOT_FINITE = (
    "an embedding holds NaN or an infinity: no search can rank it; check the embedding "
    "model's output (nothing was stored)"
)


def check_id(id: object, doing: str) -> str:
    """`id` if it is an embedding id (a str), else a ConfigurationError naming `doing`."""
    if not isinstance(id, str):
        raise ConfigurationError(f"{doing} takes embedding ids (str), got {id!r}")
    return id


def check_text_search(text: object, max_results: object, filter: object) -> None:
    """The arguments of `FullTextSearch.search_text` every store checks alike."""
    if not isinstance(text, str):
        raise ConfigurationError(f"search_text takes a str, got {text!r}")
    if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
        raise ConfigurationError(f"`max_results` must be an int >= 1, got {max_results!r}")
    if filter is not None and not isinstance(filter, Filter):
        raise ConfigurationError(f"`filter` must be a Filter, got {filter!r}")


class SingleWrites:
    """`add` and `remove` of one embedding, for a store that implements `add_all` and
    `remove_all` (every built-in store)."""

    def add_all(
        self,
        embeddings: Sequence[Embedding],
        segments: Sequence[TextSegment] | None = None,
        *,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        raise NotImplementedError

    def remove_all(
        self, ids: Sequence[str] | Filter | _Unset = UNSET, *, filter: Filter | _Unset = UNSET
    ) -> None:
        raise NotImplementedError

    def add(
        self, embedding: Embedding, segment: TextSegment | None = None, *, id: str | None = None
    ) -> str:
        """Store one embedding; returns its id (a new UUID unless `id` is given)."""
        ids = None if id is None else [id]
        return self.add_all([embedding], None if segment is None else [segment], ids=ids)[0]

    def remove(self, id: str) -> None:
        """Remove the embedding `id` (nothing happens when it is not stored)."""
        self.remove_all([check_id(id, "remove()")])


@runtime_checkable
class FullTextSearch(Protocol):
    """A store that also finds segments by their words (BM25 or the like), for hybrid retrieval.
    Scores are the store's, higher is better; only the order matters to fusion."""

    def search_text(
        self, text: str, *, max_results: int = 3, filter: Filter | None = None
    ) -> list[EmbeddingMatch]: ...
