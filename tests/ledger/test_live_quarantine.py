"""A quarantine takes effect in processes already running (charter.stores.flags): a runtime
open and serving a run, or a ``charter serve`` process, refuses the run quarantined by
``charter runs quarantine`` in another process (or by another runtime) from its very next call
or append — no restart — and nothing is dispatched in it; a run beside it keeps working. On
SQLite and PostgreSQL; the ``charter`` commands run as real processes, on this tree's code."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx2
import psycopg
import pytest

import charter
from charter.client import Client
from charter.ledger.events import NewEvent, format_at
from charter.ledger.trust import RunLedgerInvalid
from charter.runtime import Runtime, open_runtime
from charter.stores import migrations
from charter.stores.flags import UPSERT_QUARANTINE, quarantine_row
from tests.kernel._project import runs_of
from tests.ledger._backends import Backend, postgres_backend
from tests.ledger._damage import assert_refused, intact_run_works, seed
from tests.server._harness import spawn_serve, write_served_project
from tests.stores.conftest import create_database, drop_database

pytestmark = pytest.mark.anyio

SOURCE = Path(charter.__file__).resolve().parents[1]
"""The tree under test: ``charter`` subprocesses run its code, not an installed copy's."""


@pytest.fixture(autouse=True)
def _this_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(SOURCE))


