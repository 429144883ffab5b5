"""OpenTelemetry traces of governed calls, read with the SDK's in-memory exporter: one
approved write over HTTP to a remote executor is a tree of ``execute_tool`` spans with the
GenAI attributes, its phases, the approval's wait and the executor's HTTP request, all in the
caller's trace; the executor receives the caller's trace id in ``traceparent``."""

from __future__ import annotations

import importlib.util
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import charter.remote
from charter.client import Client
from charter.kernel.envelope import CallStatus
from charter.runtime import open_runtime
from charter.server import create_app
from tests.executors_http import fault_tools
from tests.executors_http.conftest import write_project
from tests.server._harness import ThreadServer


class _Switch(SpanProcessor):
    """Export only while a test of this module listens (the provider is process-global)."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner
        self.on = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            self.inner.on_end(span)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


_EXPORTER = InMemorySpanExporter()
_SWITCH = _Switch(SimpleSpanProcessor(_EXPORTER))


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(_SWITCH)
        trace.set_tracer_provider(provider)
    assert isinstance(trace.get_tracer_provider(), TracerProvider)
    _EXPORTER.clear()
    _SWITCH.on = True
    try:
        yield _EXPORTER
    finally:
        _SWITCH.on = False
        _EXPORTER.clear()


class _Recording:
    """The executor app, recording the ``traceparent`` of every request it receives."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.traceparents: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/execute"):
            headers = dict(scope["headers"])
            self.traceparents.append(headers.get(b"traceparent", b"").decode())
        await self.inner(scope, receive, send)


