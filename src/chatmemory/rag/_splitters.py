"""Splitting documents into segments no larger than a size, measured in characters or in tokens
(with a `TokenCountEstimator`, exact for OpenAI models), with an overlap between neighbours.

As LangChain4j's recursive splitters: a paragraph splitter packs whole paragraphs, a paragraph too
large goes to sentences, a sentence too large to words, a word too large to characters. Unlike
them, a segment is always a slice of the document's own text (its whitespace kept), so a segment
can be found again in its source, and the overlap is the longest run of whole words at the end of
the previous segment that fits in `overlap`.

Sentences are found by pysbd's rules (the Golden Rules: "Mrs.", "U.S.", "$3.50", "p.m." end no
sentence), which ship with it: nothing is downloaded. A sentence never crosses a paragraph break,
and a line break inside a paragraph is read as a space (hard-wrapped text and PDF pages break
lines in mid-sentence).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import Any, ClassVar, Protocol, runtime_checkable

from .._errors import ConfigurationError
from .._tokens import TokenCountEstimator
from ._documents import Document, DocumentKey
from ._values import TextSegment

__all__ = ["DocumentSplitter", "ParagraphSplitter", "SentenceSplitter", "WordSplitter"]

_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_WORD = re.compile(r"\s+")
_LINE_BREAKS = str.maketrans(dict.fromkeys("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029", " "))

_WINDOW = 2_000
"""Characters given to pysbd at once: its abbreviation pass rewrites the whole text it is given
for each abbreviation it meets, so a paragraph is read a window at a time (a megabyte at once
would take minutes)."""
_LARGEST_WINDOW = 16_000
"""A window grows (doubles) until it holds two sentence ends; past this, its ends are taken as
found."""

Span = tuple[int, int]
Piece = tuple[Span, tuple[Span, ...]]
Units = Callable[[str, int, int], Iterator[Span]]


@runtime_checkable
class DocumentSplitter(Protocol):
    """Splits a document into segments that inherit its metadata, each with its `index`."""

    def split(self, document: Document) -> list[TextSegment]: ...


class _RecursiveSplitter:
    _level: ClassVar[int]

    def __init__(
        self, max_size: int, overlap: int = 0, *, estimator: TokenCountEstimator | None = None
    ) -> None:
        for name, value in (("max_size", max_size), ("overlap", overlap)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"`{name}` must be an int >= 0, got {value!r}")
        if max_size < 1:
            raise ConfigurationError(f"`max_size` must be at least 1, got {max_size}")
        if overlap >= max_size:
            raise ConfigurationError(
                f"`overlap` ({overlap}) must be smaller than `max_size` ({max_size})"
            )
        if estimator is not None and not isinstance(estimator, TokenCountEstimator):
            raise ConfigurationError(
                f"`estimator` must be a TokenCountEstimator (count_text), got {estimator!r}"
            )
        self.max_size = max_size
        self.overlap = overlap
        self.estimator = estimator

    def __repr__(self) -> str:
        unit = "chars" if self.estimator is None else "tokens"
        return f"{type(self).__name__}({self.max_size} {unit}, overlap={self.overlap})"

    def split(self, document: Document) -> list[TextSegment]:
        if not isinstance(document, Document):
            raise ConfigurationError(f"split() takes a Document, got {document!r}")
        text = document.text
        spans = _Packer(text, self._size_of(text), self.max_size, self.overlap).pack(
            self._pieces(text, self._size_of(text))
        )
        return [
            TextSegment(
                text[a:b], {**document.metadata, DocumentKey.INDEX: index, DocumentKey.START: a}
            )
            for index, (a, b) in enumerate(spans)
        ]

    def _size_of(self, text: str) -> Callable[[int, int], int]:
        if self.estimator is None:
            return lambda a, b: b - a
        count = self.estimator.count_text
        cache: dict[Span, int] = {}

        def size(a: int, b: int) -> int:
            found = cache.get((a, b))
            if found is None:
                found = cache[(a, b)] = count(text[a:b])
            return found

        return size

    def _pieces(self, text: str, size: Callable[[int, int], int]) -> Iterator[Piece]:
        """Spans of whole units, each within `max_size` unless it is one character, with the
        units too large they were cut from: only pieces of the same unit are packed together."""

        def descend(a: int, b: int, level: int, within: tuple[Span, ...]) -> Iterator[Piece]:
            for start, end in _LEVELS[level](text, a, b):
                if size(start, end) <= self.max_size or level == len(_LEVELS) - 1:
                    yield (start, end), within
                else:
                    yield from descend(start, end, level + 1, (*within, (start, end)))

        return descend(0, len(text), self._level, ())


class _Packer:
    """Packs consecutive pieces into the largest spans within `max_size`, each after the first
    starting with the overlap it can afford."""

    def __init__(
        self, text: str, size: Callable[[int, int], int], max_size: int, overlap: int
    ) -> None:
        self.text, self.size, self.max_size, self.overlap = text, size, max_size, overlap

    def pack(self, pieces: Iterator[Piece]) -> list[Span]:
        out: list[Span] = []
        current: Span | None = None
        group: tuple[Span, ...] = ()
        for (start, end), within in pieces:
            if current is None:
                current = (start, end)
            elif within == group and self.size(current[0], end) <= self.max_size:
                current = (current[0], end)
            else:
                out.append(current)
                tail = self._overlap_start(*current)
                fits = tail is not None and self.size(tail, end) <= self.max_size
                current = (tail if fits and tail is not None else start, end)
            group = within
        if current is not None:
            out.append(current)
        return out

    def _overlap_start(self, a: int, b: int) -> int | None:
        """The earliest word start after `a` whose run to `b` fits in `overlap`."""
        if not self.overlap:
            return None
        best = None
        for match in reversed(list(_WORD.finditer(self.text, a, b))):
            start = match.end()
            if start >= b:
                continue
            if self.size(start, b) > self.overlap:
                break
            best = start
        return best


def _spans(text: str, a: int, b: int, separator: re.Pattern[str]) -> Iterator[Span]:
    """The stripped, non-empty spans of text[a:b] between the matches of `separator`."""
    start = a
    for match in separator.finditer(text, a, b):
        yield from _stripped(text, start, match.start())
        start = match.end()
    yield from _stripped(text, start, b)


def _stripped(text: str, a: int, b: int) -> Iterator[Span]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    if a < b:
        yield a, b


def _paragraphs(text: str, a: int, b: int) -> Iterator[Span]:
    return _spans(text, a, b, _PARAGRAPH)


def _sentences(text: str, a: int, b: int) -> Iterator[Span]:
    """The sentences of text[a:b], paragraph by paragraph."""
    for start, end in _paragraphs(text, a, b):
        bounds = [start, *_sentence_starts(text, start, end), end]
        for one, two in pairwise(bounds):
            yield from _stripped(text, one, two)


def _words(text: str, a: int, b: int) -> Iterator[Span]:
    return _spans(text, a, b, _WORD)


def _characters(text: str, a: int, b: int) -> Iterator[Span]:
    return ((i, i + 1) for i in range(a, b) if not text[i].isspace())


_LEVELS: tuple[Units, ...] = (_paragraphs, _sentences, _words, _characters)


def _sentence_starts(text: str, a: int, b: int, language: str = "en") -> Iterator[int]:
    """Where the sentences of the paragraph text[a:b] start (after `a`), read `_WINDOW`
    characters at a time: a window's last sentence may be cut short by its end, so only the
    starts before the last are taken, and the next window starts at the last one taken."""
    start, size = a, _WINDOW
    while True:
        end = _window_end(text, start, b, size)
        found = [x for x in _pysbd_starts(text, start, end, language) if x > start]
        if end == b or size >= _LARGEST_WINDOW:
            yield from found
            if end == b:
                return
            start, size = end, _WINDOW
        elif len(found) < 2:
            size *= 2
        else:
            yield from found[:-1]
            start, size = found[-2], _WINDOW


def _window_end(text: str, start: int, b: int, size: int) -> int:
    """`start + size`, moved back to a space (a window never ends inside a word), or `b`."""
    if start + size >= b:
        return b
    space = max(text.rfind(" ", start, start + size), text.rfind("\n", start, start + size))
    return space if space > start else start + size


def _pysbd_starts(text: str, a: int, b: int, language: str) -> list[int]:
    """Where pysbd's sentences of text[a:b] start. Line breaks are read as spaces (the same
    length: offsets hold). A sentence pysbd gives back changed (it cannot be found where it
    should be) is taken as part of the one before: text is never lost."""
    window = text[a:b].translate(_LINE_BREAKS)
    starts: list[int] = []
    position = 0
    for sentence in _segmenter(language).segment(window):
        stripped = sentence.strip()
        found = window.find(stripped, position) if stripped else -1
        if found >= 0:
            starts.append(a + found)
            position = found + len(stripped)
    return starts


def _segmenter(language: str) -> Any:
    """A pysbd segmenter (one per call: a segmenter keeps the text it segments)."""
    with warnings.catch_warnings():
        # pysbd 0.3.4 has regexes in plain strings ("\s"): compiling them without a cached .pyc
        # warns, which -W error would turn into an import failure
        warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
        import pysbd

    return pysbd.Segmenter(language=language, clean=False)


class ParagraphSplitter(_RecursiveSplitter):
    """Whole paragraphs (separated by a blank line) packed into segments of at most `max_size`
    characters, or tokens with `estimator`; a larger paragraph is split by sentences, then words.
    """

    _level = 0


class SentenceSplitter(_RecursiveSplitter):
    """Whole sentences packed into segments of at most `max_size` (characters, or tokens with
    `estimator`); a larger sentence is split by words."""

    _level = 1


class WordSplitter(_RecursiveSplitter):
    """Whole words packed into segments of at most `max_size` (characters, or tokens with
    `estimator`: a token-count splitter that never cuts a word)."""

    _level = 2
