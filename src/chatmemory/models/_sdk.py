"""What the SDK adapters share: the capability check and the mapping of SDK errors.

Errors: an HTTP status of 408, 409, 429 or 5xx, a timeout or a lost connection is retriable;
every other status (400, 401, 403, 404, 422...) is not. The SDK has already retried the
retriable ones `max_retries` times when the error reaches us; we never retry again. An answer
that cannot be read (not JSON, JSON nested too deeply, the wrong shape) is not retriable either:
what sends it (a proxy's login page, a base_url that is not the API, a server speaking another
dialect) sends it again.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .._codec.invalid import quote
from .._errors import ConfigurationError, ModelError, SerializationError
from ._protocols import Capability
from ._refusals import is_a_refusal
from ._values import ChatRequest

__all__ = ["CHECK_BASE_URL", "SdkErrors", "check_request", "mapped_errors", "missing_sdk"]

CHECK_BASE_URL = (
    "a proxy, a login page or a base_url that is not the provider's API answers like this: "
    "check base_url (not retried: the same answer would come again)"
)

_RETRIABLE_STATUSES = frozenset({408, 409, 429})
_RETRIABLE_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
_REFUSED = (
    "the server does not take part of the request, as its message says; not retried: the same "
    "request fails again"
)
_HINTS = {
    400: "the provider refused the request; its message says what to change",
    401: "check the API key",
    403: "the API key may not use this model or endpoint",
    404: "check the model name and the base_url",
    413: "the request is too large; send fewer or shorter messages",
    422: "the provider refused the request; its message says what to change",
    429: "rate limited or out of quota: wait and try again, or lower the request rate",
}


def missing_sdk(cls: str, package: str, extra: str) -> ImportError:
    return ImportError(
        f"{cls} needs the {package} package, an optional extra: pip install 'chatmemory[{extra}]'"
    )


def check_request(model: str, capabilities: frozenset[Capability], request: ChatRequest) -> None:
    """A `ConfigurationError` when `request` asks for something `model` says it cannot do."""
    if not isinstance(request, ChatRequest):
        raise ConfigurationError(f"{model} takes a ChatRequest, got {request!r}")
    if request.tools and Capability.TOOLS not in capabilities:
        raise ConfigurationError(
            f"{model} does not declare Capability.TOOLS, but the request has tools; remove them "
            f"or declare the capability"
        )
    response_format = request.response_format
    if (
        response_format is not None
        and response_format.schema is not None
        and Capability.RESPONSE_FORMAT_JSON_SCHEMA not in capabilities
    ):
        raise ConfigurationError(
            f"{model} does not declare Capability.RESPONSE_FORMAT_JSON_SCHEMA, but the request "
            f"asks for JSON following a schema; describe the format in the prompt instead"
        )


@dataclass(frozen=True, slots=True)
class SdkErrors:
    """The exception classes of one SDK, and the provider's name for messages."""

    provider: str
    base: type[Exception]
    status: type[Exception]
    connection: type[Exception]
    timeout: type[Exception]
    server: str | None = None
    """The compatible server the adapter talks to (its base URL), when not the provider's."""

    @property
    def who(self) -> str:
        """Who answered, for messages: the provider, or the server at its base URL."""
        return f"the server at {self.server}" if self.server else self.provider


@contextlib.contextmanager
def mapped_errors(sdk: SdkErrors, model: str) -> Iterator[None]:
    """Turns the SDK's exceptions raised inside the block, and answers that cannot be read, into
    `ModelError`s (the original exception stays as the cause); works around sync code, awaits
    and stream iteration alike."""
    provider = sdk.provider.lower()
    try:
        yield
    except SerializationError as error:  # our codec could not read what the provider sent
        raise ModelError(
            f"{sdk.who} sent an answer chatmemory cannot read (model {model!r}): {error} "
            f"(not retried: the same answer would come again; a compatible server behind "
            f"base_url may not follow the API here)",
            retriable=False,
            provider=provider,
        ) from error
    except json.JSONDecodeError as error:  # the SDK read a body or an event's data as JSON
        raise ModelError(
            f"{sdk.who} answered with text that is not JSON ({quote(error.doc[:200], 100)}: "
            f"{error.msg} at character {error.pos}) for model {model!r}; {CHECK_BASE_URL}",
            retriable=False,
            provider=provider,
        ) from error
    except RecursionError as error:  # the same, of JSON nested deeper than the parser goes
        raise ModelError(
            f"{sdk.who} answered with JSON nested too deeply to read for model {model!r}; "
            f"{CHECK_BASE_URL}",
            retriable=False,
            provider=provider,
        ) from error
    except sdk.base as error:
        raise _model_error(sdk, model, error) from error


def _model_error(sdk: SdkErrors, model: str, error: Exception) -> ModelError:
    provider = sdk.provider.lower()
    if isinstance(error, sdk.timeout):
        return ModelError(
            f"{sdk.who} did not answer in time (model {model!r}; not sent again, as it may "
            f"still be working on it); try again later, or raise `timeout`",
            retriable=True,
            provider=provider,
        )
    if isinstance(error, sdk.connection):
        return ModelError(
            f"cannot reach {sdk.who} (model {model!r}): {str(error).rstrip('.')}; check the "
            f"base_url and the "
            f"network, then try again",
            retriable=True,
            provider=provider,
        )
    if isinstance(error, sdk.status):
        status: int = getattr(error, "status_code", 0)
        body = getattr(error, "body", None)
        said = provider_message(body) or str(error)
        if status < 400:  # an error event inside a stream whose response began with 200
            return ModelError(
                f"{sdk.who} failed while streaming (model {model!r}): {said}",
                retriable=_error_type(body) in _RETRIABLE_TYPES,
                provider=provider,
                provider_message=said,
                request_id=getattr(error, "request_id", None),
            )
        refused = status >= 500 and is_a_refusal(said)
        retriable = (status in _RETRIABLE_STATUSES or status >= 500) and not refused
        hint = _HINTS.get(status) or (
            _REFUSED
            if refused
            else "the provider failed; try again later"
            if retriable
            else "see the provider's message"
        )
        return ModelError(
            f"{sdk.who} answered HTTP {status} for model {model!r}: {said} ({hint})",
            retriable=retriable,
            status=status,
            provider=provider,
            provider_message=said,
            request_id=getattr(error, "request_id", None),
        )
    return ModelError(
        f"{sdk.who} call failed (model {model!r}): {error}",
        retriable=False,
        provider=provider,
        provider_message=str(error),
    )


def provider_message(body: object) -> str | None:
    """The human-readable message of an error body: `{"error": {"message": ...}}` (both
    providers' form), or `{"message": ...}` (OpenAI's SDK passes the inner object)."""
    if not isinstance(body, Mapping):
        return body if isinstance(body, str) and body else None
    inner: Any = body.get("error")
    if isinstance(inner, Mapping):
        body = inner
    elif isinstance(inner, str):
        return inner
    message = body.get("message")
    return message if isinstance(message, str) else None


def _error_type(body: object) -> str | None:
    inner = body.get("error") if isinstance(body, Mapping) else None
    kind = inner.get("type") if isinstance(inner, Mapping) else None
    return kind if isinstance(kind, str) else None
