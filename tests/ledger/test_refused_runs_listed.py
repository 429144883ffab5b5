"""Runs refused for their ledger stay visible wherever runs are listed, and never break the
list: `GET /v1/runs` and `charter runs ls` name the damage (`ledger`), a run whose run row
was deleted is listed as damaged instead of silently dropping out (SQLite and PostgreSQL),
the console's runs and audit pages answer with the damaged runs named, `charter audit
observe` reports them, and MCP `resources/list` lists the other runs while a read of the
damaged one says why, to its own tenant only."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import anyio
import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from typer.testing import CliRunner

from charter.cli.app import app
from charter.client import Client as CharterClient
from charter.ledger.chain import LedgerKey
from charter.runtime import open_runtime
from charter.stores.factory import open_store
from charter.stores.flags import ROWLESS_GATE_SQL
from charter.stores.sqlite_listing import rowless_runs
from charter.testing.scenarios import record_sample_run
from tests.console._console import signed_in
from tests.console.conftest import console_app
from tests.ledger._tamper import KEY_HEX
from tests.mcp._project import make_project
from tests.mcp.test_resources import _artifact, server
from tests.server._harness import ThreadServer, write_served_project

DAMAGE = {
    "gap": "DELETE FROM events WHERE run_id = '{run}' AND seq = 2",
    "rowless": "DELETE FROM runs WHERE run_id = '{run}'",
    "row_edited": "UPDATE runs SET status = 'failed' WHERE run_id = '{run}'",
}


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_damaged_runs_are_listed_named_on_every_surface(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = write_served_project(tmp_path / "served")
    root = project.root
    runs: dict[str, str] = {}
    with ThreadServer(console_app(root)) as live:
        client = CharterClient(live.url, project.keys["app"])
        for name in (*DAMAGE, "intact"):
            runs[name] = client.resolve_context("all")["run_id"]
        client.close()
    db = sqlite3.connect(root / ".charter" / "charter.db", isolation_level=None)
    for name, sql in DAMAGE.items():
        db.execute(sql.format(run=runs[name]))
    db.close()

    with ThreadServer(console_app(root)) as live:
        http = httpx2.Client(
            base_url=live.url, headers={"Authorization": f"Bearer {project.keys['alice']}"}
        )
        for name in DAMAGE:  # this process finds each damaged (and refuses it)
            assert http.get(f"/v1/runs/{runs[name]}").status_code == 500
        listed = http.get("/v1/runs")
        assert listed.status_code == 200, listed.text
        by_id = {r["run_id"]: r for r in listed.json()}
        assert set(by_id) == set(runs.values())  # the rowless run is not left out
        assert by_id[runs["intact"]]["ledger"] is None
        assert by_id[runs["intact"]]["status"] == "running"
        reasons = {name: by_id[runs[name]]["ledger"]["reason"] for name in DAMAGE}
        assert (reasons["gap"], reasons["rowless"]) == ("LEDGER_GAP", "SNAPSHOT_DIVERGENCE")
        assert reasons["row_edited"] in {"SNAPSHOT_DIVERGENCE", "ROW_MAC_INVALID"}
        # another tenant's list holds none of them (the rowless one by its first event)
        other = httpx2.get(
            f"{live.url}/v1/runs", headers={"Authorization": f"Bearer {project.keys['bob']}"}
        )
        assert other.status_code == 200
        assert other.json() == []
        http.close()

        console = signed_in(live.url, project.keys["alice"])
        page = console.get("/console/runs")
        assert page.status_code == 200, page.text
        for name in DAMAGE:
            assert f'data-run-id="{runs[name]}"' in page.text
        assert f"refused: {reasons['row_edited']}" in _text(page.text)
        filtered = console.get("/console/runs", params={"status": "running"})
        assert filtered.status_code == 200
        assert f'data-run-id="{runs["gap"]}"' in filtered.text
        for path in ("/console/audit", "/console/audit/observe"):
            answer = console.get(path)
            assert answer.status_code == 200, (path, answer.text)
            shown = _text(answer.text)
            assert "Not read, their ledger refused" in shown
            for name in DAMAGE:
                assert f"{runs[name]} ({reasons[name]})" in shown, (path, name)
        console.close()

    monkeypatch.chdir(root)
    cli = CliRunner().invoke(app, ["runs", "ls", "--json"])
    assert cli.exit_code == 0, cli.output
    ledgers = {r["run_id"]: r["ledger"] for r in json.loads(cli.stdout)}
    assert ledgers[runs["rowless"]]["reason"] == "SNAPSHOT_DIVERGENCE"
    assert ledgers[runs["intact"]] is None
    observed = CliRunner().invoke(app, ["audit", "observe", "--as", "alice", "--json"])
    assert observed.exit_code == 0, observed.output
    report = json.loads(observed.stdout)
    assert {r["run_id"] for r in report["runs_refused"]} == {runs[n] for n in DAMAGE}
    assert report["runs_scanned"] == 1
    table = CliRunner().invoke(app, ["audit", "observe", "--as", "alice"])
    assert table.exit_code == 0, table.output
    assert f"run {runs['gap']} not read: its ledger is refused (LEDGER_GAP)" in table.output


@pytest.mark.postgres
def test_a_rowless_run_is_listed_on_postgres(pg_url: str) -> None:
    key = LedgerKey.derive_id(bytes.fromhex(KEY_HEX))

    async def record() -> None:
        async with open_store(pg_url, key=key) as store:
            await record_sample_run(store, "pg-rowless")
            await record_sample_run(store, "pg-kept")

    anyio.run(record)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(b"DELETE FROM runs WHERE run_id = 'pg-rowless'")

    async def read() -> None:
        async with open_store(pg_url, key=key) as store:
            everyone = {s.run["run_id"]: s for s in await store.list_runs(limit=10)}
            assert set(everyone) == {"pg-rowless", "pg-kept"}
            rowless = everyone["pg-rowless"]
            assert rowless.problem is not None
            assert rowless.problem.reason == "SNAPSHOT_DIVERGENCE"
            assert "no run row" in rowless.problem.message
            assert rowless.event_count > 0
            assert everyone["pg-kept"].problem is None
            tenant = everyone["pg-kept"].run["tenant"]
            mine = await store.list_runs(limit=10, tenant=tenant)
            assert {s.run["run_id"] for s in mine} == {"pg-rowless", "pg-kept"}
            assert await store.list_runs(limit=10, tenant="no-such-tenant") == []
            assert len(await store.list_runs(limit=1)) == 1

    anyio.run(read)


@pytest.mark.slow
@pytest.mark.anyio
async def test_mcp_resources_with_a_damaged_run(tmp_path: Path) -> None:
    make_project(tmp_path)
    async with open_runtime(tmp_path) as rt:
        kept = await rt.resolve_context("app", "main")
        kept_id = await _artifact(rt, kept.run_id, "kept.txt", b"kept", "text/plain")
        damaged = await rt.resolve_context("app", "main", session_id="second")
        await _artifact(rt, damaged.run_id, "lost.txt", b"lost", "text/plain")
    db = sqlite3.connect(tmp_path / ".charter" / "charter.db", isolation_level=None)
    db.execute(DAMAGE["gap"].format(run=damaged.run_id))
    db.close()
    async with Client(server(tmp_path, "app", "main"), cache=None) as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource(f"charter://runs/{damaged.run_id}/manifest.json")
        assert "RUN_LEDGER_INVALID" in caught.value.message
        assert "LEDGER_GAP" in caught.value.message
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert f"charter://runs/{kept.run_id}/artifacts/{kept_id}" in uris
        assert not any(damaged.run_id in u for u in uris)


def test_the_rowless_scan_runs_only_when_a_run_row_may_be_missing(tmp_path: Path) -> None:
    """The anti-join over every head is gated: off for a healthy store; on when the counts
    differ, even with the triggers that note deletions dropped."""
    db = tmp_path / "store.db"
    key = LedgerKey.derive_id(bytes.fromhex(KEY_HEX))

    async def record() -> None:
        async with open_store(f"sqlite:///{db}", key=key) as store:
            await record_sample_run(store, "kept")
            await record_sample_run(store, "rowless")

    anyio.run(record)
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        assert conn.execute(ROWLESS_GATE_SQL).fetchone()[0] == 0
        conn.execute("DROP TRIGGER runs_row_deleted")
        conn.execute("DELETE FROM runs WHERE run_id = 'rowless'")
        assert conn.execute(ROWLESS_GATE_SQL).fetchone()[0] == 1
        assert [s.run["run_id"] for s in rowless_runs(conn, None, None)] == ["rowless"]
    finally:
        conn.close()
