"""The store's working tables (``builds``, ``leases``) edited by hand in a SQLite file, which
stores any value in any column. Before, ``UPDATE builds SET activation = 'x'`` made every
``charter serve`` fail to start with "internal error (ValueError)", and a lease row with a
pid that is no integer did the same to the reconciliation that reads it; now the row is
refused naming the table, the row and the column (``STORE_ROW_INVALID``), in one line."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from charter.errors import StoreError
from charter.ledger.chain import LedgerKey
from charter.stores.sqlite import SQLiteStore
from tests.cli.test_first_hour import CHARTER, charter
from tests.conftest import copy_demo

KEY = LedgerKey("k1", b"k" * 32)


def _edit(db: Path, sql: str, *params: object) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute(sql, params)
    finally:
        conn.close()


def test_charter_serve_names_an_edited_build_row(demo_template: Path, tmp_path: Path) -> None:
    demo = copy_demo(demo_template, tmp_path)
    made = charter(
        "call", "notes.search", "--args", '{"query": "x"}', "--call-id", "c1",
        "--profile", "reader", "--as", "app", "--json", cwd=demo,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    db = demo / ".charter" / "charter.db"
    _edit(db, "INSERT INTO builds VALUES ('sha256:edited', 't0', 't0', 'x')")
    served = subprocess.run(
        [CHARTER, "serve", "--port", "0"],
        cwd=demo,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert served.returncode == 1, served.stderr
    assert "Traceback" not in served.stdout + served.stderr
    last = served.stderr.strip().splitlines()[-1]
    assert last.startswith("error: internal (STORE_ROW_INVALID): the builds row"), last
    assert "'sha256:edited' holds activation = 'x', not an integer" in last


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("UPDATE builds SET activated_at = x'41'", "holds activated_at = b'A', not text"),
        ("UPDATE builds SET activation = x'00'", "holds activation = b'\\x00', not an integer"),
    ],
)
async def test_an_edited_build_record_is_refused(tmp_path: Path, sql: str, said: str) -> None:
    db = tmp_path / "store.db"
    async with SQLiteStore.open(db, key=KEY) as store:
        await store.activate_build("sha256:b1", "t0")
        _edit(db, sql)
        with pytest.raises(StoreError) as raised:
            await store.current_build()
        assert raised.value.reason == "STORE_ROW_INVALID"
        assert f"the builds row 'sha256:b1' {said}" in str(raised.value)


@pytest.mark.anyio
async def test_an_edited_lease_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    async with SQLiteStore.open(db, key=KEY) as store:
        _edit(db, "INSERT INTO leases VALUES ('owner-1', 'h', 'x', 't0', 't0', 't9')")
        with pytest.raises(StoreError) as raised:
            await store.read_leases(["owner-1"])
        assert raised.value.reason == "STORE_ROW_INVALID"
        assert "the leases row 'owner-1' holds pid = 'x', not an integer" in str(raised.value)
