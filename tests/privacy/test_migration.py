"""Migrating an existing database: call rows written before argument shapes kept the redacted
argument values; opening the store rewrites them to their shapes (SQLite migration 9,
PostgreSQL 8), and the run still verifies — the projection builds the same shape from the
old event."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from charter.contracts.canonical import canonical_text
from charter.ledger.verify import verify_run
from charter.runtime import ledger_key_for, open_runtime
from charter.stores import migrations
from tests.privacy._project import Canaries, write_privacy_project
from tests.stores.conftest import create_database, drop_database

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


def _make_legacy(url: str, plain: str) -> None:
    """Put the old row back (the summary with the value) and the schema one version back."""
    old = {"query": plain}
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite://")) as conn:
            (data,) = conn.execute("SELECT data FROM calls").fetchone()
            row = json.loads(data)
            conn.execute("UPDATE calls SET data = ?", (canonical_text({**row, "summary": old}),))
            shapes = len(migrations.SQLITE) - 10  # then leases, delegation, edits, row edits,
            # ids, history MACs, quarantine marks, live quarantines, builds, the parent index
            conn.execute(f"DELETE FROM {migrations.SCHEMA_TABLE} WHERE version >= ?", (shapes,))
            for name in (
                "unmarked", "mark_cleared", "mark_replaced", "mark_overwritten", "marked",
                "remarked",
            ):  # fmt: skip
                conn.execute(f"DROP TRIGGER run_ledger_flags_{name}")
            conn.execute("ALTER TABLE run_ledger_flags DROP COLUMN quarantine_mac")
            for table in migrations.ROW_TABLES:
                conn.execute(f"DROP TRIGGER {table}_row_deleted")
                conn.execute(f"DROP TRIGGER IF EXISTS {table}_key_changed")
            conn.execute("ALTER TABLE conversations DROP COLUMN history_mac")
            conn.execute("DROP TABLE builds")
            conn.execute("DROP TABLE leases")
            conn.execute("DROP INDEX calls_by_parent")
            conn.execute("ALTER TABLE calls DROP COLUMN parent_span_id")
            conn.execute("DROP TRIGGER events_updated")
            conn.execute("DROP TRIGGER events_deleted")
            conn.execute("DROP TABLE ledger_edits")
        return
    with psycopg.connect(url, autocommit=True) as conn:
        got = conn.execute("SELECT data FROM calls").fetchone()
        assert got is not None
        row = json.loads(got[0])
        conn.execute("UPDATE calls SET data = %s", (canonical_text({**row, "summary": old}),))
        shapes = len(migrations.POSTGRES) - 10  # then leases … live quarantines, builds, parents
        conn.execute(f"DELETE FROM {migrations.SCHEMA_TABLE} WHERE version >= %s", (shapes,))
        conn.execute("DROP TRIGGER run_ledger_flags_marked ON run_ledger_flags")
        conn.execute("DROP FUNCTION charter_note_quarantine()")
        conn.execute("DROP TRIGGER run_ledger_flags_unmarked ON run_ledger_flags")
        conn.execute("DROP TRIGGER run_ledger_flags_truncated ON run_ledger_flags")
        conn.execute("DROP FUNCTION charter_note_unquarantine()")
        conn.execute("ALTER TABLE run_ledger_flags DROP COLUMN quarantine_mac")
        for table in migrations.ROW_TABLES:
            conn.execute(f"DROP TRIGGER {table}_row_deleted ON {table}".encode())
            conn.execute(f"DROP TRIGGER IF EXISTS {table}_key_changed ON {table}".encode())
        conn.execute("DROP FUNCTION charter_note_row_gone()")
        conn.execute("DROP FUNCTION charter_note_row_delete()")
        conn.execute("ALTER TABLE conversations DROP COLUMN history_mac")
        conn.execute("DROP TABLE builds")
        conn.execute("DROP TABLE leases")
        conn.execute("DROP INDEX calls_by_parent")
        conn.execute("ALTER TABLE calls DROP COLUMN parent_span_id")
        conn.execute("DROP TRIGGER events_edited ON events")
        conn.execute("DROP FUNCTION charter_note_event_edit()")
        conn.execute("DROP TABLE ledger_edits")
        conn.execute("DROP FUNCTION charter_keep_unquarantine()")
        conn.execute("DROP FUNCTION charter_keep_quarantine()")


async def test_old_call_rows_are_rewritten_to_their_shapes(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    canaries = Canaries.fresh()
    project = write_privacy_project(tmp_path / "p", canaries)
    monkeypatch.setenv("PRIVACY_UPSTREAM", canaries.dep)
    plain = canaries.plain
    async with open_runtime(project.root, store=store) as rt:
        ctx = await rt.resolve_context("app", "all")
        out = await rt.call(ctx.context_id, "notes.search", "s1", {"query": plain}, as_="app")
        assert out.ok
        row = (await rt.get_call(ctx.context_id, "s1", as_="app")).to_dict()
    shape = row["summary"]
    assert shape["fields"] == {"/query": f"string:{len(plain)}"}
    _make_legacy(store, plain)  # what an older Charter left: the value in the call row
    async with open_runtime(project.root, store=store) as rt:
        migrated = (await rt.get_call(ctx.context_id, "s1", as_="app")).to_dict()
        report = await verify_run(rt.store, ctx.run_id, ledger_key_for(project.root, None))
    assert migrated["summary"] == shape
    assert plain not in json.dumps(migrated)
    assert report.ok, report.to_dict()
