"""Extension hooks as LangChain4j has them: a chat request transformer, a system message
transformer, and invocation parameters that reach tools, tool providers and transformers (never
the model or the memory)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Annotated, Any, Protocol

import pytest

from chatmemory import (
    AiMessage,
    ConfigurationError,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    SystemMessage,
    ToolExecutionRequest,
    UserMessage,
)
from chatmemory.models import ChatParameters, ChatRequest
from chatmemory.services import (
    InvocationContext,
    InvocationParameters,
    MemoryId,
    UserId,
    ai_service,
    system_message,
)
from chatmemory.testing import ScriptedChatModel
from chatmemory.tools import ToolContext, tool


class Support(Protocol):
    @system_message("You help the customers of {{company}}.")
    def chat(
        self,
        user: Annotated[str, MemoryId],
        who: Annotated[str, UserId],
        text: Annotated[str, UserMessage],
        company: str,
        params: InvocationParameters | None = None,
    ) -> str: ...

    @system_message("You help the customers of {{company}}.")
    async def achat(
        self,
        user: Annotated[str, MemoryId],
        who: Annotated[str, UserId],
        text: Annotated[str, UserMessage],
        company: str,
        params: InvocationParameters | None = None,
    ) -> str: ...

    @system_message("You help the customers of {{company}}.")
    def stream(
        self,
        user: Annotated[str, MemoryId],
        who: Annotated[str, UserId],
        text: Annotated[str, UserMessage],
        company: str,
        params: InvocationParameters | None = None,
    ) -> Iterator[str]: ...


SEEN: list[ToolContext] = []


@tool
def plan_of(context: ToolContext) -> str:
    """The customer's plan."""
    SEEN.append(context)
    return f"plan of {context.user_id} at {context.parameters.get('tenant')}"


def make(script: list[Any], **options: Any) -> tuple[Any, ScriptedChatModel, Any]:
    SEEN.clear()
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel(script)
    service = ai_service(
        Support,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=20, store=store
        ),
        **options,
    )
    return service, model, store


def ask(service: Any, mode: str, **arguments: Any) -> str:
    if mode == "sync":
        return str(service.chat(**arguments))
    if mode == "async":
        return str(asyncio.run(service.achat(**arguments)))
    return "".join(service.stream(**arguments))


@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
def test_a_request_transformer_changes_what_the_model_gets_not_the_memory(mode: str) -> None:
    seen: list[InvocationContext] = []

    def cooler(request: ChatRequest, context: InvocationContext) -> ChatRequest:
        seen.append(context)
        return ChatRequest(
            [*request.messages, SystemMessage(f"tenant: {context.parameters['tenant']}")],
            tools=request.tools,
            parameters=ChatParameters(temperature=0.1),
        )

    service, model, store = make(["Hello."], chat_request_transformer=cooler)
    answer = ask(
        service,
        mode,
        user="c1",
        who="ann",
        text="hi",
        company="ACME",
        params=InvocationParameters(tenant="acme-eu"),
    )
    assert answer == "Hello."
    sent = model.requests[0]
    assert sent.parameters == ChatParameters(temperature=0.1)
    assert sent.messages[-1] == SystemMessage("tenant: acme-eu")
    assert seen[0] == InvocationContext(
        "c1", "ann", UserMessage("hi"), InvocationParameters(tenant="acme-eu")
    )
    assert store.get_messages("c1") == [
        SystemMessage("You help the customers of ACME."),
        UserMessage("hi"),
        AiMessage("Hello."),
    ]


def test_a_system_message_transformer_sees_the_invocation() -> None:
    def localized(text: str, context: InvocationContext) -> str:
        return f"{text} Answer in {context.parameters.get('language', 'English')}."

    service, model, _ = make(["Bonjour."], system_message_transformer=localized)
    service.chat("c1", "ann", "salut", "ACME", InvocationParameters(language="French"))
    assert model.requests[0].messages[0] == SystemMessage(
        "You help the customers of ACME. Answer in French."
    )
    blank, model, _ = make(["Hi."], system_message_transformer=lambda text, context: " ")
    blank.chat("c2", "bob", "hi", "ACME")
    assert not any(isinstance(m, SystemMessage) for m in model.requests[0].messages)


@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
def test_invocation_parameters_reach_tools_and_providers_not_the_model(mode: str) -> None:
    asked: list[ToolContext] = []

    class Provider:
        dynamic = False

        def provide(self, context: ToolContext) -> list[Any]:
            asked.append(context)
            return []

    call = AiMessage(tool_execution_requests=[ToolExecutionRequest("c0", "plan_of", "{}")])
    service, model, _ = make(["x", call, "Gold."], tools=[plan_of], tool_providers=[Provider()])
    ask(service, mode, user="c1", who="ann", text="warm up", company="ACME")
    answer = ask(
        service,
        mode,
        user="c1",
        who="ann",
        text="my plan?",
        company="ACME",
        params=InvocationParameters(tenant="acme-eu"),
    )
    assert answer == "Gold."
    assert SEEN[0].parameters == {"tenant": "acme-eu"}
    assert SEEN[0].user_message == UserMessage("my plan?")
    assert asked[-1].parameters == {"tenant": "acme-eu"}
    assert asked[0].parameters == {}
    assert model.requests[2].messages[-1].text == "plan of ann at acme-eu"  # type: ignore[union-attr]
    spec = model.requests[1].tools[0]
    assert spec.parameters is None or "context" not in str(spec.parameters)


def test_hooks_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="`chat_request_transformer` is a function"):
        make([], chat_request_transformer="cool")
    service, _, _ = make(["x"], chat_request_transformer=lambda request, context: None)
    with pytest.raises(ConfigurationError, match="returns a ChatRequest, got None"):
        service.chat("c", "ann", "hi", "ACME")
    service, _, _ = make(["x"], system_message_transformer=lambda text, context: 3)
    with pytest.raises(ConfigurationError, match="returns the system message's text"):
        service.chat("c", "ann", "hi", "ACME")
    with pytest.raises(ConfigurationError, match="must be InvocationParameters"):
        make(["x"])[0].chat("c", "ann", "hi", "ACME", params=["tenant"])
