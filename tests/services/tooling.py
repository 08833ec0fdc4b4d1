"""A hand-written `Tool` for the tool-loop tests: a function of keyword arguments."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from typing import Any

from chatmemory.models import ToolSpecification
from chatmemory.tools import (
    ReturnBehavior,
    ToolArgumentsError,
    ToolContext,
    ToolExecutionError,
    ToolOutput,
)


class FnTool:
    """Runs `function(**arguments)`; arguments must be a JSON object of the names in `params`."""

    def __init__(
        self,
        name: str,
        function: Callable[..., Any],
        *params: str,
        return_behavior: ReturnBehavior = "to_model",
    ) -> None:
        self.specification = ToolSpecification(
            name=name,
            parameters={
                "type": "object",
                "properties": {p: {"type": "string"} for p in params},
                "required": list(params),
            },
        )
        self.return_behavior: ReturnBehavior = return_behavior
        self.function = function
        self.params = params
        self.contexts: list[ToolContext] = []

    def _arguments(self, arguments: str) -> dict[str, Any]:
        try:
            value = json.loads(arguments or "{}")
        except json.JSONDecodeError as error:
            raise ToolArgumentsError(
                f"the arguments are not JSON ({error})",
                tool=self.specification.name,
                arguments=arguments,
            ) from None
        missing = [p for p in self.params if p not in value]
        if missing:
            raise ToolArgumentsError(
                f"missing {', '.join(missing)}", tool=self.specification.name, arguments=arguments
            )
        return dict(value)

    def _output(self, value: Any) -> ToolOutput:
        return ToolOutput("null" if value is None else str(value), value)

    def execute(self, arguments: str, context: ToolContext) -> ToolOutput:
        self.contexts.append(context)
        args = self._arguments(arguments)
        try:
            value = self.function(**args)
            if inspect.isawaitable(value):
                value = asyncio.run(value)  # type: ignore[arg-type]
        except Exception as error:
            raise ToolExecutionError(
                str(error) or type(error).__name__, tool=self.specification.name, cause=error
            ) from error
        return self._output(value)

    async def aexecute(self, arguments: str, context: ToolContext) -> ToolOutput:
        self.contexts.append(context)
        args = self._arguments(arguments)
        try:
            value = self.function(**args)
            if inspect.isawaitable(value):
                value = await value
        except Exception as error:
            raise ToolExecutionError(
                str(error) or type(error).__name__, tool=self.specification.name, cause=error
            ) from error
        return self._output(value)
