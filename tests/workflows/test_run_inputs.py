"""A catalog run's inputs refused before the run exists: a path the artifact store refuses
(traversal, NUL, a run's own file), a media type that is not one, two inputs on one path —
each answered with its reason and the input it concerns, and no run left behind in
``planning``; a store failing part-way fails the run instead of leaving it half-made."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx2
import pytest

from charter.errors import InvalidInput, ResourceLimit
from charter.ledger.views import RunRow
from charter.project.build import build_project, save_build
from charter.runtime import open_runtime
from charter.server import create_app
from charter.workflows.service import RunInput
from tests.server._harness import ThreadServer
from tests.workflows.conftest import Env
from tests.workflows.pipeline_env import pipeline_project

AUDIT = """---
name: sales-audit
description: Summarise a data set the caller gives.
version: 1.0.0
profiles: [analysis]
permissions: [compute:execute, artifact:read, artifact:write]
input_artifacts: [dataset]
output_artifacts: [summary]
required_tools: [stats.summarise]
tasks:
  - id: analyse
    role: analyst
    profile: analysis
    required_tools: [stats.summarise]
    input_artifacts: [dataset]
    output_artifacts: [summary]
    acceptance_criteria: [count and mean of every numeric column]
---
# Sales audit
"""

CSV = base64.b64encode(b"a,b\n1,2\n").decode()


@pytest.fixture
def live(tmp_path: Path) -> Any:
    root = pipeline_project(tmp_path / "rp")
    (root / "workflows" / "sales-audit").mkdir()
    (root / "workflows" / "sales-audit" / "WORKFLOW.md").write_text(AUDIT)
    save_build(build_project(root), root)
    key = (root / ".charter" / "secrets" / "alice.key").read_text().strip()

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store=f"sqlite:///{root / '.charter' / 'charter.db'}")

    with ThreadServer(create_app(opener=opener, sse_keepalive_s=0.5)) as server:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx2.Client(base_url=server.url, headers=headers, timeout=30) as http:
            yield http, root


@pytest.mark.parametrize(
    ("item", "reason", "words"),
    [
        ({"path": "../escape.csv"}, "ARTIFACT_PATH_TRAVERSAL", "must not contain . or .."),
        ({"path": "in\x00.csv"}, "ARTIFACT_PATH_CONTROL_CHAR", "U+0000"),
        ({"path": "manifest.json"}, "ARTIFACT_PATH_RESERVED", "the run's own files"),
        ({"path": "/etc/passwd"}, "ARTIFACT_PATH_ABSOLUTE", "relative to its run"),
        ({"path": "in.csv", "media_type": "text"}, "ARTIFACT_MEDIA_TYPE_INVALID", "media_type"),
        ({"path": "in.csv", "media_type": "text/csv\r\nX: y"}, "ARTIFACT_MEDIA_TYPE_INVALID", ""),
    ],
)
def test_a_refused_input_leaves_no_run(
    live: Any, item: dict[str, str], reason: str, words: str
) -> None:
    http, root = live
    body = {"workflow": "sales-audit", "inputs": {"dataset": {**item, "content_base64": CSV}}}
    res = http.post("/v1/runs", json=body)
    assert res.status_code == 422, res.text
    problem = res.json()
    assert problem["reason"] == reason
    assert problem["detail"].startswith("input dataset: ")
    assert words in problem["detail"]
    assert "Error" not in problem["detail"]
    # nothing recorded: no run half-made in planning, no file written
    assert http.get("/v1/runs").json() == []
    assert not list((root / ".charter" / "artifacts").rglob("*.csv"))


def test_a_good_input_is_normalised_and_the_run_runs(live: Any) -> None:
    http, _ = live
    item = {"path": "in.csv", "media_type": " Text/CSV; charset=utf-8", "content_base64": CSV}
    res = http.post("/v1/runs", json={"workflow": "sales-audit", "inputs": {"dataset": item}})
    assert res.status_code == 201, res.text
    assert res.json()["status"] == "running"
    (artifact,) = http.get(f"/v1/runs/{res.json()['run_id']}/artifacts").json()
    assert artifact["media_type"] == "text/csv; charset=utf-8"
    assert [r["status"] for r in http.get("/v1/runs").json()] == ["running"]


@pytest.mark.anyio
async def test_two_inputs_on_one_path_are_refused_before_the_run(env: Env) -> None:
    from tests.workflows._project import workflow, write_catalog_project

    wf = workflow(input_artifacts=["dataset", "notes"])
    wf["tasks"][0]["input_artifacts"] = ["notes"]
    root = write_catalog_project(env.root.parent / "two", wf=wf)
    env.runs.build = build_project(root)
    inputs = [
        RunInput(type="dataset", path="in/a.csv", data=b"a\n"),
        RunInput(type="notes", path="in/A.csv", data=b"b\n"),
    ]
    with pytest.raises(InvalidInput) as info:
        await env.runs.create_run("pipeline", principal="alice", tenant="acme", inputs=inputs)
    assert info.value.reason == "RUN_INPUT_INVALID"
    assert "dataset and notes name the same path" in info.value.message
    assert await env.store.find_views(RunRow, limit=10) == []


@pytest.mark.anyio
async def test_a_store_failing_part_way_fails_the_run(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.workflows._project import workflow, write_catalog_project

    root = write_catalog_project(env.root.parent / "in", wf=workflow(input_artifacts=["dataset"]))
    env.runs.build = build_project(root)

    def full(*args: object, **kwargs: object) -> None:
        raise ResourceLimit("the artifact store is full", reason="ARTIFACT_QUOTA_BYTES")

    monkeypatch.setattr(env.artifacts.store, "put", full)
    inputs = [RunInput(type="dataset", path="in.csv", data=b"a\n")]
    with pytest.raises(ResourceLimit):
        await env.runs.create_run("pipeline", principal="alice", tenant="acme", inputs=inputs)
    (run,) = await env.store.find_views(RunRow, limit=10)
    assert run.status == "failed"  # never left in planning
    assert run.error["details"] == {"reason": "ARTIFACT_QUOTA_BYTES"}
