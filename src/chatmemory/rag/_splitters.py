"""Splitting documents into segments no larger than a size, measured in characters or in tokens
(with a `TokenCountEstimator`, exact for OpenAI models), with an overlap between neighbours.

As LangChain4j's hierarchical splitters: each splitter cuts a text into units of its kind
(paragraphs, lines, sentences, words, or the parts between a regex's matches) and packs
consecutive units into segments of at most `max_size`; a unit too large goes to its
`sub_splitter`, whose segments stand alone (a paragraph goes to sentences, a sentence to words, a
word to characters, unless told otherwise; `recursive_splitter` is `DocumentSplitters.recursive`).
Unlike them, a segment is always a slice of the document's own text (its whitespace kept), so a
segment can be found again in its source (its offset is `metadata["start"]`), sizes are the exact
size of the slice, and the overlap is the longest run of whole words at the end of the previous
segment that fits in `overlap`.

Sentences are found by pysbd's rules (the Golden Rules: "Mrs.", "U.S.", "$3.50", "p.m." end no
sentence), which ship with it: nothing is downloaded. A sentence never crosses a paragraph break,
and a line break inside a paragraph is read as a space (hard-wrapped text and PDF pages break
lines in mid-sentence).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from itertools import pairwise
from typing import Any, Protocol, overload, runtime_checkable

from .._errors import ConfigurationError
from .._tokens import TokenCountEstimator
from ._documents import Document, DocumentKey
from ._values import TextSegment

__all__ = [
    "DocumentSplitter",
    "LineSplitter",
    "ParagraphSplitter",
    "RegexSplitter",
    "SentenceSplitter",
    "WordSplitter",
    "recursive_splitter",
]

_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_LINE = re.compile(r"[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]+")
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
Cut = Span | str
"""A segment as a splitter makes it: a span of the document, or the text a sub-splitter of the
application's gave that is not found in the document."""
Size = Callable[[int, int], int]


@runtime_checkable
class DocumentSplitter(Protocol):
    """Splits a document into segments that inherit its metadata, each with its `index`."""

    def split(self, document: Document) -> list[TextSegment]: ...


