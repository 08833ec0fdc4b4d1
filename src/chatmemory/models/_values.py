"""What goes into a chat model and what comes out: immutable request and response values.

Frozen, keyword-only dataclasses, like the messages they carry: no validation library at run
time (pydantic is not a core dependency), hashable, cheap to build on every turn of a tool loop,
and checked on construction with errors that name the field.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Literal, TypeAlias

from .._errors import ConfigurationError
from .._frozen import FrozenDict
from .._messages import AiMessage, ChatMessage, check_messages

__all__ = [
    "ChatParameters",
    "ChatRequest",
    "ChatResponse",
    "FinishReason",
    "ResponseFormat",
    "TokenUsage",
    "ToolChoice",
    "ToolSpecification",
]

ToolChoice: TypeAlias = Literal["auto", "required", "none"] | str
"""Whether the model may call tools (`auto`), must call one (`required`), must not (`none`), or
must call the tool of that name (any other text: one of the request's tools)."""

TOOL_CHOICES = ("auto", "required", "none")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpecification:
    """A tool the model may call: its name, what it does, and its arguments as a JSON schema.

    `parameters` is the JSON schema of the arguments object (an empty object schema by default);
    `strict=True` asks providers that support it to follow the schema exactly. `metadata` is
    the application's (LangChain4j's tool metadata: a team, a cost, a risk level), read by its
    own code (providers, listeners, guardrails) and never sent to the model.
    """

    name: str
    description: str | None = None
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: FrozenDict({"type": "object", "properties": {}})
    )
    strict: bool | None = None
    metadata: Mapping[str, Any] = field(default_factory=FrozenDict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigurationError(
                f"`ToolSpecification.name` must be a non-empty str, got {self.name!r}"
            )
        if self.description is not None and not isinstance(self.description, str):
            raise ConfigurationError(
                f"`ToolSpecification.description` must be a str or None, got {self.description!r}"
            )
        object.__setattr__(
            self, "parameters", _schema(self.parameters, "ToolSpecification.parameters")
        )
        _optional_bool(self.strict, "ToolSpecification.strict")
        object.__setattr__(self, "metadata", _schema(self.metadata, "ToolSpecification.metadata"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseFormat:
    """The form the answer must take: plain text, any JSON object, or JSON following a schema.

    Build one with `ResponseFormat.TEXT`, `ResponseFormat.JSON` or
    `ResponseFormat.json_schema(schema, name=..., strict=...)`.
    """

    type: Literal["text", "json"]
    schema: Mapping[str, Any] | None = None
    name: str | None = None
    strict: bool | None = None

    TEXT: ClassVar[ResponseFormat]
    """Plain text, the default."""
    JSON: ClassVar[ResponseFormat]
    """Any JSON object ("JSON mode"), without a schema."""

    def __post_init__(self) -> None:
        if self.type not in ("text", "json"):
            raise ConfigurationError(
                f"`ResponseFormat.type` must be 'text' or 'json', got {self.type!r}"
            )
        if self.schema is None:
            if self.name is not None or self.strict is not None:
                raise ConfigurationError("`ResponseFormat.name` and `strict` go with a `schema`")
            return
        if self.type != "json":
            raise ConfigurationError("a `ResponseFormat` with a schema has type 'json'")
        object.__setattr__(self, "schema", _schema(self.schema, "ResponseFormat.schema"))
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise ConfigurationError(
                f"`ResponseFormat.name` must be a non-empty str, got {self.name!r}"
            )
        _optional_bool(self.strict, "ResponseFormat.strict")

    @classmethod
    def json_schema(
        cls, schema: Mapping[str, Any], *, name: str = "response", strict: bool | None = True
    ) -> ResponseFormat:
        """JSON following `schema`; `name` labels it for providers that want one (OpenAI)."""
        return cls(type="json", schema=schema, name=name, strict=strict)


ResponseFormat.TEXT = ResponseFormat(type="text")
ResponseFormat.JSON = ResponseFormat(type="json")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatParameters:
    """How to generate: which model, sampling, limits. None means "not set here".

    A model holds default parameters; a request's parameters override them field by field
    (`defaults.merged(overrides)`), the way LangChain4j's `ChatRequestParameters` do.
    `extra_body` is sent as is, merged into the provider's request body, for options chatmemory
    does not name (e.g. `{"reasoning_effort": "low"}` for OpenAI, `{"thinking": {...}}` for
    Anthropic).
    """

    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_output_tokens: int | None = None
    stop: Sequence[str] | None = None
    seed: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.model is not None and (not isinstance(self.model, str) or not self.model):
            raise ConfigurationError(f"`model` must be a non-empty str, got {self.model!r}")
        for name in ("temperature", "top_p", "frequency_penalty", "presence_penalty"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float))
            ):
                raise ConfigurationError(f"`{name}` must be a number, got {value!r}")
        for name in ("top_k", "max_output_tokens", "seed"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigurationError(f"`{name}` must be an int, got {value!r}")
        if self.max_output_tokens is not None and self.max_output_tokens < 1:
            raise ConfigurationError(
                f"`max_output_tokens` must be at least 1, got {self.max_output_tokens!r}"
            )
        if self.stop is not None:
            stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
            if not all(isinstance(s, str) for s in stop):
                raise ConfigurationError(f"`stop` must be a list of str, got {self.stop!r}")
            object.__setattr__(self, "stop", stop)
        if self.extra_body is not None:
            object.__setattr__(self, "extra_body", _schema(self.extra_body, "extra_body"))

    def merged(self, overrides: ChatParameters | None) -> ChatParameters:
        """These parameters with every field `overrides` sets replacing ours (`extra_body`
        dictionaries are merged, the override's keys winning)."""
        if overrides is None:
            return self
        changes: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(overrides, f.name)
            if value is not None:
                changes[f.name] = value
        if self.extra_body is not None and overrides.extra_body is not None:
            changes["extra_body"] = {**self.extra_body, **overrides.extra_body}
        return replace(self, **changes) if changes else self


@dataclass(frozen=True, slots=True, init=False)
class ChatRequest:
    """One call to a chat model: the messages, the tools it may call, the answer's format and
    the parameters that override the model's defaults.

    ``ChatRequest([SystemMessage("Be terse."), UserMessage("Hi")], tools=[weather])``
    """

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpecification, ...]
    tool_choice: ToolChoice | None
    response_format: ResponseFormat | None
    parameters: ChatParameters | None

    def __init__(
        self,
        messages: Iterable[ChatMessage],
        *,
        tools: Iterable[ToolSpecification] = (),
        tool_choice: ToolChoice | None = None,
        response_format: ResponseFormat | None = None,
        parameters: ChatParameters | None = None,
    ) -> None:
        checked = tuple(check_messages(messages, "ChatRequest(messages=...)"))
        if not checked:
            raise ConfigurationError("a ChatRequest needs at least one message")
        specs = tuple(tools)
        names: set[str] = set()
        for spec in specs:
            if not isinstance(spec, ToolSpecification):
                raise ConfigurationError(f"`tools` holds ToolSpecification values, got {spec!r}")
            if spec.name in names:
                raise ConfigurationError(
                    f"two tools are named {spec.name!r}; tool names must differ"
                )
            names.add(spec.name)
        check_tool_choice(tool_choice)
        if tool_choice == "required" and not specs:
            raise ConfigurationError("`tool_choice='required'` needs at least one tool")
        if tool_choice is not None and tool_choice not in TOOL_CHOICES and tool_choice not in names:
            raise ConfigurationError(
                f"`tool_choice={tool_choice!r}` names no tool of the request (its tools: "
                f"{', '.join(sorted(names)) or 'none'}); name one, or use 'auto', 'required' "
                f"or 'none'"
            )
        if response_format is not None and not isinstance(response_format, ResponseFormat):
            raise ConfigurationError(
                f"`response_format` must be a ResponseFormat, got {response_format!r}"
            )
        if parameters is not None and not isinstance(parameters, ChatParameters):
            raise ConfigurationError(f"`parameters` must be ChatParameters, got {parameters!r}")
        object.__setattr__(self, "messages", checked)
        object.__setattr__(self, "tools", specs)
        object.__setattr__(self, "tool_choice", tool_choice)
        object.__setattr__(self, "response_format", response_format)
        object.__setattr__(self, "parameters", parameters)


def check_tool_choice(tool_choice: object) -> None:
    """`ConfigurationError` unless `tool_choice` is None, a keyword or a tool's name."""
    if tool_choice is None or tool_choice in TOOL_CHOICES:
        return
    if not isinstance(tool_choice, str) or not re.fullmatch(r"[\w-]{1,64}", tool_choice):
        raise ConfigurationError(
            f"`tool_choice` must be 'auto', 'required', 'none', a tool's name or None, got "
            f"{tool_choice!r}"
        )


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Tokens a call consumed. `total_tokens` defaults to input + output; usages add up with `+`
    (a tool loop sums the usage of all its calls)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.total_tokens is None:
            object.__setattr__(self, "total_tokens", self.input_tokens + self.output_tokens)

    def __add__(self, other: TokenUsage) -> TokenUsage:
        if not isinstance(other, TokenUsage):
            return NotImplemented
        return TokenUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            (self.total_tokens or 0) + (other.total_tokens or 0),
        )


