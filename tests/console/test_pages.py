"""The console's pages and forms through the app on a real loopback server: sign-in,
sessions, CSRF and Origin checks, the inbox, runs, calls needing attention, readiness,
audit, and the refusals (application credential, cross-tenant ids, expired approvals)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import jwt
from fastapi import FastAPI

from charter.client import Client
from tests.console._console import (
    browser,
    csrf_of,
    seed_late_result,
    seed_unknown,
    sign_in,
    signed_in,
)
from tests.server._harness import JWT_AUDIENCE, Project, ThreadServer


def pending_call(clients: dict[str, Client], call_id: str) -> tuple[str, str, str]:
    """An application's write call waiting for approval: (context, run, approval)."""
    ctx = clients["app"].resolve_context("all")
    env = clients["app"].call(ctx["context_id"], "kv.put", call_id, {"key": call_id, "value": "v"})
    assert env.status.value == "pending_approval"
    assert env.approval is not None
    return ctx["context_id"], ctx["run_id"], env.approval["id"]


def test_signin_sets_a_strict_http_only_session(server: ThreadServer, project: Project) -> None:
    client, answer = sign_in(server.url, project.keys["alice"])
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/approvals"
    cookie = next(
        v for k, v in answer.headers.multi_items() if k == "set-cookie" and "charter_console=" in v
    )
    lowered = cookie.lower()
    assert "httponly" in lowered
    assert "samesite=strict" in lowered
    assert "path=/console" in lowered
    assert "secure" not in lowered  # plain HTTP here; Secure is set over TLS
    page = client.get("/console/approvals")
    assert page.status_code == 200
    assert 'data-testid="whoami">alice · acme' in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert "<script>" not in page.text
    assert "<script src=" in page.text
    assert page.headers["x-frame-options"] == "DENY"


def test_signin_refuses_application_wrong_key_and_forged_form(
    server: ThreadServer, project: Project
) -> None:
    _, answer = sign_in(server.url, project.keys["app"])
    assert answer.status_code == 403
    assert "application credential" in answer.text
    assert "charter_console=" not in answer.headers.get("set-cookie", "")
    _, answer = sign_in(server.url, "not-a-key")
    assert answer.status_code == 401
    assert "AUTH_INVALID" in answer.text
    with browser(server.url) as client:  # no sign-in cookie: the form did not come from us
        answer = client.post("/console/login", data={"csrf_token": "x", "credential": "y"})
        assert answer.status_code == 403
    with browser(server.url, "https://evil.example") as client:
        client.get("/console/login")
        answer = client.post("/console/login", data={"credential": project.keys["alice"]})
        assert answer.status_code == 403
        assert "ORIGIN_MISMATCH" in answer.text


def test_jwt_signin(server: ThreadServer, project: Project) -> None:
    token = jwt.encode(
        {"sub": "alice", "aud": JWT_AUDIENCE, "exp": int(time.time()) + 600},
        project.jwt_secret,
        algorithm="HS256",
    )
    client = signed_in(server.url, token)
    assert "alice · acme" in client.get("/console/runs").text


def test_pages_need_a_session(server: ThreadServer) -> None:
    with browser(server.url) as client:
        for path in ("/console/approvals", "/console/runs", "/console/audit", "/console/readiness"):
            answer = client.get(path)
            assert answer.status_code == 303
            assert answer.headers["location"].startswith("/console/login?next=/console/")
    with browser(server.url) as client:
        client.cookies.set("charter_console", "e30.AAAA", path="/console")
        assert client.get("/console/runs").status_code == 303


