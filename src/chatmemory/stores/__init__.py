"""Where memories keep their messages: the store contracts and the built-in stores."""

from ._protocol import (
    AsyncChatMemoryStore,
    AsyncIncrementalChatMemoryStore,
    ChatMemoryStore,
    HistoryEntry,
    IncrementalChatMemoryStore,
    NewMessage,
    StoredMessage,
    WindowSnapshot,
)
from .in_memory import AsyncInMemoryChatMemoryStore, InMemoryChatMemoryStore

__all__ = [
    "AsyncChatMemoryStore",
    "AsyncInMemoryChatMemoryStore",
    "AsyncIncrementalChatMemoryStore",
    "ChatMemoryStore",
    "HistoryEntry",
    "InMemoryChatMemoryStore",
    "IncrementalChatMemoryStore",
    "NewMessage",
    "StoredMessage",
    "WindowSnapshot",
]
