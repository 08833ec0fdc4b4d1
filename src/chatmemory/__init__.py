"""chatmemory: conversation memory for LLM applications.

Message and token windows with LangChain4j's rules, persistent stores that keep the history and
never lose a message, exact offline token counts, and Mastra-style memory processors.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from ._codec import (
    from_openai,
    message_from_json,
    message_to_json,
    messages_from_json,
    messages_to_json,
    to_openai,
)
from ._errors import (
    ChatMemoryError,
    ConcurrentUpdateError,
    ConfigurationError,
    ModelError,
    SerializationError,
    StoreError,
)
from ._memory.window import (
    AsyncChatMemory,
    AsyncMessageWindowChatMemory,
    AsyncTokenWindowChatMemory,
    ChatMemory,
    MessageWindowChatMemory,
    TokenWindowChatMemory,
)
from ._messages import (
    AiMessage,
    AudioContent,
    ChatMessage,
    Content,
    CustomMessage,
    DetailLevel,
    ImageContent,
    PdfFileContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
)
from ._processors import MemoryProcessor, Processor, TokenLimiter, ToolCallFilter, apply_processors
from ._tokens import ApproximateTokenCountEstimator, OpenAiTokenCountEstimator, TokenCountEstimator
from .stores import (
    AsyncChatMemoryStore,
    AsyncInMemoryChatMemoryStore,
    ChatMemoryStore,
    HistoryEntry,
    InMemoryChatMemoryStore,
)

if TYPE_CHECKING:
    from .stores.postgres import AsyncPostgresChatMemoryStore, PostgresChatMemoryStore
    from .stores.redis import AsyncRedisChatMemoryStore, RedisChatMemoryStore
    from .stores.sqlite import AsyncSqliteChatMemoryStore, SqliteChatMemoryStore

try:
    __version__ = version("chatmemory")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = [
    "AiMessage",
    "ApproximateTokenCountEstimator",
    "AsyncChatMemory",
    "AsyncChatMemoryStore",
    "AsyncInMemoryChatMemoryStore",
    "AsyncMessageWindowChatMemory",
    "AsyncPostgresChatMemoryStore",
    "AsyncRedisChatMemoryStore",
    "AsyncSqliteChatMemoryStore",
    "AsyncTokenWindowChatMemory",
    "AudioContent",
    "ChatMemory",
    "ChatMemoryError",
    "ChatMemoryStore",
    "ChatMessage",
    "ConcurrentUpdateError",
    "ConfigurationError",
    "Content",
    "CustomMessage",
    "DetailLevel",
    "HistoryEntry",
    "ImageContent",
    "InMemoryChatMemoryStore",
    "MemoryProcessor",
    "MessageWindowChatMemory",
    "ModelError",
    "OpenAiTokenCountEstimator",
    "PdfFileContent",
    "PostgresChatMemoryStore",
    "Processor",
    "RedisChatMemoryStore",
    "SerializationError",
    "SqliteChatMemoryStore",
    "StoreError",
    "SystemMessage",
    "TextContent",
    "TokenCountEstimator",
    "TokenLimiter",
    "TokenWindowChatMemory",
    "ToolCallFilter",
    "ToolExecutionRequest",
    "ToolExecutionResultMessage",
    "UserMessage",
    "VideoContent",
    "__version__",
    "apply_processors",
    "from_openai",
    "message_from_json",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
    "to_openai",
]

# Persistent stores load their module on first use: Redis and PostgreSQL drivers are optional
# extras, and `import chatmemory` needs none of them.
_STORES = {
    "SqliteChatMemoryStore": ".stores.sqlite",
    "AsyncSqliteChatMemoryStore": ".stores.sqlite",
    "RedisChatMemoryStore": ".stores.redis",
    "AsyncRedisChatMemoryStore": ".stores.redis",
    "PostgresChatMemoryStore": ".stores.postgres",
    "AsyncPostgresChatMemoryStore": ".stores.postgres",
}


def __getattr__(name: str) -> object:
    module = _STORES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


def __dir__() -> list[str]:
    return sorted(__all__)