def test_inbox_approve_and_reject(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    client = signed_in(server.url, project.keys["alice"])
    context_id, run_id, approval_id = pending_call(clients, "inbox-1")
    page = client.get("/console/approvals")
    assert f'data-approval-id="{approval_id}"' in page.text
    for fact in ("kv.put", "danger: high", 'requested-by">app', run_id, "hmac-sha256:", "inbox-1"):
        assert fact in page.text
    answer = client.post(
        f"/console/approvals/{approval_id}/approve",
        data={"csrf_token": csrf_of(page.text), "reason": "checked with the owner"},
    )
    assert answer.status_code == 303
    done = client.get(answer.headers["location"])
    assert f"Approval {approval_id} approved." in done.text
    row = clients["alice"].get_approval(approval_id)
    assert row["status"] == "approved"
    assert row["decided_by"] == "alice"
    assert row["reason"] == "checked with the owner"
    env = clients["app"].call(
        context_id, "kv.put", "inbox-1", {"key": "inbox-1", "value": "v"}, approval_id=approval_id
    )
    assert env.status.value == "succeeded"

    _, _, second = pending_call(clients, "inbox-2")
    page = client.get("/console/approvals")
    answer = client.post(
        f"/console/approvals/{second}/reject",
        data={"csrf_token": csrf_of(page.text), "reason": "not today"},
    )
    assert answer.status_code == 303
    assert clients["alice"].get_approval(second)["status"] == "rejected"
    again = client.post(
        f"/console/approvals/{second}/approve", data={"csrf_token": csrf_of(page.text)}
    )
    assert again.status_code == 409
    assert "APPROVAL_NOT_PENDING" in again.text


def test_forms_need_csrf_and_origin(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    client = signed_in(server.url, project.keys["alice"])
    _, _, approval_id = pending_call(clients, "csrf-1")
    token = csrf_of(client.get("/console/approvals").text)
    missing = client.post(f"/console/approvals/{approval_id}/approve", data={"reason": "x"})
    assert missing.status_code == 403
    assert "CSRF_INVALID" in missing.text
    other = signed_in(server.url, project.keys["bob"])
    stolen = other.post(f"/console/approvals/{approval_id}/approve", data={"csrf_token": token})
    assert stolen.status_code == 403  # a token belongs to one session
    cross_site = client.post(
        f"/console/approvals/{approval_id}/approve",
        data={"csrf_token": token},
        headers={"Origin": "https://evil.example"},
    )
    assert cross_site.status_code == 403
    assert "ORIGIN_MISMATCH" in cross_site.text
    assert clients["alice"].get_approval(approval_id)["status"] == "pending"
    client.post(f"/console/approvals/{approval_id}/reject", data={"csrf_token": token})


def test_cross_tenant_ids_are_not_found(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    _, run_id, approval_id = pending_call(clients, "tenant-1")
    bob = signed_in(server.url, project.keys["bob"])
    page = bob.get("/console/approvals")
    assert approval_id not in page.text
    answer = bob.post(
        f"/console/approvals/{approval_id}/approve", data={"csrf_token": csrf_of(page.text)}
    )
    assert answer.status_code == 404
    assert "APPROVAL_NOT_FOUND" in answer.text
    assert bob.get(f"/console/runs/{run_id}").status_code == 404
    assert bob.get(f"/console/runs/{run_id}/stream").status_code == 404
    assert run_id not in bob.get("/console/runs").text
    assert clients["alice"].get_approval(approval_id)["status"] == "pending"
    alice = signed_in(server.url, project.keys["alice"])
    token = csrf_of(alice.get("/console/approvals").text)
    alice.post(f"/console/approvals/{approval_id}/reject", data={"csrf_token": token})


def test_expired_approval_is_refused(
    app: FastAPI, server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    client = signed_in(server.url, project.keys["alice"])
    _, _, approval_id = pending_call(clients, "expire-1")
    token = csrf_of(client.get("/console/approvals").text)
    kernel = app.state.charter.runtime.kernel
    real = kernel.clock
    kernel.clock = lambda: real() + timedelta(hours=2)  # the approval's lifetime has passed
    try:
        answer = client.post(
            f"/console/approvals/{approval_id}/approve", data={"csrf_token": token}
        )
    finally:
        kernel.clock = real
    assert answer.status_code == 403
    assert "APPROVAL_EXPIRED" in answer.text
    page = client.get("/console/approvals")
    assert f'data-approval-id="{approval_id}" data-status="expired"' in page.text


def test_runs_list_filters_run_page_and_verify(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    ctx = clients["app"].resolve_context("all")
    clients["app"].call(ctx["context_id"], "kv.echo", "runs-1", {"payload": {"text": "hi"}})
    client = signed_in(server.url, project.keys["alice"])
    listing = client.get("/console/runs")
    assert f'data-run-id="{ctx["run_id"]}"' in listing.text
    assert ctx["run_id"] in client.get("/console/runs", params={"workflow": "adhoc"}).text
    none = client.get("/console/runs", params={"status": "no-such-status"})
    assert "No run matches these filters." in none.text
    assert ctx["run_id"] not in client.get("/console/runs", params={"since": "2999"}).text
    page = client.get(f"/console/runs/{ctx['run_id']}")
    assert page.status_code == 200
    for fact in (
        'data-type="run_created"',
        'data-type="tool_call_recorded"',
        'data-call-id="runs-1"',
    ):
        assert fact in page.text
    assert 'data-state="succeeded"' in page.text
    verified = client.get(f"/console/runs/{ctx['run_id']}", params={"verify": "1"})
    assert 'data-testid="verify-result" data-ok="true"' in verified.text


def test_run_stream_sends_rendered_events(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    ctx = clients["app"].resolve_context("all")
    client = signed_in(server.url, project.keys["alice"])
    with client.stream("GET", f"/console/runs/{ctx['run_id']}/stream") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        seen: list[str] = []
        for line in stream.iter_lines():
            seen.append(line)
            if line.startswith("data:") and "context_resolved" in line:
                break
    assert "event: timeline" in seen
    assert any('data-type="run_created"' in line for line in seen)


def test_approvals_stream_sends_the_list(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    _, _, approval_id = pending_call(clients, "stream-1")
    client = signed_in(server.url, project.keys["alice"])
    data: list[str] = []
    with client.stream("GET", "/console/approvals/stream") as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                data.append(line)
            elif line == "" and data:
                break
    assert any(approval_id in line for line in data)
    token = csrf_of(client.get("/console/approvals").text)
    client.post(f"/console/approvals/{approval_id}/reject", data={"csrf_token": token})


def test_unknown_calls_and_the_operator_finding(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    client = signed_in(server.url, project.keys["alice"])
    empty = client.get("/console/attention")
    assert 'data-testid="attention-empty"' in empty.text
    ctx = clients["app"].resolve_context("all")
    seed_unknown(project.root, ctx["context_id"], "lost-1")
    page = client.get("/console/attention")
    assert 'data-call-id="lost-1"' in page.text
    bob = signed_in(server.url, project.keys["bob"])
    assert "lost-1" not in bob.get("/console/attention").text
    action = f"/console/attention/{ctx['context_id']}/lost-1"
    no_reason = client.post(action, data={"csrf_token": csrf_of(page.text), "outcome": "failed"})
    assert no_reason.status_code == 422
    answer = client.post(
        action,
        data={"csrf_token": csrf_of(page.text), "outcome": "failed", "reason": "no row written"},
    )
    assert answer.status_code == 303
    assert "Call lost-1 resolved." in client.get(answer.headers["location"]).text
    assert clients["alice"].get_call(ctx["context_id"], "lost-1")["state"] == "failed"


def test_readiness_page(server: ThreadServer, project: Project) -> None:
    client = signed_in(server.url, project.keys["alice"])
    page = client.get("/console/readiness")
    assert page.status_code == 200
    assert 'data-testid="build-digest">sha256:' in page.text
    for tool in ("kv.get", "kv.put", "kv.echo"):
        assert f'data-tool="{tool}"' in page.text


def test_audit_search(server: ThreadServer, project: Project, clients: dict[str, Client]) -> None:
    ctx = clients["app"].resolve_context("all")
    clients["app"].call(ctx["context_id"], "kv.echo", "audit-1", {"payload": {"text": "x"}})
    clients["app"].call(ctx["context_id"], "kv.boom", "audit-2", {"message": "bad"})
    client = signed_in(server.url, project.keys["alice"])
    rows = _rows(client.get("/console/audit", params={"actor": "app", "tool": "kv.boom"}).text)
    assert rows
    assert all(o != "succeeded" for o in rows)
    ok = _rows(client.get("/console/audit", params={"outcome": "succeeded"}).text)
    assert ok
    assert set(ok) == {"succeeded"}
    nothing = client.get("/console/audit", params={"actor": "nobody"})
    assert 'data-testid="audit-empty"' in nothing.text
    assert _rows(signed_in(server.url, project.keys["bob"]).get("/console/audit").text) == []


def _rows(html: str) -> list[Any]:
    import re

    return re.findall(r'data-testid="audit-row" data-outcome="([^"]+)"', html)


def test_sign_out(server: ThreadServer, project: Project) -> None:
    client = signed_in(server.url, project.keys["alice"])
    token = csrf_of(client.get("/console/runs").text)
    answer = client.post("/console/logout", data={"csrf_token": token})
    assert answer.status_code == 303
    assert client.get("/console/runs").status_code == 303


def test_an_unknown_call_shows_its_late_result(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    client = signed_in(server.url, project.keys["alice"])
    ctx = clients["app"].resolve_context("all")
    seed_unknown(project.root, ctx["context_id"], "late-1")
    seed_late_result(project.root, ctx["context_id"], "late-1")
    page = client.get("/console/attention").text
    card = page.split('data-call-id="late-1"', 1)[1].split("</article>", 1)[0]
    assert 'data-testid="late-result"' in card
    assert "late hello" in card
    assert "succeeded" in card
