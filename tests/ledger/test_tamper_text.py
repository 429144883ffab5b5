"""Hand edits that put text of the wrong kind in a SQLite ledger: bytes that are not UTF-8 in a
TEXT column (SQLite stores any bytes as TEXT) and a MAC with non-ASCII characters. Each is
reported as the ledger damage it is, through the CLI and over HTTP — never as a store error
or a traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.console.conftest import console_app
from tests.ledger._tamper import edit, recorded_project, run_cli
from tests.server._harness import ThreadServer, write_served_project

NOT_UTF8 = "CAST(x'ff41' AS TEXT)"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return recorded_project(tmp_path, monkeypatch, "run-1")


def _edit(db: Path, sql: str) -> None:
    assert edit(db, sql) == 1


def _verify() -> dict[str, Any]:
    code, report = run_cli("runs", "verify", "run-1", "--no-artifact-files")
    assert code == 1
    return report


@pytest.mark.parametrize("column", ["type", "at", "prev_hash", "hash"])
def test_event_text_that_is_not_utf8_is_a_hash_mismatch(project: Path, column: str) -> None:
    _edit(project, f"UPDATE events SET {column} = {NOT_UTF8} WHERE seq = 3")
    report = _verify()
    assert (report["ok"], report["reason"], report["seq"]) == (False, "LEDGER_HASH_MISMATCH", 3)
    code, shown = run_cli("runs", "show", "run-1")
    assert code == 1
    assert "LEDGER_HASH_MISMATCH at event 3" in str(shown["error"])
    code, listed = run_cli("runs", "ls")
    assert code == 0
    assert listed[0]["ledger"]["reason"] == "LEDGER_HASH_MISMATCH"


def test_head_hash_that_is_not_utf8_is_a_head_mismatch(project: Path) -> None:
    _edit(project, f"UPDATE run_heads SET hash = {NOT_UTF8}")
    assert _verify()["reason"] == "LEDGER_HEAD_MISMATCH"


def test_run_row_that_is_not_utf8_is_named(project: Path) -> None:
    _edit(project, f"UPDATE runs SET data = {NOT_UTF8}")
    assert _verify()["reason"] == "SNAPSHOT_DIVERGENCE"
    code, listed = run_cli("runs", "ls")
    assert code == 0
    assert listed[0]["ledger"]["reason"] == "ROW_MAC_INVALID"


@pytest.mark.parametrize("mac", ["'hmac-sha256:é'", NOT_UTF8, "5"])
def test_a_head_mac_that_is_not_ascii_fails_the_mac(project: Path, mac: str) -> None:
    _edit(project, f"UPDATE run_heads SET mac = {mac}")
    assert _verify()["reason"] == "LEDGER_MAC_INVALID"
    code, shown = run_cli("runs", "show", "run-1")
    assert code == 1
    assert "LEDGER_MAC_INVALID" in str(shown["error"])


def test_a_row_mac_that_is_not_ascii_fails_the_row(project: Path) -> None:
    _edit(project, "UPDATE runs SET row_mac = 'hmac-sha256:é'")
    code, shown = run_cli("runs", "show", "run-1")
    assert code == 1
    assert "ROW_MAC_INVALID" in str(shown["error"])
    code, listed = run_cli("runs", "ls")
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
