"""The demo's scripted world: two users, two tools and an assistant that never calls a network.

Each conversation is a cycle of steps. Turn `n` (1, 2, ...) plays step `(n - 1) % len(steps)`
with values taken from the cycle it is in, so a conversation can go on for ever and its messages
keep changing. The tools are deterministic functions of their arguments and the turn number (the
demo's clock). The assistant's answers are templates over the tool results, except one: asked to
recall an earlier calculation, it looks for it in the window it is given — and says so when the
window no longer holds it.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._messages import ChatMessage, ToolExecutionRequest, ToolExecutionResultMessage

__all__ = ["CONVERSATIONS", "Conversation", "Turn", "run_tool"]

Answer = Callable[[Sequence[Any], Sequence[ChatMessage]], str]
"""(tool results, the window the assistant sees) -> the assistant's final text."""


@dataclass(frozen=True)
class Turn:
    user: str
    calls: tuple[tuple[str, dict[str, Any]], ...]
    answer: Answer


@dataclass(frozen=True)
class Conversation:
    name: str
    system: str
    steps: tuple[Callable[[int], Turn], ...]
    """Each step builds its turn from the cycle it is in (0 on the first pass)."""

    @property
    def memory_id(self) -> str:
        return f"demo:{self.name}"

    def turn(self, n: int) -> Turn:
        """Turn number `n` (1-based) of this conversation."""
        cycle, step = divmod(n - 1, len(self.steps))
        return self.steps[step](cycle)


# -- tools ----------------------------------------------------------------------------------

_CONDITIONS = ("sunny", "partly cloudy", "overcast", "light rain", "windy")


def _weather(city: str, day: int) -> dict[str, Any]:
    seed = sum(map(ord, city))
    return {
        "city": city,
        "temperature_c": 8 + (seed * 7 + day * 5) % 19,
        "conditions": _CONDITIONS[(seed + day) % len(_CONDITIONS)],
    }


_OPERATIONS: dict[str, Callable[[float, float], float]] = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "divide": operator.truediv,
}


def run_tool(request: ToolExecutionRequest, day: int) -> str:
    """Execute a tool call as the demo's tool loop would: JSON arguments in, JSON text out."""
    arguments = json.loads(request.arguments)
    if request.name == "get_weather":
        return json.dumps(_weather(arguments["city"], day))
    if request.name == "calculator":
        return json.dumps(_OPERATIONS[arguments["operation"]](arguments["a"], arguments["b"]))
    raise ValueError(f"the demo has no tool {request.name!r}")  # pragma: no cover


# -- answers --------------------------------------------------------------------------------

_TIPS = {
    "sunny": "bring sunscreen",
    "partly cloudy": "a light jacket will do",
    "overcast": "grey but dry",
    "light rain": "take an umbrella",
    "windy": "hold on to your hat",
}


def _report(results: Sequence[Any], _: Sequence[ChatMessage]) -> str:
    w = json.loads(results[0])
    return (
        f"Right now it is {w['conditions']} in {w['city']} at {w['temperature_c']} °C "
        f"— {_TIPS[w['conditions']]}."
    )


def _compare(results: Sequence[Any], _: Sequence[ChatMessage]) -> str:
    a, b = (json.loads(r) for r in results)
    if a["temperature_c"] == b["temperature_c"]:
        return f"Both are at {a['temperature_c']} °C today; {a['city']} is {a['conditions']}."
    warm, cool = (a, b) if a["temperature_c"] > b["temperature_c"] else (b, a)
    return (
        f"{warm['city']} is warmer: {warm['temperature_c']} °C and {warm['conditions']}, "
        f"against {cool['temperature_c']} °C and {cool['conditions']} in {cool['city']}."
    )


def _recall(_: Sequence[Any], window: Sequence[ChatMessage]) -> str:
    for message in reversed(window):
        if isinstance(message, ToolExecutionResultMessage) and message.tool_name == "calculator":
            return f"We worked it out earlier: the hotel comes to {message.text} euros."
    return (
        "That calculation is no longer in my context window, so I can't see it. "
        "What was the nightly price again?"
    )


def _constant(text: str) -> Answer:
    return lambda _results, _window: text


# -- the two conversations ------------------------------------------------------------------

_TRIP = ("Lisbon", "Porto", "Seville", "Valencia")
_BBQ = ("Oslo", "Bergen", "Hamburg", "Copenhagen")


def _pick(cities: tuple[str, ...], cycle: int, offset: int = 0) -> str:
    return cities[(cycle + offset) % len(cities)]


def _alice_weather(c: int) -> Turn:
    return Turn(
        f"Hi! I'm spending {3 + c % 5} nights in {_pick(_TRIP, c)} soon. "
        f"What's the weather like there right now?",
        (("get_weather", {"city": _pick(_TRIP, c)}),),
        _report,
    )


def _alice_hotel(c: int) -> Turn:
    price, nights = 90 + 5 * c, 3 + c % 5
    return Turn(
        f"My hotel is {price} euros a night. What will {nights} nights cost?",
        (("calculator", {"operation": "multiply", "a": price, "b": nights}),),
        lambda results, _: f"{nights} nights at {price} euros come to {results[0]} euros in total.",
    )


def _alice_compare(c: int) -> Turn:
    city, other = _pick(_TRIP, c), _pick(_TRIP, c, 1)
    return Turn(
        f"Is it warmer in {city} or in {other} today?",
        (("get_weather", {"city": city}), ("get_weather", {"city": other})),
        _compare,
    )


def _alice_recall(c: int) -> Turn:
    return Turn("Remind me: what did the hotel come to?", (), _recall)


def _bob_weather(c: int) -> Turn:
    return Turn(
        f"I'm hosting a barbecue for {6 + 2 * c} people in {_pick(_BBQ, c)} this weekend. "
        f"Will the weather hold?",
        (("get_weather", {"city": _pick(_BBQ, c)}),),
        _report,
    )


def _bob_food(c: int) -> Turn:
    guests, grams = 6 + 2 * c, 250 + 25 * c
    return Turn(
        f"Each guest eats about {grams} g of grilled vegetables. How much do I buy in total?",
        (("calculator", {"operation": "multiply", "a": guests, "b": grams}),),
        lambda results, _: (
            f"{guests} guests × {grams} g = {results[0]} g, so buy about "
            f"{json.loads(results[0]) / 1000:.1f} kg and a little extra."
        ),
    )


def _bob_compare(c: int) -> Turn:
    city, other = _pick(_BBQ, c), _pick(_BBQ, c, 1)
    return Turn(
        f"Would {other} be warmer than {city} for the barbecue?",
        (("get_weather", {"city": city}), ("get_weather", {"city": other})),
        _compare,
    )


def _bob_marinade(c: int) -> Turn:
    return Turn(
        f"Thanks! Any tip for a vegetable marinade for {6 + 2 * c} people?",
        (),
        _constant(
            "Olive oil, lemon, garlic and a pinch of smoked paprika; "
            "marinate the vegetables for at least an hour."
        ),
    )


CONVERSATIONS = (
    Conversation(
        "alice",
        "You are Tripwise, a concise travel assistant. Use get_weather for weather and "
        "calculator for arithmetic; never guess numbers.",
        (_alice_weather, _alice_hotel, _alice_compare, _alice_recall),
    ),
    Conversation(
        "bob",
        "You are Chefbot, a friendly cooking assistant. Use get_weather for forecasts and "
        "calculator for quantities.",
        (_bob_weather, _bob_food, _bob_compare, _bob_marinade),
    ),
)
