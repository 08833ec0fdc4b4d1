"""The exceptions chatmemory raises.

One base class, a small tree::

    ChatMemoryError
    │   the caller's own mistake
    ├── ConfigurationError      (also a ValueError) a usage mistake: fix the call
    │   (a service method called with wrong arguments raises TypeError, as Python does)
    │   infrastructure: try again later, or fix the server
    ├── StoreError              a store failed: carries `memory_id` and `store`
    │   └── ConcurrentUpdateError  another writer won too many times in a row
    ├── ModelError              a chat model failed: `retriable` says whether to try again,
    │                           `status` and `provider_message` keep what the provider said
    ├── ToolServerError         a tool server (MCP) could not be reached or listed
    │   a model that misbehaved: asking again may pass (`output_retries` does for parsing)
    ├── ModelBehaviourError     the model's answer cannot be used: an unknown tool called
    │   │                       with on_unknown_tool="raise", a router answer that names no source
    │   ├── OutputParsingError  (also a ValueError) a model's answer is not the declared type
    │   └── ToolLoopError       a service call's model kept calling tools past the limit
    │   data and policy
    ├── SerializationError      (also a ValueError) stored or given data could not be read
    ├── ModerationError         a moderation model flagged the input; nothing was stored
    └── GuardrailError          a guardrail refused the input or the answer; nothing was stored

`ModelRetry` is not raised by the library: a tool or an output guardrail raises it to have the
model try again with its message.
"""

from __future__ import annotations

__all__ = [
    "ChatMemoryError",
    "ConcurrentUpdateError",
    "ConfigurationError",
    "GuardrailError",
    "ModelBehaviourError",
    "ModelError",
    "ModelRetry",
    "ModerationError",
    "OutputParsingError",
    "SerializationError",
    "StoreError",
    "ToolLoopError",
    "ToolServerError",
]


class ChatMemoryError(Exception):
    """Base class of every error raised by chatmemory."""

    @property
    def message(self) -> str:
        return str(self)


class ConfigurationError(ChatMemoryError, ValueError):
    """The library was used wrongly: an invalid limit, an unknown model, a bad identifier."""


class SerializationError(ChatMemoryError, ValueError):
    """Data could not be turned into messages (or back).

    `fragment` quotes what could not be read (shortened), `memory_id` and `row` say where it
    came from when it was read from a store.
    """

    def __init__(
        self,
        message: str,
        *,
        fragment: str | None = None,
        memory_id: str | None = None,
        row: object = None,
    ) -> None:
        parts = [message]
        if memory_id is not None:
            parts.append(f"memory id {memory_id!r}")
        if row is not None:
            parts.append(f"row {row!r}")
        if fragment is not None:
            parts.append(f"in {shorten(fragment)!r}")
        super().__init__("; ".join(parts) if len(parts) > 1 else message)
        self.fragment = fragment
        self.memory_id = memory_id
        self.row = row


class StoreError(ChatMemoryError):
    """A store could not do what was asked (unreachable server, failed transaction...).

    Nothing was half-written: every built-in store writes one memory id atomically.
    """

    def __init__(self, message: str, *, store: object, memory_id: str | None = None) -> None:
        where = f"{type(store).__name__}" + (f", memory id {memory_id!r}" if memory_id else "")
        super().__init__(f"{message} ({where})")
        self.store = store
        self.memory_id = memory_id


class ConcurrentUpdateError(StoreError):
    """Other writers changed the memory every time this one tried to; nothing was written."""


class ModelError(ChatMemoryError):
    """A chat model call failed.

    `retriable` is True for what may pass on a later try (rate limits, timeouts, lost
    connections, server errors) and False for what will fail again until something is changed
    (a refused request, a bad key, an unknown model). `status` is the HTTP status when the
    provider answered one, `provider_message` the provider's own words, `provider` its name
    ("openai", "anthropic") and `request_id` the id to quote to its support. The SDK's own
    retries (`max_retries`) have already run when this is raised.
    """

    def __init__(
        self,
        message: str,
        *,
        retriable: bool,
        status: int | None = None,
        provider: str | None = None,
        provider_message: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.status = status
        self.provider = provider
        self.provider_message = provider_message
        self.request_id = request_id


class ToolServerError(ChatMemoryError):
    """A tool server (an MCP server) could not be reached, or did not list its tools; the
    message says which server and what went wrong (never its secrets)."""


class ModelBehaviourError(ChatMemoryError):
    """A model answered, but not in a way the call can use: it called a tool that does not
    exist (with ``on_unknown_tool="raise"``), a routing model named no source, its answer does
    not parse (`OutputParsingError`), it kept calling tools (`ToolLoopError`). Nothing of the
    call was stored; asking again may pass."""


class OutputParsingError(ModelBehaviourError, ValueError):
    """A model's answer could not be read as the type the service method declares.

    `text` is the answer as the model wrote it, `target` the type it was read into, and
    `reason` what was wrong with it (pydantic's validation message, for instance).
    """

    def __init__(self, message: str, *, text: str, target: object, reason: str) -> None:
        super().__init__(message)
        self.text = text
        self.target = target
        self.reason = reason


class ModerationError(ChatMemoryError):
    """A moderation model flagged the input of a service call; nothing of the turn was stored.

    `moderation` is the model's verdict (`chatmemory.models.Moderation`): which text was flagged
    and why.
    """

    def __init__(self, message: str, *, moderation: object) -> None:
        super().__init__(message)
        self.moderation = moderation


class GuardrailError(ChatMemoryError):
    """A guardrail refused a service call's input, or its answer (also after asking the model
    again as often as allowed); nothing of the call was stored. `stage` is ``"input"`` or
    ``"output"``. Raise it from an input or output guardrail to refuse."""

    def __init__(self, message: str, *, stage: str = "input") -> None:
        super().__init__(message)
        self.stage = stage


class ModelRetry(Exception):
    """Raised by an output guardrail (or a tool): the model is asked again, told this message.

    Not a `ChatMemoryError`: it is the application's signal, and the library turns it into
    another model call (or, past the limit, into a `GuardrailError`)."""


class ToolLoopError(ModelBehaviourError):
    """The model asked for tools more times in one service call than
    `max_tool_calling_round_trips` allows; nothing of the call was stored."""


def shorten(text: str, limit: int = 120) -> str:
    """`text` cut to `limit` characters with an ellipsis, for quoting in error messages."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
