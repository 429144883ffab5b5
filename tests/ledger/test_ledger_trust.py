"""A damaged run is never continued (issue 16): damage a run in the database the way an
attacker with write access would, open the runtime again, and every resolve, call and
resubmission in that run is refused with ``internal`` / ``RUN_LEDGER_INVALID`` naming the
first problem, while nothing is dispatched (the tools' own journal) and a run beside it keeps
working. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from charter.errors import Failure
from charter.kernel.envelope import CallStatus
from charter.ledger.chain import LedgerKey
from charter.ledger.trust import RunProblem
from charter.runtime import Runtime, open_runtime
from charter.stores.factory import open_store
from tests.kernel._project import runs_of
from tests.ledger._backends import Backend, sqlite_backend
from tests.ledger._damage import EXPECTED, assert_refused, damage, intact_run_works, seed

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("kind", sorted(EXPECTED))
async def test_damaged_run_is_refused_and_its_neighbour_works(
    kind: str, project: Path, backend: Backend
) -> None:
    runs = await seed(project, backend)
    assert runs_of(project, "kv.get") == 2
    damage(kind, backend, runs)
    problem = EXPECTED[kind]
    audit = project / "audit.jsonl"
    async with open_runtime(project, store=backend.url, audit_file=audit) as rt:
        with pytest.raises(Failure) as caught:
            await rt.resolve_context("app", "all", run_id=runs["damaged"])
        assert caught.value.reason == "RUN_LEDGER_INVALID"
        assert caught.value.details["problem"] == problem
        with pytest.raises(Failure) as caught:  # nor is one of its contexts served
            await rt.get_context(runs["damaged_ctx"])
        assert caught.value.reason == "RUN_LEDGER_INVALID"
        call = await rt.call(runs["damaged_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        assert_refused(call, problem)
        resubmitted = await rt.call(runs["damaged_ctx"], "kv.get", "c1", {"key": "k"}, as_="app")
        assert_refused(resubmitted, problem)
        assert runs_of(project, "kv.get") == 2  # nothing dispatched in the damaged run
        await intact_run_works(rt, runs, project)
        refused = rt.store.trust.invalid
        assert list(refused) == [runs["damaged"]]
        assert refused[runs["damaged"]].reason == problem
    # outside the damaged run: the audit sink and the store's run flags
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    refusals = [r for r in records if r["outcome"] == "run_refused"]
    assert [(r["run_id"], r["reason"], r["details"]["reason"]) for r in refusals] == [
        (runs["damaged"], "RUN_LEDGER_INVALID", problem)
    ]
    async with open_runtime(project, store=backend.url) as rt:
        flags = await rt.store.run_flags()
        assert [(f.run_id, f.reason, f.quarantined) for f in flags] == [
            (runs["damaged"], problem, False)
        ]
        [listed] = [s for s in await rt.store.list_runs() if s.run["run_id"] == runs["damaged"]]
        assert listed.problem is not None
        assert listed.problem.reason == problem


async def test_a_row_edited_under_a_running_process_is_never_served(
    project: Path, backend: Backend
) -> None:
    """After the first touch verified the run, each read checks the row's MAC: a call row
    edited under the running process is refused (ROW_MAC_INVALID), not served as a receipt."""
    runs = await seed(project, backend)
    async with open_runtime(project, store=backend.url) as rt:
        first = await rt.call(runs["damaged_ctx"], "kv.get", "c1", {"key": "k"}, as_="app")
        assert first.metrics.cached  # the run is verified and its receipt served
        damage("row_edited", backend, runs)
        env = await rt.call(runs["damaged_ctx"], "kv.get", "c1", {"key": "k"}, as_="app")
        assert_refused(env, "ROW_MAC_INVALID")
        with pytest.raises(Failure) as caught:
            await rt.get_call(runs["damaged_ctx"], "c1", as_="app")
        assert caught.value.reason == "RUN_LEDGER_INVALID"
        assert runs_of(project, "kv.get") == 2
        await intact_run_works(rt, runs, project)


def _edit_row(backend: Backend, table: str, run_id: str) -> None:
    """Edit a projection row in place, keeping its MAC (first brace: one more field)."""
    backend.sql(
        f"UPDATE {table} SET data = '{{\"x\":1,' || substr(data, 2) WHERE run_id = ?", run_id
    )


async def _deciding_read(rt: Runtime, table: str, runs: dict[str, str], approval: str) -> Any:
    """The read that decides something with a row of ``table``; returns what it answered."""
    run, ctx = runs["damaged"], runs["damaged_ctx"]
    if table == "runs":  # the run's tenant decides whether a context may be resolved in it
        return await rt.resolve_context("app", "all", run_id=run)
    if table == "calls":  # idempotency: a resubmission answers from the call row
        return await rt.call(ctx, "kv.get", "c1", {"key": "k"}, as_="app")
    if table == "run_calls":  # the run's call budget, read by the intent's append
        return await rt.call(ctx, "kv.get", "c3", {"key": "k"}, as_="app")
    if table == "approvals":  # deciding an approval reads its row
        return await rt.approve(approval, as_="alice")
    if table == "contexts":  # a context looked up by id (the API, another process)
        return await rt.store.query_rows("contexts", {"context_id": ctx}, limit=1)
    raise AssertionError(table)


@pytest.mark.parametrize("table", ["runs", "contexts", "calls", "run_calls", "approvals"])
async def test_each_projection_table_is_authenticated(
    table: str, project: Path, backend: Backend
) -> None:
    """A row edited in place (its MAC kept) is refused at the next read that decides
    something with it; the run is refused from then on, its neighbour keeps working."""
    runs = await seed(project, backend)
    async with open_runtime(project, store=backend.url) as rt:
        pending = await rt.call(
            runs["damaged_ctx"], "kv.put", "w1", {"key": "k", "value": "v"}, as_="app"
        )
        assert pending.status is CallStatus.PENDING_APPROVAL
        assert pending.approval is not None
        _edit_row(backend, table, runs["damaged"])
        if table in ("runs", "approvals", "contexts"):  # raised to the caller
            with pytest.raises(Failure) as caught:
                await _deciding_read(rt, table, runs, pending.approval["id"])
            assert caught.value.reason == "RUN_LEDGER_INVALID"
        else:  # answered in the call's envelope
            assert_refused(await _deciding_read(rt, table, runs, ""), "ROW_MAC_INVALID")
        problem = rt.store.trust.invalid[runs["damaged"]]
        assert problem.reason == "ROW_MAC_INVALID"
        article = "an" if table == "approvals" else "a"  # the message reads as English
        assert f"{article} {table} row does not match its MAC" in problem.message
        after = await rt.call(runs["damaged_ctx"], "kv.get", "c4", {"key": "k"}, as_="app")
        assert_refused(after, "ROW_MAC_INVALID")
        assert runs_of(project, "kv.get") == 2
        assert runs_of(project, "kv.put") == 0
        await intact_run_works(rt, runs, project)


@pytest.mark.slow
async def test_a_damaged_run_with_a_call_in_flight_does_not_stop_the_runtime(
    project: Path, tmp_path: Path
) -> None:
    """Start-up reconciliation meets a damaged run holding a call a dead process left
    ``dispatching``: the run is refused and left alone, the runtime opens."""
    from tests.kernel.test_crash import run_phases

    backend = sqlite_backend(tmp_path / "store.db")
    runs = await seed(project, backend)
    call = {
        "op": "call",
        "context": runs["damaged_ctx"],
        "tool": "kv.slow",
        "call_id": "c5",
        "args": {"seconds": 0.0},
        "as": "app",
    }
    env = {"CHARTER_FAULT": "after_intent", "CHARTER_FAULT_TOOL": "kv.slow"}
    [dying] = run_phases(project, backend.url, [{"env": env, "steps": [call]}], tmp_path / "o")
    assert dying["exit"] != 0
    damage("missing_middle_event", backend, runs)
    async with open_runtime(project, store=backend.url) as rt:
        assert rt.store.trust.invalid[runs["damaged"]].reason == "LEDGER_GAP"
        await intact_run_works(rt, runs, project)
    assert runs_of(project, "kv.slow") == 0


class _SlowSink:
    """An audit sink that takes its time (a slow disk or a remote collector)."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    async def record(self, record: Any) -> None:
        await asyncio.sleep(0.3)
        self.records.append(record)