class FinishReason(str, enum.Enum):
    """Why the model stopped, in LangChain4j's terms."""

    STOP = "STOP"
    """It finished its answer (or met a stop sequence)."""
    LENGTH = "LENGTH"
    """It reached the output token limit; the answer is cut."""
    TOOL_EXECUTION = "TOOL_EXECUTION"
    """It asks for tool calls; run them and call it again with the results."""
    CONTENT_FILTER = "CONTENT_FILTER"
    """The provider's filter withheld (part of) the answer."""
    OTHER = "OTHER"
    """Another reason; the provider's own word is not kept."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatResponse:
    """What the model answered, with how it stopped and what it cost.

    `model_name` is the model the provider says answered (it may differ from the one asked
    for, e.g. a dated snapshot); `id` is the provider's id of the response.
    """

    ai_message: AiMessage
    token_usage: TokenUsage | None = None
    finish_reason: FinishReason | None = None
    model_name: str | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.ai_message, AiMessage):
            raise ConfigurationError(f"`ai_message` must be an AiMessage, got {self.ai_message!r}")

    @property
    def text(self) -> str | None:
        """The answer's text (None when the model only called tools)."""
        return self.ai_message.text


def _schema(value: object, name: str) -> FrozenDict:
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"`{name}` must be a JSON object (a dict), got {value!r}")
    try:
        return value if isinstance(value, FrozenDict) else FrozenDict(value)
    except TypeError as error:
        raise ConfigurationError(f"`{name}` must be JSON-like: {error}") from None


def _optional_bool(value: object, name: str) -> None:
    if value is not None and not isinstance(value, bool):
        raise ConfigurationError(f"`{name}` must be a bool or None, got {value!r}")
