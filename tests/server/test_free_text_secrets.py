"""A client's text — a context's objective, a disclosure report's model name and request id
— holds no known secret when Charter keeps it (docs/privacy.md): not in the ledger, the
rows, an export or an answer; a session id holding one is refused (an id cannot be kept
redacted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.server._harness import Project, ThreadServer, stored_bytes


def test_free_text_with_a_known_secret_is_kept_redacted(
    project: Project, server: ThreadServer, tmp_path: Path
) -> None:
    secret = project.approval_token  # a credential the deployment file references
    auth = {"Authorization": f"Bearer {project.keys['app']}"}
    with httpx.Client(base_url=server.url, headers=auth, trust_env=False) as http:
        ctx = http.post("/v1/contexts", json={"profile": "all", "objective": f"use {secret} now"})
        assert ctx.status_code == 201, ctx.text
        assert secret not in ctx.text
        context = ctx.json()
        assert "[REDACTED]" in context["objective"]
        report = {
            "tools": [],
            "schema_digest": "sha256:" + "0" * 64,
            "tokens": 1,
            "model": secret,
            "request_id": f"req-{secret}",
        }
        got = http.post(f"/v1/contexts/{context['context_id']}/disclosures", json=report)
        assert got.status_code in (200, 201), got.text
        assert secret not in got.text
        # an id cannot be kept redacted (it must stay an id): refused, not echoed
        for body in ({"session_id": f"s-{secret}"}, {"session_id": secret}):
            run = http.post("/v1/runs", json=body)
            assert run.status_code == 422, run.text
            assert run.json()["reason"] == "IDENTIFIER_SECRET"
            assert secret not in run.text
        run = http.post("/v1/runs", json={"session_id": "s-plain"})
        assert run.status_code in (200, 201), run.text
        json_only = {"Accept": "application/json"}
        listed = http.get(f"/v1/runs/{context['run_id']}/events", headers=json_only)
        assert "[REDACTED]" in listed.text
        for run_id in (context["run_id"], run.json()["run_id"]):
            events = http.get(f"/v1/runs/{run_id}/events", headers=json_only)
            assert events.status_code == 200, events.text
            assert secret not in events.text
            assert http.get(f"/v1/runs/{run_id}/verify").json()["ok"] is True
        assert secret not in http.get(f"/v1/contexts/{context['context_id']}").text
    assert secret.encode() not in stored_bytes(project.root)
    out = tmp_path / "export"
    store = "sqlite:///.charter/charter.db"
    command = [sys.executable, "-m", "charter", "runs", "export", context["run_id"], str(out)]
    done = subprocess.run(
        [*command, "--store", store], cwd=project.root, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files
    assert not [p for p in files if secret.encode() in p.read_bytes()]


def test_a_problem_never_sends_back_a_known_secret_the_client_sent(
    project: Project, server: ThreadServer
) -> None:
    """A problem's detail may quote a name the client sent (an unknown member, profile or
    workflow, a repeated member); a known secret in it is redacted. A call id holding one is
    refused (``IDENTIFIER_SECRET``) with no call id in the answer, and kept nowhere."""
    secret = project.approval_token
    auth = {"Authorization": f"Bearer {project.keys['app']}", "Content-Type": "application/json"}
    with httpx.Client(base_url=server.url, headers=auth, trust_env=False) as http:
        context = http.post("/v1/contexts", json={"profile": "all"}).json()
        calls = f"/v1/contexts/{context['context_id']}/calls"
        call = {"tool": "kv.get", "call_id": "g1", "arguments": {"key": "a"}}
        sent = {
            "unknown member": http.post(calls, json={**call, secret: 1}),
            "repeated member": http.post(
                calls, content=f'{{"tool": "kv.get", "{secret}": 1, "{secret}": 2}}'.encode()
            ),
            "unknown profile": http.post("/v1/contexts", json={"profile": f"p-{secret}"}),
            "unknown workflow": http.post("/v1/runs", json={"workflow": f"w-{secret}"}),
        }
        for what, answer in sent.items():
            assert 400 <= answer.status_code < 500, (what, answer.text)
            assert secret not in answer.text, what
            assert "[REDACTED]" in answer.text, (what, answer.text)
        refused = http.post(calls, json={**call, "call_id": f"c-{secret}"})
        assert refused.status_code == 422, refused.text  # rejected: an envelope
        assert refused.json()["error"]["reason"] == "IDENTIFIER_SECRET"
        assert refused.json()["call_id"] == ""
        assert secret not in refused.text
        assert http.post(calls, json=call).json()["status"] == "succeeded"
    assert secret.encode() not in stored_bytes(project.root)
