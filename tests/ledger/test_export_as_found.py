"""A damaged run can be taken away as evidence (issue 16, deliver 1): ``charter runs export``
refuses a run that fails verification and says how to export it anyway; ``--as-found``
writes it exactly as stored with a manifest that says it is NOT verified and names the first
problem, and ``charter runs verify`` on that export reports the same problem. Each damage of
the run-time trust tests, on SQLite and PostgreSQL, through the real CLI; a quarantined run
too."""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from charter.cli.app import app
from charter.errors import Failure
from charter.runtime import open_runtime
from tests.ledger._backends import Backend
from tests.ledger._damage import EXPECTED, damage, seed

pytestmark = pytest.mark.anyio


async def _cli(project: Path, backend: Backend, *args: str) -> Result:
    """The real CLI, on a worker thread (it runs its own event loop)."""
    argv = ["runs", *args, "--project", str(project), "--store", backend.url, "--json"]
    return await _thread(argv)


async def _thread(argv: list[str]) -> Result:
    """``CliRunner().invoke`` on a worker thread that does not inherit this task's context
    (anyio would take the copied context for a running loop)."""
    return await asyncio.get_running_loop().run_in_executor(
        None, functools.partial(CliRunner().invoke, app, argv)
    )


def _stored_events(backend: Backend, run_id: str) -> dict[int, bytes]:
    rows = backend.sql("SELECT seq, data FROM events WHERE run_id = ? ORDER BY seq", run_id)
    return {
        int(seq): bytes(data) if not isinstance(data, str) else data.encode() for seq, data in rows
    }


def _exported_events(out: Path) -> dict[int, bytes]:
    """Each exported line's event bytes (the hash suffix removed, as the verifier does)."""
    found: dict[int, bytes] = {}
    for path in sorted((out / "events").iterdir()):
        line = path.read_bytes()
        assert line.endswith(b"\n")
        found[int(path.stem)] = line[: line.rindex(b',"hash":')] + b"}"
    return found


def _check_as_found(out: Path, run_id: str, problem: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((out / "manifest.json").read_text())
    assert doc["run_id"] == run_id
    assert doc["as_found"] is True
    assert doc["verified"] is False
    assert "NOT verified" in doc["warning"] or "FAILED verification" in doc["warning"]
    assert doc["problem"]["reason"] == problem
    assert doc["problem"]["message"]
    assert (out / "projections.json").is_file()
    return doc


@pytest.mark.parametrize("kind", sorted(EXPECTED))
async def test_a_damaged_run_is_refused_by_default_and_exported_as_found(
    kind: str, project: Path, backend: Backend, tmp_path: Path
) -> None:
    runs = await seed(project, backend)
    damage(kind, backend, runs)
    problem = EXPECTED[kind]
    run_id = runs["damaged"]

    refused = await _cli(project, backend, "export", run_id, str(tmp_path / "plain"))
    assert refused.exit_code != 0, (refused.stdout, refused.stderr, refused.exception)
    assert refused.stdout, (refused.stderr, repr(refused.exception))
    error = json.loads(refused.stdout)
    assert (error["ok"], error["reason"]) == (False, problem), error
    assert "--as-found" in error["error"]
    assert not (tmp_path / "plain").exists()

    out = tmp_path / "found"
    done = await _cli(project, backend, "export", run_id, str(out), "--as-found")
    assert done.exit_code == 0, (done.stdout, done.stderr)
    answer = json.loads(done.stdout)
    assert answer["verified"] is False
    assert answer["ok"] is False
    assert answer["reason"] == problem
    doc = _check_as_found(out, run_id, problem)
    stored = _stored_events(backend, run_id)
    assert doc["events"] == len(stored)
    assert _exported_events(out) == stored  # every stored event, its bytes as stored
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left
    assert list((project / ".charter" / "staging" / "exports").iterdir()) == []  # no record

    verified = await _cli(project, backend, "verify", str(out))
    assert verified.exit_code == 1, verified.stdout
    report = json.loads(verified.stdout)
    assert report["ok"] is False
    assert report["reason"] == problem
    assert report["seq"] == doc["problem"]["seq"]
    assert report["message"].startswith("exported as found, not verified: ")
    argv = ["runs", "verify", str(out), "--project", str(project)]
    text = await _thread(argv)
    assert text.exit_code == 1
    assert problem in text.output

    intact = tmp_path / "intact"  # the run beside it exports verified, as found or not
    beside = await _cli(project, backend, "export", runs["intact"], str(intact), "--as-found")
    assert beside.exit_code == 0, beside.stdout
    assert json.loads(beside.stdout)["verified"] is True
    assert "as_found" not in json.loads((intact / "manifest.json").read_text())
    again = await _cli(project, backend, "verify", str(intact))
    assert again.exit_code == 0, again.stdout


async def test_a_quarantined_run_is_exported_as_found(
    project: Path, backend: Backend, tmp_path: Path
) -> None:
    runs = await seed(project, backend)
    damage("missing_middle_event", backend, runs)
    run_id = runs["damaged"]
    marked = await _cli(
        project, backend, "quarantine", run_id, "--reason", "event 3 missing", "--by", "ops"
    )
    assert marked.exit_code == 0, marked.stdout
    async with open_runtime(project, store=backend.url) as rt:  # the process refuses it
        with pytest.raises(Failure) as caught:
            await rt.resolve_context("app", "all", run_id=run_id)
        assert caught.value.reason == "RUN_LEDGER_INVALID"
        assert rt.store.trust.invalid[run_id].quarantined

    out = tmp_path / "evidence"
    done = await _cli(project, backend, "export", run_id, str(out), "--as-found")
    assert done.exit_code == 0, (done.stdout, done.stderr)
    _check_as_found(out, run_id, "LEDGER_GAP")
    assert 3 not in _exported_events(out)
    report = json.loads((await _cli(project, backend, "verify", str(out))).stdout)
    assert (report["ok"], report["reason"], report["seq"]) == (False, "LEDGER_GAP", 3)


def test_export_help_explains_as_found() -> None:
    shown = CliRunner().invoke(app, ["runs", "export", "--help"])
    assert shown.exit_code == 0
    assert "--as-found" in shown.output
    assert "NOT verified" in shown.output
