"""`OpenAiModerationModel` with the real `openai` SDK against a local server, the scripted
moderation model for users' tests, and both behind a service's `@moderate` method."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, Protocol

import pytest

from chatmemory import (
    AiMessage,
    ConfigurationError,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    ModelError,
    ModerationError,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    ai_service,
    moderate,
)
from chatmemory.models import AsyncModerationModel, Moderation, ModerationModel
from chatmemory.models.openai_moderation import OpenAiModerationModel
from chatmemory.testing import ScriptedChatModel, ScriptedModerationModel

from .fake_server import FakeServer, Reply, assert_unreadable, not_json_objects


def verdicts(*flags: bool, **scores: float) -> dict[str, Any]:
    results = [
        {
            "flagged": flag,
            "categories": {"violence": flag, "harassment": False, "harassment/threatening": flag},
            "category_scores": {"violence": 0.9 if flag else 0.01, **scores},
            "category_applied_input_types": {"violence": ["text"]},
        }
        for flag in flags
    ]
    return {"id": "modr-1", "model": "omni-moderation-latest", "results": results}


@pytest.fixture
def moderation(server: FakeServer) -> Iterator[OpenAiModerationModel]:
    model = OpenAiModerationModel(base_url=f"{server.url}/v1", api_key="sk-test", max_retries=0)
    yield model
    model.close()


def test_every_text_goes_in_one_request_and_the_first_flagged_one_is_named(
    server: FakeServer, moderation: OpenAiModerationModel
) -> None:
    server.reply(Reply(body=verdicts(False, True, True, False)))
    verdict = moderation.moderate(
        [
            SystemMessage("Be kind."),
            UserMessage("hello"),
            AiMessage(tool_execution_requests=[ToolExecutionRequest(id="1", name="t")]),
            ToolExecutionResultMessage(id="1", tool_name="t", text="tool output"),
            UserMessage("I will hurt you"),
            AiMessage("and more"),
        ]
    )
    (sent,) = server.requests
    assert sent.path == "/v1/moderations"
    assert sent.body == {
        "model": "omni-moderation-latest",
        "input": ["Be kind.", "hello", "I will hurt you", "and more"],
    }
    assert verdict.flagged
    assert verdict.flagged_text == "hello"
    assert verdict.categories == ("harassment/threatening", "violence")
    assert verdict.scores == {"violence": 0.9}


def test_nothing_flagged_is_a_clean_verdict_and_a_text_is_judged_alone(
    server: FakeServer, moderation: OpenAiModerationModel
) -> None:
    server.reply(Reply(body=verdicts(False)))
    verdict = moderation.moderate("a kind word")
    assert not verdict.flagged
    assert verdict == Moderation.not_flagged()
    assert server.requests[0].body["input"] == ["a kind word"]


def test_no_text_makes_no_request(server: FakeServer, moderation: OpenAiModerationModel) -> None:
    assert moderation.moderate([]) == Moderation.not_flagged()
    assert moderation.moderate("") == Moderation.not_flagged()
    assert asyncio.run(moderation.amoderate([])) == Moderation.not_flagged()
    assert server.requests == []


def test_async_moderation_sends_the_same_request(
    server: FakeServer, moderation: OpenAiModerationModel
) -> None:
    server.reply(Reply(body=verdicts(True)))

    async def main() -> Moderation:
        try:
            return await moderation.amoderate([UserMessage("a threat")])
        finally:
            await moderation.aclose()

    verdict = asyncio.run(main())
    assert verdict.flagged_text == "a threat"
    assert server.requests[0].body == {"model": "omni-moderation-latest", "input": ["a threat"]}


def test_provider_errors_keep_the_status_and_message(
    server: FakeServer, moderation: OpenAiModerationModel
) -> None:
    server.reply(Reply(401, {"error": {"message": "Incorrect API key provided"}}))
    with pytest.raises(ModelError, match=r"HTTP 401.*Incorrect API key.*check the API key") as e:
        moderation.moderate("hi")
    assert e.value.status == 401
    assert not e.value.retriable


def judge(moderation: OpenAiModerationModel, texts: list[str], way: str) -> Moderation:
    if way == "moderate":
        return moderation.moderate([UserMessage(text) for text in texts])

    async def main() -> Moderation:
        try:
            return await moderation.amoderate([UserMessage(text) for text in texts])
        finally:
            await moderation.aclose()

    return asyncio.run(main())


NOT_JSON_OBJECTS = not_json_objects("{'results': []}", verdicts(True))


@pytest.mark.parametrize("way", ["moderate", "amoderate"])
@pytest.mark.parametrize(("reply", "said"), NOT_JSON_OBJECTS.values(), ids=NOT_JSON_OBJECTS)
def test_an_answer_that_is_not_a_json_object_is_a_model_error_not_retried(
    server: FakeServer, moderation: OpenAiModerationModel, reply: Reply, said: str, way: str
) -> None:
    server.reply(reply)
    assert_unreadable(lambda: judge(moderation, ["hi"], way), said, "openai")


def result(**fields: Any) -> dict[str, Any]:
    return {"results": [{**verdicts(True)["results"][0], **fields}]}


WRONG_SHAPES = {
    "results not an array": ({"results": "none"}, "`results` must be an array"),
    "fewer results than texts": ({"results": []}, "0 verdicts for 1 texts"),
    "a result not an object": ({"results": [1]}, r"`results\[0\]` must be an object"),
    "flagged as text": (result(flagged="false"), r"`results\[0\].flagged` must be true or false"),
    "no flagged": (
        {"results": [{"categories": {}}]},
        r"`results\[0\].flagged` must be true or false",
    ),
    "categories as text": (
        result(categories="violence"),
        r"`results\[0\].categories` must be an object",
    ),
    "a score as text": (
        result(category_scores={"violence": "high"}),
        r"`results\[0\].category_scores.violence` must be a number",
    ),
}


@pytest.mark.parametrize("way", ["moderate", "amoderate"])
@pytest.mark.parametrize(("body", "said"), WRONG_SHAPES.values(), ids=WRONG_SHAPES)
def test_an_answer_of_the_wrong_shape_is_a_model_error_not_a_verdict(
    server: FakeServer, moderation: OpenAiModerationModel, body: Any, said: str, way: str
) -> None:
    """Nothing is passed as clean that the endpoint did not judge."""
    server.reply(Reply(body=body))
    with pytest.raises(ModelError, match=said) as caught:
        judge(moderation, ["a threat"], way)
    assert "cannot read" in str(caught.value)
    assert not caught.value.retriable


def test_the_model_is_named_and_checked(server: FakeServer) -> None:
    model = OpenAiModerationModel(
        model="text-moderation-stable", base_url=f"{server.url}/v1", api_key="k"
    )
    assert repr(model) == (
        f"OpenAiModerationModel(model='text-moderation-stable', base_url='{server.url}/v1')"
    )
    assert isinstance(model, ModerationModel)
    assert isinstance(model, AsyncModerationModel)
    with pytest.raises(ConfigurationError, match="`model` must be a non-empty str"):
        OpenAiModerationModel(model="", api_key="k")


def test_a_verdict_checks_its_text() -> None:
    with pytest.raises(ConfigurationError, match="the flagged text or None"):
        Moderation(42)  # type: ignore[arg-type]
    verdict = Moderation("x", ["hate"], {"hate": 1.0})
    assert verdict.categories == ("hate",)
    with pytest.raises(TypeError):
        verdict.scores["hate"] = 0.0  # type: ignore[index]


def test_moderation_refuses_what_is_not_messages(moderation: OpenAiModerationModel) -> None:
    with pytest.raises(ConfigurationError, match="not a list of chat messages"):
        moderation.moderate({"role": "user"})  # type: ignore[arg-type]


# -- the scripted moderation model -------------------------------------------------------------


def test_scripted_moderation_flags_words_or_by_a_rule() -> None:
    words = ScriptedModerationModel(flag=["Bomb"], categories=["violence"])
    verdict = words.moderate([SystemMessage("sys"), UserMessage("a BOMB here")])
    assert verdict.flagged_text == "a BOMB here"
    assert verdict.categories == ("violence",)
    assert verdict.scores == {"violence": 1.0}
    assert not words.moderate("fine").flagged
    assert words.asked == [["sys", "a BOMB here"], ["fine"]]
    rule = ScriptedModerationModel(flag=lambda text: len(text) > 5)
    assert asyncio.run(rule.amoderate("longer text")).flagged_text == "longer text"
    assert not ScriptedModerationModel().moderate("anything").flagged
    with pytest.raises(ConfigurationError, match=r"write flag=\['bomb'\]"):
        ScriptedModerationModel(flag="bomb")


# -- behind a service ----------------------------------------------------------------------------


class Support(Protocol):
    @moderate
    def chat(self, text: str) -> str: ...


class AsyncSupport(Protocol):
    @moderate
    async def chat(self, text: str) -> str: ...


def test_a_flagged_input_through_the_openai_endpoint_stores_nothing(
    server: FakeServer, moderation: OpenAiModerationModel
) -> None:
    server.reply(Reply(body=verdicts(True)))
    store = InMemoryChatMemoryStore()
    service = ai_service(
        Support,
        chat_model=ScriptedChatModel(["Here is how."]),
        chat_memory=MessageWindowChatMemory(id="default", max_messages=10, store=store),
        moderation_model=moderation,
    )
    with pytest.raises(ModerationError, match='Text "how do I hurt someone" violates') as e:
        service.chat("how do I hurt someone")
    assert isinstance(e.value.moderation, Moderation)
    assert e.value.moderation.categories == ("harassment/threatening", "violence")
    assert store.get_messages("default") == []


def test_an_async_service_awaits_an_async_only_moderation_model() -> None:
    class AsyncOnly:
        def __init__(self) -> None:
            self.inner = ScriptedModerationModel(flag=["bomb"])

        async def amoderate(self, messages: Any) -> Moderation:
            return await self.inner.amoderate(messages)

    service = ai_service(
        AsyncSupport, chat_model=ScriptedChatModel(["ok", "ok"]), moderation_model=AsyncOnly()
    )
    assert asyncio.run(service.chat("hello")) == "ok"
    with pytest.raises(ModerationError):
        asyncio.run(service.chat("a bomb"))


def test_a_moderation_model_must_fit_the_method() -> None:
    class AsyncOnly:
        async def amoderate(self, messages: Any) -> Moderation:
            raise AssertionError("never called")

    with pytest.raises(ConfigurationError, match="only has amoderate: declare the method `async"):
        ai_service(Support, chat_model=ScriptedChatModel([]), moderation_model=AsyncOnly())
    with pytest.raises(ConfigurationError, match="is not a moderation model: it needs moderate"):
        ai_service(Support, chat_model=ScriptedChatModel([]), moderation_model=object())
