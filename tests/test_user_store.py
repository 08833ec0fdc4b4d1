"""The seed documents' example: a user-written persistent store, built on the JSON helpers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from chatmemory import (
    AiMessage,
    ChatMessage,
    MessageWindowChatMemory,
    SystemMessage,
    UserMessage,
    messages_from_json,
    messages_to_json,
)


class PersistentChatMemoryStore:
    """Like the seed's MapDB store: one JSON document per memory id, in a file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> dict[str, str]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        return messages_from_json(self._load().get(memory_id))

    def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        data = self._load()
        data[memory_id] = messages_to_json(messages)
        self.path.write_text(json.dumps(data))

    def delete_messages(self, memory_id: str) -> None:
        data = self._load()
        data.pop(memory_id, None)
        self.path.write_text(json.dumps(data))


def test_a_user_written_persistent_store_survives_a_restart(tmp_path: Path) -> None:
    store = PersistentChatMemoryStore(tmp_path / "memories.json")
    memory = MessageWindowChatMemory(id="12345", max_messages=10, store=store)
    memory.add(SystemMessage("You are polite."))
    for i in range(12):
        memory.add(UserMessage(f"question {i}"), AiMessage(f"answer {i}"))
    window = memory.messages()
    assert len(window) == 10
    assert window[0] == SystemMessage("You are polite.")
    assert window[-1] == AiMessage("answer 11")

    restarted = MessageWindowChatMemory(
        id="12345", max_messages=10, store=PersistentChatMemoryStore(tmp_path / "memories.json")
    )
    assert restarted.messages() == window
    stored = json.loads((tmp_path / "memories.json").read_text())["12345"]
    assert json.loads(stored)[0] == {"text": "You are polite.", "type": "SYSTEM"}
    restarted.clear()
    assert restarted.messages() == []
    assert json.loads((tmp_path / "memories.json").read_text()) == {}
