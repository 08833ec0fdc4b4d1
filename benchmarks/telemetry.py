"""What tracing adds to an AI-service call (issue 26: at most 10 % on, nothing off).

One call of the services benchmark's declared method on a SQLite memory of 100 messages, with
`ScriptedChatModel` answering at once (so the model costs nothing and the share is the largest
it can be), in five setups measured in rounds taking turns (the machine's drift falls on all
alike; each setup's quietest round counts):

* the plain model, tracing off: the baseline;
* the model wrapped by `with_listeners`, tracing off: what "off" costs, judged by the function
  calls it makes (the same as the baseline's: its time differs by the machine's noise only);
* `chatmemory.instrument()` with the OpenTelemetry API's no-op providers: our side alone (the
  listener, the spans' attributes, the context handling), with no SDK behind it;
* `chatmemory.instrument()` with the SDK as a service would run it: a `TracerProvider` with a
  `BatchSpanProcessor` (spans handed to a background thread, exported in batches to an
  exporter that drops them) and a `MeterProvider` with a `PeriodicExportingMetricReader` (once
  a minute, to an exporter that drops them);
* the same with a `SimpleSpanProcessor` and the `InMemorySpanExporter` the tests use;
* the SDK's floor: the plain call, then the very spans (names, kinds, attributes, nesting) and
  measurements one traced call records, replayed bare on the batch setup's SDK, with none of
  chatmemory's code around them: what those spans and metrics cost whoever makes them;
* the baseline again: how far two measurements of the same work fall apart on this machine.

Each row also counts the Python function calls of one service call (cProfile): a number the
machine's noise does not move. `over_http` is the same call through `OpenAiChatModel` against a
local server: the share in a real call.
"""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import chatmemory
from chatmemory.models import with_listeners
from chatmemory.testing import ScriptedChatModel

from .common import table
from .services import ANSWER, CALLS, _median_us, _prefill, _service_call, _store

GOAL_ON = 0.10
"""Issue 26: tracing on adds at most 10 % to a service call."""
ROUNDS = 20


@dataclass
class Setup:
    name: str
    call: Callable[[int], Any]
    providers: tuple[Any, Any] | None
    """The tracer and meter providers `instrument()` gets; None: tracing off."""
    owned: tuple[Any, Any] | None = None
    """Providers the setup uses on its own (the SDK floor's), shut down at the end."""


@dataclass
class _Recorded:
    """A span one traced call made, with its children, as the SDK's exporter got it."""

    name: str
    kind: Any
    attributes: dict[str, Any]
    children: list[_Recorded]


