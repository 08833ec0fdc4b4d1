"""The OpenAI chat-request token formula (LangChain4j's), shared by both built-in estimators.

`OpenAiFormula` walks a message and adds up the parts OpenAI bills: texts, user names, tool-call
names and arguments, tool results, plus fixed per-message and per-call overheads. Subclasses say
how a text is counted (exactly, or by an estimate) and what media and custom messages cost.

Per message: `per_message` (4 = 3 per message + 1 for the role), plus

* system: count(text);
* user: count of every text content, media via `_count_media`; a `name` adds 1 + count(name);
* AI: count(text) when not None (`thinking` is not counted); with one tool call
  5 + 2 * count(name) + count(arguments); with two or more, 21 and then per call
  7 + count(name) + (unless the arguments are blank: per top-level JSON entry
  2 + count(key) + count(`java_string(value)`), or count(arguments) when they are not a JSON
  object); `per_ai_message` more for every AI message (2 for o4 models);
* tool result: count of its text contents, media via `_count_media` (id and tool name are free);
* `CustomMessage`: `_count_custom`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, NoReturn

from .._errors import ConfigurationError
from .._messages import (
    MESSAGE_TYPES,
    AiMessage,
    ChatMessage,
    Content,
    CustomMessage,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    memo,
)
from .estimator import cached_count

__all__ = ["OpenAiFormula", "java_string", "parse_json_object"]

PER_NAME = 1
ONE_CALL = 5
MANY_CALLS = 21
PER_CALL = 7
PER_ARGUMENT = 2


class OpenAiFormula:
    """Base of the built-in estimators: the message walk, the per-message cache, the request sum.

    Subclasses set `cache_key`, `_per_message`, `_per_ai_message` and `_per_request`, and
    define `count_text`, `_count_media` and `_count_custom`.
    """

    __slots__ = ("_per_ai_message", "_per_message", "_per_request", "cache_key")

    cache_key: str
    _per_message: int
    _per_ai_message: int
    _per_request: int

    def count_text(self, text: str) -> int:  # pragma: no cover - always overridden
        raise NotImplementedError

    def _count_media(self, message: ChatMessage, content: Content) -> int:  # pragma: no cover
        raise NotImplementedError

    def _count_custom(self, message: CustomMessage) -> int:  # pragma: no cover
        raise NotImplementedError

    def count_message(self, message: ChatMessage) -> int:
        """Tokens `message` adds to a request (computed once per message instance)."""
        try:
            return cached_count(self.cache_key, message, self._count)
        except (AttributeError, TypeError):
            if not isinstance(message, MESSAGE_TYPES):
                _not_a_message(message)
            raise  # pragma: no cover - a bug, not a usage error

    def count_messages(self, messages: Iterable[ChatMessage]) -> int:
        """Tokens of a whole request made of `messages`: the fixed overhead plus each message."""
        total = self._per_request
        key = self.cache_key
        for message in messages:
            # The cache hit inlined: re-counting a window is a dictionary look-up per message.
            try:
                total += memo(message)[key]
            except (KeyError, AttributeError, TypeError):
                total += self.count_message(message)
        return total

    def _count(self, message: ChatMessage) -> int:
        count_text = self.count_text
        if isinstance(message, UserMessage):
            tokens = self._per_message + self._count_contents(message, message.contents)
            if message.name is not None:
                tokens += PER_NAME + count_text(message.name)
            return tokens
        if isinstance(message, AiMessage):
            tokens = self._per_message + self._per_ai_message
            if message.text is not None:
                tokens += count_text(message.text)
            if message.tool_execution_requests:
                tokens += self._count_tool_calls(message.tool_execution_requests)
            return tokens
        if isinstance(message, ToolExecutionResultMessage):
            return self._per_message + self._count_contents(message, message.contents)
        if isinstance(message, SystemMessage):
            return self._per_message + count_text(message.text)
        if isinstance(message, CustomMessage):
            return self._count_custom(message)
        _not_a_message(message)

    def _count_contents(self, message: ChatMessage, contents: tuple[Content, ...]) -> int:
        tokens = 0
        for content in contents:
            if isinstance(content, TextContent):
                tokens += self.count_text(content.text)
            else:
                tokens += self._count_media(message, content)
        return tokens

    def _count_tool_calls(self, calls: tuple[ToolExecutionRequest, ...]) -> int:
        count_text = self.count_text
        if len(calls) == 1:
            (call,) = calls
            return ONE_CALL + 2 * count_text(call.name) + count_text(call.arguments)
        tokens = MANY_CALLS
        for call in calls:
            tokens += PER_CALL + count_text(call.name)
            if call.arguments.strip():
                tokens += self._count_arguments(call.arguments)
        return tokens

    def _count_arguments(self, arguments: str) -> int:
        """Per top-level entry 2 + count(key) + count(value as Java prints it).

        Arguments that are not a JSON object (invalid JSON, nested too deeply, an array, a
        number...) count as their raw text: LangChain4j throws there, a memory should rather keep
        working.
        """
        parsed = parse_json_object(arguments)
        if parsed is None:
            return self.count_text(arguments)
        count_text = self.count_text
        return sum(
            PER_ARGUMENT + count_text(key) + count_text(java_string(value))
            for key, value in parsed.items()
        )


def _not_a_message(message: object) -> NoReturn:
    raise ConfigurationError(
        f"expected a chat message (SystemMessage, UserMessage, AiMessage, "
        f"ToolExecutionResultMessage, CustomMessage), got {type(message).__name__}: {message!r}"
    )


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def parse_json_object(text: str) -> dict[str, Any] | None:
    """`text` parsed as a JSON object the way Jackson reads it into a `Map`, or None.

    Strict JSON: NaN/Infinity, JSON nested too deeply to parse and non-objects give None.
    Duplicate keys keep the first key's position and the last value, like Jackson's
    LinkedHashMap.
    """
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):  # JSONDecodeError, NaN/Infinity, too long, too deep
        return None
    return value if isinstance(value, dict) else None


def java_string(value: Any) -> str:
    """`String.valueOf` of a JSON value as Jackson parses it into Java objects.

    Jackson reads objects as `LinkedHashMap`, arrays as `ArrayList`, integers as
    Integer/Long/BigInteger and other numbers as `Double`, so:

    * strings print raw (no quotes), also inside containers: ``{"a": "x"}`` -> ``{a=x}``;
    * null -> ``null``, booleans -> ``true``/``false``, integers -> their digits;
    * numbers with a fraction or exponent follow `Double.toString` of JDK 19+: the shortest digits
      that round trip, plain for magnitudes in [1e-3, 1e7) with at least one fractional digit
      (``2.0``, ``0.001``, ``1234567.5``), else computerized scientific notation (``1.0E7``,
      ``1.5E-4``); a literal too large for a double (``1e999``) is ``Infinity``;
    * arrays -> ``[a, b]``, objects -> ``{k=v, k2=v2}`` (`AbstractCollection`/`AbstractMap`).
    """
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(java_string, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={java_string(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"not a JSON value: {value!r}")


_TENTH = Decimal("0.1")


def _java_double(value: float) -> str:
    """`Double.toString(value)` as JDK 19+ prints it (shortest digits that round trip)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    significant, point = _decimal_digits(repr(magnitude))
    if len(significant) == 1:
        # When one digit suffices Java also considers two-digit decimals and picks the closest
        # to the exact binary value: Double.MIN_VALUE prints as 4.9E-324, not 5.0E-324.
        exact = Decimal(magnitude)
        two = exact.scaleb(-exact.adjusted()).quantize(_TENTH, ROUND_HALF_EVEN)
        candidate = two.scaleb(exact.adjusted())
        shortest = Decimal(f"0.{significant}").scaleb(point)
        if float(candidate) == magnitude and abs(candidate - exact) < abs(shortest - exact):
            significant, point = _decimal_digits(str(candidate))
    if 1e-3 <= magnitude < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{significant}"
        whole = significant[:point].ljust(point, "0")
        return f"{sign}{whole}.{significant[point:] or '0'}"
    return f"{sign}{significant[0]}.{significant[1:] or '0'}E{point - 1}"


def _decimal_digits(text: str) -> tuple[str, int]:
    """("d1d2...", p) such that text == 0.d1d2... * 10**p, without leading or trailing zeros."""
    mantissa, _, exponent = text.lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + int(exponent or 0)
    significant = digits.lstrip("0")
    point -= len(digits) - len(significant)
    return significant.rstrip("0"), point
