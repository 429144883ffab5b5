"""Acceptance: report-pipeline end to end, pinned contracts, partial runs, entry points."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import anyio
import httpx2
import pytest
from typer.testing import CliRunner

from charter.cli.app import app
from charter.cli.pipeline_demo import handoff_for, run_report_pipeline
from charter.project.build import build_project, save_build
from charter.server import create_app
from charter.workflows.service import WorkflowRuns
from tests.server._harness import ThreadServer
from tests.workflows.pipeline_env import pipeline_project, pipeline_runtime

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_run_completes_with_its_artifacts_registered_and_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = pipeline_project(tmp_path / "rp")
    async with pipeline_runtime(root) as rt:
        result = await run_report_pipeline(rt)
        assert (result.status, result.gaps) == ("completed", ())
        assert set(result.artifacts) == {"dataset", "summary", "report"}
        rows = {
            r.type: r
            for r in await WorkflowRuns(build=rt.build, store=rt.store).artifact_rows(result.run_id)
        }
        assert {t: r.media_type for t, r in rows.items()} == {
            "dataset": "text/csv",
            "summary": "application/json",
            "report": "text/markdown",
        }
        assert {t: r.producer["task_id"] for t, r in rows.items()} == {
            "dataset": "retrieve",
            "summary": "analyse",
            "report": "report",
        }
        for r in rows.values():
            await rt.artifacts.verify(result.run_id, r.artifact_id)
        summary = json.loads(rt.artifacts.store.read_bytes(result.run_id, rows["summary"].path))
        assert summary["rows"] == 16
        assert summary["columns"]["units"]["count"] == 16
        assert summary["columns"]["units"]["mean"] == 115.5
        report = rt.artifacts.store.read_bytes(result.run_id, rows["report"].path).decode()
        assert report.startswith("# Quarterly sales")
        assert "| units | 16 | 115.5 |" in report
    monkeypatch.chdir(root)
    argv = ["runs", "verify", result.run_id, "--store", "sqlite:///.charter/charter.db", "--json"]
    res = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(app, argv))
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["ok"] is True


def edit_workflow(root: Path) -> None:
    path = root / "workflows" / "quarterly-report" / "WORKFLOW.md"
    text = path.read_text()
    text = text.replace("version: 1.0.0", "version: 2.0.0", 1)
    text = text.replace(
        "acceptance_criteria: [a CSV data set with a header row]",
        "acceptance_criteria: [a CSV data set with a header row, at least 100 rows]",
    )
    path.write_text(text)
    save_build(build_project(root), root)


async def test_editing_the_workflow_does_not_change_a_running_or_finished_run(
    tmp_path: Path,
) -> None:
    root = pipeline_project(tmp_path / "rp")
    async with pipeline_runtime(root) as rt:
        finished = await run_report_pipeline(rt)
        runs = WorkflowRuns(build=rt.build, store=rt.store, artifacts=rt.artifacts)
        running = await runs.create_run("quarterly-report", principal="alice", tenant="acme")
        before = {r: (await runs.run(r)).workflow for r in (finished.run_id, running)}
    edit_workflow(root)
    async with pipeline_runtime(root) as rt:
        new_build = rt.build
        assert new_build.document["catalog"]["workflows"]["quarterly-report"]["version"] == "2.0.0"
        runs = WorkflowRuns(build=new_build, store=rt.store, artifacts=rt.artifacts)
        for run_id, pinned in before.items():
            assert (await runs.run(run_id)).workflow == pinned
            assert pinned["version"] == "1.0.0"
        # the running run goes on under its pinned contract: the old criteria are what match
        run = await runs.run(running)
        old = handoff_for(run, "retrieve", [])
        assert old["acceptance_criteria"] == ["a CSV data set with a header row"]
        await runs.record_handoff(running, "retrieve", old)
        await runs.start_task(running, "retrieve")
        # a new run pins the edited workflow
        fresh = await runs.create_run("quarterly-report", principal="alice", tenant="acme")
        pinned = (await runs.run(fresh)).workflow
        assert pinned["version"] == "2.0.0"
        assert pinned["contract_sha256"] != before[running]["contract_sha256"]


async def test_a_run_missing_one_output_ends_partial_with_the_gap_named(tmp_path: Path) -> None:
    root = pipeline_project(tmp_path / "rp")
    async with pipeline_runtime(root) as rt:
        result = await run_report_pipeline(rt, skip_calls={"report"})
        assert result.status == "partial"
        assert set(result.artifacts) == {"dataset", "summary"}
        assert result.gaps == ("task report is failed", "output report is not registered")
        run = await WorkflowRuns(build=rt.build, store=rt.store).run(result.run_id)
        assert run.status == "partial"


def test_runs_create_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = pipeline_project(tmp_path / "rp")
    monkeypatch.chdir(root)
    store = "sqlite:///.charter/charter.db"
    res = CliRunner().invoke(
        app, ["runs", "create", "quarterly-report", "--as", "alice", "--store", store, "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["status"] == "running"
    assert out["tasks"] == {"retrieve": "pending", "analyse": "pending", "report": "pending"}
    res = CliRunner().invoke(
        app,
        [
            "runs",
            "create",
            "quarterly-report",
            "--as",
            "alice",
            "--store",
            store,
            "--input",
            "dataset=datasets/sales.csv",
            "--json",
        ],
    )
    assert res.exit_code != 0
    assert "RUN_INPUTS_MISMATCH" in res.output


def test_post_runs_creates_a_catalog_run(tmp_path: Path) -> None:
    from charter.runtime import open_runtime

    root = pipeline_project(tmp_path / "rp")
    key = (root / ".charter" / "secrets" / "app.key").read_text().strip()

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store=f"sqlite:///{root / '.charter' / 'charter.db'}")

    with ThreadServer(create_app(opener=opener, sse_keepalive_s=0.5)) as live:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx2.Client(base_url=live.url, headers=headers, timeout=30) as http:
            res = http.post("/v1/runs", json={"workflow": "quarterly-report"})
            assert res.status_code == 201, res.text
            body = res.json()
            assert body["status"] == "running"
            assert [t["task_id"] for t in body["tasks"]] == ["retrieve", "analyse", "report"]
            res = http.post("/v1/runs", json={"workflow": "nope"})
            assert res.status_code == 422
            assert res.json()["reason"] == "WORKFLOW_UNKNOWN"
            data = base64.b64encode(b"a,b\n1,2\n").decode()
            res = http.post(
                "/v1/runs",
                json={
                    "workflow": "quarterly-report",
                    "inputs": {"dataset": {"path": "in.csv", "content_base64": data}},
                },
            )
            assert res.status_code == 422
            assert res.json()["reason"] == "RUN_INPUTS_MISMATCH"
            res = http.post("/v1/runs", json={})  # ad-hoc runs keep working
            assert res.status_code == 201
            assert res.json()["tasks"] == []
