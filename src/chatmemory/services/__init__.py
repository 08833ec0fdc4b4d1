"""AI services: declare what an assistant does as a typed Protocol, get an object that calls the
model with per-user memory, prompt templates, structured output, streaming and moderation.

```python
from typing import Annotated, Protocol
from chatmemory import MessageWindowChatMemory, UserMessage
from chatmemory.services import MemoryId, ai_service, system_message
from chatmemory.testing import ScriptedChatModel

class Assistant(Protocol):
    @system_message("You are the support assistant of {{company}}.")
    def chat(self, user: Annotated[str, MemoryId], text: Annotated[str, UserMessage],
             company: str) -> str: ...

assistant = ai_service(Assistant, chat_model=ScriptedChatModel(["Hello!"]),
    chat_memory_provider=lambda memory_id: MessageWindowChatMemory(id=memory_id, max_messages=20))
assert assistant.chat("alice", "Hi", company="ACME") == "Hello!"
```
"""

from .._errors import GuardrailError, ModelRetry
from ..titles import DEFAULT_TITLE_PROMPT, ConversationTitles
from ._approval import ApprovalAccess, ApprovalRequired, Decisions, PendingApproval
from ._invocation import InvocationContext, InvocationParameters
from ._markers import (
    MemoryId,
    UserId,
    UserName,
    V,
    describe_members,
    moderate,
    structured_prompt,
    system_message,
    tool_choice,
    user_message,
)
from ._memories import ChatMemoryProvider
from ._results import (
    AsyncTokenStream,
    Result,
    Retrieved,
    ServiceEvent,
    TokenStream,
    ToolExecuted,
    ToolExecution,
)
from ._service import ChatMemoryAccess, ai_service
from ._turn import InputGuardrail, OutputGuardrail

__all__ = [
    "DEFAULT_TITLE_PROMPT",
    "ApprovalAccess",
    "ApprovalRequired",
    "AsyncTokenStream",
    "ChatMemoryAccess",
    "ChatMemoryProvider",
    "ConversationTitles",
    "Decisions",
    "GuardrailError",
    "InputGuardrail",
    "InvocationContext",
    "InvocationParameters",
    "MemoryId",
    "ModelRetry",
    "OutputGuardrail",
    "PendingApproval",
    "Result",
    "Retrieved",
    "ServiceEvent",
    "TokenStream",
    "ToolExecuted",
    "ToolExecution",
    "UserId",
    "UserName",
    "V",
    "ai_service",
    "describe_members",
    "moderate",
    "structured_prompt",
    "system_message",
    "tool_choice",
    "user_message",
]
