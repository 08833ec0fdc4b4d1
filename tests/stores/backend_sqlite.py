from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from chatmemory.stores.sqlite import AsyncSqliteChatMemoryStore, SqliteChatMemoryStore

from .backends import Backend, Context


@asynccontextmanager
async def open_sync(context: Context) -> AsyncIterator[SqliteChatMemoryStore]:
    with SqliteChatMemoryStore(context.tmp_path / f"{context.unique}.db") as store:
        yield store


@asynccontextmanager
async def open_async(context: Context) -> AsyncIterator[AsyncSqliteChatMemoryStore]:
    async with AsyncSqliteChatMemoryStore(context.tmp_path / f"{context.unique}.db") as store:
        yield store


BACKEND = Backend("sqlite", open_sync, open_async)
