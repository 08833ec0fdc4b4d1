"""PLACEHOLDER until the output branch merges: str and JSON via pydantic."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from .._errors import OutputParsingError
from ..models import ResponseFormat

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class OutputSpec(Generic[T]):
    annotation: object
    adapter: TypeAdapter[Any] | None

    @property
    def is_text(self) -> bool:
        return self.adapter is None

    def response_format(self) -> ResponseFormat | None:
        if self.adapter is None:
            return None
        return ResponseFormat.json_schema(self.adapter.json_schema(), strict=False)

    def instructions(self) -> str:
        if self.adapter is None:
            return ""
        return "\nYou must answer strictly in the following JSON format: " + json.dumps(
            self.adapter.json_schema()
        )

    def parse(self, text: str) -> T:
        if self.adapter is None:
            return text  # type: ignore[return-value]
        try:
            return self.adapter.validate_json(text)  # type: ignore[no-any-return]
        except ValidationError as error:
            raise OutputParsingError(
                f"Failed to parse {text!r} into {self.annotation}: {error}",
                text=text,
                target=self.annotation,
                reason=str(error),
            ) from None


def output_spec(annotation: object, *, where: str) -> OutputSpec[Any]:
    if annotation is str:
        return OutputSpec(annotation, None)
    return OutputSpec(annotation, TypeAdapter(annotation))  # type: ignore[arg-type]
