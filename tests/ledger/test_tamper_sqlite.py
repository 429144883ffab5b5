"""Damage a SQLite ledger directly in the database; `charter runs verify` must say how."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from charter.cli.app import app
from charter.ledger.chain import LedgerKey
from charter.ledger.events import NewEvent, StoredEvent
from charter.ledger.rows import RowKey
from charter.ledger.trust import LedgerTrust, RunLedgerInvalid
from charter.stores.factory import load_ledger_key
from charter.stores.flags import flag_problem
from charter.stores.sqlite import SQLiteStore
from charter.testing.clock import FakeClock
from charter.testing.scenarios import SAMPLE_RUN, record_sample_run
from tests.ledger.forge import rechain

KEY_HEX = "11" * 32
N = len(SAMPLE_RUN)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CHARTER_LEDGER_KEY", KEY_HEX)
    monkeypatch.delenv("CHARTER_STORE", raising=False)
    key = load_ledger_key()

    async def record() -> None:
        async with SQLiteStore.open(
            tmp_path / ".charter" / "charter.db", key=key, clock=FakeClock()
        ) as store:
            await record_sample_run(store, "run-1")

    anyio.run(record)
    return tmp_path / ".charter" / "charter.db"


def _db(path: Path, fn: Callable[[sqlite3.Connection], object]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        fn(conn)
        conn.execute("COMMIT")
    finally:
        conn.close()


def _verify(*args: str) -> tuple[int, dict[str, object]]:
    # The sample run's artifact is fictional (no file): check the ledger only here;
    # tests/artifacts_export checks artifact files.
    result = CliRunner().invoke(app, ["runs", "verify", *args, "--no-artifact-files", "--json"])
    return result.exit_code, json.loads(result.stdout)


def _rows(conn: sqlite3.Connection) -> list[StoredEvent]:
    cur = conn.execute("SELECT seq, type, at, prev_hash, hash, data FROM events ORDER BY seq")
    return [
        StoredEvent(run_id="run-1", seq=s, type=t, at=a, prev_hash=p, hash=h, data=d)
        for s, t, a, p, h, d in cur
    ]


def _forge(
    conn: sqlite3.Connection, index: int, edit: Callable[[StoredEvent], StoredEvent]
) -> None:
    """Edit the event at ``index`` and recompute the chain from there on (no key needed)."""
    rows = _rows(conn)
    rows[index] = edit(rows[index])
    forged = rechain(rows, index)
    conn.execute("DELETE FROM events")
    conn.executemany(
        "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(r.run_id, r.seq, r.type, r.at, r.prev_hash, r.hash, r.data) for r in forged],
    )
    conn.execute("UPDATE run_heads SET hash = ?", (forged[-1].hash,))


def test_intact_ledger_verifies(project: Path) -> None:
    code, report = _verify("run-1")
    assert (code, report["ok"], report["events"]) == (0, True, N)
    text = CliRunner().invoke(app, ["runs", "verify", "run-1", "--no-artifact-files"])
    assert text.exit_code == 0
    assert "ok" in text.stdout


def test_deleted_row_is_a_gap(project: Path) -> None:
    _db(project, lambda c: c.execute("DELETE FROM events WHERE seq = 5"))
    code, report = _verify("run-1")
    assert code == 1
    assert (report["reason"], report["seq"]) == ("LEDGER_GAP", 5)


def test_edited_payload_is_a_hash_mismatch(project: Path) -> None:
    _db(
        project,
        lambda c: c.execute(
            "UPDATE events SET data = CAST(replace(CAST(data AS TEXT), 'fetch actives', "
            "'fetch ACTIVES') AS BLOB) WHERE seq = 6"
        ),
    )
    code, report = _verify("run-1")
    assert code == 1
    assert (report["reason"], report["seq"]) == ("LEDGER_HASH_MISMATCH", 6)


def test_deleting_the_last_two_events_is_a_head_mismatch(project: Path) -> None:
    _db(project, lambda c: c.execute("DELETE FROM events WHERE seq > ?", (N - 2,)))
    code, report = _verify("run-1")
    assert code == 1
    assert (report["reason"], report["seq"]) == ("LEDGER_HEAD_MISMATCH", N - 1)
    text = CliRunner().invoke(app, ["runs", "verify", "run-1"])
    assert text.exit_code == 1
    assert "LEDGER_HEAD_MISMATCH" in text.stderr


def test_swapped_rows_are_reordered(project: Path) -> None:
    def swap(c: sqlite3.Connection) -> None:
        c.execute("UPDATE events SET seq = -1 WHERE seq = 3")
        c.execute("UPDATE events SET seq = 3 WHERE seq = 4")
        c.execute("UPDATE events SET seq = 4 WHERE seq = -1")

    _db(project, swap)
    code, report = _verify("run-1")
    assert (code, report["reason"], report["seq"]) == (1, "LEDGER_SEQ_ORDER", 3)


def test_chain_recomputed_without_the_key_fails_the_mac(project: Path) -> None:
    def edit(row: StoredEvent) -> StoredEvent:
        return dataclasses.replace(row, data=row.data.replace(b"fetch actives", b"fetch ACTIVES"))

    _db(project, lambda c: _forge(c, 5, edit))
    code, report = _verify("run-1")
    assert (code, report["reason"], report["seq"]) == (1, "LEDGER_MAC_INVALID", N)


def test_future_schema_version_is_named(project: Path) -> None:
    """An event written by a newer Charter says which version it is, not "hash mismatch"."""

    def future(c: sqlite3.Connection) -> None:
        rows = _rows(c)
        rows[5] = dataclasses.replace(
            rows[5], data=rows[5].data.replace(b'"schema_version":1,', b'"schema_version":3,')
        )
        forged = rechain(rows, 5)
        c.execute("DELETE FROM events")
        c.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(r.run_id, r.seq, r.type, r.at, r.prev_hash, r.hash, r.data) for r in forged],
        )

    _db(project, future)
    code, report = _verify("run-1")
    assert (code, report["reason"], report["seq"]) == (1, "LEDGER_SCHEMA_TOO_NEW", 6)
    assert "schema_version 3" in str(report["message"])


def test_edited_projection_is_a_snapshot_divergence(project: Path) -> None:
    _db(
        project,
        lambda c: c.execute(
            "UPDATE tasks SET data = replace(data, '\"attempts\":2', '\"attempts\":1') "
            "WHERE task_id = 'report'"
        ),
    )
    code, report = _verify("run-1")
    assert (code, report["reason"]) == (1, "SNAPSHOT_DIVERGENCE")


def test_wrong_key_fails_the_mac(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHARTER_LEDGER_KEY", "22" * 32)
    code, report = _verify("run-1")
    assert (code, report["reason"]) == (1, "LEDGER_MAC_INVALID")


def test_export_then_verify_the_directory(project: Path, tmp_path: Path) -> None:
    out = tmp_path / "exported"
    result = CliRunner().invoke(
        app, ["runs", "export", "run-1", str(out), "--no-artifact-files", "--json"]
    )
    assert result.exit_code == 0, result.stdout
    assert sorted(p.name for p in (out / "events").iterdir())[0] == "00000001.jsonl"
    assert (out / "artifacts" / "index.json").exists()
    code, report = _verify(str(out))
    assert (code, report["ok"], report["events"]) == (0, True, N)
    again = CliRunner().invoke(app, ["runs", "export", "run-1", str(out)])
    assert again.exit_code == 1


def test_ls_show_events(project: Path) -> None:
    runner = CliRunner()
    ls = runner.invoke(app, ["runs", "ls", "--json"])
    assert ls.exit_code == 0
    [run] = json.loads(ls.stdout)
    assert (run["run_id"], run["status"], run["event_count"]) == ("run-1", "completed", N)
    assert "run-1" in runner.invoke(app, ["runs", "ls"]).stdout
    show = runner.invoke(app, ["runs", "show", "run-1", "--json"])
    doc = json.loads(show.stdout)
    assert doc["status"] == "completed"
    assert [t["task_id"] for t in doc["tasks"]] == ["retrieve", "report"]
    assert runner.invoke(app, ["runs", "show", "run-1"]).exit_code == 0
    events = runner.invoke(app, ["runs", "events", "run-1", "--after", str(N - 2), "--json"])
    lines = [json.loads(line) for line in events.stdout.splitlines()]
    assert [e["seq"] for e in lines] == [N - 1, N]
    # --follow on a finished run stops at its terminal status.
    follow = runner.invoke(app, ["runs", "events", "run-1", "--follow"])
    assert follow.exit_code == 0
    assert follow.stdout.strip().splitlines()[-1].split()[2] == "run_status_changed"
    missing = runner.invoke(app, ["runs", "show", "nope", "--json"])
    assert missing.exit_code == 1
    assert json.loads(missing.stdout)["reason"] == "RUN_NOT_FOUND"


def test_no_store_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["runs", "ls"])
    assert result.exit_code == 1
    assert "no Charter store" in result.stderr
    assert not (tmp_path / ".charter").exists()


@pytest.mark.parametrize(("stored_as", "sql"), [("TEXT", "CAST(data AS TEXT)"), ("INTEGER", "7")])
def test_event_bytes_stored_as_another_type_are_named(
    project: Path, stored_as: str, sql: str
) -> None:
    # SQLite keeps whatever an edit stores; the writer stores every event's bytes as a BLOB.
    _db(project, lambda c: c.execute(f"UPDATE events SET data = {sql} WHERE seq = 6"))
    code, report = _verify("run-1")
    assert (code, report["reason"], report["seq"]) == (1, "LEDGER_HASH_MISMATCH", 6)
    assert report["message"] == f"event 6's bytes are stored as {stored_as}, not as a BLOB"
    events = CliRunner().invoke(app, ["runs", "events", "run-1", "--json"])
    assert events.exit_code == 1
    assert events.exception is None or isinstance(events.exception, SystemExit)
    assert "LEDGER_HASH_MISMATCH" in events.stdout
    show = CliRunner().invoke(app, ["runs", "show", "run-1", "--json"])
    assert show.exit_code == 1
    assert show.exception is None or isinstance(show.exception, SystemExit)
    assert f"stored as {stored_as}, not as a BLOB" in json.loads(show.stdout)["error"]


def test_head_seq_stored_as_text_is_refused_everywhere(project: Path) -> None:
    # (An INTEGER column turns the text '22' back into a number; a word stays text.)
    _db(project, lambda c: c.execute("UPDATE run_heads SET seq = 'twenty-two'"))
    runner = CliRunner()
    for args in (
        ["runs", "verify", "run-1", "--no-artifact-files", "--json"],
        ["runs", "events", "run-1", "--json"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, args
        assert result.exception is None or isinstance(result.exception, SystemExit), args
        assert json.loads(result.stdout)["reason"] == "LEDGER_HEAD_MISMATCH", args
    # reading the run's rows refuses it as any damaged run, naming the damage
    show = runner.invoke(app, ["runs", "show", "run-1", "--json"])
    assert show.exit_code == 1
    assert show.exception is None or isinstance(show.exception, SystemExit)
    answer = json.loads(show.stdout)
    assert answer["reason"] == "RUN_LEDGER_INVALID"
    assert "(LEDGER_HEAD_MISMATCH)" in answer["error"]
    assert "seq is stored as TEXT" in answer["error"]
    listed = runner.invoke(app, ["runs", "ls", "--json"])
    assert listed.exit_code == 0
    [run] = json.loads(listed.stdout)
    assert (run["event_count"], run["ledger"]["reason"]) == (0, "LEDGER_HEAD_MISMATCH")
    assert "seq is stored as TEXT" in run["ledger"]["message"]

    async def append_then_other_run() -> None:
        async with SQLiteStore.open(project, key=load_ledger_key()) as store:
            # refused as any damaged run: RUN_LEDGER_INVALID naming the problem, and flagged
            # (run_ledger_flags) for /readyz, the console and other processes
            with pytest.raises(RunLedgerInvalid) as refused:
                await store.append(
                    "run-1", [NewEvent(type="run_status_changed", payload={"status": "failed"})]
                )
            assert refused.value.problem.reason == "LEDGER_HEAD_MISMATCH"
            assert "seq is stored as TEXT" in refused.value.problem.message
            flagged = {s.run["run_id"]: s.problem for s in await store.list_runs()}
            assert flagged["run-1"] is not None
            assert flagged["run-1"].reason == "LEDGER_HEAD_MISMATCH"
            await record_sample_run(store, "run-2")  # the store goes on writing other runs
            assert (await store.head("run-2")) is not None

    anyio.run(append_then_other_run)


def test_row_seq_stored_as_text_fails_the_row_not_the_command(project: Path) -> None:
    # row_seq is part of a row's MAC message, not of the events: verification passes, the row
    # is refused when it is read (before, int('x') raised out of show and ls).
    _db(project, lambda c: c.execute("UPDATE runs SET row_seq = 'x'"))
    assert _verify("run-1")[0] == 0
    runner = CliRunner()
    show = runner.invoke(app, ["runs", "show", "run-1", "--json"])
    assert show.exit_code == 1
    assert show.exception is None or isinstance(show.exception, SystemExit)
    assert "ROW_MAC_INVALID" in show.stdout
    assert "a runs row has its row_seq stored as TEXT" in show.stdout
    listed = runner.invoke(app, ["runs", "ls", "--json"])
    assert listed.exit_code == 0
    [run] = json.loads(listed.stdout)
    assert run["ledger"]["reason"] == "ROW_MAC_INVALID"


def test_a_flag_row_with_a_text_seq_is_listed() -> None:
    values = ("LEDGER_GAP", "x", "event 5 is missing", "t", None, None, None, False)
    problem = flag_problem("run-1", values, None)
    assert problem is not None
    assert (problem.reason, problem.seq, problem.quarantined) == ("LEDGER_GAP", None, False)


def test_a_row_put_back_with_a_text_seq_is_a_divergence() -> None:
    trust = LedgerTrust(LedgerKey("k", b"k" * 32))
    key = RowKey("runs", ("run-1",))
    trust.wrote({key: 7})
    trust.check_fresh(key, 7)
    trust.check_fresh(key, 9)
    with pytest.raises(RunLedgerInvalid) as refused:
        trust.check_fresh(key, "x")
    assert refused.value.problem.reason == "SNAPSHOT_DIVERGENCE"
    assert "row_seq stored as TEXT" in refused.value.problem.message


def test_a_forged_row_with_a_blob_time_is_reported(project: Path) -> None:
    # Event 7 (a task change: its handler runs) has its time column stored as the BLOB b"5"
    # (a TEXT column keeps a BLOB) and bytes that spell it as the frame check formats it; the
    # chain is recomputed (no key needed). The fast path must not treat the column as text.
    def edit(row: StoredEvent) -> StoredEvent:
        data = row.data.replace(f'"at":"{row.at}"'.encode(), b'"at":"b\'5\'"')
        return dataclasses.replace(row, data=data, at=b"5")  # type: ignore[arg-type]

    _db(project, lambda c: _forge(c, 6, edit))
    code, report = _verify("run-1")
    assert code == 1
    assert (report["reason"], report["seq"]) == ("LEDGER_MAC_INVALID", N)
