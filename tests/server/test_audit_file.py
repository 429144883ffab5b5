"""``audit.file`` in the deployment file: real ``charter serve`` / ``charter call`` processes
write the audit trail there; bad settings are refused with one line, no traceback."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2

from tests.server._harness import Project, free_port, spawn_serve, write_served_project

CHARTER = str(Path(sys.executable).parent / "charter")
SECRET_ARG = "arg-value-do-not-log-7f3a9c"


def _with_audit(tmp_path: Path, setting: str = "{file: .charter/audit.jsonl}") -> Project:
    project = write_served_project(tmp_path / "p")
    deploy = project.root / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text() + f"audit: {setting}\n")
    return project


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    return subprocess.run(
        [CHARTER, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**env, "NO_COLOR": "1"},
        timeout=120,
        check=False,
    )


def test_charter_serve_audits_success_denial_and_rejection(tmp_path: Path) -> None:
    project = _with_audit(tmp_path)
    audit = project.root / ".charter" / "audit.jsonl"
    key = project.keys["app"]
    with (
        spawn_serve(project.root, "sqlite:///.charter/charter.db") as url,
        httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http,
    ):
        ctx = http.post("/v1/contexts", json={"profile": "all"}).json()
        calls = f"/v1/contexts/{ctx['context_id']}/calls"
        payload = {"payload": {"note": SECRET_ARG}}
        ok = http.post(calls, json={"tool": "kv.echo", "call_id": "a1", "arguments": payload})
        assert ok.json()["status"] == "succeeded"
        denied = http.post(
            calls, json={"tool": "kv.secret", "call_id": "a2", "arguments": {"k": SECRET_ARG}}
        )
        assert denied.status_code == 403
        rejected = http.post(
            calls, json={"tool": "kv.echo", "call_id": "a3", "arguments": {"nope": SECRET_ARG}}
        )
        assert rejected.status_code == 422
    assert stat.S_IMODE(audit.stat().st_mode) == 0o600
    text = audit.read_text()
    assert SECRET_ARG not in text
    assert not any(k in text for k in project.keys.values())
    by_call = {line["call_id"]: line for line in _lines(audit)}
    assert by_call["a1"]["outcome"] == "succeeded"
    assert by_call["a1"]["actor"] == "app"
    assert by_call["a1"]["tenant"] == "acme"
    assert by_call["a1"]["fingerprint"].startswith("hmac-sha256:")
    assert by_call["a2"]["outcome"] == "denied"
    assert by_call["a2"]["code"] == "permission_denied"
    assert by_call["a2"]["reason"] == denied.json()["error"]["reason"]
    assert by_call["a3"]["outcome"] == "rejected"
    assert by_call["a3"]["code"] == "invalid_input"
    assert by_call["a3"]["reason"] == rejected.json()["error"]["reason"]


def test_approvals_decided_over_http_are_audited(tmp_path: Path) -> None:
    """An approval granted by an operator's key and one refused with the standalone approval
    token, both over HTTP: each decision is a line of the deployment's audit file, beside the
    call's own lines (requested, then executed)."""
    project = _with_audit(tmp_path)
    audit = project.root / ".charter" / "audit.jsonl"
    put = {"key": "k", "value": SECRET_ARG}
    with spawn_serve(project.root, "sqlite:///.charter/charter.db") as url:
        app = httpx2.Client(
            base_url=url, headers={"Authorization": f"Bearer {project.keys['app']}"}, timeout=30
        )
        alice = httpx2.Client(
            base_url=url, headers={"Authorization": f"Bearer {project.keys['alice']}"}, timeout=30
        )
        with app, alice:
            ctx = app.post("/v1/contexts", json={"profile": "all"}).json()
            calls = f"/v1/contexts/{ctx['context_id']}/calls"
            asked = {}
            for call_id in ("p1", "p2"):
                body = {"tool": "kv.put", "call_id": call_id, "arguments": put}
                pending = app.post(calls, json=body)
                assert pending.status_code == 202, pending.text
                asked[call_id] = pending.json()["approval"]["id"]
            approved = alice.post(
                f"/v1/approvals/{asked['p1']}/approve", json={"reason": "ticket 42"}
            )
            assert approved.status_code == 200, approved.text
            rejected = httpx2.post(
                f"{url}/v1/approvals/{asked['p2']}/reject",
                json={"reason": "not today"},
                headers={
                    "X-Charter-Approval-Token": project.approval_token,
                    "X-Charter-Tenant": "acme",
                },
                timeout=30,
            )
            assert rejected.status_code == 200, rejected.text
            body = {"tool": "kv.put", "call_id": "p1", "arguments": put, "approval_id": asked["p1"]}
            assert app.post(calls, json=body).json()["status"] == "succeeded"
    text = audit.read_text()
    assert SECRET_ARG not in text
    assert project.approval_token not in text
    lines = _lines(audit)
    assert [(line["call_id"], line["outcome"]) for line in lines] == [
        ("p1", "pending_approval"),
        ("p2", "pending_approval"),
        ("p1", "approved"),
        ("p2", "approval_rejected"),
        ("p1", "succeeded"),
    ]
    decided = {line["outcome"]: line for line in lines[2:4]}
    for outcome, call_id, note in (
        ("approved", "p1", "ticket 42"),
        ("approval_rejected", "p2", "not today"),
    ):
        line = decided[outcome]
        assert line["tenant"] == "acme"
        assert line["tool"] == "kv.put"
        assert line["run_id"] == ctx["run_id"]
        assert line["context_id"] == ctx["context_id"]
        assert line["details"]["approval_id"] == asked[call_id]
        assert line["details"]["requested_by"] == "app"
        assert line["details"]["note"] == note
    assert decided["approved"]["actor"] == "alice"
    assert decided["approval_rejected"]["actor"] == "approval-token"  # never the token itself


