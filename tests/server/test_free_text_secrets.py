"""A client's text — a context's objective, a disclosure report's model name and request id
— holds no known secret when Charter keeps it (docs/privacy.md): not in the ledger, the
rows, an export or an answer; a session id holding one is refused (an id cannot be kept
redacted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.server._harness import Project, ThreadServer


def _stored_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (root / ".charter").glob("charter.db*"))


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
    assert secret.encode() not in _stored_bytes(project.root)
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
