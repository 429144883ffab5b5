"""The HTTP API over a real uvicorn server on loopback, through the Python client and raw
HTTP: every endpoint, each authentication failure, tenant isolation, the approval flow,
error documents and limits."""

from __future__ import annotations

import json
import re
import sqlite3
import time

import httpx2
import jwt
import pytest
from prometheus_client.parser import text_string_to_metric_families

import charter
from charter.client import Client
from charter.errors import InvalidInput, PermissionDenied, TransientExternal
from charter.kernel.envelope import CallStatus
from charter.stores import migrations
from tests.kernel._project import runs_of
from tests.server._harness import JWT_AUDIENCE, Project, ThreadServer


def raw(server: ThreadServer, key: str | None = None) -> httpx2.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx2.Client(base_url=server.url, headers=headers, timeout=30)


def test_health_ready_metrics_docs(server: ThreadServer, clients: dict[str, Client]) -> None:
    cl = clients["app"]
    assert cl.health() == {"status": "ok", "version": charter.__version__}
    assert cl.ready()["status"] == "ready"
    with raw(server) as http:
        docs = http.get("/docs")
        assert docs.status_code == 200
        assert "/static/swagger/swagger-ui-bundle.js" in docs.text
        assert "cdn" not in docs.text.lower()
        bundle = http.get("/static/swagger/swagger-ui-bundle.js")
        assert bundle.status_code == 200
        assert len(bundle.content) > 500_000
        spec = http.get("/openapi.json").json()
        assert spec["openapi"].startswith("3.1")
        assert "/v1/contexts/{context_id}/calls" in spec["paths"]
        metrics = http.get("/metrics")
        assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
        assert "charter_pending_approvals" in metrics.text
        # The names and types dashboards depend on, unchanged since the hand-written exporter.
        types = dict(re.findall(r"^# TYPE (\S+) (\w+)$", metrics.text, flags=re.M))
        assert {
            "charter_calls_total": "counter",
            "charter_call_duration_seconds": "histogram",
            "charter_unknown_outcomes_total": "counter",
            "charter_http_requests_total": "counter",
            "charter_pending_approvals": "gauge",
            "charter_unknown_calls": "gauge",
            "charter_call_phase_seconds": "histogram",
            "charter_limit_refusals_total": "counter",
        }.items() <= types.items()


def test_ready_only_while_the_schema_is_current(server: ThreadServer, project: Project) -> None:
    """A newer Charter migrating the database under a running server makes it not ready."""
    db = sqlite3.connect(project.root / ".charter" / "charter.db", isolation_level=None)
    db.execute("PRAGMA busy_timeout = 5000")
    newer = len(migrations.SQLITE) + 1
    with raw(server) as http:
        assert http.get("/readyz").status_code == 200
        db.execute(f"INSERT INTO {migrations.SCHEMA_TABLE} VALUES (?, 'x')", (newer,))
        try:
            answer = http.get("/readyz")
            assert answer.status_code == 503
            (store,) = [c for c in answer.json()["checks"] if c["name"] == "store"]
            assert store["reason"] == "STORE_SCHEMA_TOO_NEW"
            assert store["schema"] == {"recorded": newer, "known": newer - 1}
        finally:
            db.execute(f"DELETE FROM {migrations.SCHEMA_TABLE} WHERE version = ?", (newer,))
            db.close()
        assert http.get("/readyz").status_code == 200


def test_context_schemas_in_every_format(clients: dict[str, Client]) -> None:
    cl = clients["app"]
    ctx = cl.resolve_context("reader", objective="look things up")
    assert {t["id"] for t in ctx["tools"]} == {"kv.get", "kv.echo"}
    again = cl.get_context(ctx["context_id"], format="openai")
    assert again["tool_schemas"][0]["type"] == "function"
    assert (
        "input_schema" in cl.get_context(ctx["context_id"], format="anthropic")["tool_schemas"][0]
    )
    assert "inputSchema" in cl.get_context(ctx["context_id"], format="mcp")["tool_schemas"][0]
    with pytest.raises(InvalidInput) as info:
        cl.get_context(ctx["context_id"], format="cohere")
    assert info.value.reason == "REQUEST_INVALID"
    with pytest.raises(InvalidInput) as info:
        cl.resolve_context("no-such-profile")
    assert info.value.reason == "PROFILE_UNKNOWN"