def _quarantine_elsewhere(project: Path, store: str, run_id: str) -> None:
    """``charter runs quarantine RUN`` in a process of its own, as an operator runs it."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "charter", "runs", "quarantine", run_id),
            *("--reason", "incident 42", "--by", "alice"),
            *("--project", str(project), "--store", store, "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(SOURCE)},
        check=False,
    )
    assert done.returncode == 0, done.stderr


async def _serving(project: Path, rt: Runtime, runs: dict[str, str]) -> None:
    """The live runtime has verified and served both runs (their state is in its memory)."""
    for name in ("damaged", "intact"):
        env = await rt.call(runs[f"{name}_ctx"], "kv.get", "c1", {"key": "k"}, as_="app")
        assert env.ok, env
        assert env.metrics.cached
    assert rt.store.trust.verified(runs["damaged"]) is not None


async def test_a_live_runtime_refuses_a_run_quarantined_by_another_process(
    project: Path, backend: Backend
) -> None:
    runs = await seed(project, backend)
    async with open_runtime(project, store=backend.url) as rt:
        await _serving(project, rt, runs)
        _quarantine_elsewhere(project, backend.url, runs["damaged"])
        before = runs_of(project, "kv.get")
        env = await rt.call(runs["damaged_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        assert_refused(env, "QUARANTINED")
        assert "is quarantined" in env.error["message"]
        assert "incident 42" in env.error["message"]
        assert runs_of(project, "kv.get") == before  # nothing dispatched in the run
        await intact_run_works(rt, runs, project)


async def test_a_live_append_is_refused_as_soon_as_another_process_quarantines(
    project: Path, backend: Backend
) -> None:
    """The write path checks too: an append straight to the store (no read before it)."""
    runs = await seed(project, backend)
    done = [NewEvent(type="run_status_changed", payload={"status": "completed"})]
    async with open_runtime(project, store=backend.url) as rt:
        await _serving(project, rt, runs)
        _quarantine_elsewhere(project, backend.url, runs["damaged"])
        with pytest.raises(RunLedgerInvalid) as refused:
            await rt.store.append(runs["damaged"], done)
        assert (refused.value.problem.reason, refused.value.problem.quarantined) == (
            "QUARANTINED",
            True,
        )
        await rt.store.append(runs["intact"], done)  # the run beside it is not refused
    [(status,)] = backend.sql("SELECT status FROM runs WHERE run_id = ?", runs["damaged"])
    assert status != "completed"


async def test_a_quarantine_by_one_runtime_holds_in_another_open_one(
    project: Path, backend: Backend
) -> None:
    """Two runtimes open on one store (two replicas): one quarantines, the other refuses the
    run at its next call — the note that tells it cannot be deleted or changed before it
    reads it; a mark forged by hand under it is refused as tampering."""
    runs = await seed(project, backend)
    async with (
        open_runtime(project, store=backend.url) as first,
        open_runtime(project, store=backend.url) as second,
    ):
        await _serving(project, second, runs)
        await first.store.quarantine(runs["damaged"], by="alice", reason="incident 42")
        for statement in (
            "DELETE FROM ledger_edits WHERE op = ?",
            "UPDATE ledger_edits SET op = 'update' WHERE op = ?",
            "UPDATE ledger_edits SET row_key = 'elsewhere' WHERE op = ?",
        ):
            with pytest.raises(Exception, match="keeps the note of a quarantine"):
                backend.sql(statement, migrations.MARKED)
        env = await second.call(runs["damaged_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        assert_refused(env, "QUARANTINED")
        backend.sql(
            "INSERT INTO run_ledger_flags (run_id, reason, message, found_at, quarantined_at, "
            "quarantined_by) VALUES (?, 'QUARANTINED', 'x', 't', 't', 'mallory')",
            runs["intact"],
        )
        env = await second.call(runs["intact_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        assert_refused(env, "ROW_MAC_INVALID")
        assert "mallory" not in env.error["message"]


@pytest.mark.postgres
@pytest.mark.parametrize("opened", ["before", "while it commits"])
async def test_a_quarantine_committed_after_a_later_note_is_not_passed_over(
    project: Path, opened: str
) -> None:
    """PostgreSQL gives ``ledger_edits`` ids at insert, and transactions commit in any order:
    a live runtime that read a later note first (or opened while the quarantine was
    committing) still reads the quarantine's note once it commits
    (:mod:`charter.stores.postgres_edits`)."""
    name = create_database()
    try:
        backend = postgres_backend(f"postgresql://postgres@127.0.0.1:5432/{name}")
        runs = await seed(project, backend)
        async with contextlib.AsyncExitStack() as stack:
            rt = await stack.enter_async_context(open_runtime(project, store=backend.url))
            await _serving(project, rt, runs)
            held = stack.enter_context(psycopg.connect(backend.url))  # left open: in flight
            values, _ = quarantine_row(
                rt.store.key,
                runs["damaged"],
                None,
                by="alice",
                reason="incident 42",
                now=format_at(datetime.now(UTC)),
            )
            held.execute(UPSERT_QUARANTINE.format(p="%s").encode(), values)
            backend.sql("INSERT INTO ledger_edits (run_id, op) VALUES ('elsewhere', 'x')")
            if opened != "before":
                rt = await stack.enter_async_context(open_runtime(project, store=backend.url))
            env = await rt.call(runs["intact_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
            assert env.ok, env  # the live runtime read the later note
            held.commit()
            before = runs_of(project, "kv.get")
            env = await rt.call(runs["damaged_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
            assert_refused(env, "QUARANTINED")
            assert runs_of(project, "kv.get") == before
    finally:
        drop_database(name)


def test_charter_serve_refuses_a_run_quarantined_while_it_serves(tmp_path: Path) -> None:
    """``charter serve`` (a real process) keeps serving; ``charter runs quarantine`` in
    another process; the next call in that run over HTTP is refused and its tool never runs,
    and ``/readyz`` counts the run quarantined."""
    served = write_served_project(tmp_path / "served")
    root = served.root
    store = f"sqlite:///{root / '.charter' / 'charter.db'}"
    headers = {"Authorization": f"Bearer {served.keys['app']}"}
    with spawn_serve(root, store) as url, httpx2.Client(base_url=url, headers=headers) as http:
        client = Client(url, served.keys["app"])
        try:
            contexts = [client.resolve_context("all") for _ in range(2)]
        finally:
            client.close()

        def call(context: dict[str, str], call_id: str) -> dict[str, object]:
            answer = http.post(
                f"/v1/contexts/{context['context_id']}/calls",
                json={"tool": "kv.get", "call_id": call_id, "arguments": {"key": "k"}},
            )
            got: dict[str, object] = answer.json()
            return got

        for context in contexts:
            assert call(context, "c1")["status"] == "succeeded"
        damaged, intact = contexts
        _quarantine_elsewhere(root, store, damaged["run_id"])
        before = runs_of(root, "kv.get")
        answer = call(damaged, "c2")
        problem = answer.get("error") or answer
        assert isinstance(problem, dict)
        assert problem.get("reason") == "RUN_LEDGER_INVALID", answer
        assert "is quarantined (QUARANTINED" in problem["message"]
        assert runs_of(root, "kv.get") == before  # the tool did not run
        assert call(intact, "c2")["status"] == "succeeded"
        assert runs_of(root, "kv.get") == before + 1
        [ledger] = [c for c in http.get("/readyz").json()["checks"] if c["name"] == "ledger"]
        assert ledger["quarantined_runs"] == 1
