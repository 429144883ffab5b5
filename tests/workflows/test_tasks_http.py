"""The report pipeline driven over HTTP only, against a real server on loopback: create the
run, list its tasks, record handoffs, start, call with ``task_id``, complete, finish, verify
— and the refusals (no task, wrong role, outside the allowlist, who may drive, tenancy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest

from charter.cli.pipeline_demo import call_arguments
from charter.runtime import open_runtime
from charter.server import create_app
from tests.server._harness import ThreadServer
from tests.workflows.pipeline_env import pipeline_project


def _keys(root: Path) -> dict[str, str]:
    secrets = root / ".charter" / "secrets"
    return {n: (secrets / f"{n}.key").read_text().strip() for n in ("alice", "app", "intruder")}


def _handoff(task: dict[str, Any], inputs: dict[str, str]) -> dict[str, Any]:
    c = task["contract"]
    return {
        "objective": c["title"],
        "sender_role": "coordinator",
        "receiver_role": c["role"],
        "constraints": [],
        "acceptance_criteria": c["acceptance_criteria"],
        "input_artifact_ids": [inputs[t] for t in c["input_artifacts"]],
        "expected_outputs": c["output_artifacts"],
        "capabilities": c["required_tools"],
        "budget": {"max_tokens": 4000, "max_tool_calls": 3, "timeout_seconds": 600},
    }


@pytest.fixture
def live(tmp_path: Path) -> Any:
    root = pipeline_project(tmp_path / "rp")

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store=f"sqlite:///{root / '.charter' / 'charter.db'}")

    with ThreadServer(create_app(opener=opener, sse_keepalive_s=0.5)) as server:
        yield server, _keys(root)


def test_the_pipeline_over_http_only(live: Any) -> None:
    server, keys = live

    def client(who: str) -> httpx2.Client:
        headers = {"Authorization": f"Bearer {keys[who]}"}
        return httpx2.Client(base_url=server.url, headers=headers, timeout=30)

    with client("alice") as alice, client("app") as app, client("intruder") as intruder:
        res = alice.post("/v1/runs", json={"workflow": "quarterly-report"})
        assert res.status_code == 201, res.text
        run_id = res.json()["run_id"]
        res = app.get(f"/v1/runs/{run_id}/tasks")  # any principal of the tenant reads
        assert res.status_code == 200, res.text
        tasks = res.json()
        assert [t["task_id"] for t in tasks] == ["retrieve", "analyse", "report"]
        # another tenant: 404 everywhere; the application may not drive alice's run
        assert intruder.get(f"/v1/runs/{run_id}/tasks").json()["reason"] == "RUN_NOT_FOUND"
        res = intruder.post(f"/v1/runs/{run_id}/tasks/retrieve/start")
        assert (res.status_code, res.json()["reason"]) == (404, "RUN_NOT_FOUND")
        res = app.post(f"/v1/runs/{run_id}/tasks/retrieve/handoff", json=_handoff(tasks[0], {}))
        assert (res.status_code, res.json()["reason"]) == (403, "RUN_CONTROL_DENIED")
        res = app.post(f"/v1/runs/{run_id}/finish")
        assert (res.status_code, res.json()["reason"]) == (403, "RUN_CONTROL_DENIED")
        # a handoff that breaks its rules is refused with its reason
        bad = {**_handoff(tasks[0], {}), "chat_history": []}
        res = alice.post(f"/v1/runs/{run_id}/tasks/retrieve/handoff", json=bad)
        assert res.status_code == 422
        assert res.json()["reason"].startswith("HANDOFF_")

        inputs: dict[str, str] = {}
        for task in tasks:
            tid, c = task["task_id"], task["contract"]
            res = alice.post(f"/v1/runs/{run_id}/tasks/{tid}/handoff", json=_handoff(task, inputs))
            assert res.status_code == 201, res.text
            res = alice.post(f"/v1/runs/{run_id}/tasks/{tid}/start")
            assert (res.status_code, res.json()["status"]) == (200, "running"), res.text
            body = {"profile": c["profile"], "agent": c["role"], "run": run_id}
            ctx = app.post("/v1/contexts", json=body).json()["context_id"]
            tool, args = call_arguments(tid, {t: inputs[t] for t in c["input_artifacts"]})
            call = {"tool": tool, "call_id": f"{tid}-1", "arguments": args}
            if tid == "retrieve":
                res = app.post(f"/v1/contexts/{ctx}/calls", json=call)  # no task named
                assert (res.status_code, res.json()["error"]["reason"]) == (403, "TASK_REQUIRED")
                other = app.post(
                    "/v1/contexts", json={"profile": c["profile"], "run": run_id}
                ).json()["context_id"]
                res = app.post(f"/v1/contexts/{other}/calls", json={**call, "task_id": tid})
                assert res.json()["error"]["reason"] == "TASK_ROLE_MISMATCH"
                outside = {
                    "tool": "stats.summarise",
                    "call_id": "outside",
                    "arguments": {"dataset": "artifact-000000000000"},
                    "task_id": tid,
                }
                res = app.post(f"/v1/contexts/{ctx}/calls", json=outside)
                assert res.status_code == 403
                assert res.json()["error"]["reason"] in ("TOOL_NOT_DISCLOSED", "AGENT_SCOPE")
            res = app.post(f"/v1/contexts/{ctx}/calls", json={**call, "task_id": tid})
            assert (res.status_code, res.json()["status"]) == (200, "succeeded"), res.text
            res = alice.post(f"/v1/runs/{run_id}/tasks/{tid}/complete")
            assert (res.status_code, res.json()["status"]) == (200, "completed"), res.text
            for a in alice.get(f"/v1/runs/{run_id}/artifacts").json():
                inputs[a["type"]] = a["artifact_id"]
        res = alice.post(f"/v1/runs/{run_id}/finish")
        assert res.json() == {"run_id": run_id, "status": "completed", "gaps": []}
        res = alice.get(f"/v1/runs/{run_id}/verify")
        assert res.status_code == 200, res.text
        assert res.json()["ok"] is True, res.text
        assert set(inputs) == {"dataset", "summary", "report"}
        report = alice.get(f"/v1/runs/{run_id}/artifacts/{inputs['report']}")
        assert report.status_code == 200
        assert b"Quarterly sales" in report.content


def test_the_python_client_drives_tasks(live: Any) -> None:
    from charter.client import Client
    from charter.errors import PermissionDenied

    server, keys = live
    with Client(server.url, api_key=keys["app"]) as app:
        manifest = app.create_run(workflow="quarterly-report")  # the app owns this one
        run_id = manifest["run_id"]
        tasks = app.tasks(run_id)
        recorded = app.record_handoff(run_id, "retrieve", _handoff(tasks[0], {}))
        assert recorded["handoff_id"].startswith("handoff-")
        assert app.start_task(run_id, "retrieve")["status"] == "running"
        ctx = app.resolve_context("retrieval", agent="retriever", run_id=run_id)["context_id"]
        env = app.call(ctx, "data.fetch", "c0", {"name": "sales"})
        assert (env.status.value, (env.error or {}).get("reason")) == ("denied", "TASK_REQUIRED")
        env = app.call(ctx, "data.fetch", "c1", {"name": "sales"}, task_id="retrieve")
        assert env.status.value == "succeeded", env.error
        assert app.complete_task(run_id, "retrieve")["status"] == "completed"
        end = app.finish_run(run_id)
        assert end["status"] == "partial"
        assert "task analyse is pending" in end["gaps"]
    with Client(server.url, api_key=keys["intruder"]) as intruder:
        with pytest.raises(PermissionDenied) as hidden:
            intruder.tasks(run_id)
        assert hidden.value.reason == "RUN_NOT_FOUND"


def test_a_missing_task_answers_404_like_every_missing_resource(live: Any) -> None:
    """``TASK_NOT_FOUND`` is a 404 (it was 422), on every task endpoint: read, handoff, start,
    complete, and the operators' cancel, fail and skip."""
    server, keys = live
    headers = {"Authorization": f"Bearer {keys['alice']}"}
    with httpx2.Client(base_url=server.url, headers=headers, timeout=30) as alice:
        run_id = alice.post("/v1/runs", json={"workflow": "quarterly-report"}).json()["run_id"]
        tasks = alice.get(f"/v1/runs/{run_id}/tasks").json()
        base = f"/v1/runs/{run_id}/tasks/nope"
        answers = [
            alice.get(base),
            alice.post(f"{base}/handoff", json=_handoff(tasks[0], {})),
            alice.post(f"{base}/start"),
            alice.post(f"{base}/complete"),
            *(alice.post(f"{base}/{a}", json={"reason": "x"}) for a in ("cancel", "fail", "skip")),
        ]
        for res in answers:
            assert res.status_code == 404, (res.request.url, res.text)
            problem = res.json()
            assert (problem["reason"], problem["status"]) == ("TASK_NOT_FOUND", 404)
            assert "nope" in problem["detail"]
        # a task that exists still answers
        assert alice.get(f"/v1/runs/{run_id}/tasks/retrieve").status_code == 200
