"""`ApproximateTokenCountEstimator`: a fast token estimate that needs no tokenizer.

Each character is classed as ASCII, CJK (Han, kana, hangul, bopomofo, fullwidth forms, CJK
punctuation and symbols) or other non-ASCII, and weighted by how many tokens such a character
costs on average in the target encoding:

================  =====  =====  =====
encoding          ASCII  CJK    other
================  =====  =====  =====
``o200k_base``    0.27   0.80   0.30
``cl100k_base``   0.27   1.10   0.47
================  =====  =====  =====

``tokens(text) = ceil(ascii * w_ascii + cjk * w_cjk + other * w_other)``. The weights come from
least-squares fits on English, code, JSON, Chinese, Japanese, Russian and Korean text
(research/tokenizers-offline.md §6). Whole-corpus error against the real encodings, measured by
`tests/test_tokens_approximate.py` (which also bounds it) on CPython 3.11:

=================================================  ==========  ===========  =======
corpus                                             o200k_base  cl100k_base  chars/4
=================================================  ==========  ===========  =======
English: stdlib docstrings + LICENSE (270k chars)      +17.3 %      +17.8 %     +9 %
Python: stdlib sources (600k chars)                    +17.3 %      +17.8 %     +9 %
JSON from stdlib tables, indent=2 (88k chars)          -18.5 %      -18.2 %    -25 %
the same JSON, ``json.dumps`` default (63k chars)      -24.8 %      -24.4 %    -30 %
Chinese prose (tests/data)                              +4.5 %       -9.6 %    -67 %
Japanese prose (tests/data)                             +0.3 %       +0.8 %    -68 %
Korean prose (tests/data)                              +13.0 %       -5.8 %    -56 %
Russian prose (tests/data)                             +14.2 %       -2.8 %     -3 %
Chinese: CPython test/cjkencodings samples              +5.5 %       -8.0 %    -56 %
Japanese: CPython test/cjkencodings samples             +5.5 %       +3.5 %    -61 %
=================================================  ==========  ===========  =======

So: ASCII prose and code are over-estimated by about a sixth, JSON (many short keys, digits and
punctuation) under-estimated by a fifth to a quarter, CJK within about ±10 %, where ``chars/4``
misses by two thirds. Short texts and unusual content (base64, long digit runs, emoji) deviate
more. Treat the result as an estimate and leave headroom in budgets (for example a 1.3 margin
to avoid overflowing a context window).

Messages are counted with the same formula as `OpenAiTokenCountEstimator` (per-message overhead,
names, tool-call names and arguments, tool results) with estimated text counts, and where the
exact estimator raises, this one estimates instead:

* media, by fixed amounts (class attributes, override in a subclass, and give the subclass its own
  `cache_key`): an image 85 tokens at `DetailLevel.LOW` (OpenAI's low-detail cost) and 765 at any
  other detail level (a 1024x1024 image at high detail), audio 1,000, video 2,000, a PDF 1,500;
* a `CustomMessage`, as the per-message overhead plus its attributes written as compact JSON.
"""

from __future__ import annotations

import json
import re
from typing import ClassVar

from .._errors import ConfigurationError
from .._frozen import thaw
from .._messages import (
    AudioContent,
    ChatMessage,
    Content,
    CustomMessage,
    DetailLevel,
    ImageContent,
    PdfFileContent,
    VideoContent,
)
from ._formula import OpenAiFormula

__all__ = ["ApproximateTokenCountEstimator"]

# Token weights per character class, in hundredths (integer arithmetic: exact ceilings).
_WEIGHTS: dict[str, tuple[int, int, int]] = {
    "o200k_base": (27, 80, 30),
    "cl100k_base": (27, 110, 47),
}

