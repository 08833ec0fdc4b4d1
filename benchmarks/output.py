"""What reading a structured answer costs (issue 8 §6): a 20-field pydantic model read by a
service method's output spec, beside pydantic's own `model_validate_json` on the bare JSON (the
floor: the least any reader that validates with pydantic can do).

Cases: the clean JSON a model with a JSON-schema response format sends (our fast path is one
`validate_json`); the same JSON inside prose and a code fence, as a model without one writes
it (the floor is handed the JSON already cut out); JSON after prose that has braces of its own;
and an answer that does not parse (the floor's `ValidationError` against our
`OutputParsingError` after every lenient attempt).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from datetime import date

from pydantic import BaseModel, ValidationError

from chatmemory import OutputParsingError
from chatmemory.services._output import output_spec

from .common import table


class Order(BaseModel):
    id: int
    customer: str
    email: str
    street: str
    city: str
    zip_code: str
    country: str
    placed: date
    shipped: date | None
    items: list[str]
    quantities: list[int]
    subtotal: float
    tax: float
    total: float
    currency: str
    paid: bool
    gift: bool
    notes: str | None
    priority: int
    tags: list[str]


JSON = (
    '{"id": 1042, "customer": "Ann Example", "email": "ann@example.com", "street": "1 Main St",'
    ' "city": "Oslo", "zip_code": "0150", "country": "NO", "placed": "2024-05-01",'
    ' "shipped": null, "items": ["tea", "cups", "spoons"], "quantities": [2, 6, 6],'
    ' "subtotal": 48.5, "tax": 12.13, "total": 60.63, "currency": "NOK", "paid": true,'
    ' "gift": false, "notes": "leave at the door", "priority": 2, "tags": ["web", "repeat"]}'
)
PROSE = f"Sure! Here is the order you asked for:\n\n```json\n{JSON}\n```\n\nAnything else?"
BRACES = f"Your template {{name}} and set {{1, 2}} were ignored; the order is {JSON}. Done."
BAD = JSON.replace('"priority": 2', '"priority": "urgent"')


def _us_per_call(
    floor: Callable[[], object], ours: Callable[[], object], calls: int, batches: int
) -> tuple[float, float]:
    """Median µs per call of each side, batches alternating so both see the same machine."""
    samples: tuple[list[float], list[float]] = ([], [])
    for batch in range(batches + 1):
        for side, op in enumerate((floor, ours)):
            start = time.perf_counter()
            for _ in range(calls):
                op()
            if batch:  # the first batch warms up
                samples[side].append((time.perf_counter() - start) / calls)
    return statistics.median(samples[0]) * 1e6, statistics.median(samples[1]) * 1e6


def _raises(op: Callable[[], object], error: type[Exception]) -> Callable[[], None]:
    def call() -> None:
        try:
            op()
        except error:
            return
        raise AssertionError("expected a failure")

    return call


def run(quick: bool = False) -> Iterator[str]:
    calls, batches = (100, 5) if quick else (1000, 15)
    spec = output_spec(Order, where="Orders.read")
    assert spec.parse(PROSE) == spec.parse(BRACES) == Order.model_validate_json(JSON)
    cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("clean JSON", lambda: Order.model_validate_json(JSON), lambda: spec.parse(JSON)),
        (
            "JSON in prose and a fence",
            lambda: Order.model_validate_json(JSON),
            lambda: spec.parse(PROSE),
        ),
        (
            "JSON after prose with braces",
            lambda: Order.model_validate_json(JSON),
            lambda: spec.parse(BRACES),
        ),
        (
            "an answer that does not parse",
            _raises(lambda: Order.model_validate_json(BAD), ValidationError),
            _raises(lambda: spec.parse(BAD), OutputParsingError),
        ),
    ]
    rows = []
    for name, floor, ours in cases:
        floor_us, ours_us = _us_per_call(floor, ours, calls, batches)
        rows.append(
            [name, f"{floor_us:,.1f} µs", f"{ours_us:,.1f} µs", f"{ours_us / floor_us:.2f}×"]
        )
    yield table(
        f"Reading a 20-field pydantic model ({len(JSON)}-character JSON; median of {batches} "
        f"batches of {calls} parses)",
        ["answer", "floor: model_validate_json", "ours: output spec", "ours / floor"],
        rows,
    )
