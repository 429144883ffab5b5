"""Prometheus metrics in the text exposition format (version 0.0.4), without a dependency.

Counters and histograms live in the process (one set per replica: Prometheus sums them);
gauges that describe shared state — pending approvals, calls whose outcome is unknown — are
read from the store when ``/metrics`` is scraped, so every replica reports the same figure.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Sequence

LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels, extra: Labels = ()) -> str:
    items = labels + extra
    if not items:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in items) + "}"


def _number(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


class Counter:
    def __init__(self, name: str, help_text: str) -> None:
        self.name = name
        self.help = help_text
        self._values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def inc(self, labels: Labels = (), amount: float = 1.0) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def value(self, labels: Labels = ()) -> float:
        return self._values.get(labels, 0.0)

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} counter"
        with self._lock:
            items = sorted(self._values.items())
        for labels, value in items:
            yield f"{self.name}{_labels(labels)} {_number(value)}"


class Histogram:
    def __init__(
        self, name: str, help_text: str, buckets: Sequence[float] = LATENCY_BUCKETS
    ) -> None:
        self.name = name
        self.help = help_text
        self.buckets = tuple(sorted(buckets))
        self._counts: dict[Labels, list[int]] = {}
        self._sums: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def observe(self, value: float, labels: Labels = ()) -> None:
        index = bisect.bisect_left(self.buckets, value)
        with self._lock:
            counts = self._counts.setdefault(labels, [0] * (len(self.buckets) + 1))
            counts[index] += 1
            self._sums[labels] = self._sums.get(labels, 0.0) + value

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} histogram"
        with self._lock:
            items = sorted((k, list(v)) for k, v in self._counts.items())
            sums = dict(self._sums)
        for labels, counts in items:
            running = 0
            for bound, count in zip((*self.buckets, float("inf")), counts, strict=True):
                running += count
                le = (("le", _number(bound)),)
                yield f"{self.name}_bucket{_labels(labels, le)} {running}"
            yield f"{self.name}_sum{_labels(labels)} {_number(sums[labels])}"
            yield f"{self.name}_count{_labels(labels)} {running}"


def gauge(name: str, help_text: str, samples: Iterable[tuple[Labels, float]]) -> Iterable[str]:
    yield f"# HELP {name} {help_text}"
    yield f"# TYPE {name} gauge"
    for labels, value in samples:
        yield f"{name}{_labels(labels)} {_number(value)}"


class ServerMetrics:
    """The metrics one server process keeps."""

    def __init__(self) -> None:
        self.calls = Counter(
            "charter_calls_total", "Governed calls answered, by tool and call status."
        )
        self.call_latency = Histogram(
            "charter_call_duration_seconds", "Time to answer a governed call, by tool."
        )
        self.unknown = Counter(
            "charter_unknown_outcomes_total", "Calls this process answered with status unknown."
        )
        self.requests = Counter(
            "charter_http_requests_total", "HTTP requests, by route template and status."
        )

    def record_call(self, tool: str, status: str, seconds: float) -> None:
        self.calls.inc((("status", status), ("tool", tool)))
        self.call_latency.observe(seconds, (("tool", tool),))
        if status == "unknown":
            self.unknown.inc((("tool", tool),))

    def render(self, gauges: Iterable[str] = ()) -> str:
        lines: list[str] = []
        for metric in (self.calls, self.call_latency, self.unknown, self.requests):
            lines.extend(metric.render())
        lines.extend(gauges)
        return "\n".join(lines) + "\n"
