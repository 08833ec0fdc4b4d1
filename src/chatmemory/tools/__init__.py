"""Tools a service offers the model: declared with `@tool`, written by hand, or provided per
call (an MCP server's tools: `chatmemory.tools.mcp`)."""

from ._contracts import (
    AsyncToolProvider,
    ReturnBehavior,
    Tool,
    ToolArgumentsError,
    ToolContext,
    ToolExecutionError,
    ToolLimits,
    ToolOutput,
    ToolProvider,
)
from ._declare import (
    ExtraArguments,
    FunctionTool,
    P,
    ToolMemoryId,
    parse_arguments,
    tool,
    tool_from,
)

__all__ = [
    "AsyncToolProvider",
    "ExtraArguments",
    "FunctionTool",
    "P",
    "ReturnBehavior",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolExecutionError",
    "ToolLimits",
    "ToolMemoryId",
    "ToolOutput",
    "ToolProvider",
    "parse_arguments",
    "tool",
    "tool_from",
]
