"""An operator's quarantine (``charter runs quarantine RUN``) is a mark in ``run_ledger_flags``
that a database edit can neither lift nor forge (charter.stores.flags): a mark deleted,
cleared, moved or replaced is noted in ``ledger_edits`` (a note that cannot be deleted), and
the run stays refused as quarantined by every process — the runtime, the ``charter`` CLI (a
real subprocess), ``/readyz`` and the HTTP listing; a mark without a valid MAC (forged,
altered) is refused as ``ROW_MAC_INVALID``, never shown as an operator's quarantine. On
SQLite and PostgreSQL, the edits made from the attacker's own connection (or the sqlite3
command-line shell)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from typer.testing import CliRunner

from charter.cli.app import app
from charter.client import Client
from charter.runtime import open_runtime
from charter.stores import migrations
from tests.console._console import signed_in
from tests.console.conftest import console_app
from tests.kernel._project import runs_of
from tests.ledger._backends import Backend
from tests.ledger._damage import assert_refused, intact_run_works, seed
from tests.server._harness import ThreadServer, write_served_project

pytestmark = pytest.mark.anyio


def _charter(project: Path, backend: Backend, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``charter`` command in a process of its own (a fresh store, as an operator runs it)."""
    command = [sys.executable, "-m", "charter", "runs", *args]
    command += ["--project", str(project), "--store", backend.url, "--json"]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, env=os.environ.copy(), check=False
    )


def _listed(project: Path, backend: Backend) -> dict[str, Any]:
    done = _charter(project, backend, "ls")
    assert done.returncode == 0, done.stderr
    return {r["run_id"]: r["ledger"] for r in json.loads(done.stdout)}


async def _quarantine(project: Path, backend: Backend, run_id: str) -> None:
    async with open_runtime(project, store=backend.url) as rt:
        problem = await rt.store.quarantine(run_id, by="alice", reason="host compromised")
    assert problem.quarantined


