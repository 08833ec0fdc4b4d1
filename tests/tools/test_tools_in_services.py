"""`@tool` functions inside a service call, through the sync, async and streaming paths: two
tools in parallel, a tool that raises, invalid arguments corrected on the next round, the memory
id, and a memory left well-formed every time."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Protocol

import pytest

from chatmemory import (
    AiMessage,
    ApproximateTokenCountEstimator,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    OpenAiTokenCountEstimator,
    TokenCountEstimator,
    TokenWindowChatMemory,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
)
from chatmemory.services import MemoryId, Result, TokenStream, ai_service
from chatmemory.testing import ScriptedChatModel
from chatmemory.tools import ToolMemoryId, tool
from tests.services.test_tool_loop import well_formed

MODES = ("sync", "async", "stream")


class Agent(Protocol):
    def chat(self, user: Annotated[str, MemoryId], text: str) -> Result[str]: ...

    async def achat(self, user: Annotated[str, MemoryId], text: str) -> Result[str]: ...

    def events(self, user: Annotated[str, MemoryId], text: str) -> TokenStream: ...


def ask(service: Agent, mode: str, user: str, text: str) -> Result[str]:
    if mode == "sync":
        return service.chat(user, text)
    if mode == "async":
        return asyncio.run(service.achat(user, text))
    stream = service.events(user, text)
    for _ in stream:
        pass
    return stream.result


def calls(*pairs: tuple[str, str]) -> AiMessage:
    return AiMessage(
        tool_execution_requests=[
            ToolExecutionRequest(f"c{i}", name, arguments)
            for i, (name, arguments) in enumerate(pairs)
        ]
    )


class Shop:
    """Tools as methods of an object that holds state."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=5)
        self.carts: dict[str, list[str]] = {}

    @tool
    def stock(self, item: str) -> int:
        """How many are in stock."""
        self.barrier.wait()  # both calls must be running at once to pass
        return {"tea": 3, "cake": 0}[item]

    @tool
    def add_to_cart(self, user: ToolMemoryId, item: str, quantity: int = 1) -> str:
        """Put an item in the user's cart."""
        if quantity < 1:
            raise ValueError("quantity must be at least 1")
        self.carts.setdefault(user, []).extend([item] * quantity)
        return f"{quantity} {item} added"


def service_for(
    shop: Shop, script: list[AiMessage | str]
) -> tuple[Agent, ScriptedChatModel, InMemoryChatMemoryStore]:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel(script)
    service = ai_service(
        Agent,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=50, store=store
        ),
        tools=[shop],
        execute_tools_concurrently=True,
    )
    return service, model, store


@pytest.mark.parametrize("mode", MODES)
def test_two_tools_run_in_parallel_results_in_request_order(mode: str) -> None:
    shop = Shop()
    service, model, store = service_for(
        shop, [calls(("stock", '{"item": "tea"}'), ("stock", '{"item": "cake"}')), "Tea: 3."]
    )
    result = ask(service, mode, "ann", "what is in stock?")
    assert result.content == "Tea: 3."
    assert [e.result for e in result.tool_executions] == ["3", "0"]
    assert model.requests[1].messages[-2:] == (
        ToolExecutionResultMessage("c0", "stock", "3"),
        ToolExecutionResultMessage("c1", "stock", "0"),
    )
    assert {t.name for t in model.requests[0].tools} == {"add_to_cart", "stock"}
    assert well_formed(store.get_messages("ann"))