def test_call_statuses_map_to_http_statuses(server: ThreadServer, project: Project) -> None:
    with raw(server, project.keys["app"]) as http:
        ctx = http.post("/v1/contexts", json={"profile": "all"}).json()
        url = f"/v1/contexts/{ctx['context_id']}/calls"
        ok = http.post(url, json={"tool": "kv.echo", "call_id": "s1", "arguments": {"payload": {}}})
        assert ok.status_code == 200
        assert ok.json()["status"] == "succeeded"
        assert ok.headers["x-charter-trace-id"] == ok.json()["trace"]["trace_id"]
        failed = http.post(
            url, json={"tool": "kv.boom", "call_id": "s2", "arguments": {"message": "x"}}
        )
        assert failed.status_code == 200
        assert failed.json()["status"] == "failed"
        pending = http.post(
            url, json={"tool": "kv.put", "call_id": "s3", "arguments": {"key": "k", "value": "v"}}
        )
        assert pending.status_code == 202
        assert pending.json()["status"] == "pending_approval"
        conflict = http.post(
            url, json={"tool": "kv.put", "call_id": "s3", "arguments": {"key": "k", "value": "w"}}
        )
        assert conflict.status_code == 409
        assert conflict.json()["status"] == "conflict"
        # duplicate keys inside the arguments reach the kernel's strict parser verbatim
        dup = http.post(
            url,
            content=b'{"tool": "kv.get", "call_id": "s4", "arguments": {"key": "a", "key": "b"}}',
            headers={"content-type": "application/json"},
        )
        assert dup.status_code == 422
        assert dup.json()["status"] == "rejected"
        assert dup.json()["error"]["reason"] == "ARGS_DUPLICATE_KEY"
        nan = http.post(
            url,
            json={"tool": "kv.echo", "call_id": "s5", "arguments_json": '{"payload": NaN}'},
        )
        assert nan.status_code == 422
        assert nan.json()["error"]["code"] == "invalid_input"
        denied = http.post(url, json={"tool": "kv.secret", "call_id": "s6", "arguments": {}})
        assert denied.status_code == 403
        assert denied.json()["status"] == "denied"
        cached = http.post(
            url, json={"tool": "kv.echo", "call_id": "s1", "arguments": {"payload": {}}}
        )
        assert cached.status_code == 200
        assert cached.json()["metrics"]["cached"] is True
        row = http.get(f"/v1/calls/{ctx['context_id']}/s1").json()
        assert row["state"] == "succeeded"


