"""Two runs seeded in the store, the damage an attacker with write access does to one of
them, and the checks that it is refused while the run beside it keeps working (the ledger-trust
tests: test_ledger_trust.py, test_export_as_found.py, the quarantine tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from charter.kernel.envelope import CallStatus
from charter.runtime import Runtime, open_runtime
from tests.kernel._project import runs_of, two_runs
from tests.ledger._backends import Backend


async def seed(project: Path, backend: Backend) -> dict[str, str]:
    """Two runs, each with a context and one finished call ``c1``."""
    async with open_runtime(project, store=backend.url) as rt:
        return await two_runs(rt)


def first_call(backend: Backend, run_id: str) -> tuple[Any, ...]:
    [row] = backend.sql(
        "SELECT run_id, context_id, call_id, state, tool_id, tenant, updated_seq, data, "
        "row_seq, row_mac FROM calls WHERE run_id = ?",
        run_id,
    )
    return row


def damage(kind: str, backend: Backend, runs: dict[str, str]) -> None:
    run, other = runs["damaged"], runs["intact"]
    sql = backend.sql
    if kind == "missing_middle_event":
        sql("DELETE FROM events WHERE run_id = ? AND seq = 3", run)
    elif kind == "all_events_deleted":
        sql("DELETE FROM events WHERE run_id = ?", run)
    elif kind == "head_moved":
        sql("UPDATE run_heads SET seq = seq + 1 WHERE run_id = ?", run)
    elif kind == "row_edited":
        sql(
            "UPDATE calls SET state = 'failed', "
            'data = replace(data, \'"state":"succeeded"\', \'"state":"failed"\') '
            "WHERE run_id = ?",
            run,
        )
    elif kind == "row_inserted":
        row = list(first_call(backend, run))
        row[2] = "c9"  # another call id, the same (now wrong) MAC
        row[7] = row[7].replace('"call_id":"c1"', '"call_id":"c9"')
        sql(
            "INSERT INTO calls (run_id, context_id, call_id, state, tool_id, tenant, "
            "updated_seq, data, row_seq, row_mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            *row,
        )
    elif kind == "event_from_another_run":
        [(prev, digest, data)] = sql(
            "SELECT prev_hash, hash, data FROM events WHERE run_id = ? AND seq = 5", other
        )
        sql(
            "UPDATE events SET prev_hash = ?, hash = ?, data = ? WHERE run_id = ? AND seq = 5",
            prev,
            digest,
            data,
            run,
        )
    else:  # pragma: no cover - a typo in the parametrization
        raise AssertionError(kind)


EXPECTED = {
    "missing_middle_event": "LEDGER_GAP",
    "all_events_deleted": "LEDGER_HEAD_MISMATCH",
    "head_moved": "LEDGER_HEAD_MISMATCH",
    "row_edited": "SNAPSHOT_DIVERGENCE",
    "row_inserted": "SNAPSHOT_DIVERGENCE",
    "event_from_another_run": "LEDGER_HASH_MISMATCH",
}


def assert_refused(env: Any, problem: str) -> None:
    assert env.status is CallStatus.FAILED, env
    assert env.error["code"] == "internal"
    assert env.error["reason"] == "RUN_LEDGER_INVALID"
    assert f"({problem}" in env.error["message"]  # the first problem, named


async def intact_run_works(rt: Runtime, runs: dict[str, str], project: Path) -> None:
    before = runs_of(project, "kv.get")
    found = await rt.get_context(runs["intact_ctx"])
    assert found is not None
    assert found.run_id == runs["intact"]
    ctx = await rt.resolve_context("app", "all", run_id=runs["intact"])
    env = await rt.call(ctx.context_id, "kv.get", "c2", {"key": "k"}, as_="app")
    assert env.status is CallStatus.SUCCEEDED, env
    again = await rt.call(runs["intact_ctx"], "kv.get", "c1", {"key": "k"}, as_="app")
    assert again.status is CallStatus.SUCCEEDED
    assert again.metrics.cached
    assert runs_of(project, "kv.get") == before + 1