@pytest.mark.parametrize("mode", MODES)
def test_a_raising_tool_and_invalid_arguments_go_back_to_the_model(mode: str) -> None:
    shop = Shop()
    script: list[AiMessage | str] = [
        calls(("add_to_cart", '{"item": "tea", "quantity": "lots"}')),  # invalid: corrected next
        calls(("add_to_cart", '{"item": "tea", "quantity": 0}')),  # raises inside the tool
        calls(("add_to_cart", '{"item": "tea", "quantity": 2}')),
        "Two teas are in your cart.",
    ]
    service, model, store = service_for(shop, script)
    result = ask(service, mode, "bob", "add tea")
    assert result.content == "Two teas are in your cart."
    invalid, raised, done = result.tool_executions
    assert invalid.is_error
    assert "quantity: Input should be a valid integer" in invalid.result
    assert raised.is_error
    assert raised.result == "quantity must be at least 1"
    assert (done.is_error, done.result) == (False, "2 tea added")
    assert shop.carts == {"bob": ["tea", "tea"]}  # the memory id reached the tool
    assert well_formed(store.get_messages("bob"))
    schema = next(t for t in model.requests[0].tools if t.name == "add_to_cart").parameters
    assert list(schema["properties"]) == ["item", "quantity"]


@pytest.mark.parametrize("mode", MODES)
def test_a_made_up_tool_name_is_an_error_result_naming_the_real_ones(mode: str) -> None:
    shop = Shop()
    service, _, store = service_for(shop, [calls(("checkout", "{}")), "Sorry."])
    result = ask(service, mode, "cy", "check out")
    [made_up] = result.tool_executions
    assert made_up.is_error
    assert 'There is no tool named "checkout"' in made_up.result
    assert "add_to_cart" in made_up.result
    assert well_formed(store.get_messages("cy"))


DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"item": ' * 100_000 + '"tea"' + "}" * 100_000
LONG_BROKEN = '{"item": "' + "tea " * 50_000  # no closing quote nor brace


@pytest.mark.parametrize(
    "arguments",
    [DEEP_ARRAY, DEEP_OBJECT, LONG_BROKEN],
    ids=["an array 100k deep", "an object 100k deep", "200 kB of broken JSON"],
)
@pytest.mark.parametrize("mode", MODES)
def test_unreadable_arguments_are_invalid_arguments_told_in_a_sentence(
    mode: str, arguments: str
) -> None:
    """Not the tool failing (a RecursionError), and not 200 kB echoed back to the model."""
    shop = Shop()
    service, model, store = service_for(
        shop, [calls(("add_to_cart", arguments)), calls(("add_to_cart", '{"item": "tea"}')), "ok"]
    )
    result = ask(service, mode, "dee", "add tea")
    unreadable, corrected = result.tool_executions
    assert unreadable.is_error
    assert unreadable.result.startswith('Invalid arguments for the tool "add_to_cart": ')
    assert "recursion" not in unreadable.result
    assert len(unreadable.result) < 400
    told = model.requests[1].messages[-1]
    assert isinstance(told, ToolExecutionResultMessage)
    assert told.text == unreadable.result
    assert (corrected.is_error, corrected.result) == (False, "1 tea added")
    assert shop.carts == {"dee": ["tea"]}
    assert well_formed(store.get_messages("dee"))


@pytest.mark.parametrize(
    "estimator",
    [OpenAiTokenCountEstimator("gpt-4o-mini"), ApproximateTokenCountEstimator()],
    ids=["exact counts", "approximate counts"],
)
@pytest.mark.parametrize("mode", MODES)
def test_arguments_nested_too_deeply_are_counted_by_a_token_window(
    mode: str, estimator: TokenCountEstimator
) -> None:
    """A token window counts the turn's tool calls (each argument of several calls apart):
    arguments too deep to parse count as their text instead of failing the call."""
    shop = Shop()
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel(
        [calls(("add_to_cart", DEEP_OBJECT), ("add_to_cart", DEEP_ARRAY)), "Sorry."]
    )
    service = ai_service(
        Agent,
        chat_model=model,
        chat_memory_provider=lambda mid: TokenWindowChatMemory(
            id=mid, max_tokens=1_000_000, estimator=estimator, store=store
        ),
        tools=[shop],
    )
    result = ask(service, mode, "tok", "add tea")
    assert result.content == "Sorry."
    assert [e.result.startswith("Invalid arguments") for e in result.tool_executions] == [
        True,
        True,
    ]
    assert well_formed(store.get_messages("tok"))
