"""Tool declarations as pydantic-ai users expect them (issue 22 item 22): parameter
descriptions from attribute docstrings, the docstring's Returns section, `functools.partial` and
callable objects as tools, and `require_descriptions`."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from typing import Annotated, Any, Protocol

import pytest
from pydantic import Field
from typing_extensions import TypedDict

from chatmemory import AiMessage, ConfigurationError, ToolExecutionRequest
from chatmemory._frozen import thaw
from chatmemory.services import Result, ai_service
from chatmemory.testing import ScriptedChatModel
from chatmemory.tools import P, ToolContext, ToolMemoryId, tool, tool_from

CONTEXT = ToolContext("ann")


class Window(TypedDict):
    start: str
    """The first day, yyyy-mm-dd."""
    days: int
    """How many days, 1 to 7."""


@dataclasses.dataclass
class Place:
    city: str
    """The city, in English."""
    country: str = "NO"
    """An ISO country code."""


# -- attribute docstrings ----------------------------------------------------------------------


def test_attribute_docstrings_describe_the_fields_of_typeddicts_and_dataclasses() -> None:
    @tool
    def forecast(window: Window, place: Place) -> str:
        """The forecast."""
        return "ok"

    parameters = thaw(tool_from(forecast).specification.parameters)
    definitions = parameters["$defs"]
    assert definitions["Window"]["properties"] == {
        "start": {"type": "string", "description": "The first day, yyyy-mm-dd."},
        "days": {"type": "integer", "description": "How many days, 1 to 7."},
    }
    assert definitions["Place"]["properties"]["city"]["description"] == "The city, in English."
    assert definitions["Place"]["properties"]["country"]["description"] == "An ISO country code."


# -- the Returns section -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        "The forecast.\n\nArgs:\n    city: The city.\n\nReturns:\n    Sun or rain, per day.",
        "The forecast.\n\n:param city: The city.\n:returns: Sun or rain, per day.",
        "The forecast.\n\nParameters\n----------\ncity : str\n    The city.\n\n"
        "Returns\n-------\nstr\n    Sun or rain, per day.",
    ],
)
def test_the_returns_section_ends_the_description(doc: str) -> None:
    def forecast(city: str) -> str:
        return "ok"

    forecast.__doc__ = doc
    spec = tool_from(forecast).specification
    assert spec.description == "The forecast.\n\nReturns: Sun or rain, per day."
    assert thaw(spec.parameters)["properties"]["city"]["description"] == "The city."


def test_an_explicit_description_is_kept_whole() -> None:
    def forecast(city: str) -> str:
        """The forecast.

        Returns:
            Sun or rain.
        """
        return "ok"

    assert tool_from(forecast, description="Mine.").specification.description == "Mine."


# -- functools.partial and callable objects ------------------------------------------------------


def convert(amount: float, rate: float, currency: str = "EUR") -> str:
    """Converts an amount.

    Args:
        amount: How much.
        rate: The exchange rate.
        currency: The target currency.
    """
    return f"{amount * rate:.2f} {currency}"


def test_a_partial_is_a_tool_without_the_arguments_it_binds() -> None:
    fixed = tool_from(functools.partial(convert, rate=2.0))
    spec = fixed.specification
    assert spec.name == "convert"
    assert spec.description == "Converts an amount."
    assert set(thaw(spec.parameters)["properties"]) == {"amount", "currency"}
    assert fixed.execute('{"amount": 3}', CONTEXT).text == "6.00 EUR"
    positional = tool_from(functools.partial(convert, 10.0), name="ten")
    assert set(thaw(positional.specification.parameters)["properties"]) == {"rate", "currency"}
    assert positional.execute('{"rate": 0.5, "currency": "NOK"}', CONTEXT).text == "5.00 NOK"


def test_a_partial_of_a_decorated_function_keeps_its_declaration_and_not_its_schema() -> None:
    @tool(name="exchange", strict=True)
    def exchange(amount: float, rate: float) -> str:
        """Exchanges."""
        return f"{amount * rate:.1f}"

    whole = tool_from(exchange)
    half = tool_from(functools.partial(exchange, rate=0.5))
    assert set(thaw(whole.specification.parameters)["properties"]) == {"amount", "rate"}
    assert thaw(half.specification.parameters)["required"] == ["amount"]
    assert half.specification.name == "exchange"
    assert half.specification.strict is True
    assert half.execute('{"amount": 4}', CONTEXT).text == "2.0"


class Counter:
    """Counts words."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, text: Annotated[str, P("The text to count")], memory: ToolMemoryId) -> int:
        self.seen.append(memory)
        return len(text.split())


