"""What the hand-edit tests share: a project directory whose SQLite store holds sample runs,
an edit through another connection (the attacker's), and a CLI command's ``--json`` answer
that must never be a traceback."""

from __future__ import annotations

import json
import sqlite3
import traceback
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from charter.cli.app import app
from charter.stores.factory import load_ledger_key
from charter.stores.sqlite import SQLiteStore
from charter.testing.clock import FakeClock
from charter.testing.scenarios import record_sample_run

KEY_HEX = "11" * 32


def recorded_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *runs: str) -> Path:
    """``tmp_path`` as the current directory, its default store holding a sample run per name
    in ``runs`` (the ledger key in the environment); the store file's path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CHARTER_LEDGER_KEY", KEY_HEX)
    monkeypatch.delenv("CHARTER_STORE", raising=False)
    db = tmp_path / ".charter" / "charter.db"

    async def record() -> None:
        async with SQLiteStore.open(db, key=load_ledger_key(), clock=FakeClock()) as store:
            for run_id in runs:
                await record_sample_run(store, run_id)

    anyio.run(record)
    return db


def edit(db: Path, sql: str) -> int:
    """``sql`` run on ``db`` through another connection; the rows it changed."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        return conn.execute(sql).rowcount
    finally:
        conn.close()


def run_cli(*args: str) -> tuple[int, Any]:
    """A CLI command with ``--json``: its exit code and its document; never a traceback."""
    result = CliRunner().invoke(app, [*args, "--json"])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(
            "".join(traceback.format_exception(result.exception))
        )  # pragma: no cover - the failure shown
    assert "Traceback" not in result.output
    text = result.stdout.strip()
    return result.exit_code, json.loads(text) if text.startswith(("{", "[")) else text
