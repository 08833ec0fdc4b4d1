"""Reading what a provider answered, with its shape checked as it is read.

The SDKs build their response models from the wire without checking them, so a server that
speaks another protocol, or a proxy in between, can hand an adapter any JSON, or text. The
adapters read the answer through these helpers:

- `answer_object` turns what the SDK returned into the JSON object it holds, and raises
  `ModelError` when the body was not one (an HTML page, an array);
- the structure that carries the answer (`json_object`, `json_array`) is checked: a wrong shape
  raises `SerializationError` naming where, which `mapped_errors` turns into a `ModelError`;
- metadata (ids, model names, token counts) and stream pieces of the wrong type are left out
  (`text`, `count`), as the OpenAI stream always skipped what is not text: compatible servers
  vary there, and the answer itself is still good.

Neither kind of error is retriable: the same server would send the same answer again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._codec.invalid import describe, quote
from .._errors import ModelError, SerializationError
from ._sdk import CHECK_BASE_URL, SdkErrors

__all__ = [
    "answer_object",
    "count",
    "json_array",
    "json_index",
    "json_object",
    "no_events",
    "text",
]


def answer_object(sdk: SdkErrors, model: str, answer: object) -> dict[str, Any]:
    """The JSON object the SDK read (its model as plain JSON, without pydantic's warnings about
    fields of unexpected types, which the adapters check themselves); `ModelError` when the
    body held something else."""
    dump = getattr(answer, "model_dump", None)
    if callable(dump):  # the SDK's model, as its `to_dict(mode="json")` gives it
        dumped: dict[str, Any] = dump(
            mode="json", by_alias=True, exclude_unset=True, warnings=False
        )
        return dumped
    if isinstance(answer, str):  # the SDK hands over a body that is not JSON as its text
        what = f"text that is not JSON ({quote(answer[:200], 100)})"
    else:
        what = f"JSON that is not a JSON object ({describe(answer)})"
    raise ModelError(
        f"{sdk.who} answered with {what} for model {model!r}; {CHECK_BASE_URL}",
        retriable=False,
        provider=sdk.provider.lower(),
    )


def no_events(sdk: SdkErrors, model: str, stream: object) -> ModelError:
    """The error of a streaming call whose answer held no event at all: a proxy's page, or a
    server that ignored `stream` and answered in one piece."""
    response = getattr(stream, "response", None)
    headers = getattr(response, "headers", None)
    kind = headers.get("content-type") if isinstance(headers, Mapping) else None
    said = f"its Content-Type is {kind!r}" if kind else "it has no Content-Type"
    return ModelError(
        f"{sdk.who} answered a streaming call of model {model!r} with no stream events "
        f"({said}); {CHECK_BASE_URL}, or call `chat` instead of streaming (and leave "
        f"Capability.STREAMING out of the model's capabilities)",
        retriable=False,
        provider=sdk.provider.lower(),
    )


def json_object(value: object, where: str, *, required: bool = False) -> Mapping[str, Any]:
    """`value` when it is a JSON object; {} for null or absent unless `required`."""
    if isinstance(value, Mapping):
        return value
    if value is None and not required:
        return {}
    raise SerializationError(f"`{where}` must be an object, got {describe(value)}")


def json_array(value: object, where: str, *, required: bool = False) -> list[Any]:
    """`value` when it is a JSON array; [] for null or absent unless `required`."""
    if isinstance(value, list):
        return value
    if value is None and not required:
        return []
    raise SerializationError(f"`{where}` must be an array, got {describe(value)}")


def json_index(value: object, where: str) -> int:
    """`value` when it is an integer (a position in the answer); 0 for null or absent."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise SerializationError(f"`{where}` must be an integer, got {describe(value)}")


def text(value: object) -> str | None:
    """`value` when it is a non-empty str, else None (ids, names, pieces of a stream)."""
    return value if isinstance(value, str) and value else None


def count(value: object) -> int:
    """`value` when it is a positive int, else 0 (token counts)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
