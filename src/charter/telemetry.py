"""OpenTelemetry traces: one ``execute_tool {tool}`` span per governed call.

Charter depends on ``opentelemetry-api`` only; without an SDK every call here is a no-op of
a few hundred nanoseconds. Install the ``otel`` extra and set the standard variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME``, ``OTEL_TRACES_SAMPLER`` …) and
:func:`configure_from_environment` — called by ``charter serve``, ``charter mcp`` and the CLI
— installs a tracer provider with the OTLP/HTTP exporter.

Spans follow the OpenTelemetry GenAI semantic conventions for tool execution:

- ``execute_tool {tool}`` (kind INTERNAL) with ``gen_ai.operation.name = execute_tool``,
  ``gen_ai.tool.name`` (the name the caller asked for: a tool id, or the model-facing name in a
  chat), ``gen_ai.tool.call.id``, ``gen_ai.tool.type = function``, and Charter's own
  ``charter.tool_id`` (once disclosure named the tool), ``charter.run_id``,
  ``charter.context_id``, ``charter.tenant``, ``charter.status``, ``charter.reason``,
  ``charter.cached``, ``charter.trace_id`` (the envelope's trace id);
- children ``charter.approval_wait`` (from the approval request to its consumption, on the
  call that consumed it), ``charter.dispatch`` (intent to outcome), and the executor's HTTP
  request (``POST execute``, kind CLIENT) whose context travels to a remote executor in the
  W3C ``traceparent`` header;
- ``chat_turn`` spans (``gen_ai.operation.name = chat``) around a chat turn, parents of the
  tool spans the turn makes.

The HTTP server continues a caller's trace: a ``traceparent`` header makes every span of the
request a descendant of the caller's span.

Phase timings are also handed to listeners (:func:`on_phase`), which the server turns into
the ``charter_call_phase_seconds`` histogram.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from charter._version import __version__

logger = logging.getLogger("charter.telemetry")

TRACER_NAME = "charter"
_tracer = trace.get_tracer(TRACER_NAME, __version__)

PhaseListener = Callable[[str, float], None]
_listeners: list[PhaseListener] = []
_configured = threading.Lock()
_done = False

FAILED_STATES = frozenset({"failed", "unknown", "denied", "rejected", "abandoned", "conflict"})


def tracer() -> trace.Tracer:
    return _tracer


def _tracing() -> bool:
    """Whether a tracer provider (an SDK) is installed. Without one every span is a
    non-recording stand-in for the current one, so the span helpers below skip making and
    attaching it: the current span (a caller's ``traceparent`` included) is what the API's
    no-op tracer would have answered anyway.

    Asked on every governed call: while no provider is set and the environment names none
    (read once, at import), the answer is the API's global itself, without
    ``get_tracer_provider``'s look-up of the environment (a KeyError raised and caught)."""
    if getattr(trace, "_TRACER_PROVIDER", _UNSET) is None and not _ENV_PROVIDER:
        return False
    return not isinstance(trace.get_tracer_provider(), _NO_SDK)


_NO_SDK = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
_UNSET = object()  # an API without that global: always ask get_tracer_provider
_ENV_PROVIDER = OTEL_PYTHON_TRACER_PROVIDER in os.environ


class _Current:
    """What the span helpers give without an SDK: the current span, nothing made (a plain
    context manager: no generator per governed call)."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return trace.get_current_span()

    def __exit__(self, *exc: object) -> None:
        return None


_CURRENT = _Current()


def tool_span(
    tool: str, call_id: str, *, run_id: str | None = None, context_id: str | None = None
) -> AbstractContextManager[Span]:
    """The ``execute_tool {tool}`` span around one governed call."""
    if not _tracing():
        return _CURRENT
    return _tool_span(tool, call_id, run_id=run_id, context_id=context_id)


@contextmanager
def _tool_span(
    tool: str, call_id: str, *, run_id: str | None, context_id: str | None
) -> Iterator[Span]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    if run_id:
        attributes["charter.run_id"] = run_id
    if context_id:
        attributes["charter.context_id"] = context_id
    with _tracer.start_as_current_span(
        f"execute_tool {tool}",
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        record_exception=True,
        set_status_on_exception=True,
    ) as span:
        yield span


def finish_tool_span(span: Span, envelope: Any, *, tenant: str | None = None) -> None:
    """Record the outcome of the call on its span (status, reason, cached, ids)."""
    if not span.is_recording():
        return
    status = getattr(getattr(envelope, "status", None), "value", None) or str(
        getattr(envelope, "status", "")
    )
    span.set_attribute("charter.status", status)
    error = getattr(envelope, "error", None) or {}
    reason = error.get("reason") if isinstance(error, Mapping) else None
    if reason:
        span.set_attribute("charter.reason", str(reason))
        span.set_attribute("error.type", str(error.get("code") or reason))
    metrics = getattr(envelope, "metrics", None)
    span.set_attribute("charter.cached", bool(getattr(metrics, "cached", False)))
    for name, value in (
        ("charter.tool_id", getattr(envelope, "tool", None)),
        ("charter.run_id", getattr(envelope, "run_id", None)),
        ("charter.context_id", getattr(envelope, "context_id", None)),
        ("charter.tenant", tenant),
    ):
        if value:
            span.set_attribute(name, str(value))
    trace_info = getattr(envelope, "trace", None)
    trace_id = trace_info.get("trace_id") if isinstance(trace_info, Mapping) else None
    if trace_id:
        span.set_attribute("charter.trace_id", str(trace_id))
    if status in FAILED_STATES:
        span.set_status(Status(StatusCode.ERROR, str(reason or status)))


def record_span(name: str, start_ns: int, end_ns: int, **attributes: Any) -> None:
    """A finished child span of the current span, for a stretch measured elsewhere (the
    phases of a call, an approval's wait)."""
    span = _tracer.start_span(name, start_time=start_ns, attributes=attributes or None)
    span.end(end_time=end_ns)


@contextmanager
def span(
    name: str, attributes: Mapping[str, Any] | None = None, *, kind: SpanKind = SpanKind.INTERNAL
) -> Iterator[Span]:
    """A child span of the current one."""
    if not _tracing():
        yield trace.get_current_span()
        return
    with _tracer.start_as_current_span(
        name, kind=kind, attributes=dict(attributes or {}) or None, record_exception=True
    ) as current:
        yield current


def inject(headers: MutableMapping[str, str]) -> None:
    """Put the current trace context into outgoing headers (W3C ``traceparent``)."""
    propagate.inject(headers)


@contextmanager
def continued(headers: Mapping[str, str]) -> Iterator[None]:
    """Make the caller's trace context (``traceparent``) current for the block.

    When a server instrumentation has already opened the request's span in that trace
    (FastAPI's native OpenTelemetry, ``opentelemetry-instrumentation-asgi``), that span stays
    current, so the request span is the parent of the spans the request makes instead of
    their sibling under the caller's span."""
    extracted = propagate.extract(headers)
    current = trace.get_current_span().get_span_context()
    if current.is_valid:
        incoming = trace.get_current_span(extracted).get_span_context()
        if not incoming.is_valid or incoming.trace_id == current.trace_id:
            yield
            return
    token = otel_context.attach(extracted)
    try:
        yield
    finally:
        otel_context.detach(token)


def current_trace_id() -> str | None:
    """The 32-hex trace id of the current span, when there is one."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def on_phase(listener: PhaseListener) -> Callable[[], None]:
    """Call ``listener(phase, seconds)`` for every timed phase of every call; returns a
    function that removes it."""
    _listeners.append(listener)

    def remove() -> None:
        if listener in _listeners:
            _listeners.remove(listener)

    return remove


def phase_timings(marks: list[tuple[str, int]], end_ns: int, span: Span | None = None) -> None:
    """Turn the phase marks of one call (name, start in ``time.time_ns()``) into child
    spans of the current span and observations for the listeners (``span``: the current
    span, when the caller has it)."""
    if not marks:
        return
    recording = (span if span is not None else trace.get_current_span()).is_recording()
    if not recording and not _listeners:
        return  # nobody looks: no spans to record, no histogram to feed
    bounds = [*(start for _, start in marks[1:]), end_ns]
    for (name, start), end in zip(marks, bounds, strict=True):
        if recording:
            record_span(f"charter.{name}", start, end, **{"charter.phase": name})
        for listener in tuple(_listeners):
            listener(name, max(end - start, 0) / 1e9)


def configure_from_environment() -> bool:
    """Install the SDK's tracer provider with an OTLP/HTTP exporter when the environment
    asks for one (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``,
    unless ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``). Returns whether it
    did. Without the ``otel`` extra it logs once and leaves tracing off."""
    global _done
    with _configured:
        if _done:
            return False
        _done = True
        env = os.environ
        wanted = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        )
        if not wanted or env.get("OTEL_SDK_DISABLED", "").lower() == "true":
            return False
        if env.get("OTEL_TRACES_EXPORTER", "otlp").lower() == "none":
            return False
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            logger.warning(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is not "
                "installed: pip install -e '.[otel]'; traces stay off"
            )
            return False
        resource = Resource.create({"service.version": __version__})
        if "OTEL_SERVICE_NAME" not in env and "service.name" not in env.get(
            "OTEL_RESOURCE_ATTRIBUTES", ""
        ):
            resource = resource.merge(Resource.create({"service.name": "charter"}))
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        logger.info("OpenTelemetry traces export over OTLP/HTTP to %s", wanted)
        return True
