"""`@tool`: names, descriptions, JSON schemas from type hints (plain and strict), argument
validation and coercion, results as text, and the registration errors."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
from datetime import date
from decimal import Decimal
from typing import Annotated, Any, Literal, Optional
from uuid import UUID

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from chatmemory import ConfigurationError
from chatmemory._frozen import thaw
from chatmemory.tools import (
    FunctionTool,
    P,
    ToolArgumentsError,
    ToolContext,
    ToolExecutionError,
    ToolMemoryId,
    tool,
    tool_from,
)
from chatmemory.tools._collect import collect_tools

CONTEXT = ToolContext("ann")


def one(item: Any) -> FunctionTool:
    [found] = collect_tools([item])
    assert isinstance(found, FunctionTool)
    return found


def schema(item: Any) -> dict[str, Any]:
    return thaw(one(item).specification.parameters)  # type: ignore[no-any-return]


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


@dataclasses.dataclass
class Place:
    city: str
    country: str = "NO"


class Tree(BaseModel):
    label: str
    children: list[Tree] = []


class Price(BaseModel):
    amounts: list[Decimal | None]


class Span(TypedDict):
    start: date
    days: int


def test_name_and_description_from_the_function_and_its_google_docstring() -> None:
    @tool
    def get_weather(city: str, days: int = 1) -> str:
        """The forecast for a city.

        Uses the national service.

        Args:
            city: The city, in English.
            days: How many days ahead.
        """
        return f"sunny in {city} for {days} days"

    spec = one(get_weather).specification
    assert spec.name == "get_weather"
    assert spec.description == "The forecast for a city.\n\nUses the national service."
    assert schema(get_weather) == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city, in English."},
            "days": {"type": "integer", "default": 1, "description": "How many days ahead."},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    assert get_weather("Oslo") == "sunny in Oslo for 1 days"  # still a plain function


def test_numpy_and_rest_docstrings_and_p_which_wins() -> None:
    @tool("Book a table.", name="book")
    def reserve(people: Annotated[int, P("Guests, 1 to 8")], when: str) -> str:
        """Ignored summary.

        Parameters
        ----------
        people : int
            Overridden by P.
        when : str
            ISO date and time.
        """
        return "booked"

    @tool
    def cancel(code: str) -> str:
        """Cancel a booking.

        :param code: The booking code.
        """
        return "cancelled"

    spec = one(reserve).specification
    assert (spec.name, spec.description) == ("book", "Book a table.")
    assert schema(reserve)["properties"] == {
        "people": {"type": "integer", "description": "Guests, 1 to 8"},
        "when": {"type": "string", "description": "ISO date and time."},
    }
    assert schema(cancel)["properties"]["code"]["description"] == "The booking code."


def test_the_type_matrix() -> None:
    @tool
    def everything(
        text: str,
        count: int,
        ratio: float,
        flag: bool,
        price: Decimal,
        unit: Unit,
        mode: Literal["fast", "slow"],
        ident: UUID,
        day: date,
        tags: list[str],
        unique: set[int],
        pair: tuple[int, str],
        scores: dict[str, float],
        place: Place,
        tree: Tree,
        span: Span,
        maybe: Optional[int],  # noqa: UP045 - the old spelling works too
        either: int | str,
    ) -> None:
        return None

    found = schema(everything)
    props = found["properties"]
    assert found["required"] == [
        "text", "count", "ratio", "flag", "price", "unit", "mode", "ident", "day", "tags",
        "unique", "pair", "scores", "place", "tree", "span", "either",
    ]  # fmt: skip
    assert props["count"] == {"type": "integer"}
    assert props["ratio"] == {"type": "number"}
    assert props["flag"] == {"type": "boolean"}
    assert found["$defs"]["Unit"] == {"enum": ["celsius", "fahrenheit"], "type": "string"}
    assert props["mode"] == {"enum": ["fast", "slow"], "type": "string"}
    assert props["ident"] == {"format": "uuid", "type": "string"}
    assert props["day"] == {"format": "date", "type": "string"}
    assert props["tags"] == {"items": {"type": "string"}, "type": "array"}
    assert props["unique"]["uniqueItems"] is True
    assert props["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert props["scores"] == {"additionalProperties": {"type": "number"}, "type": "object"}
    assert found["$defs"]["Place"]["required"] == ["city"]
    assert found["$defs"]["Tree"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Tree"}
    assert found["$defs"]["Span"]["required"] == ["start", "days"]
    assert props["maybe"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    assert props["either"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert "title" not in json.dumps(found)


def test_strict_mode_is_what_openai_requires() -> None:
    @tool(strict=True)
    def search(query: str, limit: int = 5, place: Place | None = None) -> str:
        return "found"

    found = schema(search)
    assert one(search).specification.strict is True
    assert found["additionalProperties"] is False
    assert found["required"] == ["query", "limit", "place"]
    assert "default" not in json.dumps(found)
    assert found["properties"]["place"]["anyOf"][1] == {"type": "null"}
    assert found["$defs"]["Place"]["additionalProperties"] is False
    assert found["$defs"]["Place"]["required"] == ["city", "country"]

    @tool(strict=True)
    def tag(labels: dict[str, str]) -> str:
        return "tagged"

    with pytest.raises(ConfigurationError, match="'tag' cannot be strict"):
        collect_tools([tag])


def test_strict_mode_without_parameters_still_says_no_properties_are_allowed() -> None:
    @tool(strict=True)
    def ping() -> str:
        return "pong"

    @tool(strict=True, extra_arguments="ignore")
    def pong() -> str:
        return "ping"

    for item in (ping, pong):
        assert schema(item) == {
            "type": "object",
            "properties": {},
            "additionalProperties": False,
            "required": [],
        }


def test_null_for_a_parameter_with_a_default_means_the_default() -> None:
    seen: list[Any] = []

    @tool
    def forecast(
        city: str,
        unit: Unit = Unit.CELSIUS,
        days: Annotated[int, P("How many days", name="n_days")] = 1,
        note: str | None = "none",
        extra: Annotated[int, Field(default=7)] = 7,
    ) -> str:
        seen.append((city, unit, days, note, extra))
        return "ok"

    one(forecast).execute(
        '{"city": "Oslo", "unit": null, "n_days": null, "note": null, "extra": null}', CONTEXT
    )
    assert seen == [("Oslo", Unit.CELSIUS, 1, None, 7)]  # a type that takes None gets None
    with pytest.raises(ToolArgumentsError, match="city: Input should be a valid string"):
        one(forecast).execute('{"city": null}', CONTEXT)
    assert len(seen) == 1


def test_field_in_annotated_describes_constrains_and_renames() -> None:
    seen: list[Any] = []

    @tool
    def forecast(
        days: Annotated[int, Field(ge=1, le=7, description="How many days, 1 to 7")],
        city: Annotated[str, Field(alias="town", min_length=2)],
        hours: Annotated[int, Field(default=12, description="Hours of each day")],
        step: int = Field(3, gt=0),  # pydantic-ai's spelling
    ) -> str:
        """Forecast.

        Args:
            days: Ignored: Field's description wins.
            city: The town.
        """
        seen.append((days, city, hours, step))
        return "ok"

    found = schema(forecast)
    assert found["properties"] == {
        "days": {
            "type": "integer",
            "minimum": 1,
            "maximum": 7,
            "description": "How many days, 1 to 7",
        },
        "town": {"type": "string", "minLength": 2, "description": "The town."},
        "hours": {"type": "integer", "default": 12, "description": "Hours of each day"},
        "step": {"type": "integer", "default": 3, "exclusiveMinimum": 0},
    }
    assert found["required"] == ["days", "town"]
    with pytest.raises(ToolArgumentsError, match="days: Input should be less than or equal to 7"):
        one(forecast).execute('{"days": 99, "town": "Oslo"}', CONTEXT)
    with pytest.raises(ToolArgumentsError, match="step: Input should be greater than 0"):
        one(forecast).execute('{"days": 2, "town": "Oslo", "step": 0}', CONTEXT)
    assert seen == []
    one(forecast).execute('{"days": 2, "town": "Oslo"}', CONTEXT)
    assert seen == [(2, "Oslo", 12, 3)]


def test_decimal_arguments_are_exact_and_floats_stay_floats() -> None:
    seen: list[Any] = []

    @tool
    def pay(amount: Decimal, rate: float, place: Place, anything: Any, rows: dict[str, Any]) -> str:
        seen.append((amount, rate, anything, rows))
        return "paid"

    one(pay).execute(
        '{"amount": 1234567890.123456789, "rate": 0.1, "place": {"city": "Oslo"}, '
        '"anything": [1.5, {"x": 2.25}], "rows": {"y": 0.5}}',
        CONTEXT,
    )
    [(amount, rate, anything, rows)] = seen
    assert amount == Decimal("1234567890.123456789")
    assert type(rate) is float
    assert rate == 0.1
    assert anything == [1.5, {"x": 2.25}]
    assert [type(anything[0]), type(anything[1]["x"]), type(rows["y"])] == [float] * 3

    @tool
    def price(it: Price) -> str:
        return repr(it.amounts)

    exact = one(price).execute('{"it": {"amounts": [0.1000000000000000000001]}}', CONTEXT)
    assert exact.text == "[Decimal('0.1000000000000000000001')]"


def test_unknown_arguments_are_refused_unless_the_tool_ignores_them() -> None:
    seen: list[Any] = []

    @tool
    def forecast(city: str, days: int = 1) -> str:
        seen.append((city, days))
        return "ok"

    @tool(extra_arguments="ignore")
    def lenient(city: str, days: int = 1) -> str:
        seen.append((city, days))
        return "ok"

    with pytest.raises(ToolArgumentsError, match="dayz: this tool takes no such argument"):
        one(forecast).execute('{"city": "Oslo", "dayz": 3}', CONTEXT)
    with pytest.raises(ToolArgumentsError) as caught:
        one(forecast).execute('{"city": "Oslo", "' + "k" * 100_000 + '": 3}', CONTEXT)
    assert len(str(caught.value)) < 300
    assert seen == []
    assert "additionalProperties" not in schema(lenient)
    assert one(lenient).execute('{"city": "Oslo", "dayz": 3}', CONTEXT).text == "ok"
    assert seen == [("Oslo", 1)]
    with pytest.raises(ConfigurationError, match="`extra_arguments` must be one of forbid, ig"):
        tool(extra_arguments="allow")  # type: ignore[call-overload]


def test_a_docstring_with_only_an_args_section_describes_the_parameters() -> None:
    @tool
    def forecast(city: str, days: Annotated[int, Field(description="From Field")] = 1) -> str:
        """Args:
        city: The city, in English.
        days: Overridden by Field.
        """
        return "ok"

    @tool
    def indented(city: str, days: Annotated[int, Field(description="From Field")] = 1) -> str:
        """
        Args:
            city: The city, in English.
            days: Overridden by Field.
        Returns:
            What it says of the weather.
        """
        return "ok"

    assert one(forecast).specification.description is None
    assert one(indented).specification.description == "Returns: What it says of the weather."
    for item in (forecast, indented):
        assert schema(item)["properties"] == {
            "city": {"type": "string", "description": "The city, in English."},
            "days": {"type": "integer", "default": 1, "description": "From Field"},
        }


def test_specifications_are_made_once_per_function() -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert one(ping).specification is one(ping).specification
    assert schema(ping) == {"type": "object", "properties": {}, "additionalProperties": False}


def test_arguments_are_validated_and_coerced_before_the_function_runs() -> None:
    seen: list[Any] = []

    @tool
    def plan(place: Place, day: date, unit: Unit = Unit.CELSIUS, tree: Tree | None = None) -> str:
        seen.append((place, day, unit, tree))
        return "planned"

    output = one(plan).execute(
        '{"place": {"city": "Oslo"}, "day": "2026-11-25", "unit": "fahrenheit", '
        '"tree": {"label": "a", "children": [{"label": "b"}]}}',
        CONTEXT,
    )
    assert output.text == "planned"
    assert seen == [
        (
            Place("Oslo"),
            date(2026, 11, 25),
            Unit.FAHRENHEIT,
            Tree(label="a", children=[Tree(label="b")]),
        )
    ]
    with pytest.raises(ToolArgumentsError, match="place: Field required; day: Input should be"):
        one(plan).execute('{"day": "tomorrow"}', CONTEXT)
    assert len(seen) == 1


def test_arguments_get_one_repair_attempt() -> None:
    @tool
    def echo(text: str) -> str:
        return text

    assert one(echo).execute('"{\\"text\\": \\"hi\\",}"', CONTEXT).text == "hi"
    assert one(echo).execute('{"text": "a",}', CONTEXT).text == "a"
    with pytest.raises(ToolArgumentsError, match="not valid JSON"):
        one(echo).execute("{text: hi", CONTEXT)
    with pytest.raises(ToolArgumentsError, match="must be a JSON object"):
        one(echo).execute('["hi"]', CONTEXT)


def test_arguments_nested_too_deeply_are_invalid_arguments() -> None:
    @tool
    def echo(text: str) -> str:
        return text

    for nested in ("[" * 100_000 + "]" * 100_000, '{"text": ' * 100_000 + '"x"' + "}" * 100_000):
        with pytest.raises(ToolArgumentsError, match="nested too deeply") as caught:
            one(echo).execute(nested, CONTEXT)
        assert len(str(caught.value)) < 300
        assert caught.value.arguments == nested  # kept whole for the application
    with pytest.raises(ToolArgumentsError, match="not valid JSON") as caught:
        one(echo).execute('{"text": "' + "x" * 200_000, CONTEXT)
    assert len(str(caught.value)) < 300


def test_many_invalid_arguments_are_told_in_a_few_sentences() -> None:
    @tool
    def total(numbers: list[int]) -> int:
        return sum(numbers)

    arguments = '{"numbers": [' + ",".join(['"many"'] * 10_000) + "]}"
    with pytest.raises(ToolArgumentsError) as caught:
        one(total).execute(arguments, CONTEXT)
    told = str(caught.value)
    assert told.startswith("numbers.0: Input should be a valid integer")
    assert told.endswith("; and 9995 more")
    assert len(told) < 500


def test_results_become_text() -> None:
    @tool
    def nothing() -> None:
        return None

    @tool
    def maybe() -> str | None:
        return None

    @tool
    def place() -> Place:
        return Place("Oslo")

    @tool
    def tree() -> Tree:
        return Tree(label="root")

    @tool
    def numbers() -> list[int]:
        return [1, 2]

    assert one(nothing).execute("", CONTEXT).text == "Success"
    assert one(maybe).execute("{}", CONTEXT).text == "null"
    assert one(place).execute("{}", CONTEXT).text == '{"city":"Oslo","country":"NO"}'
    assert one(place).execute("{}", CONTEXT).value == Place("Oslo")
    assert one(tree).execute("{}", CONTEXT).text == '{"label":"root","children":[]}'
    assert one(numbers).execute("{}", CONTEXT).text == "[1,2]"


def test_the_memory_id_is_given_and_hidden() -> None:
    @tool
    def notes(user: ToolMemoryId, topic: str) -> str:
        return f"{user}:{topic}"

    @tool
    def notes_too(topic: str, user: Annotated[str, ToolMemoryId]) -> str:
        return f"{user}:{topic}"

    for item in (notes, notes_too):
        assert list(schema(item)["properties"]) == ["topic"]
        assert one(item).execute('{"topic": "tea"}', CONTEXT).text == "ann:tea"


def test_exceptions_become_execution_errors_with_the_message_or_class_name() -> None:
    @tool
    def fail(loudly: bool) -> str:
        if loudly:
            raise ValueError("the database is down")
        raise KeyError

    with pytest.raises(ToolExecutionError, match="the database is down") as info:
        one(fail).execute('{"loudly": true}', CONTEXT)
    assert isinstance(info.value.cause, ValueError)
    with pytest.raises(ToolExecutionError, match="KeyError"):
        one(fail).execute('{"loudly": false}', CONTEXT)


def test_async_tools_and_sync_tools_on_both_paths() -> None:
    @tool
    async def slow(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    @tool
    def fast(x: int) -> int:
        return x + 1

    assert one(slow).execute('{"x": 2}', CONTEXT).text == "4"
    assert asyncio.run(one(slow).aexecute('{"x": 3}', CONTEXT)).text == "6"
    assert asyncio.run(one(fast).aexecute('{"x": 3}', CONTEXT)).text == "4"

    async def inside_a_loop() -> str:
        return one(slow).execute('{"x": 5}', CONTEXT).text

    assert asyncio.run(inside_a_loop()) == "10"


class Assistant:
    def __init__(self, rate: float) -> None:
        self.rate = rate

    @tool
    def convert(self, amount: float) -> float:
        """Convert to euros."""
        return amount * self.rate

    @tool("The bank's name.")
    @staticmethod
    def bank() -> str:
        return "ACME"

    @tool
    @classmethod
    def kind(cls) -> str:
        return cls.__name__

    def helper(self) -> str:  # not a tool
        return "no"


class Cheaper(Assistant):
    @tool
    def convert(self, amount: float) -> float:
        """Convert with a discount."""
        return amount * self.rate * 0.5


def test_objects_give_their_tool_methods_bound_most_derived_first() -> None:
    found = {t.specification.name: t for t in collect_tools([Cheaper(2.0)])}
    assert set(found) == {"convert", "bank", "kind"}
    assert found["convert"].specification.description == "Convert with a discount."
    assert found["convert"].execute('{"amount": 10}', CONTEXT).text == "10.0"
    assert found["bank"].execute("", CONTEXT).text == "ACME"
    assert found["kind"].execute("", CONTEXT).text == "Cheaper"
    assert list(thaw(found["convert"].specification.parameters)["properties"]) == ["amount"]


def test_tool_from_wraps_an_undecorated_function() -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    made = tool_from(add, name="plus")
    assert made.specification.name == "plus"
    assert made.execute('{"a": 1, "b": "2"}', CONTEXT).text == "3"
    assert collect_tools([made]) == [made]


def test_tool_from_declares_each_time_and_leaves_the_function_alone() -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    plus = tool_from(add, name="plus", description="Plus.")
    total = tool_from(add, name="total", return_behavior="immediate")
    assert (plus.specification.name, plus.specification.description) == ("plus", "Plus.")
    assert (total.specification.name, total.specification.description) == (
        "total",
        "Add two numbers.",
    )
    assert (plus.return_behavior, total.return_behavior) == ("to_model", "immediate")
    assert vars(add) == {}
    with pytest.raises(ConfigurationError, match="is not a tool: decorate it with @tool"):
        collect_tools([add])

    @tool("Sum.", strict=True)
    def summed(a: int, b: int) -> int:
        return a + b

    renamed = tool_from(summed, name="sum2")
    assert (renamed.specification.name, renamed.specification.description) == ("sum2", "Sum.")
    assert renamed.specification.strict is True
    assert one(summed).specification.name == "summed"


def test_tool_from_a_builtin_says_to_wrap_it() -> None:
    with pytest.raises(ConfigurationError, match=r"a builtin has no signature.*wrap it"):
        tool_from(min).specification  # noqa: B018
    with pytest.raises(ConfigurationError, match="tool_from takes a function"):
        tool_from("min")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="a tool name is 1 to 64"):
        tool_from(abs, name="no spaces")
    with pytest.raises(ConfigurationError, match="a tool description is a str, got 3"):
        tool_from(abs, description=3)  # type: ignore[arg-type]


def test_registration_errors_say_what_to_pass() -> None:
    @tool
    def clock() -> str:
        return "noon"

    def plain() -> str:
        return "x"

    class Empty:
        pass

    cases: list[tuple[Any, str]] = [
        ([clock, clock], "Tool names must be unique: the tool 'clock' appears several times"),
        ([clock, Assistant(1.0), tool_from(lambda: "x", name="bank")], "'bank' appears"),
        ([Assistant], "Tool 'Assistant' must be an object, not a class: pass Assistant()"),
        ([[clock]], "is a collection: pass tool objects and functions directly"),
        ([Empty()], "does not have any methods decorated with @tool"),
        ([plain], "the function 'plain' is not a tool: decorate it with @tool"),
        ("clock", "`tools` is a list of tools"),
    ]
    for items, message in cases:
        with pytest.raises(
            ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)")
        ):
            collect_tools(items)


def test_p_misuse_is_refused() -> None:
    @tool
    def a(x: int = P("no")) -> str:  # type: ignore[assignment]
        return ""

    @tool
    def b(x: Annotated[int, P("x", required=False)]) -> str:
        return ""

    @tool
    def c(user: Annotated[ToolMemoryId, P("who")]) -> str:
        return ""

    @tool
    def d(*names: str) -> str:
        return ""

    for item, message in [
        (a, "has P\\(...\\) as its default"),
        (b, "is not required but has no default"),
        (c, "receives the memory id"),
        (d, "cannot take \\*names"),
    ]:
        with pytest.raises(ConfigurationError, match=message):
            collect_tools([item])
    with pytest.raises(ConfigurationError, match="P\\(description\\) must be a str"):
        P(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="`return_behavior` must be one of"):
        tool(return_behavior="later")  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match="a tool name is 1 to 64"):
        tool(name="no spaces")
    with pytest.raises(ConfigurationError, match="@tool takes a description"):
        tool(3)  # type: ignore[call-overload]
