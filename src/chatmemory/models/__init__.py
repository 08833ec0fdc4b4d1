"""Chat models: the request and response values, the protocols the AI services call, and
adapters on the official `openai` and `anthropic` SDKs.

```python
from chatmemory import UserMessage
from chatmemory.models import ChatRequest, OpenAiChatModel

model = OpenAiChatModel(model="gpt-4o-mini")
response = model.chat(ChatRequest([UserMessage("Hi")]))
print(response.ai_message.text, response.token_usage)
```

The adapters load their SDK on first use: `import chatmemory.models` needs neither, and
constructing one without its SDK raises an ImportError naming the `pip install` line.
"""

import importlib
from typing import TYPE_CHECKING

from ._events import CompleteToolCall, PartialText, PartialThinking, PartialToolCall, StreamEvent
from ._moderation import AsyncModerationModel, Moderation, ModerationModel
from ._protocols import (
    AsyncChatModel,
    AsyncStreamingChatModel,
    Capability,
    ChatModel,
    StreamingChatModel,
)
from ._values import (
    ChatParameters,
    ChatRequest,
    ChatResponse,
    FinishReason,
    ResponseFormat,
    TokenUsage,
    ToolChoice,
    ToolSpecification,
)
from .listeners import (
    CallAbandoned,
    ChatModelErrorContext,
    ChatModelListener,
    ChatModelRequestContext,
    ChatModelResponseContext,
    add_chat_model_listener,
    remove_chat_model_listener,
    with_listeners,
)

if TYPE_CHECKING:
    from .anthropic import AnthropicChatModel
    from .openai import OpenAiChatModel
    from .openai_moderation import OpenAiModerationModel

__all__ = [
    "AnthropicChatModel",
    "AsyncChatModel",
    "AsyncModerationModel",
    "AsyncStreamingChatModel",
    "CallAbandoned",
    "Capability",
    "ChatModel",
    "ChatModelErrorContext",
    "ChatModelListener",
    "ChatModelRequestContext",
    "ChatModelResponseContext",
    "ChatParameters",
    "ChatRequest",
    "ChatResponse",
    "CompleteToolCall",
    "FinishReason",
    "Moderation",
    "ModerationModel",
    "OpenAiChatModel",
    "OpenAiModerationModel",
    "PartialText",
    "PartialThinking",
    "PartialToolCall",
    "ResponseFormat",
    "StreamEvent",
    "StreamingChatModel",
    "TokenUsage",
    "ToolChoice",
    "ToolSpecification",
    "add_chat_model_listener",
    "remove_chat_model_listener",
    "with_listeners",
]

# Adapters whose SDK is an optional extra: imported on first use.
_LAZY = {
    "AnthropicChatModel": ".anthropic",
    "OpenAiChatModel": ".openai",
    "OpenAiModerationModel": ".openai_moderation",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


def __dir__() -> list[str]:
    return sorted(__all__)
