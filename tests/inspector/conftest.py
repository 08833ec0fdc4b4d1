"""The inspector's fixtures: a seeded SQLite file and the app over it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette

from chatmemory._cli.inspect import sqlite_lookups
from chatmemory.inspector import create_app
from chatmemory.stores.sqlite import SqliteChatMemoryStore
from tests.inspector.seed import seed


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    path = tmp_path / "chat.db"
    seed(path)
    return path


@pytest.fixture
def app(seeded: Path) -> Iterator[Starlette]:
    """The inspector over the seeded file, opened read-only as `chatmemory inspect` does."""
    with (
        SqliteChatMemoryStore(seeded, read_only=True, create=False) as store,
        sqlite_lookups(seeded) as (titles, users),
    ):
        yield create_app(
            store,
            titles=titles,
            users=users,
            source=f"SQLite {seeded}",
            allowed_hosts=("testserver", "127.0.0.1"),
        )
