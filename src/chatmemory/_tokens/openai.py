"""`OpenAiTokenCountEstimator`: exact, offline token counts of OpenAI chat requests.

The counting rules are LangChain4j's `OpenAiTokenCountEstimator` (langchain4j-open-ai), whose
overheads were fitted against the usage OpenAI reports, so a chatmemory token budget means what
it means there:

* each message costs 4 (3 per message + 1 for the role), plus
  - system: tokens(text);
  - user: tokens of every text content; a `name` adds 1 + tokens(name); an image, audio, video or
    PDF content raises `ConfigurationError` (this estimator counts text only);
  - AI: tokens(text) when there is a text (`thinking` is not counted); with one tool call
    5 + 2 * tokens(name) + tokens(arguments); with two or more, 21 and then per call
    7 + tokens(name) + (per top-level argument 2 + tokens(key) + tokens(value as Java prints it,
    see `java_string`)); models whose name starts with "o4" add 2 to every AI message;
  - tool result: tokens of its text contents (its id and tool name are not counted);
  - `CustomMessage`: `ConfigurationError` (it is not an OpenAI message);
* a request costs 3 (the reply is primed with the assistant role) plus its messages, minus 1 for
  models whose name starts with "o".

Where LangChain4j throws on tool-call arguments that are not a JSON object, this estimator counts
their raw text instead. Text is encoded with `encode_ordinary`: special-token text such as
``<|endoftext|>`` counts as the plain text it is and never raises. Per-message counts are cached
on the message itself (messages are immutable), so counting a window again costs a dictionary
look-up per message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from .._errors import ConfigurationError
from .._messages import ChatMessage, Content, CustomMessage
from ._formula import OpenAiFormula
from .tiktoken_offline import SUPPORTED_ENCODINGS, encoding_name_for_model, get_encoding

__all__ = ["OpenAiTokenCountEstimator"]

_PER_MESSAGE = 4  # 3 per message + 1 for the role
_PER_REQUEST = 3  # every reply is primed with <|start|>assistant<|message|>
_O4_PER_AI_MESSAGE = 2


class OpenAiTokenCountEstimator(OpenAiFormula):
    """Counts tokens exactly as LangChain4j's OpenAI estimator does, with no network.

    `OpenAiTokenCountEstimator()` counts for gpt-4o-mini (o200k_base). `model` picks the encoding
    (see `encoding_name_for_model`; an unknown model raises `ConfigurationError`) and the o-series
    rules. Pass `encoding="o200k_base"` or `"cl100k_base"` to choose the encoding yourself, for
    example for a model chatmemory does not know; `model` then only decides the o-series rules.

    The encoding is loaded once per process and shared by all instances; instances are
    thread-safe. `cache_key` (``"openai:<encoding>:<model>"``) names what is counted: per-message
    counts are cached on each message under it.
    """

    __slots__ = ("_encode", "encoding_name", "model")

    model: str
    encoding_name: str

    def __init__(self, model: str = "gpt-4o-mini", *, encoding: str | None = None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"model must be a non-empty string, got {model!r}")
        if encoding is None:
            encoding = encoding_name_for_model(model)
        elif encoding not in SUPPORTED_ENCODINGS:
            raise ConfigurationError(
                f"unknown encoding {encoding!r}; use one of {', '.join(SUPPORTED_ENCODINGS)}"
            )
        self.model = model
        self.encoding_name = encoding
        self.cache_key = f"openai:{encoding}:{model}"
        self._encode: Callable[[str], list[int]] = get_encoding(encoding).encode_ordinary
        normalized = model.strip().lower()
        self._per_message = _PER_MESSAGE
        self._per_ai_message = _O4_PER_AI_MESSAGE if normalized.startswith("o4") else 0
        self._per_request = _PER_REQUEST - 1 if normalized.startswith("o") else _PER_REQUEST

    def __repr__(self) -> str:
        return f"OpenAiTokenCountEstimator({self.model!r}, encoding={self.encoding_name!r})"

    def count_text(self, text: str) -> int:
        """Tokens in `text`; special-token text counts as plain text."""
        return len(self._encode(text))

    def _count_media(self, message: ChatMessage, content: Content) -> NoReturn:
        raise ConfigurationError(
            f"OpenAiTokenCountEstimator counts text only, and this {type(message).__name__} "
            f"holds a {type(content).__name__}: images, audio, video and PDFs cannot be counted "
            f"by this estimator (their cost depends on the model and the media); use "
            f"ApproximateTokenCountEstimator, which uses fixed estimates for media"
        )

    def _count_custom(self, message: CustomMessage) -> NoReturn:
        raise ConfigurationError(
            "OpenAiTokenCountEstimator cannot count a CustomMessage: it is application data, "
            "not an OpenAI chat message; keep custom messages out of token-counted memories or "
            "use ApproximateTokenCountEstimator, which counts their attributes as JSON"
        )
