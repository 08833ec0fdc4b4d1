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
        "for name in ('redis', 'psycopg', 'psycopg_pool', 'click', 'rich', 'platformdirs',\n"
        "             'openai', 'anthropic'):\n"
        "    sys.modules[name] = None  # importing it now raises ImportError\n"
        "import chatmemory, chatmemory.stores, chatmemory.models, chatmemory.testing\n"
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
        ("OpenAiChatModel", "openai", "chatmemory[openai]"),
        ("AnthropicChatModel", "anthropic", "chatmemory[anthropic]"),
    ],
)
def test_a_missing_extra_names_the_pip_line(name: str, blocked: str, extra: str) -> None:
    arguments = "model='m'" if name.endswith("ChatModel") else ""
    result = _run(
        "import sys\n"
        f"sys.modules[{blocked!r}] = None\n"
        "import chatmemory\n"
        "try:\n"
        f"    chatmemory.{name}({arguments})\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    assert result.returncode == 0, result.stderr
    assert f"pip install '{extra}'" in result.stdout


def test_the_stores_module_exports_what_its_all_says() -> None:
    import chatmemory.stores as stores

    assert sorted(stores.__all__) == stores.__all__
    for name in stores.__all__:
        assert getattr(stores, name) is not None, name
    # the contracts a store author implements are there, and the built-in stores declare them
    for store in (stores.InMemoryChatMemoryStore(), stores.SqliteChatMemoryStore()):
        assert isinstance(store, stores.WindowStore)
        assert isinstance(store, stores.HistoryStore)
        assert isinstance(store, stores.ChatMemoryStore)


def test_the_models_and_testing_modules_export_what_their_all_says() -> None:
    import chatmemory.models as models
    import chatmemory.testing as testing

    for module in (models, testing):
        assert sorted(module.__all__) == module.__all__
        for name in module.__all__:
            assert getattr(module, name) is not None, name
    assert sorted(dir(models)) == models.__all__
    assert chatmemory.OpenAiChatModel is models.OpenAiChatModel
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        models.Nope  # noqa: B018


def test_the_rag_module_exports_what_its_all_says_and_loads_drivers_on_use() -> None:
    import chatmemory.rag as rag

    assert sorted(rag.__all__) == rag.__all__ == sorted(dir(rag))
    for name in rag.__all__:
        assert getattr(rag, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        rag.Nope  # noqa: B018


def test_tests_reach_private_modules_only_to_test_them() -> None:
    """Tests import what users import; a private module is imported only by its own tests."""
    import re
    from pathlib import Path

    allowed = {"_messages", "_frozen", "_errors", "_tokens", "_policies", "_codec", "_cli", "_flow"}
    for path in Path(__file__).parent.rglob("*.py"):
        for module in re.findall(r"^from chatmemory\.(_\w+)", path.read_text(), re.M):
            assert module in allowed, f"{path.name} imports chatmemory.{module}"
