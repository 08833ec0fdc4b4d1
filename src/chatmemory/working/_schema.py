"""What a structured working-memory record is checked against: a pydantic model, or a JSON
Schema given as a dict (validated with the ``jsonschema`` package, an optional extra). Both
answer the memory through one small interface, so patching and storing are written once.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from .._errors import ConfigurationError
from .._validation import explain

__all__ = ["Invalid", "JsonSchemaRecord", "ModelRecord", "RecordSchema", "record_schema"]

M = TypeVar("M", bound=BaseModel)


class Invalid(Exception):
    """A value does not fit the record's schema; the message says where and why."""


class RecordSchema(abc.ABC):
    """A structured record's schema: its name, its JSON Schema (shown to the model), and how a
    value is validated, read from stored text and written to it."""

    name: str

    @abc.abstractmethod
    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of the record, as the model is shown it."""

    @abc.abstractmethod
    def validate(self, value: object) -> Any:
        """The record `value` makes, or `Invalid`."""

    @abc.abstractmethod
    def load(self, text: str) -> Any:
        """The record stored as `text` (written by `dump`)."""

    @abc.abstractmethod
    def dump(self, record: Any) -> str:
        """`record` as the compact JSON text that is stored."""

    def fields(self) -> list[str]:
        """The record's top-level field names, as its JSON Schema lists them."""
        properties = self.json_schema().get("properties")
        return list(properties) if isinstance(properties, Mapping) else []


class ModelRecord(RecordSchema, Generic[M]):
    """A record kept as a pydantic model."""

    def __init__(self, model: type[M]) -> None:
        self.model = model
        self.name = model.__name__
        self._adapter: TypeAdapter[M] = TypeAdapter(model)

    def json_schema(self) -> dict[str, Any]:
        return self.model.model_json_schema()

    def validate(self, value: object) -> M:
        try:
            return self._adapter.validate_python(value)
        except ValidationError as error:
            raise Invalid(explain(error, whole="the record")) from None

    def load(self, text: str) -> M:
        return self._adapter.validate_json(text)

    def dump(self, record: Any) -> str:
        return self._adapter.dump_json(record).decode()


class JsonSchemaRecord(RecordSchema):
    """A record kept as a JSON object that a JSON Schema (a dict) validates."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        try:
            from jsonschema import exceptions, validators
        except ImportError as error:
            raise ImportError(
                f"WorkingMemory(schema={{...}}) validates records with the jsonschema package: "
                f"pip install 'chatmemory[jsonschema]' ({error})"
            ) from error
        given = json.loads(json.dumps(schema))  # a plain copy: later changes do not leak in
        cls = validators.validator_for(given)
        try:
            cls.check_schema(given)
        except exceptions.SchemaError as error:
            raise ConfigurationError(
                f"`schema` is not a valid JSON Schema: {error.message}"
            ) from None
        if given.get("type") != "object":
            raise ConfigurationError(
                f'a working-memory schema describes a JSON object ("type": "object", with its '
                f'"properties"), got "type": {json.dumps(given.get("type"))}'
            )
        self._schema: dict[str, Any] = given
        self._validator = cls(given)
        title = given.get("title")
        self.name = title if isinstance(title, str) and title else "its JSON Schema"

    def json_schema(self) -> dict[str, Any]:
        return self._schema

    def validate(self, value: object) -> dict[str, Any]:
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            raise Invalid(
                "; ".join(
                    f"{'.'.join(map(str, e.absolute_path)) or 'the record'}: {e.message}"
                    for e in errors
                )
            )
        return json.loads(json.dumps(value))  # type: ignore[no-any-return]

    def load(self, text: str) -> dict[str, Any]:
        return json.loads(text)  # type: ignore[no-any-return]

    def dump(self, record: Any) -> str:
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def record_schema(schema: object) -> RecordSchema:
    """The `RecordSchema` of what `WorkingMemory(schema=...)` was given."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return ModelRecord(schema)
    if isinstance(schema, Mapping):
        return JsonSchemaRecord(schema)
    raise ConfigurationError(
        f"`schema` must be a pydantic model class or a JSON Schema (a dict), got {schema!r}"
    )