class AsyncEcho:
    async def __call__(self, text: str) -> str:
        """Echoes the text."""
        await asyncio.sleep(0)
        return text


def test_a_callable_object_is_a_tool_named_after_its_class() -> None:
    counter = Counter()
    counting = tool_from(counter)
    spec = counting.specification
    assert spec.name == "Counter"
    assert spec.description == "Counts words."
    assert thaw(spec.parameters)["properties"] == {
        "text": {"type": "string", "description": "The text to count"}
    }
    assert counting.execute('{"text": "a b c"}', CONTEXT).text == "3"
    assert counter.seen == ["ann"]
    echo = tool_from(AsyncEcho(), name="echo")
    assert echo.specification.description == "Echoes the text."
    assert echo.execute('{"text": "hi"}', CONTEXT).text == "hi"
    assert asyncio.run(echo.aexecute('{"text": "yo"}', CONTEXT)).text == "yo"


class Decorated:
    @tool("Adds one.")
    def __call__(self, n: int) -> int:
        return n + 1


class Calc(Protocol):
    def ask(self, text: str) -> Result[str]: ...


class AsyncCalc(Protocol):
    async def ask(self, text: str) -> Result[str]: ...


def test_partials_and_callable_objects_serve_a_service_on_every_path() -> None:
    items: list[Any] = [functools.partial(tool(convert), rate=2.0), Decorated()]

    def model() -> ScriptedChatModel:
        calls = [
            ToolExecutionRequest("1", "convert", '{"amount": 1}'),
            ToolExecutionRequest("2", "Decorated", '{"n": 41}'),
        ]
        return ScriptedChatModel([AiMessage(tool_execution_requests=calls), "Done."])

    sync = ai_service(Calc, chat_model=model(), tools=items).ask("go")
    streamed = ai_service(Calc, streaming_chat_model=model(), tools=items).ask("go")
    asynchronous = asyncio.run(ai_service(AsyncCalc, chat_model=model(), tools=items).ask("go"))
    for result in (sync, streamed, asynchronous):
        assert [e.result for e in result.tool_executions] == ["2.00 EUR", "42"]


# -- require_descriptions ------------------------------------------------------------------------


def test_require_descriptions_names_the_parameters_without_one() -> None:
    def vague(city: str, days: int, units: Annotated[str, Field(description="C or F")]) -> str:
        """The forecast.

        Args:
            days: How many days.
        """
        return "ok"

    with pytest.raises(ConfigurationError, match=r"but city has no description: describe it"):
        tool_from(vague, require_descriptions=True)
    tool_from(vague)  # not required by default

    @tool(require_descriptions=True)
    def bare(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ConfigurationError, match=r"but a, b have no description"):
        ai_service(Calc, chat_model=ScriptedChatModel(["x"]), tools=[bare])
    described = tool_from(bare, description="Adds.", require_descriptions=False)
    assert described.specification.description == "Adds."


def test_require_descriptions_passes_when_everything_is_described() -> None:
    @tool(require_descriptions=True)
    def forecast(city: Annotated[str, P("The city")], memory: ToolMemoryId, days: int = 1) -> str:
        """The forecast.

        Args:
            days: How many days.
        """
        return "ok"

    assert tool_from(forecast).specification.name == "forecast"


def test_tool_metadata_goes_on_the_specification() -> None:
    @tool(metadata={"team": "payments", "risk": 3})
    def refund(order: str) -> str:
        """Refund an order."""
        return "refunded"

    spec = tool_from(refund).specification
    assert spec.metadata == {"team": "payments", "risk": 3}
    assert tool_from(refund, metadata={"risk": 1}).specification.metadata == {"risk": 1}
