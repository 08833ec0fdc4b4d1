"""chatmemory: conversation memory for LLM applications.

Message and token windows with LangChain4j's rules, persistent stores that keep the history and
never lose a message, exact offline token counts, Mastra-style memory processors, chat models
(`chatmemory.models`) on the official OpenAI and Anthropic SDKs, and AI services
(`ai_service`) that implement a declared Protocol with per-user memory.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from . import models, stores
from ._codec import (
    from_anthropic,
    from_openai,
    message_from_json,
    message_to_json,
    messages_from_json,
    messages_to_json,
    to_anthropic,
    to_openai,
)
from ._errors import (
    ChatMemoryError,
    ConcurrentUpdateError,
    ConfigurationError,
    GuardrailError,
    ModelBehaviourError,
    ModelError,
    ModelRetry,
    ModerationError,
    OutputParsingError,
    SerializationError,
    StoreError,
    ToolLoopError,
    ToolServerError,
)
from ._memory.summarizing import AsyncSummarizingChatMemory, SummarizingChatMemory
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
from ._policies import MemoryProcessor, Processor, TokenLimiter, ToolCallFilter, apply_processors
from ._prompts import Prompt, PromptTemplate
from ._tokens import ApproximateTokenCountEstimator, OpenAiTokenCountEstimator, TokenCountEstimator
from .models import (
    AsyncChatModel,
    AsyncStreamingChatModel,
    ChatModel,
    ChatRequest,
    ChatResponse,
    StreamingChatModel,
    TokenUsage,
    ToolSpecification,
)
from .services import (
    ApprovalRequired,
    AsyncTokenStream,
    ChatMemoryAccess,
    MemoryId,
    Result,
    TokenStream,
    UserId,
    UserName,
    V,
    ai_service,
    moderate,
    system_message,
    tool_choice,
    user_message,
)
from .stores import (
    AsyncChatMemoryStore,
    AsyncInMemoryChatMemoryStore,
    AsyncSqliteChatMemoryStore,
    ChatMemoryStore,
    HistoryEntry,
    InMemoryChatMemoryStore,
    SqliteChatMemoryStore,
)
from .telemetry import instrument, uninstrument

if TYPE_CHECKING:
    from .models.anthropic import AnthropicChatModel
    from .models.openai import OpenAiChatModel
    from .stores.postgres import AsyncPostgresChatMemoryStore, PostgresChatMemoryStore
    from .stores.redis import AsyncRedisChatMemoryStore, RedisChatMemoryStore

try:
    __version__ = version("chatmemory")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = [
    "AiMessage",
    "AnthropicChatModel",
    "ApprovalRequired",
    "ApproximateTokenCountEstimator",
    "AsyncChatMemory",
    "AsyncChatMemoryStore",
    "AsyncChatModel",
    "AsyncInMemoryChatMemoryStore",
    "AsyncMessageWindowChatMemory",
    "AsyncPostgresChatMemoryStore",
    "AsyncRedisChatMemoryStore",
    "AsyncSqliteChatMemoryStore",
    "AsyncStreamingChatModel",
    "AsyncSummarizingChatMemory",
    "AsyncTokenStream",
    "AsyncTokenWindowChatMemory",
    "AudioContent",
    "ChatMemory",
    "ChatMemoryAccess",
    "ChatMemoryError",
    "ChatMemoryStore",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "ConcurrentUpdateError",
    "ConfigurationError",
    "Content",
    "CustomMessage",
    "DetailLevel",
    "GuardrailError",
    "HistoryEntry",
    "ImageContent",
    "InMemoryChatMemoryStore",
    "MemoryId",
    "MemoryProcessor",
    "MessageWindowChatMemory",
    "ModelBehaviourError",
    "ModelError",
    "ModelRetry",
    "ModerationError",
    "OpenAiChatModel",
    "OpenAiTokenCountEstimator",
    "OutputParsingError",
    "PdfFileContent",
    "PostgresChatMemoryStore",
    "Processor",
    "Prompt",
    "PromptTemplate",
    "RedisChatMemoryStore",
    "Result",
    "SerializationError",
    "SqliteChatMemoryStore",
    "StoreError",
    "StreamingChatModel",
    "SummarizingChatMemory",
    "SystemMessage",
    "TextContent",
    "TokenCountEstimator",
    "TokenLimiter",
    "TokenStream",
    "TokenUsage",
    "TokenWindowChatMemory",
    "ToolCallFilter",
    "ToolExecutionRequest",
    "ToolExecutionResultMessage",
    "ToolLoopError",
    "ToolServerError",
    "ToolSpecification",
    "UserId",
    "UserMessage",
    "UserName",
    "V",
    "VideoContent",
    "__version__",
    "ai_service",
    "apply_processors",
    "from_anthropic",
    "from_openai",
    "instrument",
    "message_from_json",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
    "moderate",
    "system_message",
    "to_anthropic",
    "to_openai",
    "tool_choice",
    "uninstrument",
    "user_message",
]


def __getattr__(name: str) -> object:
    # Persistent stores and SDK-backed models load on first use (`chatmemory.stores` and
    # `chatmemory.models` decide how): Redis and PostgreSQL drivers and the OpenAI and Anthropic
    # SDKs are optional extras, and `import chatmemory` needs none of them.
    if name.endswith("ChatMemoryStore") and name in __all__:
        return getattr(stores, name)
    if name.endswith("ChatModel") and name in __all__:
        return getattr(models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
