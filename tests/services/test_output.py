"""Structured output of AI services: every return type, lenient reading, schemas and format
instructions (LangChain4j's output-parsing checklist, research §5, each line a test here)."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import date, datetime, time
from decimal import Decimal
from typing import Annotated, Any, Literal, Optional, Protocol, Union

import pytest
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from chatmemory import (
    AiMessage,
    ConfigurationError,
    MessageWindowChatMemory,
    OutputParsingError,
    UserMessage,
)
from chatmemory._frozen import thaw
from chatmemory.models import Capability, ChatResponse, OpenAiChatModel, TokenUsage
from chatmemory.services import Result, ai_service
from chatmemory.testing import ScriptedChatModel
from tests.models import test_openai as openai_wire
from tests.models.fake_server import FakeServer, Reply, serve

NO_SCHEMA = {Capability.TOOLS, Capability.STREAMING}


class Sentiment(enum.Enum):
    POSITIVE = "positive"
    NEGATIVE = "negative"
    NEUTRAL = "neutral"


class Priority(enum.Enum):
    LOW = enum.auto()
    HIGH = enum.auto()


class Address(BaseModel):
    street: str
    city: str


class Person(BaseModel):
    name: str
    age: int
    nickname: str | None = None
    address: Address | None = None
    tags: list[str] = []
    mood: Sentiment = Sentiment.NEUTRAL


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


class Node(BaseModel):
    name: str
    children: list[Node] = []
    address: Address | None = None


class Chain(BaseModel):
    name: str
    next: Chain | None = None


class Cat(BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    good: bool


class Reads(Protocol):
    """One method per return type; each call answers "q" with the scripted text."""

    def text(self, q: str) -> str: ...
    def sentiment(self, q: str) -> Sentiment: ...
    def priority(self, q: str) -> Priority: ...
    def literal(self, q: str) -> Literal["yes", "no"]: ...
    def number(self, q: str) -> Literal[1, 2]: ...
    def integer(self, q: str) -> int: ...
    def real(self, q: str) -> float: ...
    def flag(self, q: str) -> bool: ...
    def decimal(self, q: str) -> Decimal: ...
    def day(self, q: str) -> date: ...
    def moment(self, q: str) -> datetime: ...
    def clock(self, q: str) -> time: ...
    def ident(self, q: str) -> uuid.UUID: ...
    def person(self, q: str) -> Person: ...
    def point(self, q: str) -> Point: ...
    def movie(self, q: str) -> Movie: ...
    def tree(self, q: str) -> Node: ...
    def pet(self, q: str) -> Cat | Dog: ...
    def people(self, q: str) -> list[Person]: ...
    def points(self, q: str) -> set[tuple[int, int]]: ...
    def moods(self, q: str) -> set[Sentiment]: ...
    def chain(self, q: str) -> Chain: ...
    def series(self, q: str) -> tuple[int, ...]: ...
    def labels(self, q: str) -> list[Literal["alpha", "beta"]]: ...
    def words(self, q: str) -> list[str]: ...
    def numbers(self, q: str) -> list[int]: ...
    def days(self, q: str) -> list[date]: ...
    def movies(self, q: str) -> list[Movie]: ...
    def counts(self, q: str) -> dict[str, int]: ...
    def maybe(self, q: str) -> Optional[int]: ...  # noqa: UP045
    def maybe_person(self, q: str) -> Person | None: ...
    def either(self, q: str) -> Union[int, str]: ...  # noqa: UP007
    def bounded(self, q: str) -> Annotated[int, Field(ge=0)]: ...
    def result(self, q: str) -> Result[Person]: ...
    def results(self, q: str) -> Result[list[Sentiment]]: ...


def reply(method: str, *answers: str, schema: bool = True, **options: Any) -> Any:
    """What `method` returns when the model answers `answers` (one call)."""
    return call(method, *answers, schema=schema, **options)[0]


def call(
    method: str, *answers: str, schema: bool = True, **options: Any
) -> tuple[Any, ScriptedChatModel]:
    capabilities = None if schema else NO_SCHEMA
    model = ScriptedChatModel(list(answers), capabilities=capabilities)
    service = ai_service(Reads, chat_model=model, **options)
    return getattr(service, method)("q"), model


def schema_of(method: str) -> tuple[dict[str, Any], str | None, bool | None]:
    model = ScriptedChatModel(lambda request: ChatResponse(ai_message=AiMessage("")))
    service = ai_service(Reads, chat_model=model)
    with pytest.raises(OutputParsingError):
        getattr(service, method)("q")
    response_format = model.requests[0].response_format
    assert response_format is not None
    assert response_format.schema is not None
    return thaw(response_format.schema), response_format.name, response_format.strict


def instructions_of(method: str) -> str:
    model = ScriptedChatModel(lambda request: "", capabilities=NO_SCHEMA)
    with pytest.raises(OutputParsingError):
        getattr(ai_service(Reads, chat_model=model), method)("q")
    request = model.requests[0]
    assert request.response_format is None
    [user] = request.messages
    assert isinstance(user, UserMessage)
    assert user.text.startswith("q\n")
    return user.text[1:]


def failure(method: str, answer: str) -> OutputParsingError:
    with pytest.raises(OutputParsingError) as caught:
        reply(method, answer)
    return caught.value


ANN = {"name": "Ann", "age": 31}
ANN_JSON = json.dumps(ANN)


# -- each return type from clean JSON ----------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "answer", "expected"),
    [
        ("sentiment", '{"value": "POSITIVE"}', Sentiment.POSITIVE),
        ("priority", '{"value": "HIGH"}', Priority.HIGH),
        ("literal", '{"value": "no"}', "no"),
        ("number", '{"value": 2}', 2),
        ("integer", '{"value": 42}', 42),
        ("real", '{"value": 2.5}', 2.5),
        ("flag", '{"value": true}', True),
        ("decimal", '{"value": "12.50"}', Decimal("12.50")),
        ("day", '{"value": "2024-05-01"}', date(2024, 5, 1)),
        ("moment", '{"value": "2024-05-01T10:30:00"}', datetime(2024, 5, 1, 10, 30)),
        ("clock", '{"value": "10:30:00"}', time(10, 30)),
        ("ident", f'{{"value": "{uuid.UUID(int=7)}"}}', uuid.UUID(int=7)),
        ("person", ANN_JSON, Person(name="Ann", age=31)),
        ("point", '{"x": 1, "y": 2}', Point(1, 2)),
        ("movie", '{"title": "Up", "year": 2009}', {"title": "Up", "year": 2009}),
        ("pet", '{"value": {"kind": "dog", "good": true}}', Dog(good=True)),
        ("people", json.dumps({"values": [ANN]}), [Person(name="Ann", age=31)]),
        ("points", '{"values": [[1, 2], [1, 2], [3, 4]]}', {(1, 2), (3, 4)}),
        ("moods", '{"values": ["POSITIVE", "NEGATIVE"]}', {Sentiment.POSITIVE, Sentiment.NEGATIVE}),
        ("words", '{"values": ["a", "b"]}', ["a", "b"]),
        ("series", '{"value": [1, 2, 3]}', (1, 2, 3)),
        ("labels", '{"values": ["beta", "alpha"]}', ["beta", "alpha"]),
        ("chain", '{"name": "a", "next": {"name": "b"}}', Chain(name="a", next=Chain(name="b"))),
        ("numbers", '{"values": [1, 2]}', [1, 2]),
        ("days", '{"values": ["2024-05-01"]}', [date(2024, 5, 1)]),
        ("movies", '{"values": [{"title": "Up", "year": 2009}]}', [{"title": "Up", "year": 2009}]),
        ("counts", '{"a": 1, "b": 2}', {"a": 1, "b": 2}),
        ("maybe", '{"value": null}', None),
        ("maybe", '{"value": 3}', 3),
        ("maybe_person", '{"value": {"name": "Ann", "age": 31}}', Person(name="Ann", age=31)),
        ("maybe_person", '{"value": null}', None),
        ("either", '{"value": "x"}', "x"),
        ("bounded", '{"value": 5}', 5),
    ],
)
def test_each_return_type_reads_the_json_its_schema_asks_for(
    method: str, answer: str, expected: object
) -> None:
    value = reply(method, answer)
    assert value == expected
    assert type(value) is type(expected)


def test_a_recursive_model_reads_nested_json() -> None:
    answer = {
        "name": "root",
        "children": [{"name": "leaf", "address": {"street": "s", "city": "c"}}],
    }
    tree = reply("tree", json.dumps(answer))
    assert tree == Node(
        name="root", children=[Node(name="leaf", address=Address(street="s", city="c"))]
    )


def test_str_is_the_text_as_written_with_no_schema_and_no_instructions() -> None:
    value, model = call("text", '  {"value": "x"} ')
    assert value == '  {"value": "x"} '
    assert model.requests[0].response_format is None
    value, model = call("text", "plain", schema=False)
    assert model.requests[0].messages == (UserMessage("q"),)


# -- single values: plain text and {"value": ...} (the *OutputParserTest lines) --------------------


@pytest.mark.parametrize(
    ("method", "answer", "expected"),
    [
        ("integer", "42", 42),
        ("integer", " 42.\n", 42),
        ("integer", "```\n42\n```", 42),
        ("integer", "42.0", 42),
        ("integer", '{"value": "42"}', 42),
        ("integer", 'The answer is {"value": 7}, I think.', 7),
        ("real", "-2.5", -2.5),
        ("flag", "true", True),
        ("flag", "False.", False),
        ("flag", "yes", True),
        ("decimal", "1234567.891", Decimal("1234567.891")),
        ("day", "2024-05-01", date(2024, 5, 1)),
        ("day", '"2024-05-01"', date(2024, 5, 1)),
        ("moment", "2024-05-01 10:30:00", datetime(2024, 5, 1, 10, 30)),
        ("clock", "10:30", time(10, 30)),
        ("maybe", "null", None),
        ("maybe", "None.", None),
        ("maybe", "12", 12),
        ("literal", "YES", "yes"),
        ("literal", '"No".', "no"),
        ("either", "hello", "hello"),
    ],
)
def test_a_single_value_is_read_from_plain_text(method: str, answer: str, expected: object) -> None:
    assert reply(method, answer) == expected


@pytest.mark.parametrize(
    "answer",
    [
        "POSITIVE",
        "positive",
        "  Positive \n",
        '"POSITIVE"',
        "'positive'.",
        "POSITIVE.",
        "**POSITIVE**",
        '["POSITIVE"]',
        "[POSITIVE]",
        "`POSITIVE`",
        "```\nPOSITIVE\n```",
        '{"value": "positive"}',
        '{"value": "Positive"}',
        'Sentiment: {"value": "POSITIVE"}',
    ],
)
def test_an_enum_is_read_by_name_in_any_case_and_dressing(answer: str) -> None:
    assert reply("sentiment", answer) is Sentiment.POSITIVE


def test_an_enum_whose_values_mean_nothing_is_read_by_name_or_value() -> None:
    assert reply("priority", "high") is Priority.HIGH
    assert reply("priority", '{"value": 2}') is Priority.HIGH
    assert reply("priority", "2") is Priority.HIGH


@pytest.mark.parametrize(
    ("method", "answer", "expected", "said"),
    [
        ("integer", "forty-two", "an integer", "unable to parse string as an integer"),
        ("integer", '{"value": "many"}', "an integer", "value: Input should be a valid integer"),
        ("flag", "perhaps", "true or false", "Input should be a valid boolean"),
        ("day", "May 1st", "a date, yyyy-MM-dd", "Input should be a valid date"),
        ("sentiment", "HAPPY", "one of POSITIVE, NEGATIVE, NEUTRAL", "one of POSITIVE"),
        ("literal", "maybe", "one of 'yes', 'no'", "Input should be 'yes' or 'no'"),
        ("number", "3", "one of 1, 2", "Input should be 1 or 2"),
        ("literal", '{"value": 1}', "one of 'yes', 'no'", "value: Input should be 'yes' or 'no'"),
        ("maybe", "unknown", "an integer or null", "valid integer"),
    ],
)
def test_a_single_value_that_does_not_parse_says_what_was_expected(
    method: str, answer: str, expected: str, said: str
) -> None:
    error = failure(method, answer)
    assert error.text == answer
    assert error.reason.startswith(f"expected {expected}; ")
    assert said in error.reason
    assert str(error).startswith(f'Failed to parse "{answer}" into ')


@pytest.mark.parametrize("method", ["integer", "sentiment", "person", "people", "words"])
@pytest.mark.parametrize("answer", ["", "   \n "])
def test_a_blank_answer_fails(method: str, answer: str) -> None:
    error = failure(method, answer)
    assert error.reason.endswith("got an empty answer")
    assert error.text == answer


# -- objects: JSON in prose and fences (ServiceOutputParserTest's JSON-block extraction) ---------


@pytest.mark.parametrize(
    "answer",
    [
        ANN_JSON,
        f"  {ANN_JSON}\n",
        f"```json\n{ANN_JSON}\n```",
        f"```\n{ANN_JSON}\n```",
        f"Sure! Here is the person:\n```json\n{ANN_JSON}\n```\nAnything else?",
        f"Here you go: {ANN_JSON}. Hope that helps!",
        f"Ann {{who is 31}} is described as {ANN_JSON}",
        '{"person": {"name": "Ann", "age": 31}}',
        'The answer: {"name": "Ann", "age": 31, "note": "a } and a \\" in a string"}',
        '[{"name": "Ann", "age": 31}]',
    ],
)
def test_an_object_is_found_in_prose_and_fences(answer: str) -> None:
    person = reply("person", answer)
    assert person.name == "Ann"
    assert person.age == 31


def test_nested_objects_are_read_whole() -> None:
    answer = (
        'Result: {"name": "Ann", "age": 31, "address": {"street": "Main", "city": "Oslo"}, '
        '"tags": ["a", "b"], "mood": "positive"} done'
    )
    assert reply("person", answer) == Person(
        name="Ann",
        age=31,
        address=Address(street="Main", city="Oslo"),
        tags=["a", "b"],
        mood=Sentiment.POSITIVE,
    )


def test_the_first_block_that_fits_wins() -> None:
    answer = (
        'Not this {"name": "Bo"} nor [1, 2] but {"name": "Cy", "age": 5} or '
        '{"name": "Di", "age": 6}'
    )
    assert reply("person", answer) == Person(name="Cy", age=5)


def test_values_are_coerced_as_pydantic_does_in_lax_mode() -> None:
    assert reply("person", '{"name": "Ann", "age": "31"}') == Person(name="Ann", age=31)
    assert reply("movie", '{"title": "Up", "year": "2009"}') == {"title": "Up", "year": 2009}


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("I do not know who that is.", "Invalid JSON"),
        ('{"name": "Ann"}', "age: Field required"),
        ('Maybe {"name": "Ann", "age": "old"}?', "age: Input should be a valid integer"),
        ('{"name": "Ann", "age": 31', "Invalid JSON: EOF"),
    ],
)
def test_an_object_that_does_not_parse_raises_with_pydantics_reason(answer: str, said: str) -> None:
    error = failure("person", answer)
    assert error.text == answer
    assert error.target is Person
    assert error.reason.startswith("expected a JSON object of Person; ")
    assert said in error.reason
    assert "errors.pydantic.dev" not in error.reason
    assert str(error) == f'Failed to parse "{answer}" into Person: {error.reason}'


def test_a_long_answer_is_quoted_shortened_in_the_message_and_whole_in_text() -> None:
    answer = "no " * 200
    error = failure("person", answer)
    assert error.text == answer
    assert len(str(error)) < len(answer)
    assert "…" in str(error)


@pytest.mark.parametrize(
    ("method", "answer"),
    [
        ("person", '{"name": ' * 100_000 + '"Ann"' + "}" * 100_000),
        ("tree", 'Here: {"children": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        ("people", "[" * 100_000 + "]" * 100_000),
        ("people", "[" * 100_000),  # never closed: every bracket may start the answer
    ],
    ids=["an object", "an array in prose", "a list", "an unclosed list"],
)
def test_json_nested_too_deeply_is_an_output_parsing_error(method: str, answer: str) -> None:
    error = failure(method, answer)
    assert error.text == answer
    assert len(str(error)) < 500


def test_a_failure_is_a_value_error() -> None:
    assert isinstance(failure("integer", "x"), ValueError)


# -- collections: the wrapper, a bare array, one item per line (ParsingUtilsTest) ----------------


@pytest.mark.parametrize(
    "answer",
    [
        '{"values": [{"name": "Ann", "age": 31}, {"name": "Bo", "age": 2}]}',
        '[{"name": "Ann", "age": 31}, {"name": "Bo", "age": 2}]',
        'The people:\n```json\n[{"name": "Ann", "age": 31}, {"name": "Bo", "age": 2}]\n```',
        'Found: {"values": [{"name": "Ann", "age": 31}, {"name": "Bo", "age": 2}]} (2 people)',
    ],
)
def test_a_list_of_models_reads_the_wrapper_and_a_bare_array(answer: str) -> None:
    assert reply("people", answer) == [Person(name="Ann", age=31), Person(name="Bo", age=2)]


@pytest.mark.parametrize(
    ("method", "answer", "expected"),
    [
        ("words", "apples\n  pears \n\nplums\n", ["apples", "pears", "plums"]),
        ("words", "- apples\n- pears", ["apples", "pears"]),
        ("words", "1. apples\n2) pears", ["apples", "pears"]),
        ("words", "- apples\nno marker", ["- apples", "no marker"]),
        ("words", '["apples", "pears"]', ["apples", "pears"]),
        ("numbers", "1\n2\n3", [1, 2, 3]),
        ("labels", "- Alpha\n- BETA", ["alpha", "beta"]),
        ("numbers", "[1, 2, 3]", [1, 2, 3]),
        ("days", "2024-05-01\n2024-05-02", [date(2024, 5, 1), date(2024, 5, 2)]),
        ("moods", "POSITIVE\nnegative\nPositive.", {Sentiment.POSITIVE, Sentiment.NEGATIVE}),
        ("moods", "* POSITIVE\n* NEUTRAL", {Sentiment.POSITIVE, Sentiment.NEUTRAL}),
        ("moods", '["positive"]', {Sentiment.POSITIVE}),
        ("moods", "```\nNEGATIVE\nNEUTRAL\n```", {Sentiment.NEGATIVE, Sentiment.NEUTRAL}),
    ],
)
def test_a_collection_of_simple_values_may_come_one_per_line(
    method: str, answer: str, expected: object
) -> None:
    assert reply(method, answer) == expected


def test_a_collection_that_does_not_parse_names_the_item() -> None:
    error = failure("numbers", "one\ntwo")
    assert error.reason.startswith(
        'expected a JSON array, or {"values": [...]}, of items each an integer (or one per line); '
    )
    assert "0: Input should be a valid integer" in error.reason
    error = failure("moods", "HAPPY")
    assert "names among POSITIVE, NEGATIVE, NEUTRAL" in error.reason
    error = failure("people", "Ann and Bo")
    assert "of Person items; Invalid JSON" in error.reason
    reason = failure("people", '{"values": [{"name": 1}]}').reason
    assert (
        "values.0.name: Input should be a valid string (got 1); values.0.age: Field required"
        in reason
    )


# -- response format and format instructions (JsonSchemasTest, ServiceOutputParserTest) ---------


def test_a_model_with_json_schema_gets_a_strict_response_format_and_no_instructions() -> None:
    _value, model = call("person", ANN_JSON)
    request = model.requests[0]
    assert request.messages == (UserMessage("q"),)
    assert request.response_format is not None
    assert request.response_format.name == "Person"
    assert request.response_format.strict is True
    schema = thaw(request.response_format.schema)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["name", "age", "nickname", "address", "tags", "mood"]
    assert "title" not in json.dumps(schema)
    assert "default" not in json.dumps(schema)
    # a $ref with a description beside it goes into anyOf; nested objects are closed too
    address = schema["$defs"]["Address"]
    assert address["additionalProperties"] is False
    assert address["required"] == ["street", "city"]


@pytest.mark.parametrize(
    ("method", "name", "value_schema"),
    [
        ("sentiment", "Sentiment", {"type": "string", "enum": ["POSITIVE", "NEGATIVE", "NEUTRAL"]}),
        ("priority", "Priority", {"type": "string", "enum": ["LOW", "HIGH"]}),
        ("literal", "Literal_yes_no", {"type": "string", "enum": ["yes", "no"]}),
        ("integer", "int", {"type": "integer"}),
        ("flag", "bool", {"type": "boolean"}),
        ("day", "date", {"type": "string", "format": "date"}),
        ("moment", "datetime", {"type": "string", "format": "date-time"}),
        ("maybe", "int_None", {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        ("bounded", "int", {"type": "integer", "minimum": 0}),
    ],
)
def test_a_single_value_is_asked_for_inside_a_value_object(
    method: str, name: str, value_schema: dict[str, Any]
) -> None:
    schema, got_name, strict = schema_of(method)
    assert schema == {
        "type": "object",
        "properties": {"value": value_schema},
        "required": ["value"],
        "additionalProperties": False,
    }
    assert (got_name, strict) == (name, True)


@pytest.mark.parametrize(
    ("method", "name", "items"),
    [
        ("words", "list_str", {"type": "string"}),
        ("moods", "set_Sentiment", {"type": "string", "enum": ["POSITIVE", "NEGATIVE", "NEUTRAL"]}),
        ("people", "list_Person", {"$ref": "#/$defs/Person"}),
    ],
)
def test_a_collection_is_asked_for_inside_a_values_object(
    method: str, name: str, items: dict[str, Any]
) -> None:
    schema, got_name, strict = schema_of(method)
    assert schema["properties"] == {"values": {"type": "array", "items": items}}
    assert schema["required"] == ["values"]
    assert (got_name, strict) == (name, True)  # a set's uniqueItems is left to the set


def test_a_union_of_models_is_asked_for_as_a_value_any_of() -> None:
    schema, name, strict = schema_of("pet")
    assert name == "Cat_Dog"
    variants = schema["properties"]["value"]["anyOf"]
    assert variants == [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]
    assert schema["$defs"]["Cat"]["required"] == ["kind", "lives"]
    assert strict is True


def test_a_recursive_model_refers_to_the_root_as_itself() -> None:
    schema, name, strict = schema_of("tree")
    assert name == "Node"
    assert strict is True
    assert schema["type"] == "object"
    assert schema["properties"]["children"] == {"type": "array", "items": {"$ref": "#"}}
    assert set(schema["$defs"]) == {"Address"}
    assert "$ref" not in {k for k in schema if k != "properties"}


def test_a_recursive_model_alone_has_no_defs_left() -> None:
    schema, name, strict = schema_of("chain")
    assert (name, strict) == ("Chain", True)
    assert "$defs" not in schema
    assert schema["properties"]["next"] == {"anyOf": [{"$ref": "#"}, {"type": "null"}]}


def test_a_dataclass_and_a_typeddict_are_objects() -> None:
    schema, name, strict = schema_of("point")
    assert (schema["required"], name, strict) == (["x", "y"], "Point", True)
    schema, name, strict = schema_of("movie")
    assert (schema["required"], name, strict) == (["title", "year"], "Movie", True)


def test_a_schema_strict_mode_cannot_hold_is_sent_as_pydantic_made_it() -> None:
    schema, name, strict = schema_of("counts")
    assert (name, strict) == ("dict_str_int", False)
    assert schema == {"type": "object", "additionalProperties": {"type": "integer"}}
    schema, name, strict = schema_of("points")  # tuples have prefixItems
    assert strict is False
    assert schema["properties"]["values"]["uniqueItems"] is True  # nothing dropped


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


class Short(BaseModel):
    code: str = Field(max_length=3)


class Link(BaseModel):
    url: Annotated[str, Field(json_schema_extra={"format": "uri"})]


class Guarded(BaseModel):
    model_config = ConfigDict(regex_engine="python-re")
    word: Annotated[str, Field(pattern=r"^(?!no)\w+$")]


class Anything(BaseModel):
    data: Any


class Tagged(BaseModel):
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    owner: Address = Field(description="who owns it")
    count: int = 0


class Constrained(Protocol):
    def loose(self, q: str) -> Loose: ...
    def short(self, q: str) -> Short: ...
    def link(self, q: str) -> Link: ...
    def guarded(self, q: str) -> Guarded: ...
    def anything(self, q: str) -> Anything: ...
    def tagged(self, q: str) -> Tagged: ...


def _format(method: str) -> tuple[dict[str, Any], bool | None]:
    model = ScriptedChatModel(lambda request: "")
    with pytest.raises(OutputParsingError):
        getattr(ai_service(Constrained, chat_model=model), method)("q")
    response_format = model.requests[0].response_format
    assert response_format is not None
    assert response_format.schema is not None
    return thaw(response_format.schema), response_format.strict


@pytest.mark.parametrize("method", ["loose", "short", "link", "guarded", "anything"])
def test_keywords_strict_mode_lacks_make_the_format_not_strict(method: str) -> None:
    schema, strict = _format(method)
    assert strict is False
    assert "title" not in schema


def test_tagged_unions_and_described_references_stay_strict() -> None:
    schema, strict = _format("tagged")
    assert strict is True
    pet = schema["properties"]["pet"]
    assert "oneOf" not in pet
    assert "discriminator" not in pet
    assert pet["anyOf"] == [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]
    owner = schema["properties"]["owner"]
    assert owner == {"anyOf": [{"$ref": "#/$defs/Address"}], "description": "who owns it"}
    assert schema["required"] == ["pet", "owner", "count"]


def test_the_same_response_format_is_sent_on_every_call() -> None:
    model = ScriptedChatModel([ANN_JSON, ANN_JSON])
    service = ai_service(Reads, chat_model=model)
    service.person("a")
    service.person("b")
    first, second = (r.response_format for r in model.requests)
    assert first is second  # built once, when the service was created


@pytest.mark.parametrize(
    ("method", "instructions"),
    [
        (
            "sentiment",
            "\nYou must answer strictly with one of these enums:\nPOSITIVE\nNEGATIVE\nNEUTRAL",
        ),
        ("literal", "\nYou must answer strictly with one of these values:\nyes\nno"),
        (
            "moods",
            "\nYou must answer strictly with zero or more of these enums on a separate line:\n"
            "POSITIVE\nNEGATIVE\nNEUTRAL",
        ),
        ("words", "\nYou must put every item on a separate line."),
        ("integer", "\nYou must answer strictly in the following format: integer number"),
        ("real", "\nYou must answer strictly in the following format: floating point number"),
        ("decimal", "\nYou must answer strictly in the following format: floating point number"),
        ("flag", "\nYou must answer strictly in the following format: one of [true, false]"),
        ("day", "\nYou must answer strictly in the following format: yyyy-MM-dd"),
        ("moment", "\nYou must answer strictly in the following format: yyyy-MM-ddTHH:mm:ss"),
        ("clock", "\nYou must answer strictly in the following format: HH:mm:ss"),
    ],
)
def test_a_model_without_json_schema_gets_langchain4j_format_instructions(
    method: str, instructions: str
) -> None:
    assert instructions_of(method) == instructions


@pytest.mark.parametrize(
    "method", ["person", "point", "movie", "tree", "people", "movies", "maybe", "ident", "pet"]
)
def test_structured_types_get_their_json_schema_as_instructions(method: str) -> None:
    text = instructions_of(method)
    prefix = "\nYou must answer strictly in the following JSON format: "
    assert text.startswith(prefix)
    schema, _, _ = schema_of(method)
    assert json.loads(text[len(prefix) :]) == schema


def test_instructions_describe_every_field_of_a_model() -> None:
    schema = json.loads(instructions_of("person").split("format: ", 1)[1])
    assert set(schema["properties"]) == {"name", "age", "nickname", "address", "tags", "mood"}
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert set(schema["$defs"]) == {"Address", "Sentiment"}


def test_a_model_without_json_schema_reads_the_answer_leniently() -> None:
    answer = f"Here is what I found:\n```json\n{ANN_JSON}\n```"
    assert reply("person", answer, schema=False) == Person(name="Ann", age=31)
    assert reply("sentiment", "Negative.", schema=False) is Sentiment.NEGATIVE


# -- Result[T], retries, memory, async --------------------------------------------------------


def test_result_content_is_the_parsed_type() -> None:
    result = reply("result", f"Sure: {ANN_JSON}")
    assert isinstance(result, Result)
    assert result.content == Person(name="Ann", age=31)
    assert result.final_response.ai_message.text == f"Sure: {ANN_JSON}"
    results = reply("results", '{"values": ["NEGATIVE", "positive"]}')
    assert results.content == [Sentiment.NEGATIVE, Sentiment.POSITIVE]


def test_output_retries_ask_again_with_the_validation_error_and_succeed() -> None:
    answers = [
        ChatResponse(ai_message=AiMessage('{"name": "Ann"}'), token_usage=TokenUsage(10, 4)),
        ChatResponse(ai_message=AiMessage(ANN_JSON), token_usage=TokenUsage(30, 6)),
    ]
    model = ScriptedChatModel(answers)
    memory = MessageWindowChatMemory(max_messages=10)
    service = ai_service(Reads, chat_model=model, chat_memory=memory, output_retries=2)
    result = service.result("Who is Ann?")
    assert result.content == Person(name="Ann", age=31)
    assert result.token_usage == TokenUsage(40, 10, 50)
    assert len(model.requests) == 2
    again = model.requests[1]
    assert again.response_format is model.requests[0].response_format
    assert again.messages[:2] == (UserMessage("Who is Ann?"), AiMessage('{"name": "Ann"}'))
    correction = again.messages[2]
    assert isinstance(correction, UserMessage)
    assert "expected a JSON object of Person" in correction.text
    assert "age: Field required" in correction.text
    assert memory.messages() == [UserMessage("Who is Ann?"), AiMessage(ANN_JSON)]


def test_without_retries_a_bad_answer_raises_and_stores_nothing() -> None:
    model = ScriptedChatModel(["HAPPY"])
    memory = MessageWindowChatMemory(max_messages=10)
    service = ai_service(Reads, chat_model=model, chat_memory=memory)
    with pytest.raises(OutputParsingError) as caught:
        service.sentiment("How do I feel?")
    assert caught.value.target is Sentiment
    assert len(model.requests) == 1
    assert memory.messages() == []


def test_retries_that_keep_failing_raise_the_last_error() -> None:
    model = ScriptedChatModel(["one", "two", "three"])
    service = ai_service(Reads, chat_model=model, output_retries=2)
    with pytest.raises(OutputParsingError) as caught:
        service.integer("q")
    assert caught.value.text == "three"
    assert len(model.requests) == 3


class Async(Protocol):
    async def person(self, q: str) -> Person: ...

    async def moods(self, q: str) -> Result[set[Sentiment]]: ...


def test_async_methods_read_the_same_way() -> None:
    model = ScriptedChatModel(
        [f"```json\n{ANN_JSON}\n```", "NEUTRAL\npositive"], capabilities=NO_SCHEMA
    )
    service = ai_service(Async, chat_model=model)

    async def main() -> tuple[Person, Result[set[Sentiment]]]:
        return await service.person("q"), await service.moods("q")

    person, moods = asyncio.run(main())
    assert person == Person(name="Ann", age=31)
    assert moods.content == {Sentiment.NEUTRAL, Sentiment.POSITIVE}
    [user] = model.requests[0].messages
    assert isinstance(user, UserMessage)
    assert user.text.startswith("q\nYou must answer strictly in the following JSON format: ")


# -- unsupported return types are refused when the service is created ---------------------------


class Opaque:
    def __init__(self, secret: object) -> None:
        self.secret = secret


@dataclasses.dataclass
class HoldsOpaque:
    thing: Opaque


class HoldsCallable(BaseModel):
    hook: Callable[[int], int]


def _refuse(returns: Any) -> str:
    def answer(self: object, q: str) -> None: ...

    answer.__annotations__["return"] = returns
    declaration = type("Weird", (Protocol,), {"answer": answer})
    with pytest.raises(ConfigurationError) as caught:
        ai_service(declaration, chat_model=ScriptedChatModel([]))
    return str(caught.value)


@pytest.mark.parametrize(
    ("returns", "detail"),
    [
        (object, "object is not a type pydantic can read from JSON"),
        (Any, "Any is not a type pydantic can read from JSON"),
        (bytes, "bytes is not a type pydantic can read from JSON"),
        (Callable[[int], int], "Callable[[int], int] is not a type pydantic can read from JSON"),
        (list, "list needs its item type, e.g. list[str]"),
        (set, "set needs its item type, e.g. set[str]"),
        (dict, "dict needs its key and value types, e.g. dict[str, int]"),
        (list[object], "object is not a type pydantic can read from JSON"),
        (dict[str, Callable[[], None]], "is not a type pydantic can read from JSON"),
        (Optional[object], "object is not a type"),  # noqa: UP045
        (Annotated[object, "meta"], "object is not a type"),
        (Annotated[object, {"unhashable": True}], "object is not a type"),
        (Result[None], "None alone carries no answer"),
        (HoldsOpaque, "Unable to generate pydantic-core schema for"),
        (HoldsCallable, "Cannot generate a JsonSchema for core_schema.CallableSchema"),
    ],
)
def test_an_unsupported_return_type_is_refused_at_creation(returns: Any, detail: str) -> None:
    message = _refuse(returns)
    assert message.startswith("Weird.answer returns ")
    assert detail in message
    assert "A service method returns str, None, AiMessage" in message
    assert "\n" not in message


def test_an_unhashable_annotation_that_is_supported_still_works() -> None:
    def answer(self: object, q: str) -> None: ...

    answer.__annotations__["return"] = Annotated[int, {"note": "unhashable metadata"}]
    declaration = type("Odd", (Protocol,), {"answer": answer})
    service: Any = ai_service(declaration, chat_model=ScriptedChatModel(["7"]))
    assert service.answer("q") == 7


# -- on the wire: the official OpenAI SDK against the local server ------------------------------


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    yield from serve()


def test_openai_receives_a_strict_named_wrapper_schema(server: FakeServer) -> None:
    server.reply(
        Reply(body=openai_wire.completion('{"values": ["NEGATIVE", "POSITIVE"]}')),
        Reply(body=openai_wire.completion('{"value": "NEUTRAL"}')),
    )
    model = OpenAiChatModel(model="gpt-4o-mini", base_url=server.url + "/v1", api_key="sk-test")
    try:
        service = ai_service(Reads, chat_model=model)
        assert service.moods("q") == {Sentiment.NEGATIVE, Sentiment.POSITIVE}
        assert service.sentiment("q") is Sentiment.NEUTRAL
    finally:
        model.close()
    sent = server.requests[0].body["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "set_Sentiment"
    assert sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"]["properties"]["values"]["items"]["enum"] == [
        "POSITIVE",
        "NEGATIVE",
        "NEUTRAL",
    ]
    assert server.requests[1].body["response_format"]["json_schema"]["name"] == "Sentiment"