def test_charter_call_appends_to_the_same_file(tmp_path: Path) -> None:
    project = _with_audit(tmp_path)
    audit = project.root / ".charter" / "audit.jsonl"
    base = ["--profile", "all", "--as", "app", "--store", "sqlite:///.charter/charter.db"]
    args = json.dumps({"payload": {"note": SECRET_ARG}})
    ok = _run(["call", "kv.echo", "--call-id", "c1", "--args", args, *base], project.root)
    assert ok.returncode == 0, ok.stderr
    denied = _run(["call", "kv.secret", "--call-id", "c2", "--args", "{}", *base], project.root)
    assert denied.returncode == 4, denied.stderr
    lines = _lines(audit)
    assert [(line["call_id"], line["outcome"]) for line in lines] == [
        ("c1", "succeeded"),
        ("c2", "denied"),
    ]
    assert SECRET_ARG not in audit.read_text()


def test_bad_audit_settings_are_one_line_at_check_and_start_up(tmp_path: Path) -> None:
    for setting, expected in (
        ("{file: no-such-dir/audit.jsonl}", "audit.file: directory"),
        ("{file: audit.jsonl, rotate: daily}", "audit.rotate: unknown field"),
    ):
        project = _with_audit(tmp_path / setting[7:12], setting)
        for args in (
            ["check"],
            ["serve", "--port", str(free_port()), "--store", "sqlite:///.charter/charter.db"],
            ["call", "kv.echo", "--call-id", "x", "--profile", "all", "--as", "app"],
        ):
            out = _run(args, project.root)
            assert out.returncode == 1, (args, out.stdout, out.stderr)
            assert expected in out.stderr, (args, out.stderr)
            assert "Traceback" not in out.stderr + out.stdout
            assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_an_explicit_audit_file_adds_to_the_deployment_file(tmp_path: Path) -> None:
    from charter.runtime import SyncRuntime

    project = _with_audit(tmp_path)
    own = project.root / ".charter" / "audit.jsonl"
    extra = tmp_path / "extra.jsonl"
    for call_id, named in (("m1", extra), ("m2", own)):  # the same path is written once
        with SyncRuntime(project.root, store="memory:", audit_file=named) as rt:
            ctx = rt.resolve_context("app", "all")
            rt.call(ctx.context_id, "kv.echo", call_id, {"payload": {}}, as_="app")
    assert [line["call_id"] for line in _lines(own)] == ["m1", "m2"]
    assert [line["call_id"] for line in _lines(extra)] == ["m1"]