def test_a_call_is_found_by_its_id_alone(server: ThreadServer, project: Project) -> None:
    """``GET /v1/calls/{id}`` (DESIGN's path): the call of that id in the caller's tenant; an
    id two contexts share is 409 naming both, another tenant's call is 404."""
    with raw(server, project.keys["app"]) as http, raw(server, project.keys["gapp"]) as other:
        first, second = (http.post("/v1/contexts", json={"profile": "all"}).json() for _ in "ab")
        body = {"tool": "kv.echo", "call_id": "only-here", "arguments": {"payload": {}}}
        assert http.post(f"/v1/contexts/{first['context_id']}/calls", json=body).is_success
        row = http.get("/v1/calls/only-here")
        assert row.status_code == 200, row.text
        assert (row.json()["context_id"], row.json()["state"]) == (first["context_id"], "succeeded")
        assert row.json() == http.get(f"/v1/calls/{first['context_id']}/only-here").json()
        assert other.get("/v1/calls/only-here").json()["reason"] == "CALL_NOT_FOUND"
        assert http.get("/v1/calls/never-made").status_code == 404
        for ctx in (first, second):
            body = {"tool": "kv.echo", "call_id": "twice", "arguments": {"payload": {}}}
            assert http.post(f"/v1/contexts/{ctx['context_id']}/calls", json=body).is_success
        both = http.get("/v1/calls/twice")
        assert both.status_code == 409, both.text
        assert both.json()["reason"] == "CALL_ID_AMBIGUOUS"
        assert first["context_id"] in both.json()["detail"]
        assert second["context_id"] in both.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1, 2]",
        b'{"tool": "kv.get", "tool": "kv.get", "call_id": "x"}',
        b'{"tool": "kv.get"}',
        b'{"tool": 3, "call_id": "x"}',
        b'{"tool": "kv.get", "call_id": "x", "extra": 1}',
        b'{"tool": "kv.get", "call_id": "x"} trailing',
        b"\xff\xfe",
        b"{" * 5000,
    ],
)
def test_malformed_bodies_are_4xx_problems(
    server: ThreadServer, project: Project, clients: dict[str, Client], body: bytes
) -> None:
    ctx = clients["app"].resolve_context("reader")
    with raw(server, project.keys["app"]) as http:
        answer = http.post(
            f"/v1/contexts/{ctx['context_id']}/calls",
            content=body,
            headers={"content-type": "application/json"},
        )
        assert 400 <= answer.status_code < 500
        assert answer.headers["content-type"] == "application/problem+json"
        problem = answer.json()
        assert problem["code"] == "invalid_input"
        assert problem["reason"]
        bad_ctx = http.post(
            "/v1/contexts", content=body, headers={"content-type": "application/json"}
        )
        assert 400 <= bad_ctx.status_code < 500


def test_body_size_limit(server: ThreadServer, project: Project) -> None:
    with raw(server, project.keys["app"]) as http:
        big = b'{"profile": "' + b"a" * (2 * 1024 * 1024) + b'"}'
        answer = http.post(
            "/v1/contexts", content=big, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 413
        assert answer.json()["reason"] == "BODY_TOO_LARGE"

        def chunks():  # no Content-Length: counted as it streams
            for _ in range(40):
                yield b"x" * 65536

        streamed = http.post("/v1/runs", content=chunks())
        assert streamed.status_code == 413


def _token(project: Project, **claims: object) -> str:
    base: dict[str, object] = {"sub": "app", "aud": JWT_AUDIENCE, "exp": int(time.time()) + 60}
    base.update(claims)
    return jwt.encode({k: v for k, v in base.items() if v is not None}, project.jwt_secret, "HS256")


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "AUTH_MISSING"),
        ("Bearer wrong-key", "AUTH_INVALID"),
        ("Basic abc", "AUTH_INVALID"),
        ("expired", "AUTH_TOKEN_EXPIRED"),
        ("audience", "AUTH_AUDIENCE"),
        ("nbf", "AUTH_TOKEN_NOT_YET_VALID"),
        ("forged", "AUTH_INVALID"),
        ("subject", "AUTH_UNKNOWN_SUBJECT"),
        ("no-exp", "AUTH_INVALID"),
    ],
)
def test_authentication_failures(
    server: ThreadServer, project: Project, header: str | None, reason: str
) -> None:
    now = int(time.time())
    tokens = {
        "expired": _token(project, exp=now - 10),
        "audience": _token(project, aud="someone-else"),
        "nbf": _token(project, nbf=now + 600),
        "forged": jwt.encode({"sub": "app", "aud": JWT_AUDIENCE, "exp": now + 60}, b"x" * 32),
        "subject": _token(project, sub="mallory"),
        "no-exp": _token(project, exp=None),
    }
    if header in tokens:
        header = f"Bearer {tokens[header]}"
    with raw(server) as http:
        answer = http.get("/v1/runs", headers={"Authorization": header} if header else {})
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")
    assert answer.json()["reason"] == reason
    assert answer.json()["code"] == "permission_denied"


def test_a_valid_jwt_acts_as_its_subject(server: ThreadServer, project: Project) -> None:
    with Client(server.url, _token(project, sub="alice")) as cl:
        ctx = cl.resolve_context("reader")
        assert ctx["principal"] == "alice"
        assert ctx["tenant"] == "acme"


