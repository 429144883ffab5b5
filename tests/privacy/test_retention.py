"""Run-metadata retention (``limits.run_metadata_retention_s``) on SQLite and PostgreSQL.

An ended run idle past the retention has its keyed fingerprints erased by the upkeep: the
rows keep no argument fingerprint, result fingerprint or idempotency key; a call naming one
of its contexts — even the identical resubmission that used to answer from its receipt — is
denied ``RUN_METADATA_EXPIRED``; replay refuses the run; ``verify`` still passes, and the
erasure is one ``run_metadata_expired`` event that says what went and why. The CLI path:
``charter call`` opens a runtime, whose upkeep expires what is due.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import charter as charter_pkg
from charter.deploy.ledger_key import ledger_key_for
from charter.errors import PermissionDenied
from charter.kernel.envelope import CallStatus
from charter.ledger.views import ApprovalRow, CallRow
from charter.proof.replay import replay_run
from charter.runtime import open_runtime
from charter.testing.clock import FakeClock
from tests.privacy._project import Canaries, PrivacyProject, write_privacy_project
from tests.stores.conftest import create_database, drop_database

pytestmark = pytest.mark.anyio
SRC = str(Path(charter_pkg.__file__).resolve().parent.parent)
DAY = 24 * 3600.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'charter.db'}"
        return
    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


def with_retention(root: Path, canaries: Canaries, retention_s: float) -> PrivacyProject:
    project = write_privacy_project(root, canaries)
    deploy = root / "charter.deploy.yaml"
    doc = json.loads(deploy.read_text())
    doc["limits"] = {"run_metadata_retention_s": retention_s}
    deploy.write_text(json.dumps(doc, indent=2))
    return project


async def test_expired_run_metadata_ends_dedup_and_replay_and_still_verifies(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = with_retention(tmp_path / "p", Canaries.fresh(), DAY)
    for key, value in project.env.items():
        monkeypatch.setenv(key, value)
    clock = FakeClock(datetime.now(UTC))
    async with open_runtime(project.root, store=store, clock=clock) as rt:
        ctx = await rt.resolve_context("app", "all")
        cid, run_id = ctx.context_id, ctx.run_id
        args = {"query": project.canaries.plain}
        assert (await rt.call(cid, "notes.search", "s1", args, as_="app")).status.value == (
            "succeeded"
        )
        private = await rt.call(cid, "svc.private", "p1", args, as_="app")
        assert private.status is CallStatus.SUCCEEDED
        write = {"config": {"host": "h"}}
        pending = await rt.call(cid, "svc.configure", "w1", write, as_="app")
        assert pending.approval is not None
        await rt.approve(pending.approval["id"], as_="alice")
        assert (await rt.call(cid, "svc.configure", "w1", write, as_="app")).status.value == (
            "succeeded"
        )
        # before the run ends, and before the retention has passed: nothing expires
        assert (await rt.operations.maintain())["run_metadata_expired"] == 0
        await rt.operations.end_run(run_id, "cancelled", reason="done", as_="alice")
        clock.advance(timedelta(hours=23))
        assert (await rt.operations.maintain())["run_metadata_expired"] == 0
        before = await rt.verify(run_id, ledger_key_for(project.root))
        assert before.ok
        assert before.notes == ()
        assert "notes" not in before.to_dict()
        again = await rt.call(cid, "notes.search", "s1", args, as_="app")
        assert again.metrics.cached  # the receipt still answers inside the retention

        clock.advance(timedelta(hours=2))
        assert (await rt.operations.maintain())["run_metadata_expired"] == 1
        assert (await rt.operations.maintain())["run_metadata_expired"] == 0  # once

        calls = await rt.store.find_views(CallRow, run_id=run_id, limit=100)
        assert {c.call_id for c in calls} >= {"s1", "p1", "w1"}
        for call in calls:
            assert call.fingerprint == ""
            assert call.row.get("idempotency_key") is None
            assert "result_fingerprint" not in (call.row.get("receipt") or {})
            assert call.row["metadata_expired_at"]
        approvals = await rt.store.find_views(ApprovalRow, run_id=run_id, limit=100)
        assert approvals
        assert all(a.fingerprint == "" for a in approvals)

        # deduplication ends: even the identical resubmission fails closed
        denied = await rt.call(cid, "notes.search", "s1", args, as_="app")
        assert denied.status is CallStatus.DENIED
        assert denied.error is not None
        assert denied.error["reason"] == "RUN_METADATA_EXPIRED"
        assert not denied.metrics.cached

        # the erasure is a ledger event that says what went and why; verify agrees
        events = await rt.events(run_id, limit=1000)
        gone = [e for e in events if e.type == "run_metadata_expired"]
        assert len(gone) == 1
        assert gone[0].payload["reason"] == "RETENTION"
        assert gone[0].payload["retention_s"] == DAY
        assert [cid, "s1"] in gone[0].payload["calls"]
        report = await rt.verify(run_id, ledger_key_for(project.root))
        assert report.ok, report
        assert len(report.notes) == 1  # said plainly: erased on purpose, not tampering
        assert "retention" in report.notes[0]
        assert report.to_dict()["notes"] == list(report.notes)

        # replay ends
        with pytest.raises(PermissionDenied) as refused:
            await replay_run(rt.store, run_id, rt.build)
        assert refused.value.reason == "RUN_METADATA_EXPIRED"


def test_the_cli_runs_the_upkeep_and_fails_closed(tmp_path: Path) -> None:
    project = with_retention(tmp_path / "p", Canaries.fresh(), 0.5)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update({**project.env, "PYTHONPATH": SRC, "NO_COLOR": "1"})

    def charter(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "charter", *args],
            cwd=project.root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    made = charter("call", "notes.search", "--profile", "all", "--as", "app",
                   "--call-id", "s1", "--args", '{"query": "x"}', "--json")  # fmt: skip
    assert made.returncode == 0, made.stderr
    first = json.loads(made.stdout)
    ended = charter("runs", "cancel", first["run_id"], "--reason", "done", "--as", "alice")
    assert ended.returncode == 0, ended.stdout + ended.stderr
    time.sleep(1.0)  # past the 0.5 s retention: the next runtime's upkeep expires the run
    again = charter("call", "notes.search", "--context", first["context_id"], "--call-id", "s1",
                    "--args", '{"query": "x"}', "--as", "app", "--json")  # fmt: skip
    assert again.returncode == 4, again.stdout + again.stderr  # denied
    assert json.loads(again.stdout)["error"]["reason"] == "RUN_METADATA_EXPIRED"
    verified = charter("runs", "verify", first["run_id"], "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["ok"] is True
    assert "retention" in json.loads(verified.stdout)["notes"][0]
    told = charter("runs", "verify", first["run_id"])
    assert told.returncode == 0, told.stdout + told.stderr
    assert "note: the run's metadata expired" in told.stdout
    assert "LEDGER" not in told.stdout + told.stderr
