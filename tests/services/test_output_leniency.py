"""Structured output read as LangChain4j reads it (issue 22, items 10-12): a wrong JSON shape
is an error (so output retries fire), enums and integers are read leniently at any depth, and
`Result[AiMessage]` hands back the message as is."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
from collections.abc import Callable
from typing import Annotated, Any, Literal, Protocol

import pytest
from pydantic import BaseModel, Field, WithJsonSchema
from typing_extensions import TypedDict

from chatmemory import (
    AiMessage,
    ConfigurationError,
    MessageWindowChatMemory,
    OutputParsingError,
    UserMessage,
)
from chatmemory.models import Capability
from chatmemory.services import Result, ai_service
from chatmemory.testing import ScriptedChatModel


class Animal(enum.Enum):
    CAT = "cat"
    DOG = "dog"


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


class Pet(BaseModel):
    name: str
    kind: Animal
    others: list[Animal] = []
    level: Level = Level.LOW
    by_name: dict[str, Animal] = {}
    legs: int = 4
    tagged: Animal | None = Field(default=None, alias="tag")


@dataclasses.dataclass
class Stall:
    animal: Animal
    pair: tuple[Animal, int] = (Animal.CAT, 0)


class Herd(TypedDict):
    animals: list[Animal]


class Tree(BaseModel):
    kind: Animal
    children: list[Tree] = []


class Vote(BaseModel):
    answer: Literal["yes", "no"]
    animal: Animal


class Odd(BaseModel):
    animal: Annotated[Animal, WithJsonSchema({"type": "string", "enum": ["CAT", "DOG"]})]


class Reads(Protocol):
    def words(self, q: str) -> list[str]: ...
    def animals(self, q: str) -> set[Animal]: ...
    def animal(self, q: str) -> Animal: ...
    def integer(self, q: str) -> int: ...
    def pet(self, q: str) -> Pet: ...
    def stall(self, q: str) -> Stall: ...
    def herd(self, q: str) -> Herd: ...
    def tree(self, q: str) -> Tree: ...
    def series(self, q: str) -> tuple[int, ...]: ...
    def odd(self, q: str) -> Odd: ...
    def votes(self, q: str) -> list[Vote]: ...
    def message(self, q: str) -> Result[AiMessage]: ...


class AsyncReads(Protocol):
    async def words(self, q: str) -> list[str]: ...
    async def pet(self, q: str) -> Pet: ...
    async def message(self, q: str) -> Result[AiMessage]: ...


Path = Callable[[str, str], Any]


def sync_path(method: str, answer: str) -> Any:
    return getattr(ai_service(Reads, chat_model=ScriptedChatModel([answer])), method)("q")


def async_path(method: str, answer: str) -> Any:
    service = ai_service(AsyncReads, chat_model=ScriptedChatModel([answer]))
    return asyncio.run(getattr(service, method)("q"))


def streaming_path(method: str, answer: str) -> Any:
    service = ai_service(Reads, streaming_chat_model=ScriptedChatModel([answer]))
    return getattr(service, method)("q")


PATHS = [sync_path, async_path, streaming_path]


# -- 10: valid JSON of the wrong shape is no list of one item ----------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "answer",
    [
        "{}",
        '{"values": null}',
        '{"values": false}',
        '{"values": "banana"}',
        '{"values": {"name": "Klaus"}}',
        '{"banana": [{"name": "Klaus"}]}',
        "{oops}",
        "{",
        '```json\n{"values": null}\n```',
    ],
)
def test_a_json_object_of_the_wrong_shape_is_no_list_of_one_item(path: Path, answer: str) -> None:
    with pytest.raises(OutputParsingError) as caught:
        path("words", answer)
    assert caught.value.text == answer
    assert caught.value.reason.startswith('expected a JSON array, or {"values": [...]}')


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("CAT\nDOG", ["CAT", "DOG"]),
        ('["CAT", "DOG"]', ["CAT", "DOG"]),
        ('{"values": []}', []),
        ("[CAT]\n[DOG]", ["[CAT]", "[DOG]"]),
    ],
)
def test_lines_and_arrays_still_read_as_before(answer: str, expected: list[str]) -> None:
    assert sync_path("words", answer) == expected


def test_a_wrong_shape_is_asked_again_with_output_retries() -> None:
    model = ScriptedChatModel(['{"values": null}', '{"values": ["a", "b"]}'])
    memory = MessageWindowChatMemory(max_messages=10)
    service = ai_service(Reads, chat_model=model, chat_memory=memory, output_retries=1)
    assert service.words("list") == ["a", "b"]
    assert len(model.requests) == 2
    correction = model.requests[1].messages[-1]
    assert isinstance(correction, UserMessage)
    assert "values: Input should be a valid array (got None)" in correction.text


def test_an_enum_set_refuses_an_object_it_cannot_read() -> None:
    with pytest.raises(OutputParsingError):
        sync_path("animals", '{"values": "CAT"}')
    assert sync_path("animals", "cat\nDog") == {Animal.CAT, Animal.DOG}


# -- 11: the same leniency at any depth ----------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_enums_inside_a_model_are_read_by_name_in_any_case(path: Path) -> None:
    answer = (
        '{"name": "Tom", "kind": "Cat", "others": ["dog", "CAT", "Dog."], "level": "high", '
        '"by_name": {"a": "DOG"}, "legs": "4.0", "tag": "cAt"}'
    )
    assert path("pet", answer) == Pet(
        name="Tom",
        kind=Animal.CAT,
        others=[Animal.DOG, Animal.CAT, Animal.DOG],
        level=Level.HIGH,
        by_name={"a": Animal.DOG},
        legs=4,
        tag=Animal.CAT,
    )


def test_enums_inside_dataclasses_typeddicts_and_recursive_models() -> None:
    assert sync_path("stall", '{"animal": "DOG", "pair": ["Cat", "1e1"]}') == Stall(
        Animal.DOG, (Animal.CAT, 10)
    )
    assert sync_path("herd", '{"animals": ["dog", "cat"]}') == {"animals": [Animal.DOG, Animal.CAT]}
    tree = sync_path("tree", '{"kind": "DOG", "children": [{"kind": "Cat", "children": []}]}')
    assert tree == Tree(kind=Animal.DOG, children=[Tree(kind=Animal.CAT)])


def test_literals_and_enums_in_a_list_of_models_are_read_in_any_case() -> None:
    answer = '{"values": [{"answer": "YES", "animal": "dog"}, {"answer": "No.", "animal": "CAT"}]}'
    assert sync_path("votes", answer) == [
        Vote(answer="yes", animal=Animal.DOG),
        Vote(answer="no", animal=Animal.CAT),
    ]


def test_an_enum_with_unhashable_metadata_is_lenient_too() -> None:
    assert sync_path("odd", '{"animal": "dog"}') == Odd(animal=Animal.DOG)


@pytest.mark.parametrize(
    ("method", "answer", "said"),
    [
        ("pet", '{"name": "Tom", "kind": "cat", "others": "dog"}', "others: Input should be"),
        ("pet", '{"name": "Tom", "kind": "cat", "by_name": ["dog"]}', "by_name: Input should be"),
        ("stall", '{"animal": "dog", "pair": "cat"}', "pair: Input should be"),
        ("tree", '{"kind": "dog", "children": ["cat"]}', "children.0: Input should be"),
        ("herd", '["dog"]', "Input should be"),
    ],
)
def test_mending_never_hides_a_wrong_shape_inside(method: str, answer: str, said: str) -> None:
    with pytest.raises(OutputParsingError) as caught:
        sync_path(method, answer)
    assert said in caught.value.reason


def test_a_name_that_is_no_member_is_still_an_error_at_depth() -> None:
    with pytest.raises(OutputParsingError) as caught:
        sync_path("pet", '{"name": "Tom", "kind": "BANANA"}')
    assert "kind: Input should be 'cat' or 'dog'" in caught.value.reason


@pytest.mark.parametrize(
    ("method", "answer", "expected"),
    [
        ("animal", '{"value": ["CAT"]}', Animal.CAT),
        ("animal", '  {"value":["cat"]}  ', Animal.CAT),
        ("integer", '{"value": "1e3"}', 1000),
        ("integer", '{"value": "-7"}', -7),
        ("integer", "123.0", 123),
        ("integer", "1e3", 1000),
        ("series", '["1", "2e1"]', (1, 20)),
    ],
)
def test_values_langchain4j_reads_are_read(method: str, answer: str, expected: object) -> None:
    assert sync_path(method, answer) == expected


@pytest.mark.parametrize(
    ("method", "answer"),
    [
        ("animal", '{"value": ["CAT", "DOG"]}'),
        ("animal", '{"value": 1}'),
        ("animal", '{"value": ""}'),
        ("integer", '{"value": "4.5"}'),
        ("integer", '{"value": "xyz"}'),
        ("integer", '{"value": "NaN"}'),
        ("integer", '{"foo": "2.71"}'),
        ("integer", "42abc"),
    ],
)
def test_values_langchain4j_refuses_are_refused(method: str, answer: str) -> None:
    with pytest.raises(OutputParsingError):
        sync_path(method, answer)


# -- 12: Result[AiMessage] ---------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_result_of_ai_message_is_the_message_as_is_with_no_schema(path: Path) -> None:
    result = path("message", "Just *text*, {not json")
    assert isinstance(result, Result)
    assert result.content == AiMessage("Just *text*, {not json")
    assert result.content is result.final_response.ai_message


def test_result_of_ai_message_sends_no_response_format_nor_instructions() -> None:
    for capabilities in (None, {Capability.TOOLS}):
        model = ScriptedChatModel(["Hi"], capabilities=capabilities)
        ai_service(Reads, chat_model=model).message("Hello")
        [request] = model.requests
        assert request.response_format is None
        assert request.messages == (UserMessage("Hello"),)


def test_enum_members_described_for_the_model() -> None:
    import enum

    from chatmemory.models import Capability
    from chatmemory.services import describe_members

    @describe_members({"HAPPY": "the user is glad", "SAD": "the user is down"})
    class Mood(enum.Enum):
        HAPPY = "happy"
        SAD = "sad"
        CALM = "calm"

    class Reader(Protocol):
        def mood(self, text: str) -> Mood: ...

    plain = ScriptedChatModel(["happy"], capabilities={Capability.TOOLS})
    assert ai_service(Reader, chat_model=plain).mood("Yay!") is Mood.HAPPY
    told = str(getattr(plain.requests[0].messages[-1], "text", ""))
    assert "HAPPY - the user is glad\nSAD - the user is down\nCALM" in told
    schema_model = ScriptedChatModel(['"SAD"'])
    assert ai_service(Reader, chat_model=schema_model).mood("Meh.") is Mood.SAD
    response_format = schema_model.requests[0].response_format
    assert response_format is not None
    assert "HAPPY: the user is glad; SAD: the user is down" in json.dumps(
        dict(response_format.schema or {}), default=str
    )
    with pytest.raises(ConfigurationError, match="no member named ANGRY"):
        describe_members({"ANGRY": "x"})(Mood)
    with pytest.raises(ConfigurationError, match="goes on an Enum"):
        describe_members({})(int)
