"""What tracing adds to an AI-service call (issue 26: at most 10 % on, nothing off).

One call of the services benchmark's declared method on a SQLite memory of 100 messages, with
`ScriptedChatModel` answering at once (so the model costs nothing and the share is the largest
it can be): the plain model; the model wrapped by `with_listeners` with no listener (tracing
off); and `chatmemory.instrument()` on, with the OpenTelemetry SDK's tracer and meter providers
(spans to an exporter that drops them, metrics to an in-memory reader).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import chatmemory
from chatmemory.models import with_listeners
from chatmemory.testing import ScriptedChatModel

from .common import table
from .services import ANSWER, CALLS, _median_us, _prefill, _service_call, _store


def _providers() -> tuple[Any, Any]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Dropping(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(Dropping()))
    return tracing, MeterProvider(metric_readers=[InMemoryMetricReader()])


ROUNDS = 6


def _alternating(
    first: Callable[[int], Any], second: Callable[[int], Any], calls: int, *, trace: bool
) -> tuple[float, float]:
    """Medians (µs) of `first` and `second`, measured in alternating rounds (the machine's
    drift, other processes and warm caches, falls on both alike); with `trace`, tracing is on
    during `second`'s rounds only."""
    tracing, metering = _providers()
    firsts: list[float] = []
    seconds: list[float] = []
    try:
        for _ in range(ROUNDS):
            firsts.append(_median_us(first, calls // ROUNDS))
            if trace:
                chatmemory.instrument(tracer_provider=tracing, meter_provider=metering)
            try:
                seconds.append(_median_us(second, calls // ROUNDS))
            finally:
                chatmemory.uninstrument()
    finally:
        tracing.shutdown()
        metering.shutdown()
    return statistics.median(firsts), statistics.median(seconds)


def overhead(quick: bool = False) -> str:
    calls = 100 if quick else CALLS
    with _store() as store:
        for name in ("plain", "off", "on"):
            _prefill(store, name, 100)
        plain_call = _service_call(store, ScriptedChatModel(lambda r: ANSWER), "plain")
        wrapped = with_listeners(ScriptedChatModel(lambda r: ANSWER))
        plain, off = _alternating(
            plain_call, _service_call(store, wrapped, "off"), calls, trace=False
        )
        plain_again, on = _alternating(
            plain_call, _service_call(store, wrapped, "on"), calls, trace=True
        )
    return table(
        f"Service call at N=100 with tracing (µs per call, median of {calls})",
        ["model", "µs per call", "vs plain"],
        [
            ["plain ScriptedChatModel", f"{plain:,.0f}", "—"],
            ["with_listeners, tracing off", f"{off:,.0f}", f"{off / plain - 1:+.1%}"],
            ["instrument() on (SDK)", f"{on:,.0f}", f"{on / plain_again - 1:+.1%}"],
        ],
    )


def over_http(quick: bool = False) -> str:
    """The same through `OpenAiChatModel` against a local server: a real call's share."""
    from tests.models.fake_server import FakeServer, Reply

    from chatmemory.models import OpenAiChatModel

    from .services import COMPLETION, WARMUP

    calls = 50 if quick else 200
    body = COMPLETION
    with _store() as store, FakeServer() as server:
        server.reply(*[Reply(body=body)] * (2 * ROUNDS * (calls + WARMUP)))
        model = OpenAiChatModel(model="gpt-4o-mini", base_url=server.url + "/v1", api_key="k")
        wrapped = with_listeners(model)
        _prefill(store, "plain", 100)
        _prefill(store, "on", 100)
        try:
            plain, on = _alternating(
                _service_call(store, wrapped, "plain"),
                _service_call(store, wrapped, "on"),
                calls,
                trace=True,
            )
        finally:
            model.close()
    return table(
        f"Service call at N=100 through OpenAiChatModel on a local server (µs, median of {calls})",
        ["tracing", "µs per call", "vs off"],
        [
            ["off", f"{plain:,.0f}", "—"],
            ["instrument() on (SDK)", f"{on:,.0f}", f"{on / plain - 1:+.1%}"],
        ],
    )


def run(quick: bool = False) -> Iterator[str]:
    yield overhead(quick)
    yield over_http(quick)
