"""What one service call is about, for the code a service lets you plug in.

`InvocationParameters` are per-call values the caller passes (a method parameter typed
`InvocationParameters`): they reach tools and tool providers (`ToolContext.parameters`) and the
request and system-message transformers (`InvocationContext.parameters`), and never the model
or the memory. LangChain4j's `InvocationParameters`, as a dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._messages import UserMessage

__all__ = ["InvocationContext", "InvocationParameters"]


class InvocationParameters(dict[str, Any]):
    """Per-call values for tools, providers and transformers: type a method parameter with it
    (``params: InvocationParameters``) and pass ``InvocationParameters(tenant="acme")``."""


@dataclass(frozen=True, slots=True)
class InvocationContext:
    """One call, as a transformer sees it: whose memory, which user, the user message, and the
    invocation parameters."""

    memory_id: str
    user_id: str | None = None
    user_message: UserMessage | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