def _recording(call: Callable[[int], Any]) -> tuple[list[_Recorded], list[tuple[str, Any, Any]]]:
    """The spans (roots, with their children) and the measurements (instrument name, value,
    attributes) of one traced `call`."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    chatmemory.instrument(tracer_provider=tracing, meter_provider=MeterProvider([reader]))
    try:
        call(-1_000)
    finally:
        chatmemory.uninstrument()
    finished = exporter.get_finished_spans()
    made = {
        s.context.span_id: _Recorded(s.name, s.kind, dict(s.attributes or {}), []) for s in finished
    }
    roots = []
    for s in sorted(finished, key=lambda s: s.start_time or 0):
        if s.parent is not None and s.parent.span_id in made:
            made[s.parent.span_id].children.append(made[s.context.span_id])
        else:
            roots.append(made[s.context.span_id])
    measured = []
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "sum", None) or getattr(point, "value", 0)
                    measured.append((metric.name, value, dict(point.attributes or {})))
    return roots, measured


def _bare(call: Callable[[int], Any], providers: tuple[Any, Any]) -> Callable[[int], Any]:
    """`call`, then the spans and measurements a traced call records made bare on the SDK."""
    from opentelemetry import context, trace

    spans, measured = _recording(call)
    tracer = providers[0].get_tracer("floor")
    meter = providers[1].get_meter("floor")
    instruments = [
        (meter.create_counter(name) if "evicted" in name else meter.create_histogram(name))
        for name, _, _ in measured
    ]
    recorders = [
        (getattr(instrument, "add", None) or instrument.record, value, attributes)
        for instrument, (_, value, attributes) in zip(instruments, measured, strict=True)
    ]

    def made(span: _Recorded) -> None:
        opened = tracer.start_span(span.name, kind=span.kind, attributes=span.attributes)
        if span.children:
            token = context.attach(trace.set_span_in_context(opened))
            for child in span.children:
                made(child)
            context.detach(token)
        opened.end()

    def floor(i: int) -> Any:
        answer = call(i)
        for span in spans:
            made(span)
        for record, value, attributes in recorders:
            record(value, attributes)
        return answer

    return floor


def _sdk(batch: bool) -> tuple[Any, Any]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        InMemoryMetricReader,
        MetricExporter,
        MetricExportResult,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class Dropping(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class DroppingMetrics(MetricExporter):
        def export(self, metrics_data: Any, timeout_millis: float = 0, **kwargs: Any) -> Any:
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 0) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 0, **kwargs: Any) -> None:
            return None

    tracing = TracerProvider()
    if batch:
        tracing.add_span_processor(BatchSpanProcessor(Dropping()))
        reader: Any = PeriodicExportingMetricReader(
            DroppingMetrics(), export_interval_millis=60_000
        )
    else:
        tracing.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        reader = InMemoryMetricReader()
    return tracing, MeterProvider(metric_readers=[reader])


def _noop() -> tuple[Any, Any]:
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.trace import NoOpTracerProvider

    return NoOpTracerProvider(), NoOpMeterProvider()


def _traced(setup: Setup) -> None:
    if setup.providers is not None:
        tracing, metering = setup.providers
        chatmemory.instrument(tracer_provider=tracing, meter_provider=metering)


def _rounds(setups: list[Setup], calls: int) -> list[float]:
    """The µs per call of each setup: the median of its quietest round, over `ROUNDS` rounds
    taking turns (on a shared machine a round another process interrupts is slower for
    reasons of its own; the quietest compares like with like, as `timeit` advises)."""
    medians: list[list[float]] = [[] for _ in setups]
    for _ in range(ROUNDS):
        for setup, kept in zip(setups, medians, strict=True):
            _traced(setup)
            try:
                kept.append(_median_us(setup.call, calls // ROUNDS))
            finally:
                chatmemory.uninstrument()
    return [min(kept) for kept in medians]


def _function_calls(setup: Setup, calls: int = 20) -> float:
    """Python function calls of one service call (cProfile's count: noise does not move it)."""
    _traced(setup)
    try:
        profile = cProfile.Profile()
        profile.enable()
        for i in range(calls):
            setup.call(10_000 + i)
        profile.disable()
    finally:
        chatmemory.uninstrument()
    return pstats.Stats(profile).total_calls / calls  # type: ignore[attr-defined, no-any-return]


def _verdict(share: float, limit: float) -> str:
    return f"≤ {limit:+.0%}{'' if share <= limit else ' ✗'}"


def _shutdown(setups: list[Setup]) -> None:
    for setup in setups:
        for providers in (setup.providers, setup.owned):
            for provider in providers or ():
                getattr(provider, "shutdown", lambda: None)()


def overhead(quick: bool = False) -> str:
    calls = 200 if quick else CALLS * 2
    with _store() as store:
        names = ["plain", "off", "noop", "batch", "simple", "floor", "again"]
        for name in names:
            _prefill(store, name, 100)
        wrapped = with_listeners(ScriptedChatModel(lambda r: ANSWER))
        plain = _service_call(store, ScriptedChatModel(lambda r: ANSWER), "plain")
        setups = [
            Setup("plain ScriptedChatModel, tracing off", plain, None),
            Setup("with_listeners, tracing off", _service_call(store, wrapped, "off"), None),
            Setup(
                "instrument(), API no-op providers (our side)",
                _service_call(store, wrapped, "noop"),
                _noop(),
            ),
            Setup(
                "instrument(), SDK: BatchSpanProcessor, periodic reader",
                _service_call(store, wrapped, "batch"),
                _sdk(batch=True),
            ),
            Setup(
                "instrument(), SDK: SimpleSpanProcessor, in-memory",
                _service_call(store, wrapped, "simple"),
                _sdk(batch=False),
            ),
        ]
        floor = _sdk(batch=True)
        setups.append(
            Setup(
                "the same spans and metrics made bare on the SDK (its floor)",
                _bare(_service_call(store, ScriptedChatModel(lambda r: ANSWER), "floor"), floor),
                None,
                owned=floor,
            )
        )
        setups.append(
            Setup(
                "plain, tracing off, measured again (the noise)",
                _service_call(store, ScriptedChatModel(lambda r: ANSWER), "again"),
                None,
            )
        )
        try:
            times = _rounds(setups, calls)
            counted = [_function_calls(setup) for setup in setups]
        finally:
            _shutdown(setups)
    base, base_calls = times[0], counted[0]
    rows = []
    for n, (setup, took, made) in enumerate(zip(setups, times, counted, strict=True)):
        share = took / base - 1
        if n in (0, len(setups) - 1) or setup.owned is not None:
            goal = "—"
        elif setup.providers is None:  # off: judged by what it runs, which noise cannot move
            goal = f"+0 calls{'' if made <= base_calls else ' ✗'}"
        else:
            goal = _verdict(share, GOAL_ON)
        rows.append(
            [
                setup.name,
                f"{took:,.0f}",
                "—" if n == 0 else f"{share:+.1%}",
                goal,
                f"{made:,.0f} ({made - base_calls:+,.0f})",
            ]
        )
    return table(
        f"Service call at N=100, ScriptedChatModel (µs per call: the median of the quietest of "
        f"{ROUNDS} rounds of {calls // ROUNDS})",
        ["setup", "µs per call", "vs off", "goal", "function calls"],
        rows,
    )


def over_http(quick: bool = False) -> str:
    """The same through `OpenAiChatModel` against a local server: a real call's share."""
    from tests.models.fake_server import FakeServer, Reply

    from chatmemory.models import OpenAiChatModel

    from .services import COMPLETION, WARMUP

    calls = 100 if quick else 500
    with _store() as store, FakeServer() as server:
        server.reply(*[Reply(body=COMPLETION)] * (3 * (calls + ROUNDS * WARMUP) + 40))
        model = OpenAiChatModel(model="gpt-4o-mini", base_url=server.url + "/v1", api_key="k")
        for name in ("off", "on", "again"):
            _prefill(store, name, 100)
        setups = [
            Setup("off", _service_call(store, model, "off"), None),
            Setup(
                "instrument(), SDK: BatchSpanProcessor, periodic reader",
                _service_call(store, model, "on"),
                _sdk(batch=True),
            ),
            Setup("off, measured again (the noise)", _service_call(store, model, "again"), None),
        ]
        try:
            off, on, again = _rounds(setups, calls)
            counted = [_function_calls(setup) for setup in setups[:2]]
        finally:
            _shutdown(setups)
            model.close()
    return table(
        f"Service call at N=100 through OpenAiChatModel on a local server (µs per call: the "
        f"median of the quietest of {ROUNDS} rounds of {calls // ROUNDS})",
        ["tracing", "µs per call", "vs off", "goal", "function calls"],
        [
            ["off", f"{off:,.0f}", "—", "—", f"{counted[0]:,.0f}"],
            [
                setups[1].name,
                f"{on:,.0f}",
                f"{on / off - 1:+.1%}",
                _verdict(on / off - 1, GOAL_ON),
                f"{counted[1]:,.0f} ({counted[1] - counted[0]:+,.0f})",
            ],
            [setups[2].name, f"{again:,.0f}", f"{again / off - 1:+.1%}", "—", "—"],
        ],
    )


def run(quick: bool = False) -> Iterator[str]:
    yield overhead(quick)
    yield over_http(quick)
