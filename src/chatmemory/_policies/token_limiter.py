"""`TokenLimiter`: keep the newest messages that fit a token budget (Mastra's, made safe).

Counting follows Mastra's classic `TokenLimiter` (`@mastra/memory` 0.3 to 0.15, the version
tuned against gpt-4o-mini usage), so a limit means the same thing here as there:

* a request starts at 24 tokens (`TOKENS_PER_CONVERSATION`);
* the system message, when given, adds its token count plus 3.8 (`TOKENS_PER_MESSAGE`);
  so does the memory system message, unless it is part of the system message: Mastra counts
  it twice in that case, we count it once (see `process`);
* a message is one string, encoded once: its role name (`system`, `user`, `assistant`,
  `tool`) followed, with no separator, by its text, thinking, each tool call's name and
  arguments, or its tool result's text. The message then adds 3.8, except a pure tool call
  (an AI message with no text or thinking) and a tool result, as in Mastra. A tool call whose
  arguments, or a tool result whose text, is a JSON object or array gets Mastra's JSON
  correction of -12 (Mastra subtracted it for every argument or result it serialised to JSON,
  which is every structured one; our arguments are JSON strings, so the same rule is applied to
  what they hold).

Where it departs from Mastra:

* a message never counts below 0 (Mastra's `weather{"location":"New York"}` tool call counts
  -4, which enlarged the budget);
* text that looks like a special token (`<|endoftext|>`) counts as plain text instead of
  raising;
* a tool call and its results are kept or dropped together, so the output never holds a
  result without its call or a call without its results;
* totals are compared exactly (in tenths of a token), so no float rounding at the boundary;
* media, which Mastra serialised to JSON (base64 included), cost what Mastra's later limiter
  charges: 765 per image; audio, video and PDF data base64_bytes / 4 (258 when given by URL);
* a tool call always counts its name (Mastra skipped calls without arguments).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import ClassVar, Literal, get_args

from .._errors import ConfigurationError
from .._frozen import thaw
from .._messages import (
    MESSAGE_TYPES,
    AiMessage,
    ChatMessage,
    Content,
    CustomMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolExecutionResultMessage,
    UserMessage,
    check_messages,
)
from .._tokens.estimator import TokenCountEstimator, cache_key_of, cached_count
from .._tokens.openai import OpenAiTokenCountEstimator
from .._tokens.tiktoken_offline import SUPPORTED_ENCODINGS
from .processor import optional_str
from .tool_groups import atomic_units, tool_groups, unsendable

__all__ = ["TokenLimiter", "Trim"]

Trim = Literal["contiguous", "best_fit"]

# Internal unit: tenths of a token, so that Mastra's 3.8 stays exact in integer arithmetic.
_PER_MESSAGE = 38
_PER_CONVERSATION = 240
_JSON_CORRECTION = -120
_IMAGE = 7650
_UNSIZED_MEDIA = 2580


class TokenLimiter:
    """Keeps the newest messages whose tokens, with the system prompt and the new input,
    fit `limit`.

    `TokenLimiter(4000)` counts with the exact OpenAI estimator on o200k_base (gpt-4o, gpt-4.1,
    o-series); pass another `TokenCountEstimator` (the one your memory uses, so there is one
    counting system), or an encoding name (`"cl100k_base"` for gpt-4 and gpt-3.5). Its
    `count_text` measures each message's string as Mastra builds it. Messages are walked newest
    to oldest, a tool call and its results as one unit: a unit is kept while the running total
    plus its count stays `<= limit`. With `trim="contiguous"` (Mastra's behaviour) the walk
    stops at the first unit that does not fit, so the result is always a recent stretch of the
    conversation; with `trim="best_fit"` it skips that unit and keeps looking for older ones
    that fit, which fills the budget better but can leave gaps.

    Put it last in a processor list: it measures what earlier processors left.
    """

    TOKENS_PER_MESSAGE: ClassVar[float] = 3.8
    TOKENS_PER_CONVERSATION: ClassVar[int] = 24
    JSON_CORRECTION: ClassVar[int] = -12

    __slots__ = ("_estimator", "_key", "_limit", "_trim")

    def __init__(
        self,
        limit: int,
        estimator: TokenCountEstimator | str = "o200k_base",
        *,
        trim: Trim = "contiguous",
    ) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise ConfigurationError(f"TokenLimiter `limit` must be an int > 0, got {limit!r}")
        if isinstance(estimator, str):
            if estimator not in SUPPORTED_ENCODINGS:
                supported = " or ".join(repr(name) for name in SUPPORTED_ENCODINGS)
                raise ConfigurationError(
                    f"TokenLimiter `estimator` must be a TokenCountEstimator or an encoding name "
                    f"({supported}), got {estimator!r}"
                )
            estimator = OpenAiTokenCountEstimator(encoding=estimator)
        elif not isinstance(estimator, TokenCountEstimator):
            raise ConfigurationError(
                f"TokenLimiter `estimator` must be a TokenCountEstimator or an encoding name, "
                f"got {estimator!r}"
            )
        if trim not in get_args(Trim):
            raise ConfigurationError(
                f"TokenLimiter `trim` must be 'contiguous' or 'best_fit', got {trim!r}"
            )
        self._limit = limit
        self._estimator = estimator
        self._trim: Trim = trim
        self._key = f"chatmemory.TokenLimiter:{_name_of(estimator)}"

    @property
    def limit(self) -> int:
        """The token budget of a whole request."""
        return self._limit

    @property
    def estimator(self) -> TokenCountEstimator:
        """What counts the tokens."""
        return self._estimator

    @property
    def encoding(self) -> str:
        """What is counted with: the tiktoken encoding of an OpenAI estimator."""
        return _name_of(self._estimator)

    @property
    def trim(self) -> Trim:
        """`"contiguous"` (stop at the first unit that does not fit) or `"best_fit"`."""
        return self._trim

    def count_text(self, text: str) -> int:
        """The tokens of `text` alone, with no overhead (Mastra's count of a bare string)."""
        if not isinstance(text, str):
            raise ConfigurationError(f"count_text takes a str, got {type(text).__name__}")
        return self._estimator.count_text(text)

    def count_message(self, message: ChatMessage) -> float:
        """What `message` costs in a request: its tokens plus Mastra's overhead, at least 0.

        Computed once per message instance and encoding, then cached on the message.
        """
        if not isinstance(message, MESSAGE_TYPES):
            raise ConfigurationError(f"cannot count {message!r}: it is not a chat message")
        return self._tenths(message) / 10

    def process(
        self,
        messages: Sequence[ChatMessage],
        *,
        system_message: str | None = None,
        memory_system_message: str | None = None,
        new_messages: Sequence[ChatMessage] = (),
    ) -> list[ChatMessage]:
        """The newest messages of `messages` that fit the budget, in their original order.

        `new_messages` (the current turn) are always sent after the result, so they are
        counted first and never returned; a tool call in `messages` answered by a result in
        `new_messages` is counted and kept with them, since dropping it would leave that
        result without its call. When the new messages and the system prompt already exceed
        the limit, the result is `[]`.

        `system_message` and `memory_system_message` each add their tokens plus 3.8; the
        memory system message is counted only when it is not a substring of the system
        message (the usual case is that the system message was built by appending it, and
        counting it twice, as Mastra does, wastes budget). Empty strings count nothing.
        """
        history = check_messages(messages, "`messages`")
        new = check_messages(new_messages, "`new_messages`")
        budget = self._limit * 10
        total = _PER_CONVERSATION + self._system_tenths(system_message, memory_system_message)
        combined = [*history, *new]
        kept: list[int] = []
        optional: list[tuple[int, ...]] = []
        groups = tool_groups(combined)
        dropped = unsendable(combined, groups)
        for unit in atomic_units(combined, groups):
            if unit[-1] >= len(history):  # holds a new message: it is sent whatever we do
                total += self._unit_tenths(combined, unit)
                kept.extend(unit)
            elif unit[0] not in dropped:
                optional.append(unit)
        if total > budget:
            return []
        for unit in sorted(optional, key=lambda unit: unit[-1], reverse=True):
            cost = self._unit_tenths(combined, unit)
            if total + cost <= budget:
                kept.extend(unit)
                total += cost
            elif self._trim == "contiguous":
                break
        return [combined[index] for index in sorted(kept) if index < len(history)]

    def __repr__(self) -> str:
        return f"TokenLimiter(limit={self._limit}, encoding={self.encoding!r}, trim={self._trim!r})"

    def _system_tenths(self, system: str | None, memory_system: str | None) -> int:
        total = 0
        system = optional_str(system, "system_message")
        memory_system = optional_str(memory_system, "memory_system_message")
        if system:
            total += 10 * self.count_text(system) + _PER_MESSAGE
        if memory_system and not (system and memory_system in system):
            total += 10 * self.count_text(memory_system) + _PER_MESSAGE
        return total

    def _unit_tenths(self, combined: list[ChatMessage], unit: tuple[int, ...]) -> int:
        return sum(self._tenths(combined[index]) for index in unit)

    def _tenths(self, message: ChatMessage) -> int:
        return cached_count(self._key, message, self._count_tenths)

    def _count_tenths(self, message: ChatMessage) -> int:
        text, overhead = _message_string(message)
        return max(0, 10 * self._estimator.count_text(text) + overhead)


def _name_of(estimator: TokenCountEstimator) -> str:
    """The encoding an OpenAI estimator counts with, else what names the estimator."""
    name = getattr(estimator, "encoding_name", None)
    return name if isinstance(name, str) else str(cache_key_of(estimator))


def _message_string(message: ChatMessage) -> tuple[str, int]:
    """The string Mastra encodes for `message`, and its overhead in tenths of a token."""
    if isinstance(message, SystemMessage):
        return "system" + message.text, _PER_MESSAGE
    if isinstance(message, UserMessage):
        text, media = _contents(message.contents)
        return "user" + text, _PER_MESSAGE + media
    if isinstance(message, AiMessage):
        parts = ["assistant", message.thinking or "", message.text or ""]
        overhead = 0
        if message.text or message.thinking or not message.tool_execution_requests:
            overhead = _PER_MESSAGE
        for request in message.tool_execution_requests:
            parts += (request.name, request.arguments)
            if _is_json_structure(request.arguments):
                overhead += _JSON_CORRECTION
        return "".join(parts), overhead
    if isinstance(message, ToolExecutionResultMessage):
        text, media = _contents(message.contents)
        return "tool" + text, media + (_JSON_CORRECTION if _is_json_structure(text) else 0)
    assert isinstance(message, CustomMessage)
    data = json.dumps(thaw(message.attributes), ensure_ascii=False, default=str)
    return "custom" + data, _PER_MESSAGE


def _contents(contents: tuple[Content, ...]) -> tuple[str, int]:
    """The text of `contents` joined, and the flat cost of their media in tenths."""
    texts: list[str] = []
    media = 0
    for content in contents:
        if isinstance(content, TextContent):
            texts.append(content.text)
        elif isinstance(content, ImageContent):
            media += _IMAGE
        elif content.base64_data is not None:
            media += 10 * -(-(len(content.base64_data) * 3 // 4) // 4)
        else:
            media += _UNSIZED_MEDIA
    return "".join(texts), media


def _is_json_structure(text: str) -> bool:
    """True when `text` is a JSON object or array (what Mastra held as an object); JSON nested
    too deeply to parse is counted as text."""
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        return isinstance(json.loads(text), (dict, list))
    except (ValueError, RecursionError):
        return False
