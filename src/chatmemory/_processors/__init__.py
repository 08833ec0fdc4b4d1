"""Memory processors: pure rewrites of the messages a memory sends to the model."""

from .base import MemoryProcessor, Processor, apply_processors
from .groups import ToolGroup, atomic_units, tool_groups
from .token_limiter import TokenLimiter, Trim
from .tool_call_filter import ToolCallFilter

__all__ = [
    "MemoryProcessor",
    "Processor",
    "TokenLimiter",
    "ToolCallFilter",
    "ToolGroup",
    "Trim",
    "apply_processors",
    "atomic_units",
    "tool_groups",
]
