"""The curated public API: every exported name resolves, and optional extras stay optional."""

from __future__ import annotations

import subprocess
import sys

import pytest

import chatmemory


def test_all_is_sorted_and_every_name_resolves() -> None:
    names = [n for n in chatmemory.__all__ if n != "__version__"]
    assert names == sorted(names, key=str.lower) or names == sorted(names)
    for name in chatmemory.__all__:
        assert getattr(chatmemory, name) is not None, name
    assert sorted(dir(chatmemory)) == sorted(chatmemory.__all__)


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        chatmemory.Nope  # noqa: B018


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False
    )


def test_import_needs_no_optional_extra() -> None:
    result = _run(
        "import sys\n"
        "for name in ('redis', 'psycopg', 'psycopg_pool', 'click', 'rich', 'platformdirs'):\n"
        "    sys.modules[name] = None  # importing it now raises ImportError\n"
        "import chatmemory, chatmemory.stores\n"
        "print(chatmemory.MessageWindowChatMemory(max_messages=2))\n"
    )
    assert result.returncode == 0, result.stderr
    assert "MessageWindowChatMemory" in result.stdout


@pytest.mark.parametrize(
    ("name", "blocked", "extra"),
    [
        ("RedisChatMemoryStore", "redis", "chatmemory[redis]"),
        ("AsyncRedisChatMemoryStore", "redis", "chatmemory[redis]"),
        ("PostgresChatMemoryStore", "psycopg", "chatmemory[postgres]"),
        ("AsyncPostgresChatMemoryStore", "psycopg", "chatmemory[postgres]"),
    ],
)
def test_a_missing_extra_names_the_pip_line(name: str, blocked: str, extra: str) -> None:
    result = _run(
        "import sys\n"
        f"sys.modules[{blocked!r}] = None\n"
        "import chatmemory\n"
        "try:\n"
        f"    chatmemory.{name}()\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    assert result.returncode == 0, result.stderr
    assert f"pip install '{extra}'" in result.stdout
