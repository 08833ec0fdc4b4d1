"""Tool approval (human in the loop, pydantic-ai's deferred tools, the Agents SDK's approvals):
a call stops before a tool that needs approval runs, with the memory as it was; the application
approves or denies each pending call and the call resumes where it stopped, sync, async,
streaming, and in another process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Protocol

import pytest

from chatmemory import (
    AiMessage,
    ApprovalRequired,
    ConfigurationError,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    SqliteChatMemoryStore,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.services import ApprovalAccess, MemoryId, ai_service
from chatmemory.testing import ScriptedChatModel
from chatmemory.tools import tool
from chatmemory.working import SqliteRecordStore

RAN: list[str] = []


@tool(requires_approval=True)
def transfer(amount: int, to: str) -> str:
    """Send money to someone."""
    RAN.append(f"transfer {amount} to {to}")
    return f"sent {amount} to {to}"


@tool
def balance() -> str:
    """The account's balance."""
    RAN.append("balance")
    return "1,200"


class Bank(ApprovalAccess, Protocol):
    def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    async def achat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    def stream(self, user: Annotated[str, MemoryId], text: str) -> Iterator[str]: ...


def calls(*pairs: tuple[str, str]) -> AiMessage:
    return AiMessage(
        tool_execution_requests=[
            ToolExecutionRequest(f"c{i}", name, arguments)
            for i, (name, arguments) in enumerate(pairs)
        ]
    )


TRANSFER = calls(("balance", "{}"), ("transfer", '{"amount": 100, "to": "Bob"}'))


def make(script: list[Any], **options: Any) -> tuple[Any, ScriptedChatModel, Any]:
    RAN.clear()
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel(script)
    service = ai_service(
        Bank,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=50, store=store
        ),
        tools=[transfer, balance],
        **options,
    )
    return service, model, store


def test_a_call_stops_before_a_tool_that_needs_approval_and_stores_nothing() -> None:
    service, _, store = make([TRANSFER, "Sent 100 to Bob."])
    with pytest.raises(ApprovalRequired, match=r"transfer \(c1\)") as stopped:
        service.chat("u", "send Bob 100")
    pending = stopped.value.pending
    assert [r.name for r in pending.requests] == ["transfer"]
    assert (pending.method, pending.memory_id) == ("chat", "u")
    assert RAN == []  # nothing of the round ran, not even the tool without approval
    assert store.get_messages("u") == []
    assert service.resume(pending, {"c1": True}) == "Sent 100 to Bob."
    assert RAN == ["balance", "transfer 100 to Bob"]
    stored = store.get_messages("u")
    assert stored[0] == UserMessage("send Bob 100")
    assert stored[-1] == AiMessage("Sent 100 to Bob.")
    results = [m.text for m in stored if isinstance(m, ToolExecutionResultMessage)]
    assert results == ["1,200", "sent 100 to Bob"]
    with pytest.raises(ConfigurationError, match="resumed already"):
        service.resume(pending, {"c1": True})


def test_a_denied_call_does_not_run_and_the_model_hears_why() -> None:
    service, model, _ = make([TRANSFER, "I did not send it."])
    with pytest.raises(ApprovalRequired) as stopped:
        service.chat("u", "send Bob 100")
    answer = service.resume(stopped.value.pending.id, {"c1": "over the daily limit"})
    assert answer == "I did not send it."
    assert RAN == ["balance"]
    told = model.requests[1].messages[-1]
    assert isinstance(told, ToolExecutionResultMessage)
    assert told.text == "The user did not approve this call: over the daily limit"
    assert told.is_error


def test_decisions_must_decide_every_pending_call() -> None:
    service, _, _ = make([TRANSFER, "x"])
    with pytest.raises(ApprovalRequired) as stopped:
        service.chat("u", "send Bob 100")
    pending = stopped.value.pending
    with pytest.raises(ConfigurationError, match="undecided: c1"):
        service.resume(pending, {})
    with pytest.raises(ConfigurationError, match="not pending: c0"):
        service.resume(pending, {"c1": True, "c0": True})
    with pytest.raises(ConfigurationError, match=r"resume it with service\.resume"):
        asyncio.run(service.aresume(pending, {"c1": True}))
    assert service.resume(pending, {"c1": False}) == "x"  # still pending after the mistakes


def test_async_and_streaming_calls_stop_and_resume() -> None:
    service, _, store = make([TRANSFER, "Done async.", TRANSFER, "Done streaming."])

    async def main() -> str:
        try:
            await service.achat("a", "send Bob 100")
        except ApprovalRequired as stopped:
            return str(await service.aresume(stopped.pending, {"c1": True}))
        raise AssertionError("it should have stopped")

    assert asyncio.run(main()) == "Done async."
    pieces: list[str] = []
    with pytest.raises(ApprovalRequired) as stopped:
        pieces.extend(service.stream("s", "send Bob 100"))
    assert store.get_messages("s") == []
    assert "".join(service.resume(stopped.value.pending, {"c1": True})) == "Done streaming."
    assert store.get_messages("s")[-1] == AiMessage("Done streaming.")


def test_the_service_decides_which_calls_need_approval() -> None:
    service, _, _ = make(
        [calls(("balance", "{}")), "It is 1,200."],
        requires_approval=lambda request: request.name == "balance",
    )
    with pytest.raises(ApprovalRequired) as stopped:
        service.chat("u", "balance?")
    assert service.resume(stopped.value.pending, {"c0": True}) == "It is 1,200."


def test_another_process_resumes_a_call_stopped_here(tmp_path: Path) -> None:
    program = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent.parent.parent)!r})
        from tests.services.test_tool_approval import Bank, RAN, transfer, balance, TRANSFER
        from chatmemory import MessageWindowChatMemory, SqliteChatMemoryStore
        from chatmemory.services import ai_service
        from chatmemory.testing import ScriptedChatModel
        from chatmemory.working import SqliteRecordStore

        store = SqliteChatMemoryStore({str(tmp_path / "chat.db")!r})
        service = ai_service(
            Bank,
            chat_model=ScriptedChatModel(["Sent from the other process."]),
            chat_memory_provider=lambda mid: MessageWindowChatMemory(
                id=mid, max_messages=50, store=store
            ),
            tools=[transfer, balance],
            approvals=SqliteRecordStore({str(tmp_path / "approvals.db")!r}),
        )
        print(service.resume(sys.argv[1], {{"c1": True}}))
        print(RAN)
        """
    )
    chat = SqliteChatMemoryStore(tmp_path / "chat.db")
    service = ai_service(
        Bank,
        chat_model=ScriptedChatModel([TRANSFER]),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=50, store=chat
        ),
        tools=[transfer, balance],
        approvals=SqliteRecordStore(tmp_path / "approvals.db"),
    )
    with pytest.raises(ApprovalRequired) as stopped:
        service.chat("u", "send Bob 100")
    done = subprocess.run(
        [sys.executable, "-c", program, stopped.value.pending.id],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.splitlines() == [
        "Sent from the other process.",
        "['balance', 'transfer 100 to Bob']",
    ]
    messages = chat.get_messages("u")
    assert messages[0] == UserMessage("send Bob 100")
    assert messages[-1] == AiMessage("Sent from the other process.")
    chat.close()


def test_approval_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="`requires_approval` is a function"):
        make([], requires_approval="always")
    with pytest.raises(ConfigurationError, match="`approvals` is a RecordStore"):
        make([], approvals={})
    plain = ai_service(
        Bank,
        chat_model=ScriptedChatModel([]),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=5),
    )
    with pytest.raises(ConfigurationError, match="no call 'x' waits for approval"):
        plain.resume("x", {})
