"""Declarations as LangChain4j users expect them (issue 22, items 13-15): contents in the user
message in declared order (also through **kwargs and a UserMessage-marked parameter), blank
prompts refused, annotations resolved where `ai_service(...)` is called."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Protocol

import pytest
from pydantic import BaseModel

from chatmemory import (
    AudioContent,
    ConfigurationError,
    Content,
    ImageContent,
    Prompt,
    PromptTemplate,
    TextContent,
    UserMessage,
)
from chatmemory.services import ai_service, user_message
from chatmemory.testing import ScriptedChatModel

CAT = ImageContent(url="https://example.com/cat.png")
DOG = ImageContent(url="https://example.com/dog.png")
SOUND = AudioContent(url="https://example.com/meow.wav", mime_type="audio/wav")


class Vision(Protocol):
    def before(self, image: ImageContent, text: str) -> str: ...

    def marked(
        self, media: Annotated[AudioContent | Content | list[Content], UserMessage]
    ) -> str: ...

    def mixed(self, first: ImageContent, text: str, rest: list[ImageContent]) -> str: ...

    @user_message("Compare {{a}} with {{b}}")
    def extra(self, a: str, b: str, **more: Any) -> str: ...

    def choice(
        self, text: str, picture: ImageContent | list[ImageContent] | None = None
    ) -> str: ...


class AsyncVision(Protocol):
    async def before(self, image: ImageContent, text: str) -> str: ...

    @user_message("Compare {{a}} with {{b}}")
    async def extra(self, a: str, b: str, **more: Any) -> str: ...


def sent(model: ScriptedChatModel) -> UserMessage:
    message = model.requests[-1].messages[-1]
    assert isinstance(message, UserMessage)
    return message


# -- 13: contents ------------------------------------------------------------------------------


def test_contents_keep_the_declared_parameter_order() -> None:
    model = ScriptedChatModel(lambda request: "ok")
    service = ai_service(Vision, chat_model=model)
    service.before(CAT, "what is it?")
    assert sent(model) == UserMessage(contents=[CAT, TextContent("what is it?")])
    service.mixed(CAT, "and these?", [DOG, CAT])
    assert sent(model).contents == (CAT, TextContent("and these?"), DOG, CAT)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (SOUND, (SOUND,)),
        (CAT, (CAT,)),
        ([CAT, SOUND], (CAT, SOUND)),
        ((DOG,), (DOG,)),
        ("plain text", (TextContent("plain text"),)),
    ],
)
def test_a_user_message_parameter_holding_contents_sends_them(
    value: object, expected: tuple[Content, ...]
) -> None:
    model = ScriptedChatModel(lambda request: "ok")
    ai_service(Vision, chat_model=model).marked(value)  # type: ignore[arg-type]
    assert sent(model).contents == expected


def test_an_unmarked_union_of_contents_and_lists_is_contents() -> None:
    model = ScriptedChatModel(lambda request: "ok")
    service = ai_service(Vision, chat_model=model)
    service.choice("one", CAT)
    assert sent(model).contents == (TextContent("one"), CAT)
    service.choice("two", [CAT, DOG])
    assert sent(model).contents == (TextContent("two"), CAT, DOG)
    service.choice("none")
    assert sent(model) == UserMessage("none")
    with pytest.raises(ConfigurationError, match="parameter 'picture' holds contents"):
        service.choice("bad", "not an image")  # type: ignore[arg-type]


def test_contents_passed_through_kwargs_join_the_message() -> None:
    model = ScriptedChatModel(lambda request: "ok")
    service = ai_service(Vision, chat_model=model)
    service.extra("a cat", "a dog", cat=CAT, others=[DOG, SOUND], note="not content")
    assert sent(model).contents == (TextContent("Compare a cat with a dog"), CAT, DOG, SOUND)


def test_contents_reach_the_model_on_the_async_and_streaming_paths() -> None:
    model = ScriptedChatModel(lambda request: "ok")
    service = ai_service(AsyncVision, chat_model=model)

    async def main() -> None:
        await service.before(CAT, "what?")
        await service.extra("x", "y", image=DOG)

    asyncio.run(main())
    assert model.requests[0].messages[-1] == UserMessage(contents=[CAT, TextContent("what?")])
    assert sent(model).contents == (TextContent("Compare x with y"), DOG)
    streaming = ScriptedChatModel(lambda request: "ok")
    ai_service(Vision, streaming_chat_model=streaming).extra("x", "y", image=CAT)
    assert sent(streaming).contents == (TextContent("Compare x with y"), CAT)


# -- 14: blank prompts ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", " ", "\n\t"])
def test_a_blank_prompt_is_refused(text: str) -> None:
    with pytest.raises(ConfigurationError, match="a prompt must be non-blank text"):
        Prompt(text)
    assert Prompt("hi").to_user_message() == UserMessage("hi")


def test_a_template_that_renders_blank_is_refused() -> None:
    template = PromptTemplate("{{it}}")
    with pytest.raises(ConfigurationError, match="renders to blank text"):
        template.apply("  ")
    assert template.apply("x").text == "x"

    class Blank(Protocol):
        @user_message("{{text}}")
        def chat(self, text: str) -> str: ...

    model = ScriptedChatModel(lambda request: "ok")
    with pytest.raises(ConfigurationError, match="renders to blank text"):
        ai_service(Blank, chat_model=model).chat(" ")
    assert model.requests == []


# -- 15: annotations resolved where ai_service(...) is called ----------------------------------


def test_a_service_declared_in_a_function_resolves_its_local_names() -> None:
    from chatmemory.services import Result as LocalResult

    class Price(BaseModel):
        amount: int

    class Shop(Protocol):
        def price(self, item: str) -> LocalResult[Price]: ...

    model = ScriptedChatModel(['{"amount": 3}'])
    result = ai_service(Shop, chat_model=model).price("tea")
    assert isinstance(result, LocalResult)
    assert result.content == Price(amount=3)


def test_a_service_declared_in_a_coroutine_resolves_its_local_names() -> None:
    async def main() -> object:
        from chatmemory.services import Result as LocalResult

        class Shop(Protocol):
            async def price(self, item: str) -> LocalResult[int]: ...

        service = ai_service(Shop, chat_model=ScriptedChatModel(["7"]))
        return (await service.price("tea")).content

    assert asyncio.run(main()) == 7


def test_a_name_found_nowhere_says_where_to_import_it() -> None:
    class Shop(Protocol):
        def price(self, item: str) -> Missing: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(ConfigurationError, match=r"or where ai_service\(\.\.\.\) is called"):
        ai_service(Shop, chat_model=ScriptedChatModel(["x"]))


Price = int  # the module's own name for what a price is


def test_the_callers_names_never_shadow_the_declaring_modules() -> None:
    class Shop(Protocol):
        def price(self, item: str) -> Price: ...

    def elsewhere() -> Any:
        Price = str  # noqa: F841  (a local of the caller, of the same name)
        return ai_service(Shop, chat_model=ScriptedChatModel(["7"]))

    assert elsewhere().price("tea") == 7


def test_a_structured_prompt_renders_itself_as_the_user_message() -> None:
    import dataclasses as dc

    from chatmemory.services import structured_prompt

    @structured_prompt(["Create a recipe of a {{dish}}", "using only {{ingredients}}."])
    @dc.dataclass
    class RecipePrompt:
        dish: str
        ingredients: list[str]

    @structured_prompt("Summarize {{text}} in {{words}} words.")
    class SummaryPrompt(BaseModel):
        text: str
        words: int

    class Chef(Protocol):
        def recipe(self, prompt: RecipePrompt) -> str: ...

        def summary(self, prompt: SummaryPrompt) -> str: ...

    model = ScriptedChatModel(["Salad.", "Short."])
    chef = ai_service(Chef, chat_model=model)
    chef.recipe(RecipePrompt("salad", ["cucumber", "tomato"]))
    chef.summary(SummaryPrompt(text="the news", words=10))
    assert model.requests[0].messages[-1] == UserMessage(
        "Create a recipe of a salad\nusing only ['cucumber', 'tomato']."
    )
    assert model.requests[1].messages[-1] == UserMessage("Summarize the news in 10 words.")
    with pytest.raises(ConfigurationError, match="uses cuisine, which Dish has no field for"):

        @structured_prompt("A {{cuisine}} dish")
        @dc.dataclass
        class Dish:
            name: str

    with pytest.raises(ConfigurationError, match="goes on a dataclass or a pydantic model"):
        structured_prompt("{{x}}")(int)