async def _still_quarantined(project: Path, backend: Backend, runs: dict[str, str]) -> None:
    """The run is refused as quarantined by a new runtime, and the CLI says so."""
    run = runs["damaged"]
    async with open_runtime(project, store=backend.url) as rt:
        before = runs_of(project, "kv.get")
        env = await rt.call(runs["damaged_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        assert_refused(env, "QUARANTINED")
        assert "is quarantined" in env.error["message"]
        assert runs_of(project, "kv.get") == before  # nothing dispatched in the run
        [flag] = [f for f in await rt.store.run_flags() if f.run_id == run]
        assert (flag.reason, flag.quarantined) == ("QUARANTINED", True)
        await intact_run_works(rt, runs, project)
    listed = _listed(project, backend)
    assert listed[run]["quarantined"] is True
    assert listed[runs["intact"]] is None
    shown = _charter(project, backend, "show", run)
    assert shown.returncode == 1
    assert "RUN_LEDGER_INVALID" in shown.stdout + shown.stderr


async def test_a_quarantine_holds_across_restarts(project: Path, backend: Backend) -> None:
    runs = await seed(project, backend)
    quarantined = _charter(
        project, backend, "quarantine", runs["damaged"], "--reason", "audit", "--by", "alice"
    )
    assert quarantined.returncode == 0, quarantined.stderr
    for _ in range(2):
        await _still_quarantined(project, backend, runs)
    [(by, mac)] = backend.sql(
        "SELECT quarantined_by, quarantine_mac FROM run_ledger_flags WHERE run_id = ?",
        runs["damaged"],
    )
    assert by == "alice"
    assert mac.startswith("hmac-sha256:")
    assert _listed(project, backend)[runs["damaged"]]["message"] == "audit"


LIFTS = {
    "deleted": "DELETE FROM run_ledger_flags WHERE run_id = ?",
    "cleared": "UPDATE run_ledger_flags SET quarantined_at = NULL WHERE run_id = ?",
    "all cleared": "UPDATE run_ledger_flags SET quarantined_at = NULL, quarantined_by = NULL, "
    "quarantine_mac = NULL WHERE run_id = ?",
    "moved": "UPDATE run_ledger_flags SET run_id = run_id || 'x' WHERE run_id = ?",
}


@pytest.mark.parametrize("lift", sorted(LIFTS))
async def test_a_lifted_quarantine_keeps_the_run_refused(
    project: Path, backend: Backend, lift: str
) -> None:
    runs = await seed(project, backend)
    await _quarantine(project, backend, runs["damaged"])
    backend.sql(LIFTS[lift], runs["damaged"])
    assert not backend.sql(
        "SELECT 1 FROM run_ledger_flags WHERE run_id = ? AND quarantined_at IS NOT NULL",
        runs["damaged"],
    )
    await _still_quarantined(project, backend, runs)
    # the note of the lift cannot be deleted or changed in turn
    for statement in (
        "DELETE FROM ledger_edits",
        "UPDATE ledger_edits SET op = 'update'",
        "UPDATE ledger_edits SET row_key = 'elsewhere'",
    ):
        with pytest.raises(Exception, match="keeps the note of a quarantine"):
            backend.sql(statement)
    await _still_quarantined(project, backend, runs)


async def test_sqlite_replace_and_truncate_do_not_lift_a_quarantine(
    project: Path, backend: Backend
) -> None:
    """The dialects' other ways to drop a row: SQLite's REPLACE (which skips delete triggers)
    into the mark's place and over the note, PostgreSQL's TRUNCATE of either table."""
    runs = await seed(project, backend)
    await _quarantine(project, backend, runs["damaged"])
    if backend.p == "?":
        backend.sql(
            "INSERT OR REPLACE INTO run_ledger_flags (run_id, reason, message, found_at) "
            "VALUES (?, 'LEDGER_GAP', 'x', 't')",
            runs["damaged"],
        )
        [(note,)] = backend.sql(
            "SELECT id FROM ledger_edits WHERE row_key = ? AND op = ?",
            runs["damaged"],
            migrations.LIFTED,
        )
        with pytest.raises(Exception, match="keeps the note"):
            backend.sql("INSERT OR REPLACE INTO ledger_edits (id, op) VALUES (?, 'x')", note)
    else:
        backend.sql("TRUNCATE run_ledger_flags")
        with pytest.raises(Exception, match="keeps the note"):
            backend.sql("TRUNCATE ledger_edits")
    assert not backend.sql("SELECT 1 FROM run_ledger_flags WHERE quarantined_at IS NOT NULL")
    await _still_quarantined(project, backend, runs)


_FORGED = (
    "INSERT INTO run_ledger_flags (run_id, reason, seq, message, found_at, quarantined_at, "
    "quarantined_by{mac}) VALUES (?, 'QUARANTINED', NULL, 'audit', '2026-01-01T00:00:00Z', "
    "'2026-01-01T00:00:00Z', 'mallory'{value})"
)

FORGERIES = {
    "forged": lambda backend, runs: backend.sql(
        _FORGED.format(mac=", quarantine_mac", value=", ?"),
        runs["damaged"],
        "hmac-sha256:" + "0" * 64,
    ),
    "forged without a MAC": lambda backend, runs: backend.sql(
        _FORGED.format(mac="", value=""), runs["damaged"]
    ),
    "by altered": lambda backend, runs: backend.sql(
        "UPDATE run_ledger_flags SET quarantined_by = 'mallory' WHERE run_id = ?", runs["damaged"]
    ),
    "mark copied to another run": lambda backend, runs: backend.sql(
        "UPDATE run_ledger_flags SET run_id = ? WHERE run_id = ?",
        runs["damaged"],
        runs["intact"],
    ),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
async def test_a_forged_mark_is_reported_as_tampering(
    project: Path, backend: Backend, forgery: str
) -> None:
    """A mark Charter did not make (or altered) is refused as ROW_MAC_INVALID, and no surface
    shows it as an operator's quarantine."""
    runs = await seed(project, backend)
    if forgery == "by altered":
        await _quarantine(project, backend, runs["damaged"])
    elif forgery == "mark copied to another run":
        await _quarantine(project, backend, runs["intact"])
    FORGERIES[forgery](backend, runs)
    async with open_runtime(project, store=backend.url) as rt:
        env = await rt.call(runs["damaged_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        assert_refused(env, "ROW_MAC_INVALID")
        assert "its quarantine mark in run_ledger_flags" in env.error["message"]
        assert "mallory" not in env.error["message"]
        [flag] = [f for f in await rt.store.run_flags() if f.run_id == runs["damaged"]]
        assert (flag.reason, flag.quarantined) == ("ROW_MAC_INVALID", False)
    listed = _listed(project, backend)
    assert listed[runs["damaged"]]["reason"] == "ROW_MAC_INVALID"
    assert listed[runs["damaged"]]["quarantined"] is False
    if forgery == "mark copied to another run":  # moved away from it: noted, still refused
        assert listed[runs["intact"]]["quarantined"] is True


async def test_quarantining_again_replaces_a_mark_without_a_mac(
    project: Path, backend: Backend
) -> None:
    """A mark from before marks carried a MAC reads as not an operator's (the run stays
    refused); the operator quarantines the run again and the mark holds."""
    runs = await seed(project, backend)
    await _quarantine(project, backend, runs["damaged"])
    backend.sql("UPDATE run_ledger_flags SET quarantine_mac = NULL")
    assert _listed(project, backend)[runs["damaged"]]["reason"] == "ROW_MAC_INVALID"
    again = _charter(
        project, backend, "quarantine", runs["damaged"], "--reason", "again", "--by", "bob"
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["reason"] == "QUARANTINED"
    assert json.loads(again.stdout)["message"] == "again"
    assert _listed(project, backend)[runs["damaged"]]["quarantined"] is True


def test_a_deleted_mark_is_still_shown_by_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mark deleted with the sqlite3 shell (a connection of its own where the shell is not
    installed): ``/readyz`` still counts the run quarantined,
    ``GET /v1/runs`` lists it quarantined, and a call in it is refused."""
    served = write_served_project(tmp_path / "served")
    root = served.root
    headers = {"Authorization": f"Bearer {served.keys['app']}"}
    with ThreadServer(console_app(root)) as live:
        client = Client(live.url, served.keys["app"])
        context = client.resolve_context("all")
        client.close()
    monkeypatch.chdir(root)
    run_id = context["run_id"]
    marked = CliRunner().invoke(
        app, ["runs", "quarantine", run_id, "--reason", "audit", "--by", "alice"]
    )
    assert marked.exit_code == 0, marked.output
    db, delete = root / ".charter" / "charter.db", "DELETE FROM run_ledger_flags"
    shell = shutil.which("sqlite3")
    if shell is not None:  # as an attacker would do it
        subprocess.run([shell, str(db), delete], check=True, timeout=60)
    else:
        with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
            conn.execute(delete)
    with (
        ThreadServer(console_app(root)) as live,
        httpx2.Client(base_url=live.url, headers=headers) as http,
    ):
        [ledger] = [c for c in http.get("/readyz").json()["checks"] if c["name"] == "ledger"]
        assert (ledger["quarantined_runs"], ledger["reasons"]) == (1, {"QUARANTINED": 1})
        [listed] = [r for r in http.get("/v1/runs").json() if r["run_id"] == run_id]
        assert listed["ledger"]["quarantined"] is True
        page = signed_in(live.url, served.keys["alice"]).get("/console/attention").text
        assert f'data-run-id="{run_id}"' in page
        answer = http.post(
            f"/v1/contexts/{context['context_id']}/calls",
            json={"tool": "kv.get", "call_id": "c1", "arguments": {"key": "k"}},
        ).json()
    problem = answer.get("error") or answer
    assert problem["reason"] == "RUN_LEDGER_INVALID", answer
    assert "quarantined" in problem["message"]


def _before_marks(backend: Backend) -> None:
    """Back to the schema before quarantine marks carried a MAC (SQLite 16, PostgreSQL 15):
    without the migrations from then on (SQLite 17 to 19, PostgreSQL 16 to 18)."""
    if backend.p == "?":
        version = 17
        triggers = [f"run_ledger_flags_{name} " for name in _SQLITE_FLAG_TRIGGERS]
        triggers += [f"ledger_edits_unquarantine_{name} " for name in _SQLITE_EDIT_TRIGGERS]
        triggers += [f"ledger_edits_quarantine_{name} " for name in _SQLITE_EDIT_TRIGGERS]
        functions: list[str] = []
    else:
        version = 16
        triggers = [
            "run_ledger_flags_marked ON run_ledger_flags",
            "run_ledger_flags_unmarked ON run_ledger_flags",
            "run_ledger_flags_truncated ON run_ledger_flags",
            "ledger_edits_unquarantine_kept ON ledger_edits",
            "ledger_edits_unquarantine_truncated ON ledger_edits",
            "ledger_edits_quarantine_kept ON ledger_edits",
            "ledger_edits_quarantine_truncated ON ledger_edits",
        ]
        functions = [
            "charter_keep_quarantine()",
            "charter_note_quarantine()",
            "charter_note_unquarantine()",
            "charter_keep_unquarantine()",
        ]
    for trigger in triggers:
        backend.sql(f"DROP TRIGGER {trigger}")
    for function in functions:
        backend.sql(f"DROP FUNCTION {function}")
    backend.sql("ALTER TABLE run_ledger_flags DROP COLUMN quarantine_mac")
    backend.sql("DROP TABLE builds")  # (SQLite 19, PostgreSQL 18)
    backend.sql(f"DELETE FROM {migrations.SCHEMA_TABLE} WHERE version >= ?", version)


_SQLITE_FLAG_TRIGGERS = (
    "unmarked", "mark_cleared", "mark_replaced", "mark_overwritten", "marked", "remarked",
)  # fmt: skip
_SQLITE_EDIT_TRIGGERS = ("kept", "unchanged", "not_replaced")


async def test_an_existing_database_migrates_and_its_marks_are_sealed_again(
    project: Path, backend: Backend
) -> None:
    """A database quarantined before the upgrade migrates on open: its unsealed mark keeps the
    run refused (``ROW_MAC_INVALID``, not an operator's quarantine) until the run is
    quarantined again, and from then on a deletion of the mark is noted."""
    runs = await seed(project, backend)
    await _quarantine(project, backend, runs["damaged"])
    _before_marks(backend)
    async with open_runtime(project, store=backend.url) as rt:
        env = await rt.call(runs["damaged_ctx"], "kv.get", "c2", {"key": "k"}, as_="app")
        assert_refused(env, "ROW_MAC_INVALID")
        assert "carries no MAC" in env.error["message"]
    versions = backend.sql(f"SELECT max(version) FROM {migrations.SCHEMA_TABLE}")
    assert versions[0][0] == len(migrations.SQLITE if backend.p == "?" else migrations.POSTGRES)
    await _quarantine(project, backend, runs["damaged"])
    backend.sql("DELETE FROM run_ledger_flags WHERE run_id = ?", runs["damaged"])
    await _still_quarantined(project, backend, runs)
