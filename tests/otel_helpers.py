"""An OpenTelemetry SDK tracer and meter provider recorded in memory, and `chatmemory.instrument()`
on them for a test."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

import chatmemory


class Otel:
    """An SDK tracer and meter provider, recorded in memory."""

    def __init__(self, sampler: Sampler | None = None) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(sampler=sampler)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def children(self, parent: ReadableSpan) -> list[str]:
        """The names of `parent`'s finished children, in the order they ended."""
        return [
            s.name
            for s in self.spans()
            if s.parent is not None and s.parent.span_id == parent.context.span_id
        ]

    def _points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        if data is None:
            return []
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]

    def histogram(self, name: str) -> list[tuple[dict[str, Any], int, float]]:
        """(attributes, count, sum) of each data point of the histogram `name`."""
        points = self._points(name)
        assert all(isinstance(p, HistogramDataPoint) for p in points)
        return [(dict(p.attributes or {}), p.count, p.sum) for p in points]

    def bounds(self, name: str) -> tuple[float, ...]:
        """The bucket boundaries of the histogram `name`."""
        [point, *_] = self._points(name)
        assert isinstance(point, HistogramDataPoint)
        return tuple(point.explicit_bounds)

    def counter(self, name: str) -> list[tuple[dict[str, Any], float]]:
        """(attributes, value) of each data point of the counter `name`."""
        points = self._points(name)
        assert all(isinstance(p, NumberDataPoint) for p in points)
        return [(dict(p.attributes or {}), p.value) for p in points]


@contextmanager
def instrumented() -> Iterator[Otel]:
    """`chatmemory.instrument()` on a fresh `Otel` for the block."""
    otel = Otel()
    chatmemory.instrument(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    try:
        yield otel
    finally:
        chatmemory.uninstrument()
        otel.tracer_provider.shutdown()
        otel.meter_provider.shutdown()