async def test_a_refusal_found_just_before_closing_still_reaches_the_audit_sink(
    project: Path, tmp_path: Path
) -> None:
    """Closing the runtime waits for the ``run_refused`` records it started."""
    backend = sqlite_backend(tmp_path / "store.db")
    runs = await seed(project, backend)
    damage("missing_middle_event", backend, runs)
    sink = _SlowSink()
    async with open_runtime(project, store=backend.url, audit=[sink]) as rt:
        with pytest.raises(Failure):
            await rt.resolve_context("app", "all", run_id=runs["damaged"])
    assert [(r.outcome.value, r.run_id) for r in sink.records] == [("run_refused", runs["damaged"])]


_ROW_TABLES = ("runs", "contexts", "calls", "approvals", "run_calls")


def _capture(backend: Backend, run_id: str) -> dict[str, list[tuple[Any, ...]]]:
    return {t: backend.sql(f"SELECT * FROM {t} WHERE run_id = ?", run_id) for t in _ROW_TABLES}


def _put_back(backend: Backend, run_id: str, saved: dict[str, list[tuple[Any, ...]]]) -> None:
    """Put the run's rows back as they were (each still carries its valid MAC)."""
    for table, rows in saved.items():
        backend.sql(f"DELETE FROM {table} WHERE run_id = ?", run_id)
        for row in rows:
            backend.sql(f"INSERT INTO {table} VALUES ({', '.join('?' * len(row))})", *row)


