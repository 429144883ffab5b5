"""Hand edits that put text of the wrong kind in a SQLite ledger: bytes that are not UTF-8 in a
TEXT column (SQLite stores any bytes as TEXT) and a MAC with non-ASCII characters. Each is
reported as the ledger damage it is, through the CLI and over HTTP — never as a store error
or a traceback."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from typer.testing import CliRunner

from charter.cli.app import app
from charter.stores.factory import load_ledger_key
from charter.stores.sqlite import SQLiteStore
from charter.testing.clock import FakeClock
from charter.testing.scenarios import record_sample_run
from tests.console.conftest import console_app
from tests.server._harness import ThreadServer, write_served_project

KEY_HEX = "11" * 32
NOT_UTF8 = "CAST(x'ff41' AS TEXT)"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CHARTER_LEDGER_KEY", KEY_HEX)
    monkeypatch.delenv("CHARTER_STORE", raising=False)
    db = tmp_path / ".charter" / "charter.db"

    async def record() -> None:
        async with SQLiteStore.open(db, key=load_ledger_key(), clock=FakeClock()) as store:
            await record_sample_run(store, "run-1")

    anyio.run(record)
    return db


def _edit(db: Path, sql: str) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        assert conn.execute(sql).rowcount == 1
    finally:
        conn.close()


def _run(*args: str) -> tuple[int, Any]:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), args
    text = result.stdout.strip()
    return result.exit_code, json.loads(text) if text.startswith(("{", "[")) else text


def _verify() -> dict[str, Any]:
    code, report = _run("runs", "verify", "run-1", "--no-artifact-files")
    assert code == 1
    return report


@pytest.mark.parametrize("column", ["type", "at", "prev_hash", "hash"])
def test_event_text_that_is_not_utf8_is_a_hash_mismatch(project: Path, column: str) -> None:
    _edit(project, f"UPDATE events SET {column} = {NOT_UTF8} WHERE seq = 3")
    report = _verify()
    assert (report["ok"], report["reason"], report["seq"]) == (False, "LEDGER_HASH_MISMATCH", 3)
    code, shown = _run("runs", "show", "run-1")
    assert code == 1
    assert "LEDGER_HASH_MISMATCH at event 3" in str(shown["error"])
    code, listed = _run("runs", "ls")
    assert code == 0
    assert listed[0]["ledger"]["reason"] == "LEDGER_HASH_MISMATCH"


def test_head_hash_that_is_not_utf8_is_a_head_mismatch(project: Path) -> None:
    _edit(project, f"UPDATE run_heads SET hash = {NOT_UTF8}")
    assert _verify()["reason"] == "LEDGER_HEAD_MISMATCH"


def test_run_row_that_is_not_utf8_is_named(project: Path) -> None:
    _edit(project, f"UPDATE runs SET data = {NOT_UTF8}")
    assert _verify()["reason"] == "SNAPSHOT_DIVERGENCE"
    code, listed = _run("runs", "ls")
    assert code == 0
    assert listed[0]["ledger"]["reason"] == "ROW_MAC_INVALID"


@pytest.mark.parametrize("mac", ["'hmac-sha256:é'", NOT_UTF8, "5"])
def test_a_head_mac_that_is_not_ascii_fails_the_mac(project: Path, mac: str) -> None:
    _edit(project, f"UPDATE run_heads SET mac = {mac}")
    assert _verify()["reason"] == "LEDGER_MAC_INVALID"
    code, shown = _run("runs", "show", "run-1")
    assert code == 1
    assert "LEDGER_MAC_INVALID" in str(shown["error"])


def test_a_row_mac_that_is_not_ascii_fails_the_row(project: Path) -> None:
    _edit(project, "UPDATE runs SET row_mac = 'hmac-sha256:é'")
    code, shown = _run("runs", "show", "run-1")
    assert code == 1
    assert "ROW_MAC_INVALID" in str(shown["error"])
    code, listed = _run("runs", "ls")
    assert code == 0
    assert listed[0]["ledger"]["reason"] == "ROW_MAC_INVALID"


def test_a_head_of_another_type_gets_a_verify_report(project: Path) -> None:
    # Before, `runs verify` answered with an error document instead of its report.
    _edit(project, "UPDATE run_heads SET mac = x'00ff'")
    report = _verify()
    assert (report["ok"], report["reason"], report["run_id"]) == (
        False,
        "LEDGER_HEAD_MISMATCH",
        "run-1",
    )
    assert "its mac is stored as BLOB" in str(report["message"])


def test_http_reports_text_damage_as_ledger_damage(tmp_path: Path) -> None:
    served = write_served_project(tmp_path / "served")
    root = served.root
    app_key, operator = served.keys["app"], served.keys["alice"]
    with ThreadServer(console_app(root)) as live:
        http = httpx2.Client(base_url=live.url, headers={"Authorization": f"Bearer {app_key}"})
        damaged = http.post("/v1/contexts", json={"profile": "all"}).json()
        intact = http.post("/v1/contexts", json={"profile": "all"}).json()
        http.close()
    db = root / ".charter" / "charter.db"
    _edit(
        db,
        f"UPDATE events SET type = {NOT_UTF8} WHERE seq = 2 AND run_id = '{damaged['run_id']}'",
    )
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE run_heads SET mac = 'hmac-sha256:é' WHERE run_id = ?", (intact["run_id"],))
    conn.close()
    with ThreadServer(console_app(root)) as live:
        http = httpx2.Client(base_url=live.url, headers={"Authorization": f"Bearer {app_key}"})
        for context, reason in ((damaged, "LEDGER_HASH_MISMATCH"), (intact, "LEDGER_MAC_INVALID")):
            answer = http.post(
                f"/v1/contexts/{context['context_id']}/calls",
                json={"tool": "kv.get", "call_id": "c1", "arguments": {"key": "k"}},
            )
            body = answer.json()
            problem = body.get("error") or body
            assert problem["reason"] == "RUN_LEDGER_INVALID", body
            assert reason in problem["message"]
            verified = httpx2.get(
                f"{live.url}/v1/runs/{context['run_id']}/verify",
                headers={"Authorization": f"Bearer {operator}"},
            )
            assert verified.status_code == 200, verified.text
            assert (verified.json()["ok"], verified.json()["reason"]) == (False, reason)
        http.close()
