"""Hand edits of a SQLite store, each driven through every surface that meets it: the CLI
(`runs verify`, `events`, `ls`, `export`), the next append, the HTTP API and server startup.
Each answers with the ledger damage it is — its exact reason — never a traceback, a 500,
RUN_NOT_FOUND, a server that will not start, or a run silently left out."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import httpx2
import psycopg
import pytest
from fastapi import FastAPI

from charter import runtime as charter_runtime
from charter.errors import MigrationError, PermissionDenied
from charter.kernel.principals import Principal, PrincipalKind
from charter.ledger.chain import LedgerKey
from charter.ledger.events import NewEvent
from charter.ledger.trust import RunLedgerInvalid
from charter.ledger.verify import verify_run
from charter.runtime import open_runtime
from charter.server.app import create_app
from charter.server.state import ServerState
from charter.stores.factory import load_ledger_key, open_store
from charter.stores.migrations import POSTGRES
from charter.stores.sqlite import SQLiteStore
from charter.testing.clock import FakeClock
from charter.testing.scenarios import record_sample_run, run_created
from tests.ledger._tamper import KEY_HEX, edit, recorded_project, run_cli
from tests.server._harness import ThreadServer, write_served_project

HEADLESS = "DELETE FROM run_heads WHERE run_id = '{run}'"
TEXT_SEQ = "UPDATE run_heads SET seq = 'x' WHERE run_id = '{run}'"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return recorded_project(tmp_path, monkeypatch, "run-1", "run-2")


# -- a run whose head row was deleted ---------------------------------------------------


def test_headless_run_verify_says_head_mismatch(project: Path) -> None:
    edit(project, HEADLESS.format(run="run-1"))
    code, report = run_cli("runs", "verify", "run-1", "--no-artifact-files")
    assert code == 1
    assert (report["ok"], report["reason"], report["run_id"]) == (
        False,
        "LEDGER_HEAD_MISMATCH",
        "run-1",
    )
    assert "no head record" in report["message"]
    code, report = run_cli("runs", "verify", "no-such-run", "--no-artifact-files")
    assert (code, report["reason"]) == (1, "RUN_NOT_FOUND")  # a missing run stays missing


def test_headless_run_events_say_head_mismatch(project: Path) -> None:
    edit(project, HEADLESS.format(run="run-1"))
    code, answer = run_cli("runs", "events", "run-1")
    assert code == 1
    assert answer["reason"] == "LEDGER_HEAD_MISMATCH", answer
    assert "no head record" in answer["error"]


def test_headless_run_export_says_head_mismatch(project: Path, tmp_path: Path) -> None:
    edit(project, HEADLESS.format(run="run-1"))
    code, answer = run_cli("runs", "export", "run-1", str(tmp_path / "out"), "--no-artifact-files")
    assert code == 1
    assert answer["reason"] == "LEDGER_HEAD_MISMATCH", answer
    assert not (tmp_path / "out").exists()


def test_headless_run_is_listed_damaged(project: Path) -> None:
    edit(project, HEADLESS.format(run="run-1"))
    code, listed = run_cli("runs", "ls")  # the first command after the edit: nothing flagged yet
    assert code == 0
    by_id = {r["run_id"]: r for r in listed}
    assert set(by_id) == {"run-1", "run-2"}
    assert by_id["run-1"]["ledger"]["reason"] == "LEDGER_HEAD_MISMATCH"
    assert by_id["run-2"].get("ledger") is None


def test_headless_run_refuses_the_next_append(project: Path) -> None:
    edit(project, HEADLESS.format(run="run-1"))

    async def append() -> None:
        async with SQLiteStore.open(project, key=load_ledger_key(), clock=FakeClock()) as store:
            event = NewEvent(type="run_status_changed", payload={"status": "cancelled"})
            with pytest.raises(RunLedgerInvalid) as info:
                await store.append("run-1", [event])
            assert info.value.problem.reason == "LEDGER_HEAD_MISMATCH"
            assert "no head record" in info.value.problem.message

    anyio.run(append)


# -- a head row whose seq is text -------------------------------------------------------


def test_text_head_seq_on_the_cli(project: Path) -> None:
    edit(project, TEXT_SEQ.format(run="run-1"))
    code, report = run_cli("runs", "verify", "run-1", "--no-artifact-files")
    assert (code, report["reason"]) == (1, "LEDGER_HEAD_MISMATCH")
    code, answer = run_cli("runs", "events", "run-1")
    assert (code, answer["reason"]) == (1, "LEDGER_HEAD_MISMATCH")
    code, listed = run_cli("runs", "ls")
    assert code == 0
    assert {r["run_id"]: r.get("ledger") for r in listed}["run-1"]["reason"] == (
        "LEDGER_HEAD_MISMATCH"
    )


# -- an indexed column edited alone (the row's text and MAC untouched) --------------------


def test_an_edited_status_column_on_the_cli(project: Path) -> None:
    edit(project, "UPDATE runs SET status = 'running' WHERE run_id = 'run-1'")
    edit(project, "UPDATE tasks SET status = 'failed' WHERE run_id = 'run-2'")
    code, listed = run_cli("runs", "ls")  # reads the run rows: run-1's column is caught
    assert code == 0
    ledger = {r["run_id"]: r.get("ledger") for r in listed}
    assert ledger["run-1"]["reason"] == "ROW_MAC_INVALID"
    assert "runs row's status column" in ledger["run-1"]["message"]
    code, report = run_cli("runs", "verify", "run-2", "--no-artifact-files")
    assert (code, report["reason"]) == (1, "SNAPSHOT_DIVERGENCE")
    assert "a status column that disagrees" in report["message"]
    code, report = run_cli("runs", "verify", "run-1", "--no-artifact-files")
    assert (code, report["reason"]) == (1, "SNAPSHOT_DIVERGENCE")


# -- a table or column the next migration creates, made by hand -------------------------


@pytest.mark.parametrize(
    ("version", "sql", "what"),
    [
        (  # a table the next migration creates, made by hand
            13,
            "DROP TRIGGER events_updated; DROP TRIGGER events_deleted; DROP TABLE ledger_edits; "
            "CREATE TABLE ledger_edits (x);",
            "already exists",
        ),
        (12, "", "duplicate column"),  # a migration half-applied: its column is there
    ],
)
def test_a_schema_edited_ahead_of_its_migration_is_a_mismatch(
    project: Path, version: int, sql: str, what: str
) -> None:
    conn = sqlite3.connect(project, isolation_level=None)
    conn.executescript(
        f"BEGIN; {sql} DELETE FROM charter_schema WHERE version >= {version}; COMMIT;"
    )
    conn.close()
    code, answer = run_cli("runs", "ls")
    assert code == 1
    assert answer["reason"] == "STORE_SCHEMA_MISMATCH", answer
    assert f"migration {version}" in answer["error"]
    assert what in answer["error"]


# -- HTTP and server startup ------------------------------------------------------------


def _served(root: Path) -> FastAPI:
    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store="sqlite:///.charter/charter.db")

    return create_app(opener=opener, maintain_s=None)  # startup upkeep only


def test_http_and_startup_with_damaged_runs(tmp_path: Path) -> None:
    served = write_served_project(tmp_path / "served")
    root = served.root
    app_key, operator = served.keys["app"], served.keys["alice"]
    auth = {"Authorization": f"Bearer {app_key}"}
    runs: dict[str, str] = {}
    with ThreadServer(_served(root)) as live:
        http = httpx2.Client(base_url=live.url, headers=auth)
        for name in ("headless", "text_seq", "open", "ended_headless", "ended"):
            runs[name] = http.post("/v1/contexts", json={"profile": "all"}).json()["run_id"]
        for name in ("ended_headless", "ended"):
            ended = http.post(
                f"/v1/runs/{runs[name]}/cancel",
                json={"reason": "done"},
                headers={"Authorization": f"Bearer {operator}"},
            )
            assert ended.status_code == 200, ended.text
        http.close()
    db = root / ".charter" / "charter.db"
    for name in ("headless", "ended_headless"):
        edit(db, HEADLESS.format(run=runs[name]))
    edit(db, TEXT_SEQ.format(run=runs["text_seq"]))
    deploy = root / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text() + "limits:\n  session_idle_s: 0.001\n  run_metadata_retention_s: 0.001\n"
    )
    # Startup upkeep ends idle session runs and expires ended runs' metadata: the damaged
    # runs are skipped (and logged), the server starts, the intact runs get their upkeep.
    with ThreadServer(_served(root)) as live:
        http = httpx2.Client(base_url=live.url, headers={"Authorization": f"Bearer {operator}"})
        for name in ("headless", "text_seq", "ended_headless"):
            verified = http.get(f"/v1/runs/{runs[name]}/verify")
            assert verified.status_code == 200, verified.text
            assert (verified.json()["ok"], verified.json()["reason"]) == (
                False,
                "LEDGER_HEAD_MISMATCH",
            ), name
        opened = http.get(f"/v1/runs/{runs['open']}").json()
        assert opened["status"] == "completed", opened
        events = http.get(f"/v1/runs/{runs['ended']}/events").json()["events"]
        assert events[-1]["type"] == "run_metadata_expired"
        for name in ("headless", "text_seq"):
            # A damaged run's rows are not served: a problem document naming the damage (a
            # refused run: RUN_LEDGER_INVALID, as tests/console/test_refused_runs.py has it).
            shown = http.get(f"/v1/runs/{runs[name]}")
            assert shown.headers["content-type"].startswith("application/problem+json")
            assert shown.json()["reason"] in {"RUN_LEDGER_INVALID", "LEDGER_HEAD_MISMATCH"}
            assert "LEDGER_HEAD_MISMATCH" in shown.text, shown.text
        http.close()


def test_refused_run_check_takes_an_unreadable_head(project: Path) -> None:
    """The verify route's check of a run whose run row cannot be read because its ledger is
    damaged (a head row left unreadable, read without run-time trust) finds the tenant in
    its first event, as for a refused run, instead of failing the request."""

    class Runtime:
        def __init__(self, store: SQLiteStore) -> None:
            self.store = store

        async def run(self, run_id: str) -> None:
            await self.store.head(run_id)  # the head row with its seq as text: raises

        stored_tenant = charter_runtime.Runtime.stored_tenant

    async def check() -> None:
        async with SQLiteStore.open(project, key=load_ledger_key(), clock=FakeClock()) as store:
            created = run_created()
            created = NewEvent(type=created.type, payload={**created.payload, "tenant": "acme"})
            await store.append("run-t", [created])
            edit(project, TEXT_SEQ.format(run="run-t"))
            state = ServerState(runtime=Runtime(store), authenticator=None, ledger_key=None)  # type: ignore[arg-type]
            who = Principal(
                name="op", tenant="acme", kind=PrincipalKind.OPERATOR, permissions=frozenset()
            )
            await state.check_refused_run("run-t", who)  # allowed: verify answers its report
            other = Principal(
                name="op", tenant="other", kind=PrincipalKind.OPERATOR, permissions=frozenset()
            )
            with pytest.raises(PermissionDenied) as info:
                await state.check_refused_run("run-t", other)
            assert info.value.reason == "RUN_NOT_FOUND"

    anyio.run(check)


# -- the same hand edits on PostgreSQL --------------------------------------------------


def _pg(url: str, sql: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.encode())


@pytest.mark.postgres
def test_postgres_headless_run_is_listed_damaged_and_verified(pg_url: str) -> None:
    key = LedgerKey.derive_id(bytes.fromhex(KEY_HEX))

    async def record() -> None:
        async with open_store(pg_url, key=key) as store:
            await record_sample_run(store, "run-1")
            await record_sample_run(store, "run-2")

    anyio.run(record)
    _pg(pg_url, HEADLESS.format(run="run-1"))

    async def read() -> None:
        async with open_store(pg_url, key=key) as store:
            listed = {s.run["run_id"]: s for s in await store.list_runs()}
            assert set(listed) == {"run-1", "run-2"}
            problem = listed["run-1"].problem
            assert problem is not None
            assert problem.reason == "LEDGER_HEAD_MISMATCH"
            assert listed["run-2"].problem is None
            report = await verify_run(store, "run-1", key)
            assert (report.ok, report.reason) == (False, "LEDGER_HEAD_MISMATCH")

    anyio.run(read)


@pytest.mark.postgres
def test_postgres_table_made_before_its_migration_is_a_mismatch(pg_url: str) -> None:
    key = LedgerKey.derive_id(bytes.fromhex(KEY_HEX))

    async def touch() -> None:
        async with open_store(pg_url, key=key):
            pass

    anyio.run(touch)
    # the migration that creates the builds table, recorded as not applied (with the ones after)
    version = 1 + next(
        i
        for i, m in enumerate(POSTGRES)
        if any(str(s).startswith("CREATE TABLE builds") for s in m)
    )
    _pg(
        pg_url,
        "DROP TRIGGER events_edited ON events; DROP FUNCTION charter_note_event_edit(); "
        f"DROP TABLE ledger_edits; CREATE TABLE ledger_edits (x int); "
        f"DELETE FROM charter_schema WHERE version >= {version}",
    )
    with pytest.raises(MigrationError) as info:
        anyio.run(touch)
    assert info.value.reason == "STORE_SCHEMA_MISMATCH"
    assert f"migration {version}" in info.value.message
