"""Prometheus metrics, kept and rendered by the official ``prometheus_client``.

Counters, histograms and the open-streams gauge live in the process (one set per replica:
Prometheus sums them). Each :class:`ServerMetrics` has its own registry, so several apps in
one process (tests, an embedding application) never collide. When
``PROMETHEUS_MULTIPROC_DIR`` is set — uvicorn or gunicorn running several worker processes —
the client keeps the values in memory-mapped files in that directory and ``/metrics`` sums
every worker's files, so a scrape that lands on any worker sees the whole server.

Gauges that describe shared state — pending approvals, calls whose outcome is unknown — are
read from the store when ``/metrics`` is scraped (:func:`render_gauges`), so every replica
reports the same figure.

Metric names (stable; dashboards depend on them):

- ``charter_calls_total{status, tool}`` — governed calls answered over HTTP;
- ``charter_call_duration_seconds{tool}`` — time to answer one;
- ``charter_call_phase_seconds{phase}`` — time spent in each phase of the call path;
- ``charter_unknown_outcomes_total{tool}`` — calls this process answered ``unknown``;
- ``charter_limit_refusals_total{reason, tool}`` — calls over HTTP refused by a rate,
  concurrency or pending-approval limit;
- ``charter_http_requests_total{method, route, status}`` — HTTP requests by route template;
- ``charter_streams_open{stream}`` — event streams open in this process (``runs``, ``chat``,
  ``console``; summed over live workers in multiprocess mode);
- ``charter_stream_refusals_total{scope}`` — event streams refused by ``limits.streams``
  (``tenant`` or ``principal``; reason ``TOO_MANY_STREAMS``);
- ``charter_pending_approvals`` and ``charter_unknown_calls{tool}`` — shared gauges.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

# One sample per series: the ``*_created`` timestamps double the output and no Charter
# dashboard uses them.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

# The classic text format every Prometheus version reads.
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

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

PHASE_BUCKETS: tuple[float, ...] = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.1,
    1.0,
    10.0,
)


def multiprocess_dir() -> str | None:
    """The directory worker processes share their values in, when one is configured."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


LIMIT_REASONS = frozenset({"RATE_LIMITED", "CONCURRENCY_LIMITED", "TOO_MANY_PENDING_APPROVALS"})


class _Gauges(Collector):
    """Gauges computed at scrape time, as one collector for a throwaway registry."""

    def __init__(self, gauges: Iterable[Metric]) -> None:
        self._gauges = list(gauges)

    def collect(self) -> Iterable[Metric]:
        return self._gauges


def gauge(
    name: str,
    help_text: str,
    samples: Mapping[tuple[str, ...], float],
    labels: tuple[str, ...] = (),
) -> Metric:
    """A gauge family read from shared state (the store) when ``/metrics`` is scraped."""
    family = GaugeMetricFamily(name, help_text, labels=list(labels))
    for values, value in samples.items():
        family.add_metric(list(values), value)
    return family


class ServerMetrics:
    """The metrics one server process keeps."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.calls = Counter(
            "charter_calls_total",
            "Governed calls answered, by tool and call status.",
            ("status", "tool"),
            registry=self.registry,
        )
        self.call_latency = Histogram(
            "charter_call_duration_seconds",
            "Time to answer a governed call, by tool.",
            ("tool",),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.phases = Histogram(
            "charter_call_phase_seconds",
            "Time spent in each phase of the governed call path.",
            ("phase",),
            buckets=PHASE_BUCKETS,
            registry=self.registry,
        )
        self.unknown = Counter(
            "charter_unknown_outcomes_total",
            "Calls this process answered with status unknown.",
            ("tool",),
            registry=self.registry,
        )
        self.requests = Counter(
            "charter_http_requests_total",
            "HTTP requests, by route template and status.",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.limited = Counter(
            "charter_limit_refusals_total",
            "Calls refused by a rate, concurrency or pending-approval limit, by reason and tool.",
            ("reason", "tool"),
            registry=self.registry,
        )
        self.heads_refused = Counter(
            "charter_http_heads_refused_total",
            "Request heads refused before any route (414, 431, 408, 400), by reason.",
            ("reason",),
            registry=self.registry,
        )
        self.streams_open = Gauge(
            "charter_streams_open",
            "Event streams (SSE) open in this process, by stream.",
            ("stream",),
            multiprocess_mode="livesum",
            registry=self.registry,
        )
        self.streams_refused = Counter(
            "charter_stream_refusals_total",
            "Event streams refused by limits.streams before they started, by scope.",
            ("scope",),
            registry=self.registry,
        )

    def record_call(
        self, tool: str, status: str, seconds: float, reason: str | None = None
    ) -> None:
        if reason in LIMIT_REASONS and status == "denied":  # Charter's refusals, not a tool's
            self.limited.labels(reason=reason, tool=tool).inc()
        self.calls.labels(status=status, tool=tool).inc()
        self.call_latency.labels(tool=tool).observe(seconds)
        if status == "unknown":
            self.unknown.labels(tool=tool).inc()

    def record_phase(self, phase: str, seconds: float) -> None:
        self.phases.labels(phase=phase).observe(seconds)

    def record_head_refused(self, reason: str) -> None:
        self.heads_refused.labels(reason=reason).inc()

    def record_request(self, method: str, route: str, status: int) -> None:
        self.requests.labels(method=method, route=route, status=str(status)).inc()

    def render(self, gauges: Iterable[Metric] = ()) -> bytes:
        """The exposition text: this process's values (or every worker's, in multiprocess
        mode) followed by the shared gauges."""
        shared = multiprocess_dir()
        if shared is not None:
            merged = CollectorRegistry()
            MultiProcessCollector(merged, path=shared)  # type: ignore[no-untyped-call]
            text = generate_latest(merged)
        else:
            text = generate_latest(self.registry)
        extra = CollectorRegistry()
        extra.register(_Gauges(gauges))
        return text + generate_latest(extra)