_CJK = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u9fff"  # radicals, CJK symbols and punctuation, kana, bopomofo, compatibility
    # jamo, kanbun, strokes, enclosed CJK, CJK compatibility, ext. A, Han
    "\ua960-\ua97f"  # Hangul Jamo Extended-A
    "\uac00-\ud7ff"  # Hangul syllables, Jamo Extended-B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\ufe30-\ufe4f"  # CJK compatibility forms
    "\uff00-\uffef"  # halfwidth and fullwidth forms
    "\U0001b000-\U0001b16f"  # kana supplement and extensions
    "\U00020000-\U0003ffff"  # Han extensions B-H, compatibility supplement
)
_NOT_CJK = re.compile(f"[^{_CJK}]+")


class ApproximateTokenCountEstimator(OpenAiFormula):
    """Estimates o200k_base or cl100k_base token counts from character classes, with no tokenizer.

    About 10x faster than exact tokenization (far more on pure ASCII) and needs no rank file.
    Whole documents come out within about +18 % (English, code) and -25 % (JSON), CJK within
    about ±10 %: see the module documentation for the measured errors. Never raises on content:
    media and custom messages get estimates.

    `overhead_per_message` and `overhead_per_request` default to the OpenAI chat format's 4 and 3.
    `cache_key` is ``"approx:<encoding>"``, with ``":per_message=<n>"`` appended when the
    per-message overhead is not 4.
    """

    __slots__ = ("_weights", "encoding_name")

    IMAGE_LOW_DETAIL_TOKENS: ClassVar[int] = 85
    IMAGE_TOKENS: ClassVar[int] = 765
    AUDIO_TOKENS: ClassVar[int] = 1000
    VIDEO_TOKENS: ClassVar[int] = 2000
    PDF_TOKENS: ClassVar[int] = 1500

    encoding_name: str

    def __init__(
        self,
        *,
        encoding: str = "o200k_base",
        overhead_per_message: int = 4,
        overhead_per_request: int = 3,
    ) -> None:
        if encoding not in _WEIGHTS:
            raise ConfigurationError(
                f"unknown encoding {encoding!r}; use one of {', '.join(_WEIGHTS)}"
            )
        for value, name in (
            (overhead_per_message, "overhead_per_message"),
            (overhead_per_request, "overhead_per_request"),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be an int >= 0, got {value!r}")
        self.encoding_name = encoding
        self._weights = _WEIGHTS[encoding]
        self._per_message = overhead_per_message
        self._per_ai_message = 0
        self._per_request = overhead_per_request
        suffix = "" if overhead_per_message == 4 else f":per_message={overhead_per_message}"
        self.cache_key = f"approx:{encoding}{suffix}"

    def __repr__(self) -> str:
        return (
            f"ApproximateTokenCountEstimator(encoding={self.encoding_name!r}, "
            f"overhead_per_message={self._per_message}, "
            f"overhead_per_request={self._per_request})"
        )

    def count_text(self, text: str) -> int:
        """Estimated tokens in `text` (0 for the empty string, at least 1 otherwise)."""
        w_ascii, w_cjk, w_other = self._weights
        if text.isascii():
            hundredths = w_ascii * len(text)
        else:
            ascii_chars = len(text.encode("ascii", "ignore"))
            cjk_chars = len(_NOT_CJK.sub("", text))
            other = len(text) - ascii_chars - cjk_chars
            hundredths = w_ascii * ascii_chars + w_cjk * cjk_chars + w_other * other
        return -(-hundredths // 100)

    def _count_media(self, message: ChatMessage, content: Content) -> int:
        if isinstance(content, ImageContent):
            if content.detail_level is DetailLevel.LOW:
                return self.IMAGE_LOW_DETAIL_TOKENS
            return self.IMAGE_TOKENS
        if isinstance(content, AudioContent):
            return self.AUDIO_TOKENS
        if isinstance(content, VideoContent):
            return self.VIDEO_TOKENS
        if isinstance(content, PdfFileContent):
            return self.PDF_TOKENS
        raise ConfigurationError(  # pragma: no cover - messages validate their contents
            f"unknown content {content!r}"
        )

    def _count_custom(self, message: CustomMessage) -> int:
        attributes = json.dumps(thaw(message.attributes), ensure_ascii=False, separators=(",", ":"))
        return self._per_message + self.count_text(attributes)
