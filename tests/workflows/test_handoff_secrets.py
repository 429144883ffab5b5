"""A catalog handoff's free text — objective, constraints, notes, trace ids — is recorded
redacted, as a chat's handoff and a context's objective are (docs/privacy.md): a deployment
credential a client pastes into it never reaches the ledger, the task row or an answer.
Over a real loopback server, and from Python."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2

from charter.kernel.redaction import REDACTED
from charter.runtime import open_runtime
from charter.server import create_app
from tests.server._harness import ThreadServer
from tests.workflows.pipeline_env import pipeline_project, pipeline_runtime
from tests.workflows.test_tasks_http import _handoff


def _leaky(task: dict[str, Any], secret: str) -> dict[str, Any]:
    return {
        **_handoff(task, {}),
        "objective": f"fetch the data set with key {secret}",
        "constraints": [f"Authorization: Bearer {secret}"],
        "notes": {"credentials": [f"key={secret}"]},
        "trace_id": secret,
    }


def _stored_anywhere(root: Path, secret: str) -> bool:
    return any(
        secret.encode() in p.read_bytes()
        for p in (root / ".charter").glob("charter.db*")
        if p.is_file()
    )


def test_a_credential_in_a_handoff_is_recorded_redacted_over_http(tmp_path: Path) -> None:
    root = pipeline_project(tmp_path / "rp")
    secrets = root / ".charter" / "secrets"
    alice = (secrets / "alice.key").read_text().strip()
    leaked = (secrets / "app.key").read_text().strip()

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store=f"sqlite:///{root / '.charter' / 'charter.db'}")

    with ThreadServer(create_app(opener=opener, sse_keepalive_s=0.5)) as server:
        headers = {"Authorization": f"Bearer {alice}"}
        with httpx2.Client(base_url=server.url, headers=headers, timeout=30) as http:
            run = http.post("/v1/runs", json={"workflow": "quarterly-report"}).json()["run_id"]
            task = http.get(f"/v1/runs/{run}/tasks/retrieve").json()
            res = http.post(f"/v1/runs/{run}/tasks/retrieve/handoff", json=_leaky(task, leaked))
            assert res.status_code == 201, res.text
            assert leaked not in res.text
            (handoff,) = res.json()["handoffs"]
            assert REDACTED in handoff["objective"]
            assert handoff["objective"].startswith("fetch the data set with key ")
            for path in (f"/v1/runs/{run}/tasks", f"/v1/runs/{run}/events", f"/v1/runs/{run}"):
                assert leaked not in http.get(path).text, path
            # the rest of the handoff is as given, and the task starts from it
            assert handoff["capabilities"] == ["data.fetch"]
            res = http.post(f"/v1/runs/{run}/tasks/retrieve/start")
            assert (res.status_code, res.json()["status"]) == (200, "running")
            assert http.get(f"/v1/runs/{run}/verify").json()["ok"] is True
    assert not _stored_anywhere(root, leaked)


def test_a_credential_in_a_handoff_is_recorded_redacted_from_python(tmp_path: Path) -> None:
    root = pipeline_project(tmp_path / "rp")
    leaked = (root / ".charter" / "secrets" / "alice.key").read_text().strip()

    async def main() -> None:
        async with pipeline_runtime(root) as rt:
            run = await rt.workflows.create_run("quarterly-report", as_="alice")
            task = await rt.workflows.task(run, "retrieve", as_="alice")
            got = await rt.workflows.record_handoff(
                run, "retrieve", _leaky(task, leaked), as_="alice"
            )
            assert leaked not in repr(got)

    anyio.run(main)
    assert not _stored_anywhere(root, leaked)