def test_other_tenants_resources_answer_404(clients: dict[str, Client], project: Project) -> None:
    acme, globex = clients["app"], clients["gapp"]
    run = acme.create_run()
    ctx = acme.resolve_context("all", run_id=run["run_id"])
    pending = acme.call(ctx["context_id"], "kv.put", "t1", {"key": "k", "value": "v"})
    assert pending.status is CallStatus.PENDING_APPROVAL
    assert pending.approval is not None
    approval_id = pending.approval["id"]
    checks = [
        (lambda: globex.get_context(ctx["context_id"]), "CONTEXT_NOT_FOUND"),
        (lambda: globex.get_context("ctx-000000000000"), "CONTEXT_NOT_FOUND"),
        (lambda: globex.call(ctx["context_id"], "kv.get", "t2", {"key": "k"}), "CONTEXT_NOT_FOUND"),
        (lambda: globex.get_call(ctx["context_id"], "t1"), "CALL_NOT_FOUND"),
        (lambda: globex.get_approval(approval_id), "APPROVAL_NOT_FOUND"),
        (lambda: globex.get_approval("apr-000000000000"), "APPROVAL_NOT_FOUND"),
        (lambda: clients["bob"].approve(approval_id), "APPROVAL_NOT_FOUND"),
        (lambda: globex.get_run(run["run_id"]), "RUN_NOT_FOUND"),
        (lambda: globex.get_run("adhoc-000000000000"), "RUN_NOT_FOUND"),
        (lambda: globex.events(run["run_id"]), "RUN_NOT_FOUND"),
        (lambda: globex.verify_run(run["run_id"]), "RUN_NOT_FOUND"),
        (lambda: globex.resolve_context("all", run_id=run["run_id"]), "RUN_NOT_FOUND"),
        (lambda: list(globex.stream_events(run["run_id"])), "RUN_NOT_FOUND"),
    ]
    for attempt, reason in checks:
        with pytest.raises(PermissionDenied) as info:
            attempt()
        assert info.value.reason == reason
    assert all(r["approval_id"] != approval_id for r in globex.approvals())
    assert all(r["run_id"] != run["run_id"] for r in globex.runs(limit=1000))
    assert any(r["run_id"] == run["run_id"] for r in acme.runs(limit=1000))