async def test_rows_put_back_under_a_running_process_are_not_built_on(
    project: Path, backend: Backend
) -> None:
    """An attacker keeps the rows of an approved write, lets it run, then puts them back:
    each row still has its MAC, but the process that wrote newer ones refuses to build on
    them, so the approval is not used twice and the write does not run again."""
    runs = await seed(project, backend)
    ctx = runs["damaged_ctx"]
    async with open_runtime(project, store=backend.url) as rt:
        args = {"key": "k", "value": "v"}
        pending = await rt.call(ctx, "kv.put", "w1", args, as_="app")
        assert pending.approval is not None
        approval = pending.approval["id"]
        await rt.approve(approval, as_="alice")
        saved = _capture(backend, runs["damaged"])
        done = await rt.call(ctx, "kv.put", "w1", args, as_="app", approval_id=approval)
        assert done.status is CallStatus.SUCCEEDED, done
        assert runs_of(project, "kv.put") == 1
        # The attacker drops the triggers that note deleted rows (ledger_edits) first: the
        # process still knows the rows it wrote were newer.
        for table in _ROW_TABLES:
            on = f" ON {table}" if backend.p == "%s" else ""
            backend.sql(f"DROP TRIGGER {table}_row_deleted{on}")
        _put_back(backend, runs["damaged"], saved)
        again = await rt.call(ctx, "kv.put", "w1", args, as_="app", approval_id=approval)
        assert_refused(again, "SNAPSHOT_DIVERGENCE")
        assert "put back or deleted outside Charter" in again.error["message"]
        assert runs_of(project, "kv.put") == 1  # not twice
        await intact_run_works(rt, runs, project)


async def test_a_call_row_deleted_under_a_running_process_is_not_made_again(
    project: Path, backend: Backend
) -> None:
    """Deleting the row of a call this process made does not make its resubmission a new
    call (a row another process wrote is checked by its MAC, and by the next first touch)."""
    runs = await seed(project, backend)
    async with open_runtime(project, store=backend.url) as rt:
        first = await rt.call(runs["damaged_ctx"], "kv.get", "c7", {"key": "k"}, as_="app")
        assert first.status is CallStatus.SUCCEEDED
        assert runs_of(project, "kv.get") == 3
        backend.sql("DELETE FROM calls WHERE run_id = ? AND call_id = 'c7'", runs["damaged"])
        env = await rt.call(runs["damaged_ctx"], "kv.get", "c7", {"key": "k"}, as_="app")
        assert_refused(env, "SNAPSHOT_DIVERGENCE")
        # the deletion was noted (ledger_edits): the run was verified again and found short
        assert "the stored calls rows disagree with the events" in env.error["message"]
        assert runs_of(project, "kv.get") == 3
        await intact_run_works(rt, runs, project)


def test_a_finding_made_just_before_close_is_kept(project: Path, backend: Backend) -> None:
    """A run refused on the event loop as a command ends (``charter runs show`` of a damaged
    run: the refusal is its last read, then the loop ends) is already in run_ledger_flags
    when the store has closed: closing waits for the finding, so the next command sees it."""
    seen: list[tuple[Any, ...]] = []

    async def refuse() -> None:
        async with open_store(backend.url, key=LedgerKey("k", b"k" * 32)) as store:
            store.trust.fail(
                RunProblem(run_id="run-late", reason="LEDGER_HASH_MISMATCH", seq=3, message="x")
            )
        # no await between the close and this read: nothing may still be writing
        seen.extend(backend.sql("SELECT run_id, reason, seq FROM run_ledger_flags"))

    anyio.run(refuse)  # its own loop, as the CLI's: the loop ends with the command
    assert seen == [("run-late", "LEDGER_HASH_MISMATCH", 3)]
