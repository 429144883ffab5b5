"""An approval's full redacted arguments: operators of the tenant see them (HTTP, CLI,
console); an application does not; listings carry only the clamped preview."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from charter.client import Client
from charter.errors import PermissionDenied
from charter.kernel.envelope import CallStatus
from tests.console._console import signed_in
from tests.server._harness import Project, ThreadServer

CHARTER = Path(sys.executable).with_name("charter")


def _pending(app: Client, call_id: str, value: str) -> str:
    ctx = app.resolve_context("all")
    out = app.call(ctx["context_id"], "kv.put", call_id, {"key": "/srv/target", "value": value})
    assert out.status is CallStatus.PENDING_APPROVAL
    assert out.approval is not None
    return str(out.approval["id"])


def test_operators_fetch_the_full_arguments_over_http(clients: dict[str, Client]) -> None:
    app, alice = clients["app"], clients["alice"]
    big = "v" * 8000
    approval_id = _pending(app, "full-1", big)
    listed = next(r for r in alice.approvals() if r["approval_id"] == approval_id)
    assert "full_arguments" not in listed
    assert listed["summary"]["truncated"] is True
    paths = {f["path"]: f for f in listed["summary"]["fields"]}
    assert paths["/key"]["value"] == "/srv/target"
    assert paths["/value"]["size"] == 8000
    assert "full_arguments" not in alice.get_approval(approval_id)
    full = alice.get_approval(approval_id, full=True)
    assert full["full_arguments"] == {"key": "/srv/target", "value": big}
    with pytest.raises(PermissionDenied) as refused:
        app.get_approval(approval_id, full=True)
    assert refused.value.reason == "OPERATOR_REQUIRED"


def test_the_full_arguments_refusal_is_documented(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    """An application asking for ``?full=true`` is answered 403, and the OpenAPI document of
    ``GET /v1/approvals/{approval_id}`` lists that answer (it listed 401 and 404 only)."""
    approval_id = _pending(clients["app"], "full-doc", "d" * 10)
    headers = {"Authorization": f"Bearer {project.keys['app']}"}
    with httpx2.Client(base_url=server.url, headers=headers, timeout=30) as http:
        refused = http.get(f"/v1/approvals/{approval_id}", params={"full": "true"})
        doc = http.get("/openapi.json").json()
    assert refused.status_code == 403
    assert refused.json()["reason"] == "OPERATOR_REQUIRED"
    responses = doc["paths"]["/v1/approvals/{approval_id}"]["get"]["responses"]
    assert "application/problem+json" in responses["403"]["content"]
    assert responses["403"]["description"] == "Forbidden"


def test_the_console_page_shows_every_field(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    approval_id = _pending(clients["app"], "full-2", "w" * 5000)
    browser = signed_in(server.url, project.keys["alice"])
    try:
        inbox = browser.get("/console/approvals")
        assert f"/console/approvals/{approval_id}/arguments" in inbox.text
        page = browser.get(f"/console/approvals/{approval_id}/arguments")
    finally:
        browser.close()
    assert page.status_code == 200, page.text[:300]
    assert "w" * 5000 in page.text
    assert "/srv/target" in page.text


def test_the_cli_shows_the_full_arguments(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    approval_id = _pending(clients["app"], "full-3", "x" * 3000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env["CHARTER_API_KEY"] = project.keys["alice"]
    proc = subprocess.run(
        [
            str(CHARTER),
            "approvals",
            "show",
            approval_id,
            "--full",
            "--server",
            server.url,
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["full_arguments"]["value"] == "x" * 3000
    assert shown["summary"]["truncated"] is True