def test_an_approved_write_over_http_is_one_trace(
    tmp_path: Path, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAULT_DB", str(tmp_path / "business.db"))
    credential, signing_key = secrets.token_hex(24), secrets.token_hex(24)
    executor = _Recording(
        charter.remote.app(
            [fault_tools.lookup, fault_tools.order],
            name="traced-executor",
            version="0.0.1",
            credential=credential,
            signing_key=signing_key,
            journal=tmp_path / "journal.db",
        )
    )
    with ThreadServer(executor) as remote:  # type: ignore[arg-type]
        project = write_project(tmp_path / "shop", remote.url, credential, signing_key)
        keys = {name: (project / "secrets" / name).read_text().strip() for name in ("app", "op")}

        def opener():  # type: ignore[no-untyped-def]
            return open_runtime(project, store="sqlite:///charter.db")

        caller_trace = secrets.token_hex(16)
        traceparent = f"00-{caller_trace}-{secrets.token_hex(8)}-01"
        with (
            ThreadServer(create_app(opener=opener)) as server,
            Client(server.url, keys["app"]) as app,
            Client(server.url, keys["op"]) as op,
        ):
            ctx = app.resolve_context("shopper")
            app._http.headers["traceparent"] = traceparent  # the caller's trace context
            pending = app.call(ctx["context_id"], "shop.order", "o1", {"item": "pen"})
            assert pending.status is CallStatus.PENDING_APPROVAL
            assert pending.approval
            op.approve(pending.approval["id"])
            done = app.call(ctx["context_id"], "shop.order", "o1", {"item": "pen"})
            assert done.status is CallStatus.SUCCEEDED

    finished = spans.get_finished_spans()
    tools = [s for s in finished if s.name == "execute_tool shop.order"]
    assert len(tools) == 2, [s.name for s in finished]
    first, second = sorted(tools, key=lambda s: s.start_time or 0)
    for span in (first, second):
        attributes = dict(span.attributes or {})
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["gen_ai.tool.name"] == "shop.order"
        assert attributes["gen_ai.tool.call.id"] == "o1"
        assert attributes["charter.run_id"] == ctx["run_id"]
        assert attributes["charter.context_id"] == ctx["context_id"]
        assert attributes["charter.tenant"] == "t1"
        assert attributes["charter.cached"] is False
        assert format(span.context.trace_id, "032x") == caller_trace  # the caller's trace
    assert dict(first.attributes or {})["charter.status"] == "pending_approval"
    assert dict(second.attributes or {})["charter.status"] == "succeeded"

    def children(parent: ReadableSpan) -> list[ReadableSpan]:
        return [s for s in finished if s.parent and s.parent.span_id == parent.context.span_id]

    # One tree under the caller's span: every span of the caller's trace hangs from another
    # exported span, except the outermost, whose parent is the caller's span. Where the web
    # framework opens a SERVER span per request (FastAPI's native OpenTelemetry), the request
    # spans are those outermost spans and each execute_tool span is the child of its request.
    caller_span = int(traceparent.split("-")[2], 16)
    in_trace = [s for s in finished if format(s.context.trace_id, "032x") == caller_trace]
    ids = {s.context.span_id for s in in_trace}
    outermost = [s for s in in_trace if s.parent is None or s.parent.span_id not in ids]
    assert outermost
    assert all(s.parent is not None and s.parent.span_id == caller_span for s in outermost)
    servers = [s for s in in_trace if s.kind is trace.SpanKind.SERVER]
    if importlib.util.find_spec("fastapi.telemetry") is not None:
        assert len(servers) == 2, [s.name for s in in_trace]  # the two POSTs of the call
        assert sorted(s.name for s in outermost) == sorted(s.name for s in servers)
        by_id = {s.context.span_id: s for s in in_trace}
        for span in (first, second):
            ancestors = []
            while span.parent is not None and span.parent.span_id in by_id:
                span = by_id[span.parent.span_id]
                ancestors.append(span)
            assert ancestors[-1] in servers, [a.name for a in ancestors]
            assert ancestors[-1].name == "POST /v1/contexts/{context_id}/calls"
    else:
        assert sorted(s.context.span_id for s in outermost) == sorted(
            s.context.span_id for s in (first, second)
        )
    # The envelope's trace id is the caller's, as in the ledger and the log line.
    assert dict(second.attributes or {})["charter.trace_id"] == caller_trace

    first_phases = {s.name for s in children(first)}
    assert {"charter.authorization", "charter.validation", "charter.approval"} <= first_phases
    second_children = {s.name: s for s in children(second)}
    assert "charter.approval_wait" in second_children
    wait = second_children["charter.approval_wait"]
    assert (wait.start_time or 0) < (first.end_time or 0) < (wait.end_time or 0)
    dispatch = second_children["charter.dispatch"]
    requests = [s for s in finished if s.name == "POST execute"]
    assert len(requests) == 1
    request = requests[0]
    assert request.kind is trace.SpanKind.CLIENT
    assert request.parent is not None
    assert request.parent.span_id in {dispatch.context.span_id, second.context.span_id}
    assert dict(request.attributes or {})["http.response.status_code"] == 200
    # The executor received the caller's trace id, with the request span as its parent.
    assert len(executor.traceparents) == 1
    _, trace_id, parent_id, _ = executor.traceparents[0].split("-")
    assert trace_id == caller_trace
    assert parent_id == format(request.context.span_id, "016x")


def test_a_refusal_is_an_error_span_with_its_reason(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    import anyio

    import charter
    from tests.kernel._project import write_runtime_project

    root = write_runtime_project(tmp_path)

    async def main() -> None:
        async with charter.open(root, store="memory:") as rt:
            ctx = await rt.resolve_context("app", "all")
            env = await rt.call(ctx.context_id, "kv.nope", "x1", {}, as_="app")
            assert env.status is CallStatus.DENIED

    anyio.run(main)
    denied = [s for s in spans.get_finished_spans() if s.name.startswith("execute_tool")]
    assert len(denied) == 1
    attributes = dict(denied[0].attributes or {})
    assert attributes["charter.status"] == "denied"
    assert attributes["charter.reason"]
    assert denied[0].status.status_code is trace.StatusCode.ERROR


def test_a_chat_turn_is_the_parent_of_its_tool_calls(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    import textwrap

    from charter.server.routes.chat import configure_chat
    from tests.chat.conftest import KV_CHAT, KV_SCRIPT, FakeClock
    from tests.server._harness import write_served_project

    project = write_served_project(tmp_path / "chat")
    (project.root / "script.yaml").write_text(textwrap.dedent(KV_SCRIPT))
    deploy = project.root / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text() + textwrap.dedent(KV_CHAT))

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(project.root, store="sqlite:///.charter/charter.db")

    app = create_app(opener=opener)
    configure_chat(app, clock=FakeClock(), sweep_s=0.02)
    with ThreadServer(app) as server, Client(server.url, project.keys["app"]) as client:
        events = list(client.chat("go slow please"))
    assert events[-1]["type"] == "conversation.completed"
    finished = spans.get_finished_spans()
    (turn,) = [s for s in finished if s.name == "chat_turn"]
    attributes = dict(turn.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.conversation.id"] == events[0]["conversationId"]
    tools = [s for s in finished if s.name == "execute_tool kv_slow"]  # the model's name
    assert len(tools) == 2
    for span in tools:
        assert dict(span.attributes or {})["charter.tool_id"] == "kv.slow"
        assert span.parent is not None
        assert span.parent.span_id == turn.context.span_id
        assert span.context.trace_id == turn.context.trace_id


def test_without_a_traceparent_the_trace_id_is_the_request_spans(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    """A request that brings no trace context: the id Charter echoes (and puts in envelopes,
    the ledger and the log line) is the trace id of the request span the framework opened,
    so the trace is found from an envelope."""
    import httpx2

    from tests.server._harness import write_served_project

    project = write_served_project(tmp_path / "plain")

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(project.root, store="sqlite:///.charter/charter.db")

    with ThreadServer(create_app(opener=opener)) as server:
        answer = httpx2.get(f"{server.url}/healthz", timeout=30)
    echoed = answer.headers["x-charter-trace-id"]
    requests = [s for s in spans.get_finished_spans() if s.kind is trace.SpanKind.SERVER]
    if importlib.util.find_spec("fastapi.telemetry") is None:
        assert not requests  # no request span to share: a fresh id
        return
    (request,) = requests
    assert request.parent is None
    assert format(request.context.trace_id, "032x") == echoed
