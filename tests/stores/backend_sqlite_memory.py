"""The SQLite store on a `:memory:` database: one connection, shared by the test's threads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from chatmemory.stores.sqlite import AsyncSqliteChatMemoryStore, SqliteChatMemoryStore

from .backends import Backend, Context


@asynccontextmanager
async def open_sync(context: Context) -> AsyncIterator[SqliteChatMemoryStore]:
    with SqliteChatMemoryStore(":memory:") as store:
        yield store


@asynccontextmanager
async def open_async(context: Context) -> AsyncIterator[AsyncSqliteChatMemoryStore]:
    async with AsyncSqliteChatMemoryStore(":memory:") as store:
        yield store


BACKEND = Backend("sqlite_memory", open_sync, open_async)
