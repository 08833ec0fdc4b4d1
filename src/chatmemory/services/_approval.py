"""Tool approval (human in the loop): a service call stops before running a tool that needs
someone's approval, and resumes where it stopped once each pending call is approved or denied.

What a stopped call leaves is a record in a `RecordStore` (``approval:<id>``), so another
process may resume it: the memory id and user, the method, the turn's messages so far (the
model's message with the pending calls last) and the user message as the model saw it. Nothing
reaches the memory in between: the conversation stays as it was, well-formed, until the resumed
call completes and commits the whole turn. A record is taken (deleted) by the one resume that
runs it, so a call is never resumed twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._codec.langchain4j import message_from_dict, message_to_dict
from .._errors import ChatMemoryError, ConfigurationError
from .._messages import AiMessage, ChatMessage, SystemMessage, ToolExecutionRequest, UserMessage

__all__ = [
    "ApprovalAccess",
    "ApprovalRequired",
    "Decisions",
    "PendingApproval",
    "Resumed",
    "Suspension",
]

Decisions = Mapping[str, "bool | str"]
"""Per pending call id: True approves it, False denies it, a text denies it saying why (the
model is told)."""


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A service call that stopped for approval: `requests` are the tool calls waiting for a
    decision (`id` names the stopped call for `resume`)."""

    id: str
    method: str
    memory_id: str
    requests: tuple[ToolExecutionRequest, ...]


class ApprovalRequired(ChatMemoryError):
    """A service call stopped before running tools that need approval; nothing was stored.
    Decide each of `pending.requests` and call ``service.resume(pending, decisions)`` (or
    ``await service.aresume(...)`` for an async method), here or in another process."""

    def __init__(self, pending: PendingApproval) -> None:
        names = ", ".join(f"{r.name} ({r.id})" for r in pending.requests)
        super().__init__(
            f"the call stopped for approval of {names}: decide each with "
            f"service.resume({pending.id!r}, {{call_id: True | False | 'why not'}})"
        )
        self.pending = pending


@runtime_checkable
class ApprovalAccess(Protocol):
    """What every service object offers to resume a call stopped for approval; derive a
    declaration from it to have mypy know them."""

    def resume(self, pending: PendingApproval | str, decisions: Decisions) -> Any:
        """Resume a stopped call of a sync method: what the method returns."""
        ...

    async def aresume(self, pending: PendingApproval | str, decisions: Decisions) -> Any:
        """Resume a stopped call of an async method: what the method returns."""
        ...


@dataclass(frozen=True, slots=True)
class Resumed:
    """A stopped turn, continued: its messages so far (the model's message with the pending
    calls last), the user message as the model saw it, and the decisions."""

    messages: tuple[ChatMessage, ...]
    sent: UserMessage
    decisions: Decisions

    @property
    def calls(self) -> Sequence[ToolExecutionRequest]:
        last = self.messages[-1]
        assert isinstance(last, AiMessage)
        return last.tool_execution_requests


@dataclass(frozen=True, slots=True)
class Suspension:
    """What a stopped call keeps in the approvals store."""

    id: str
    method: str
    memory_id: str
    user_id: str | None
    system: SystemMessage | None
    stored: UserMessage
    sent: UserMessage
    messages: tuple[ChatMessage, ...]
    pending: tuple[str, ...]
    """The ids of the calls that wait for a decision."""

    @property
    def key(self) -> str:
        return key_of(self.id)

    def dumps(self) -> str:
        return json.dumps(
            {
                "method": self.method,
                "memory_id": self.memory_id,
                "user_id": self.user_id,
                "system": None if self.system is None else message_to_dict(self.system),
                "stored": message_to_dict(self.stored),
                "sent": message_to_dict(self.sent),
                "messages": [message_to_dict(m) for m in self.messages],
                "pending": list(self.pending),
            }
        )

    @classmethod
    def loads(cls, pending_id: str, text: str) -> Suspension:
        data = json.loads(text)
        system = message_from_dict(data["system"]) if data["system"] is not None else None
        stored, sent = message_from_dict(data["stored"]), message_from_dict(data["sent"])
        assert isinstance(stored, UserMessage)
        assert isinstance(sent, UserMessage)
        assert system is None or isinstance(system, SystemMessage)
        return cls(
            pending_id,
            data["method"],
            data["memory_id"],
            data["user_id"],
            system,
            stored,
            sent,
            tuple(message_from_dict(m) for m in data["messages"]),
            tuple(data["pending"]),
        )

    def approval(self) -> PendingApproval:
        last = self.messages[-1]
        assert isinstance(last, AiMessage)
        waiting = tuple(r for r in last.tool_execution_requests if r.id in self.pending)
        return PendingApproval(self.id, self.method, self.memory_id, waiting)

    def resumed(self, decisions: Decisions) -> Resumed:
        return Resumed(self.messages, self.sent, checked(decisions, self.pending, self.id))


def key_of(pending_id: str) -> str:
    return f"approval:{pending_id}"


def checked(decisions: object, pending: Sequence[str], pending_id: str) -> Decisions:
    """`decisions`, if they decide every pending call and nothing else."""
    if not isinstance(decisions, Mapping):
        raise ConfigurationError(
            f"decisions map each pending call id to True, False or a reason, got {decisions!r}"
        )
    missing = [i for i in pending if i not in decisions]
    unknown = [i for i in decisions if i not in pending]
    wrong = [i for i, d in decisions.items() if not isinstance(d, (bool, str))]
    if missing or unknown or wrong:
        raise ConfigurationError(
            f"the decisions for {pending_id!r} must decide each pending call ("
            + ", ".join(pending)
            + ") with True, False or a reason"
            + (f"; undecided: {', '.join(missing)}" if missing else "")
            + (f"; not pending: {', '.join(map(str, unknown))}" if unknown else "")
            + (f"; not a decision: {', '.join(map(str, wrong))}" if wrong else "")
        )
    return decisions


def denial(decision: bool | str) -> str | None:
    """What the model is told of a denied call (None: approved)."""
    if decision is True:
        return None
    reason = decision.strip() if isinstance(decision, str) else ""
    return "The user did not approve this call" + (f": {reason}" if reason else ".")
