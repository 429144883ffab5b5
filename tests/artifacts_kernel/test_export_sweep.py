"""Sweep on start, exports (issue 16, deliver 4): ``charter runs export`` killed with SIGKILL
while it copies an artifact leaves its staging directory ``.<name>.…`` beside the target and
its record in ``.charter/staging/exports/``; the next runtime to open removes that directory,
logs it and drops the record, and leaves alone a finished export beside it, a symlink a
forged record points at, and every registered artifact."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from charter.artifacts.records import Producer, Trust
from charter.ledger.export import verify_directory
from charter.ledger.export_staging import begin, end, records_dir, sweep_exports
from charter.runtime import ledger_key_for, open_runtime
from tests.kernel._project import write_runtime_project

pytestmark = pytest.mark.anyio

# The real CLI, with the artifact source replaced by one that stalls mid-copy (the fault point).
STALLED_EXPORT = textwrap.dedent(
    """
    import json, sys, time
    import charter.cli.runs as runs
    from charter.cli.app import app

    project, store, run_id, target = sys.argv[1:5]

    def stalled(run_id, deploy, project):
        def source(path):
            yield b"k" * 500  # half the file, then wait to be killed
            print(json.dumps({"ready": True}), flush=True)
            time.sleep(120)
        return source

    runs.deployment_source = stalled
    app(["runs", "export", run_id, target, "--project", project, "--store", store])
    """
)


def _tree(root: Path) -> dict[str, str]:
    """Every file below ``root`` (not following symlinks) and its sha256."""
    out: dict[str, str] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath, name)
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


async def test_kill_9_during_an_export_leaves_no_staging_after_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = write_runtime_project(tmp_path / "kv")
    store = f"sqlite:///{tmp_path / 'charter.db'}"
    async with open_runtime(project, store=store) as rt:
        ctx = await rt.resolve_context("app", "all")
        run_id = ctx.run_id
        kept = await rt.artifacts.write_bytes(run_id, "kept.txt", b"k" * 1000)
        record = await rt.artifacts.register(
            run_id,
            kept,
            type="file",
            media_type="text/plain",
            producer=Producer(),
            trust=Trust.INTERNAL,
        )
    artifacts_before = _tree(project / ".charter" / "artifacts")
    exports = tmp_path / "exports"
    done = exports / "done"
    cli = [sys.executable, "-m", "charter", "runs", "export", run_id, str(done)]
    finished = subprocess.run(
        [*cli, "--project", str(project), "--store", store],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stderr
    done_before = _tree(done)
    assert "artifacts/files/kept.txt" in done_before

    proc = subprocess.Popen(
        [sys.executable, "-c", STALLED_EXPORT, str(project), store, run_id, str(exports / "cut")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline()) == {"ready": True}
        [staging] = [p for p in exports.iterdir() if p.name.startswith(".cut.")]
        assert (staging / "events" / "00000001.jsonl").is_file()
        [written] = list(records_dir(project).iterdir())
        assert json.loads(written.read_text())["staging"] == str(staging.resolve())
        assert json.loads(written.read_text())["pid"] == proc.pid
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert staging.is_dir()  # the dead writer's leftover
    assert not (exports / "cut").exists()

    # A forged record of a dead writer naming a staging-like symlink to the finished export.
    lure = exports / ".done.lure"
    lure.symlink_to(done, target_is_directory=True)
    st = done.stat()
    forged = records_dir(project) / "0123456789abcdef.json"
    forged.write_text(
        json.dumps(
            {
                "staging": str(lure.resolve().parent / lure.name),
                "target": str(done.resolve()),
                "dev": st.st_dev,
                "ino": st.st_ino,
                "host": socket.gethostname(),
                "pid": proc.pid,
                "start": "0",
                "at": time.time(),
            }
        )
    )

    caplog.set_level(logging.WARNING, logger="charter.ledger.export_staging")
    async with open_runtime(project, store=store) as rt:
        assert not staging.exists()  # the half-written export is gone
        assert list(records_dir(project).iterdir()) == []  # and both records
        assert lure.is_symlink()  # a symlink is never followed nor removed
        assert _tree(done) == done_before  # the finished export beside it is untouched
        assert (await rt.artifacts.verify(run_id, record.artifact_id)).sha256 == kept.sha256
        assert await rt.artifacts.read_bytes(run_id, record.artifact_id) == b"k" * 1000
    assert _tree(project / ".charter" / "artifacts") == artifacts_before
    assert verify_directory(done, ledger_key_for(project)).ok
    logged = [r.getMessage() for r in caplog.records if r.name == "charter.ledger.export_staging"]
    removed = [m for m in logged if m.startswith("removed half-written export")]
    assert len(removed) == 1, logged
    assert str(staging.resolve()) in removed[0]
    assert "left by a writer that died" in removed[0]
    assert f"pid {proc.pid}" in removed[0]
    assert any("is not the staging directory its export record names" in m for m in logged)


def test_a_living_writers_export_is_kept(tmp_path: Path) -> None:
    records = tmp_path / "records"
    target = tmp_path / "out"
    staging = tmp_path / ".out.abc123"
    staging.mkdir()
    (staging / "manifest.json").write_text("{}")
    path = begin(records, staging, target)  # this process: alive
    assert sweep_exports(records) == []
    assert staging.is_dir()
    assert path.is_file()
    end(path)
    assert list(records.iterdir()) == []
