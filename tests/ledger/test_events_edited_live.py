"""Events edited under a running process: the process notices and verifies the run again
before it builds on it or serves its rows (SQLite and PostgreSQL), instead of
appending to a run that no longer verifies until a restart. ``charter.stores.sqlite_edits``;
the same damage found by a new process is tests/ledger/test_ledger_trust.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from charter.artifacts.records import Producer, Trust
from charter.errors import Failure
from charter.kernel.envelope import CallStatus
from charter.runtime import open_runtime
from tests.kernel._project import runs_of, two_runs, write_runtime_project
from tests.ledger._backends import Backend, sqlite_backend

pytestmark = pytest.mark.anyio

DAMAGE = {
    "missing_middle_event": ("DELETE FROM events WHERE run_id = ? AND seq = 3", "LEDGER_GAP"),
    "event_prev_hash_edited": (
        "UPDATE events SET prev_hash = hash WHERE run_id = ? AND seq = 2",
        "LEDGER_HASH_MISMATCH",
    ),
    "event_type_edited": (
        "UPDATE events SET type = 'context_resolved' WHERE run_id = ? AND seq = 3",
        "LEDGER_HASH_MISMATCH",
    ),
}


def _refused(env: object, problem: str) -> None:
    assert getattr(env, "status", None) is CallStatus.FAILED, env
    error = getattr(env, "error", None) or {}
    assert error["reason"] == "RUN_LEDGER_INVALID", error
    assert f"({problem}" in error["message"]


@pytest.mark.parametrize("kind", sorted(DAMAGE))
async def test_a_call_after_the_edit_is_refused(
    tmp_path: Path, kind: str, backend: Backend
) -> None:
    project = write_runtime_project(tmp_path / "kv")
    url, edit = backend.url, backend.edit
    statement, problem = DAMAGE[kind]
    async with open_runtime(project, store=url) as rt:
        runs = await two_runs(rt)
        edit(statement, runs["damaged"])
        call = await rt.call(runs["damaged_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        _refused(call, problem)
        again = await rt.call(runs["damaged_ctx"], "kv.get", "c1", {"key": "k"}, as_="app")
        _refused(again, problem)
        with pytest.raises(Failure) as caught:
            await rt.resolve_context("app", "all", run_id=runs["damaged"])
        assert caught.value.reason == "RUN_LEDGER_INVALID"
        assert runs_of(project, "kv.get") == 2  # nothing dispatched in the damaged run
        other = await rt.call(runs["intact_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        assert other.status is CallStatus.SUCCEEDED, other
        assert list(rt.store.trust.invalid) == [runs["damaged"]]


async def test_a_resubmission_first_after_the_edit_is_refused(tmp_path: Path) -> None:
    # No append comes first: the read that answers the resubmission notices the edit.
    project = write_runtime_project(tmp_path / "kv")
    db = tmp_path / "store.db"
    async with open_runtime(project, store=f"sqlite:///{db}") as rt:
        runs = await two_runs(rt)
        sqlite_backend(db).edit(DAMAGE["missing_middle_event"][0], runs["damaged"])
        again = await rt.call(runs["damaged_ctx"], "kv.get", "c1", {"key": "k"}, as_="app")
        _refused(again, "LEDGER_GAP")
        assert runs_of(project, "kv.get") == 2


async def test_an_edit_that_changes_nothing_is_verified_and_the_run_goes_on(
    tmp_path: Path, backend: Backend
) -> None:
    project = write_runtime_project(tmp_path / "kv")
    url, edit = backend.url, backend.edit
    async with open_runtime(project, store=url) as rt:
        runs = await two_runs(rt)
        before = rt.store.trust.verifications
        edit("UPDATE events SET type = type WHERE run_id = ? AND seq = 3", runs["damaged"])
        env = await rt.call(runs["damaged_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        assert env.status is CallStatus.SUCCEEDED, env
        assert rt.store.trust.verifications == before + 1  # verified again, in full, once
        env = await rt.call(runs["damaged_ctx"], "kv.get", "c3", {"key": "k"}, as_="app")
        assert env.status is CallStatus.SUCCEEDED, env
        assert rt.store.trust.verifications == before + 1
        assert rt.store.trust.invalid == {}


ROWS_DELETED = {
    "calls": "DELETE FROM calls WHERE run_id = ?",
    "run_calls": "DELETE FROM run_calls WHERE run_id = ?",
    "runs": "DELETE FROM runs WHERE run_id = ?",
}


@pytest.mark.parametrize("table", sorted(ROWS_DELETED))
async def test_rows_deleted_under_another_process_are_noticed(
    tmp_path: Path, table: str, backend: Backend
) -> None:
    """A run's rows deleted outside Charter while a process that did not write them has
    verified the run (a second replica): the triggers of migration 14 (13 on PostgreSQL) note
    the run, so that process verifies it again and refuses it, instead of serving the run
    without the row or building on it (a call row gone: its resubmission dispatched again)."""
    project = write_runtime_project(tmp_path / "kv")
    url, edit = backend.url, backend.edit
    async with open_runtime(project, store=url) as writer:
        runs = await two_runs(writer)
    async with open_runtime(project, store=url) as rt:  # another process's view
        assert (await rt.run(runs["damaged"])) is not None  # verified, rows served
        edit(ROWS_DELETED[table], runs["damaged"])
        again = await rt.call(runs["damaged_ctx"], "kv.get", "c1", {"key": "k"}, as_="app")
        _refused(again, "SNAPSHOT_DIVERGENCE")
        assert runs_of(project, "kv.get") == 2  # nothing dispatched again
        other = await rt.call(runs["intact_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        assert other.status is CallStatus.SUCCEEDED, other


async def test_a_deleted_artifact_row_is_noticed_by_a_read(
    tmp_path: Path, backend: Backend
) -> None:
    """The next read of the run's rows notices the deletion (it listed no artifact), on
    PostgreSQL too: the read looks at ``ledger_edits`` in its own round trip."""
    project = write_runtime_project(tmp_path / "kv")
    url, edit = backend.url, backend.edit
    async with open_runtime(project, store=url) as writer:
        runs = await two_runs(writer)
        stored = await writer.artifacts.write_bytes(runs["damaged"], "a.txt", b"a")
        await writer.artifacts.register(
            runs["damaged"], stored, type="note", media_type="text/plain",
            producer=Producer(), trust=Trust.INTERNAL,
        )  # fmt: skip
    async with open_runtime(project, store=url) as rt:
        assert len(await rt.artifact_rows(runs["damaged"])) == 1
        edit("DELETE FROM artifacts WHERE run_id = ?", runs["damaged"])
        with pytest.raises(Failure) as caught:
            await rt.artifact_rows(runs["damaged"])
        assert caught.value.reason == "RUN_LEDGER_INVALID"
        assert "SNAPSHOT_DIVERGENCE" in str(caught.value)
