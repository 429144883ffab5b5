"""Indexed columns edited by hand. A projection row's MAC covers its text and its key; the
columns queries filter on (a call's tenant and state, an approval's status) are copies of the
text's values, outside it. A copy edited by hand must not move a row into another tenant's or
another state's listing: the row is not served, its run is refused as for an edited row
(``ROW_MAC_INVALID``, naming the column), and ``runs verify`` reports the column
(``SNAPSHOT_DIVERGENCE``). SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from charter.errors import Failure
from charter.kernel.envelope import CallStatus
from charter.runtime import ledger_key_for, open_runtime
from tests.kernel._project import two_runs, write_runtime_project
from tests.ledger._backends import Backend

pytestmark = pytest.mark.anyio


async def test_a_call_moved_to_another_tenant_is_not_listed_there(
    tmp_path: Path, backend: Backend
) -> None:
    project = write_runtime_project(tmp_path / "kv")
    url, edit = backend.url, backend.edit
    async with open_runtime(project, store=url) as rt:
        runs = await two_runs(rt)
    edit("UPDATE calls SET tenant = 'evil' WHERE run_id = ?", runs["damaged"])
    async with open_runtime(project, store=url) as rt:  # a new process: nothing verified yet
        assert await rt.calls(tenant="evil") == []
        assert [c.run_id for c in await rt.calls(tenant="acme")] == [runs["intact"]]
        with pytest.raises(Failure) as caught:
            await rt.get_call(runs["damaged_ctx"], "c1", as_="app")
        assert caught.value.reason == "RUN_LEDGER_INVALID"
        assert "(ROW_MAC_INVALID" in caught.value.message
        assert "calls row's tenant column" in caught.value.message
        env = await rt.call(runs["intact_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        assert env.status is CallStatus.SUCCEEDED, env  # the neighbour goes on


async def test_a_call_state_edited_under_a_live_process_is_not_believed(
    tmp_path: Path, backend: Backend
) -> None:
    """The same process that wrote the rows: a listing by state reads the edited column, and
    the row's text says otherwise."""
    project = write_runtime_project(tmp_path / "kv")
    url, edit = backend.url, backend.edit
    async with open_runtime(project, store=url) as rt:
        runs = await two_runs(rt)
        edit("UPDATE calls SET state = 'unknown' WHERE run_id = ?", runs["damaged"])
        assert await rt.calls(tenant=None, state="unknown") == []  # left out: refused
        assert len(await rt.calls(tenant="acme", state="succeeded")) == 1
        env = await rt.call(runs["damaged_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        assert env.status is CallStatus.FAILED, env
        assert env.error is not None
        assert env.error["reason"] == "RUN_LEDGER_INVALID"
        assert "state column" in env.error["message"]


@pytest.mark.parametrize(
    ("statement", "column"),
    [
        ("UPDATE calls SET state = 'failed' WHERE run_id = ?", "state"),
        ("UPDATE calls SET tenant = 'evil' WHERE run_id = ?", "tenant"),
        ("UPDATE runs SET tenant = 'evil' WHERE run_id = ?", "tenant"),
        ("UPDATE contexts SET principal = 'mallory' WHERE run_id = ?", "principal"),
    ],
)
async def test_verify_reports_an_edited_column(
    tmp_path: Path, backend: Backend, statement: str, column: str
) -> None:
    project = write_runtime_project(tmp_path / "kv")
    url, edit = backend.url, backend.edit
    async with open_runtime(project, store=url) as rt:
        runs = await two_runs(rt)
    edit(statement, runs["damaged"])
    async with open_runtime(project, store=url) as rt:
        report = await rt.verify(runs["damaged"], ledger_key_for(project))
        assert not report.ok
        assert report.reason == "SNAPSHOT_DIVERGENCE", report
        assert f"a {column} column that disagrees" in report.message
        assert (await rt.verify(runs["intact"], ledger_key_for(project))).ok


@pytest.mark.parametrize(
    ("statement", "column"),
    [
        ("UPDATE calls SET tenant = 'evil' WHERE run_id = ? AND call_id = 'slow'", "tenant"),
        ("UPDATE calls SET tool_id = 'kv.put' WHERE run_id = ? AND call_id = 'slow'", "tool_id"),
    ],
)
async def test_a_column_edited_while_its_call_runs_is_caught_before_its_outcome(
    tmp_path: Path, backend: Backend, statement: str, column: str
) -> None:
    """A call's tool and tenant never change after its intent, so its outcome's commit does
    not write those columns again (charter.ledger.rows.TableSpec.fixed). A copy edited while
    the call runs is still caught: the outcome is not recorded over it (the call answers
    UNKNOWN, its run refused), the column stays as edited, and verification names it."""
    project = write_runtime_project(tmp_path / "kv")
    async with open_runtime(project, store=backend.url) as rt:
        runs = await two_runs(rt)
        run_id = runs["damaged"]
        args = {"seconds": 1.5}
        slow = asyncio.create_task(rt.call(runs["damaged_ctx"], "kv.slow", "slow", args, as_="app"))
        query = "SELECT state FROM calls WHERE run_id = ? AND call_id = 'slow'"
        for _ in range(200):
            if backend.sql(query, run_id) == [("dispatching",)]:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the slow call never started")
        backend.edit(statement, run_id)
        done = await slow  # its outcome comes after the edit
        assert done.status is CallStatus.UNKNOWN, done
        assert done.error is not None
        assert done.error["reason"] == "RUN_LEDGER_INVALID"
        assert f"calls row's {column} column" in done.error["message"]
    async with open_runtime(project, store=backend.url) as rt:
        report = await rt.verify(run_id, ledger_key_for(project))
        assert not report.ok
        assert report.reason == "SNAPSHOT_DIVERGENCE", report
        assert f"a {column} column that disagrees" in report.message
        with pytest.raises(Failure) as caught:
            await rt.get_call(runs["damaged_ctx"], "slow", as_="app")
        assert caught.value.reason == "RUN_LEDGER_INVALID"
        assert f"calls row's {column} column" in caught.value.message