class _Splitter:
    """What the built-in splitters share: the sizes, the packing, the sub-splitter."""

    def __init__(
        self,
        max_size: int,
        overlap: int = 0,
        *,
        estimator: TokenCountEstimator | None = None,
        sub_splitter: DocumentSplitter | None = None,
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
        if sub_splitter is not None and not isinstance(sub_splitter, DocumentSplitter):
            raise ConfigurationError(
                f"`sub_splitter` must have split(document), got {sub_splitter!r}"
            )
        self.max_size = max_size
        self.overlap = overlap
        self.estimator = estimator
        self.sub_splitter = sub_splitter

    def __repr__(self) -> str:
        unit = "chars" if self.estimator is None else "tokens"
        settings = [f"{self.max_size} {unit}", f"overlap={self.overlap}", *self._settings()]
        if self.sub_splitter is not None:
            settings.append(f"sub_splitter={self.sub_splitter!r}")
        return f"{type(self).__name__}({', '.join(settings)})"

    def _settings(self) -> list[str]:
        """What else a splitter of this kind was given, for its repr (which the Ingestor's
        file digests include: other settings, other segments)."""
        return []

    def _units(self, text: str, a: int, b: int) -> Iterator[Span]:
        """The units of text[a:b] this splitter packs, stripped, in order."""
        raise NotImplementedError  # pragma: no cover - each kind has its own

    def _next(self) -> DocumentSplitter | None:
        """The sub-splitter for a unit too large: the one given, else this kind's default."""
        return self.sub_splitter

    @overload
    def split(self, document: Document) -> list[TextSegment]: ...

    @overload
    def split(self, document: str) -> list[str]: ...

    def split(self, document: Document | str) -> list[TextSegment] | list[str]:
        """The segments of `document`, each with its metadata, its `index` and its `start`.
        Given a str, its units instead (paragraphs, lines, sentences, words, or the regex's
        parts), whatever their size: LangChain4j's ``split(String)``."""
        if isinstance(document, str):
            return [document[a:b] for a, b in self._units(document, 0, len(document))]
        if not isinstance(document, Document):
            raise ConfigurationError(
                f"split() takes a Document, or a str for its units, got {document!r}"
            )
        text, metadata = document.text, document.metadata
        segments = []
        for index, cut in enumerate(self._cut(text, 0, len(text), None)):
            if isinstance(cut, str):
                segments.append(TextSegment(cut, {**metadata, DocumentKey.INDEX: index}))
                continue
            a, b = cut
            place = {DocumentKey.INDEX: index, DocumentKey.START: a}
            segments.append(TextSegment(text[a:b], {**metadata, **place}))
        return segments

    def split_all(self, documents: Iterable[Document]) -> list[TextSegment]:
        """The segments of each document in turn (each indexed from 0)."""
        if isinstance(documents, (str, Document)):
            raise ConfigurationError(
                f"split_all() takes Documents (a list of them), got {documents!r}"
            )
        return [segment for document in documents for segment in self.split(document)]

    def _cut(self, text: str, a: int, b: int, lead: int | None) -> list[Cut]:
        """The segments of text[a:b]: whole units packed up to `max_size`, a unit too large cut
        by the sub-splitter. The first segment starts at `lead` (the overlap of the segment
        before, in the text given to a sub-splitter) when that fits."""
        size = self._size_of(text)
        out: list[Cut] = []
        current: Span | None = None
        for start, end in self._units(text, a, b):
            if current is not None:
                if size(current[0], end) <= self.max_size:
                    current = (current[0], end)
                    continue
                out.append(current)
                lead = self._overlap_start(text, size, current)
                current = None
            if size(start, end) <= self.max_size:
                fits = lead is not None and size(lead, end) <= self.max_size
                current = (lead if fits and lead is not None else start, end)
                continue
            cuts = self._cut_further(text, start, end, lead)
            out.extend(cuts)
            last = cuts[-1]
            lead = None if isinstance(last, str) else self._overlap_start(text, size, last)
        if current is not None:
            out.append(current)
        return out

    def _cut_further(self, text: str, a: int, b: int, lead: int | None) -> list[Cut]:
        """The segments the sub-splitter makes of a unit too large, text[a:b]."""
        sub = self._next()
        if sub is None:
            raise ConfigurationError(
                f"the text {_excerpt(text[a:b])} ({self._size_text(text, a, b)} long) does not "
                f"fit in a segment ({self.max_size} {self._unit()}) and {self!r} has no "
                f"sub_splitter to split it further: pass "
                f"sub_splitter=WordSplitter({self.max_size}), for one"
            )
        if isinstance(sub, _Splitter):
            cuts = sub._cut(text, a, b, lead)
        else:
            cuts = _found(text, a, b, sub.split(Document(text[a:b])))
        if not cuts:
            raise ConfigurationError(
                f"the sub_splitter {type(sub).__name__} returned no segments for the text "
                f"{_excerpt(text[a:b])} ({self._size_text(text, a, b)} long), so it cannot be "
                f"split further"
            )
        return cuts

    def _unit(self) -> str:
        return "characters" if self.estimator is None else "tokens"

    def _size_text(self, text: str, a: int, b: int) -> str:
        return f"{self._size_of(text)(a, b)} {self._unit()}"

    def _size_of(self, text: str) -> Size:
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

    def _overlap_start(self, text: str, size: Size, segment: Span) -> int | None:
        """The earliest word start in `segment` whose run to its end fits in `overlap`."""
        if not self.overlap:
            return None
        a, b = segment
        best = None
        for match in reversed(list(_WORD.finditer(text, a, b))):
            start = match.end()
            if size(start, b) > self.overlap:
                break
            best = start
        return best


def _found(text: str, a: int, b: int, segments: list[TextSegment]) -> list[Cut]:
    """The segments a sub-splitter of the application's made of text[a:b], as spans where
    their text is found there in order, else as their text; blank ones are left out."""
    cuts: list[Cut] = []
    position = a
    for segment in segments:
        if not segment.text.strip():
            continue
        found = text.find(segment.text, position, b)
        if found < 0:
            cuts.append(segment.text)
            continue
        cuts.append((found, found + len(segment.text)))
        position = found + 1  # the next one may overlap this one
    return cuts


def _excerpt(text: str) -> str:
    return repr(text if len(text) <= 30 else text[:30] + "…")


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
    return _pysbd().Segmenter(language=language, clean=False)


def _pysbd() -> Any:
    """pysbd, imported on first use (60 ms)."""
    with warnings.catch_warnings():
        # pysbd 0.3.4 has regexes in plain strings ("\\s"): compiling them without a cached .pyc
        # warns, which -W error would turn into an import failure
        warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
        import pysbd

    return pysbd


class _BySeparator(_Splitter):
    """Units between matches of `_separator`; a unit too large goes to `sub_splitter`
    (default: sentences, then words)."""

    _separator: re.Pattern[str]

    def _units(self, text: str, a: int, b: int) -> Iterator[Span]:
        return _spans(text, a, b, self._separator)

    def _next(self) -> DocumentSplitter:
        return self.sub_splitter or SentenceSplitter(
            self.max_size, self.overlap, estimator=self.estimator
        )


class ParagraphSplitter(_BySeparator):
    """Whole paragraphs (separated by a blank line) packed into segments of at most `max_size`
    characters, or tokens with `estimator`; a larger paragraph goes to `sub_splitter`
    (default: sentences, then words)."""

    _separator = _PARAGRAPH


class LineSplitter(_BySeparator):
    """Whole lines packed into segments of at most `max_size` (characters, or tokens with
    `estimator`); a larger line goes to `sub_splitter` (default: sentences, then words)."""

    _separator = _LINE


class SentenceSplitter(_Splitter):
    """Whole sentences packed into segments of at most `max_size` (characters, or tokens with
    `estimator`); a larger sentence goes to `sub_splitter` (default: words). `language` is
    pysbd's code for the rules to follow ("en", "de", "fr", "es", "it", "nl", "ru", "zh", "ja",
    and more)."""

    def __init__(
        self,
        max_size: int,
        overlap: int = 0,
        *,
        estimator: TokenCountEstimator | None = None,
        sub_splitter: DocumentSplitter | None = None,
        language: str = "en",
    ) -> None:
        super().__init__(max_size, overlap, estimator=estimator, sub_splitter=sub_splitter)
        known = _languages()
        if language not in known:
            raise ConfigurationError(
                f"`language` must be one pysbd knows ({', '.join(sorted(known))}), got {language!r}"
            )
        self.language = language

    def _settings(self) -> list[str]:
        return [] if self.language == "en" else [f"language={self.language!r}"]

    def _units(self, text: str, a: int, b: int) -> Iterator[Span]:
        for start, end in _spans(text, a, b, _PARAGRAPH):  # no sentence crosses a paragraph
            bounds = [start, *_sentence_starts(text, start, end, self.language), end]
            for one, two in pairwise(bounds):
                yield from _stripped(text, one, two)

    def _next(self) -> DocumentSplitter:
        return self.sub_splitter or WordSplitter(
            self.max_size, self.overlap, estimator=self.estimator
        )


class WordSplitter(_Splitter):
    """Whole words packed into segments of at most `max_size` (characters, or tokens with
    `estimator`: a token-count splitter that never cuts a word); a larger word goes to
    `sub_splitter` (default: characters)."""

    def _units(self, text: str, a: int, b: int) -> Iterator[Span]:
        return _spans(text, a, b, _WORD)

    def _next(self) -> DocumentSplitter:
        return self.sub_splitter or _CharacterSplitter(
            self.max_size, self.overlap, estimator=self.estimator
        )


class _CharacterSplitter(_Splitter):
    """Characters packed into segments (what a word too large is cut into); a character is
    never cut, even when it alone counts more tokens than `max_size`."""

    def _units(self, text: str, a: int, b: int) -> Iterator[Span]:
        return ((i, i + 1) for i in range(a, b) if not text[i].isspace())

    def _cut_further(self, text: str, a: int, b: int, lead: int | None) -> list[Cut]:
        return [(a, b)]


class RegexSplitter(_Splitter):
    """The parts of the text between the matches of `pattern` (a str or a compiled pattern; a
    match may be empty, such as ``(?m)^(?=# )`` to cut before each Markdown heading), packed
    into segments of at most `max_size` (characters, or tokens with `estimator`). A part too
    large goes to `sub_splitter`; without one, it is an error (as LangChain4j's
    DocumentByRegexSplitter)."""

    def __init__(
        self,
        pattern: str | re.Pattern[str],
        max_size: int,
        overlap: int = 0,
        *,
        estimator: TokenCountEstimator | None = None,
        sub_splitter: DocumentSplitter | None = None,
    ) -> None:
        super().__init__(max_size, overlap, estimator=estimator, sub_splitter=sub_splitter)
        self.pattern = _compiled(pattern)
        self._given_as_str = isinstance(pattern, str)

    def __repr__(self) -> str:
        shown = self.pattern.pattern if self._given_as_str else self.pattern
        return f"RegexSplitter({shown!r}, {super().__repr__().partition('(')[2]}"

    def _units(self, text: str, a: int, b: int) -> Iterator[Span]:
        return _spans(text, a, b, self.pattern)


def recursive_splitter(
    max_size: int, overlap: int = 0, *, estimator: TokenCountEstimator | None = None
) -> ParagraphSplitter:
    """LangChain4j's `DocumentSplitters.recursive`: paragraphs packed into segments of at most
    `max_size` (characters, or tokens with `estimator`); a paragraph too large is split by
    lines, a line by sentences, a sentence by words, a word by characters."""
    sizes: dict[str, Any] = {"max_size": max_size, "overlap": overlap, "estimator": estimator}
    words = WordSplitter(**sizes)
    lines = LineSplitter(**sizes, sub_splitter=SentenceSplitter(**sizes, sub_splitter=words))
    return ParagraphSplitter(**sizes, sub_splitter=lines)


def _compiled(pattern: object) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern) and isinstance(pattern.pattern, str):
        compiled = pattern
    elif isinstance(pattern, str):
        try:
            compiled = re.compile(pattern)
        except re.error as error:
            raise ConfigurationError(
                f"`pattern` is not a regular expression ({error}): {pattern!r}"
            ) from None
    else:
        raise ConfigurationError(
            f"`pattern` must be a str or a compiled re.Pattern, got {pattern!r}"
        )
    if compiled.fullmatch(""):
        raise ConfigurationError(
            f"`pattern` {compiled.pattern!r} matches the empty text: it would cut between every "
            f"two characters; match the separator itself (a lookahead such as (?=#) is fine)"
        )
    return compiled


def _languages() -> frozenset[str]:
    """The languages pysbd has rules for (ISO 639-1 codes)."""
    return frozenset(_pysbd().languages.LANGUAGE_CODES)
