"""Guardrails: functions that check a call's input before the model and its answer after it
(LangChain4j's InputGuardrail/OutputGuardrail, pydantic-ai's output_validator). An input check
passes, rewrites or refuses; an output check passes, replaces, sends the model back with a
message (bounded) or refuses; a refused call stores nothing, on every path."""

from __future__ import annotations

from typing import Any, Protocol

import pytest
from pydantic import BaseModel

from chatmemory import (
    AiMessage,
    ConfigurationError,
    GuardrailError,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    ModelRetry,
    UserMessage,
)
from chatmemory.services import ai_service
from chatmemory.testing import ScriptedChatModel
from tests.services.modes import MODES, EveryWay, ask


class City(BaseModel):
    name: str
    population: int


class Extractor(Protocol):
    def city(self, text: str) -> City: ...


def make(script: list[Any], **options: Any) -> tuple[Any, ScriptedChatModel, Any]:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel(script)
    service = ai_service(
        EveryWay,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=20, store=store
        ),
        **options,
    )
    return service, model, store


@pytest.mark.parametrize("mode", MODES)
def test_an_input_guardrail_refuses_and_nothing_is_stored_nor_sent(mode: str) -> None:
    def no_passwords(message: UserMessage) -> None:
        if "password" in message.text:
            raise GuardrailError("no passwords, please")

    service, model, store = make(["never"], input_guardrails=[no_passwords])
    with pytest.raises(GuardrailError, match="no passwords"):
        ask(service, mode, "my password is hunter2")
    assert model.requests == []
    assert store.get_messages("u") == []


@pytest.mark.parametrize("mode", MODES)
def test_an_input_guardrail_rewrites_what_is_sent_and_stored(mode: str) -> None:
    def redact(message: UserMessage) -> str:
        return message.text.replace("4111 1111 1111 1111", "[card]")

    service, model, store = make(["noted"], input_guardrails=[redact, lambda m: None])
    assert ask(service, mode, "charge 4111 1111 1111 1111") == "noted"
    assert model.requests[0].messages[-1] == UserMessage("charge [card]")
    assert store.get_messages("u") == [UserMessage("charge [card]"), AiMessage("noted")]


@pytest.mark.parametrize("mode", MODES)
def test_an_output_guardrail_sends_the_model_back_with_its_message(mode: str) -> None:
    def no_apologies(answer: str) -> None:
        if answer.startswith("Sorry"):
            raise ModelRetry("Do not apologize; answer the question.")

    service, model, store = make(
        ["Sorry, I cannot.", "It is 4 pm."], output_guardrails=[no_apologies]
    )
    assert ask(service, mode, "what time is it?") == (
        "Sorry, I cannot.It is 4 pm." if mode in ("stream", "astream") else "It is 4 pm."
    )
    again = model.requests[1].messages
    assert again[-2] == AiMessage("Sorry, I cannot.")
    assert again[-1] == UserMessage("Do not apologize; answer the question.")
    # the memory keeps the exchange as it ended, not the rejected answer
    assert store.get_messages("u") == [UserMessage("what time is it?"), AiMessage("It is 4 pm.")]


@pytest.mark.parametrize("mode", MODES)
def test_an_output_guardrail_that_keeps_refusing_fails_the_call_and_stores_nothing(
    mode: str,
) -> None:
    def never(answer: str) -> None:
        raise ModelRetry("try harder")

    service, model, store = make(["a", "b", "c", "d"], output_guardrails=[never])
    with pytest.raises(GuardrailError, match="refused the answer after 2 tries") as raised:
        ask(service, mode, "hi")
    assert raised.value.stage == "output"
    assert len(model.requests) == 3  # the first answer and two more
    assert store.get_messages("u") == []


def test_a_refusal_stores_nothing_even_when_failed_calls_keep_the_user_message() -> None:
    def refuse(answer: str) -> None:
        raise GuardrailError("off topic", stage="output")

    service, _, store = make(
        ["about cats"], output_guardrails=[refuse], keep_user_message_on_error=True
    )
    with pytest.raises(GuardrailError, match="off topic"):
        service.chat("u", "tell me about dogs")
    assert store.get_messages("u") == []


def test_output_guardrails_see_and_may_replace_the_typed_answer() -> None:
    seen: list[Any] = []

    def plausible(city: City) -> City | None:
        seen.append(city)
        if city.population < 0:
            raise ModelRetry("A population is never negative.")
        return city.model_copy(update={"name": city.name.title()}) if city.name.islower() else None

    model = ScriptedChatModel(
        ['{"name": "lyon", "population": -1}', '{"name": "lyon", "population": 522000}']
    )
    service = ai_service(Extractor, chat_model=model, output_guardrails=[plausible])
    assert service.city("Lyon has 522,000 people") == City(name="Lyon", population=522000)
    assert [c.population for c in seen] == [-1, 522000]


def test_guardrail_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="`input_guardrails` holds functions"):
        make([], input_guardrails=["strict"])
    with pytest.raises(ConfigurationError, match="`guardrail_retries` must be an int >= 0"):
        make([], guardrail_retries=-1)
    service, _, _ = make(["x"], input_guardrails=[lambda m: 42])
    with pytest.raises(ConfigurationError, match="returns None, a text or a UserMessage"):
        service.chat("u", "hi")