def test_approval_flow_end_to_end(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    app, alice = clients["app"], clients["alice"]
    ctx = app.resolve_context("all")
    args = {"key": "flow", "value": "v1"}
    pending = app.call(ctx["context_id"], "kv.put", "f1", args)
    assert pending.status is CallStatus.PENDING_APPROVAL
    assert pending.approval
    approval_id = pending.approval["id"]
    assert any(r["approval_id"] == approval_id for r in alice.approvals(status="pending"))
    assert alice.get_approval(approval_id)["summary"] == args
    # an application can never approve, even holding approvals:approve
    with pytest.raises(PermissionDenied) as info:
        app.approve(approval_id)
    assert info.value.reason == "APPROVER_NOT_HUMAN"
    decided = alice.approve(approval_id, reason="looks fine")
    assert decided["status"] == "approved"
    with pytest.raises(InvalidInput) as info:
        alice.approve(approval_id)
    assert info.value.reason == "APPROVAL_NOT_PENDING"
    done = app.call(ctx["context_id"], "kv.put", "f1", args)
    assert done.status is CallStatus.SUCCEEDED
    assert runs_of(project.root, "kv.put") >= 1
    assert app.get_call(ctx["context_id"], "f1")["state"] == "succeeded"
    assert app.verify_run(ctx["run_id"])["ok"] is True


def test_standalone_approval_token_and_rejection(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    app = clients["app"]
    ctx = app.resolve_context("all")
    first = app.call(ctx["context_id"], "kv.put", "tok1", {"key": "a", "value": "1"})
    second = app.call(ctx["context_id"], "kv.put", "tok2", {"key": "b", "value": "2"})
    assert first.approval
    assert second.approval
    with Client(server.url) as anonymous:
        with pytest.raises(PermissionDenied) as info:
            anonymous.approve(first.approval["id"], token="not-the-token", tenant="acme")
        assert info.value.reason == "AUTH_INVALID"
        with pytest.raises(PermissionDenied) as info:
            anonymous.approve(first.approval["id"], token=project.approval_token, tenant="globex")
        assert info.value.reason == "APPROVAL_NOT_FOUND"
        # two names for the tenant that disagree are refused, whichever would have won
        url = f"{server.url}/v1/approvals/{first.approval['id']}/approve"
        for headers, body, auth in (
            ({"X-Charter-Tenant": "acme"}, {"tenant": "globex"}, None),
            ({"X-Charter-Tenant": "globex"}, {"tenant": "acme"}, None),
            ({}, {"tenant": "globex"}, project.keys["alice"]),
        ):
            if auth is None:
                headers = {**headers, "X-Charter-Approval-Token": project.approval_token}
            else:
                headers = {**headers, "Authorization": f"Bearer {auth}"}
            answer = httpx2.post(url, headers=headers, json=body, trust_env=False)
            assert answer.status_code == 422, answer.text
            assert answer.json()["reason"] == "TENANT_CONFLICT"
            assert "tenant" in answer.text
        row = anonymous.approve(first.approval["id"], token=project.approval_token, tenant="acme")
        assert row["status"] == "approved"
        rejected = anonymous.reject(
            second.approval["id"], token=project.approval_token, tenant="acme"
        )
        assert rejected["status"] == "rejected"
    again = app.call(ctx["context_id"], "kv.put", "tok2", {"key": "b", "value": "2"})
    assert again.status is CallStatus.DENIED
    assert again.error is not None
    assert again.error["reason"] == "APPROVAL_REJECTED"


def test_runs_and_events_json(clients: dict[str, Client]) -> None:
    cl = clients["app"]
    run = cl.create_run(session_id="chat-1")
    assert run["status"] == "running"
    assert run["session_id"] == "chat-1"
    ctx = cl.resolve_context("reader", run_id=run["run_id"])
    cl.call(ctx["context_id"], "kv.echo", "e1", {"payload": {"n": 1}})
    manifest = cl.get_run(run["run_id"])
    assert manifest["run_id"] == run["run_id"]
    assert manifest["event_count"] >= 4
    page = cl.events(run["run_id"], after=0, limit=2)
    assert [e["seq"] for e in page["events"]] == [1, 2]
    assert page["next_after"] == 2
    rest = cl.events(run["run_id"], after=page["next_after"])
    assert rest["events"][0]["seq"] == 3
    assert next(e["type"] for e in page["events"]) == "run_created"
    beyond = cl.events(run["run_id"], after=10_000)
    assert beyond["events"] == []
    assert beyond["next_after"] == 10_000


def test_transport_errors_are_translated() -> None:
    with (
        Client("http://127.0.0.1:9", "k", timeout=2) as cl,
        pytest.raises(TransientExternal) as info,
    ):
        cl.health()
    assert info.value.reason == "SERVER_UNREACHABLE"


def _scrape(server: ThreadServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with raw(server) as http:
        answer = http.get("/metrics")
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
    }


def test_metrics_count_calls(server: ThreadServer, clients: dict[str, Client]) -> None:
    cl = clients["app"]
    ctx = cl.resolve_context("reader")
    succeeded = ("charter_calls_total", (("status", "succeeded"), ("tool", "kv.echo")))
    infinite = ("charter_call_duration_seconds_bucket", (("le", "+Inf"), ("tool", "kv.echo")))
    before = _scrape(server)
    cl.call(ctx["context_id"], "kv.echo", "m1", json.dumps({"payload": {}}))
    samples = _scrape(server)
    assert samples[succeeded] == before.get(succeeded, 0) + 1
    assert samples[infinite] == before.get(infinite, 0) + 1
    for phase in ("authorization", "validation", "intent", "dispatch"):
        timed = ("charter_call_phase_seconds_count", (("phase", phase),))
        assert samples[timed] == before.get(timed, 0) + 1, phase
    assert ("charter_pending_approvals", ()) in samples
    requests = [k for k in samples if k[0] == "charter_http_requests_total"]
    assert any(("route", "/contexts/{context_id}/calls") in labels for _, labels in requests)
