"""Tools a service offers the model: declared with `@tool`, written by hand, or provided per
call (an MCP server's tools, for instance)."""

from ._contracts import (
    AsyncToolProvider,
    ReturnBehavior,
    Tool,
    ToolArgumentsError,
    ToolContext,
    ToolExecutionError,
    ToolOutput,
    ToolProvider,
)

__all__ = [
    "AsyncToolProvider",
    "ReturnBehavior",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolExecutionError",
    "ToolOutput",
    "ToolProvider",
]
