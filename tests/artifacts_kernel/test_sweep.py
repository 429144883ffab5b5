"""Sweep on start (issue 16): a writer killed with SIGKILL in the middle of an artifact write
leaves its temporary file (and a subprocess staging area) in the run's ``.staging/``; the
next runtime to open removes them, logs what it removed, keeps a living writer's file and
every registered artifact, and the run's quota usage is back to what is registered."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from charter.artifacts.local import LocalArtifactStore
from charter.artifacts.records import Producer, Trust
from charter.runtime import open_runtime
from tests.kernel._project import write_runtime_project

pytestmark = pytest.mark.anyio

WRITER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from charter.artifacts.local import LocalArtifactStore

    root, run_id = sys.argv[1], sys.argv[2]
    store = LocalArtifactStore(root)
    writer = store.open_write(run_id, "big.bin")
    for _ in range(12):
        writer.write(b"x" * (1 << 18))  # 3 MiB, flushed to the temporary file as it goes
    area = store.open_staging(run_id, "c9", 0)
    Path(area.location, "out.txt").write_bytes(b"y" * 4096)
    print(json.dumps({"ready": True}), flush=True)
    time.sleep(120)  # killed long before
    """
)


def _staged(root: Path, run_id: str) -> list[str]:
    staging = root / run_id / ".staging"
    return sorted(p.name for p in staging.iterdir()) if staging.exists() else []


async def test_kill_9_during_an_artifact_write_leaves_nothing_after_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = write_runtime_project(tmp_path / "kv")
    store = f"sqlite:///{tmp_path / 'charter.db'}"
    root = project / ".charter" / "artifacts"
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
    local = LocalArtifactStore(root)
    registered = local.usage(run_id)
    assert registered == 1000

    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), run_id],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline()) == {"ready": True}
        left = _staged(root, run_id)
        assert len(left) == 2  # the temporary file and the staging area
        assert local.usage(run_id) >= registered + 3 * (1 << 20)
        live = local.open_write(run_id, "live.bin")  # a writer that is alive: kept
        live.write(b"z" * (1 << 18))
        live._flush()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL

    caplog.set_level(logging.WARNING, logger="charter.artifacts.sweep")
    async with open_runtime(project, store=store) as rt:
        remaining = _staged(root, run_id)
        assert len(remaining) == 1  # only the living writer's temporary file
        assert remaining[0] not in left
        live.abort()
        assert _staged(root, run_id) == []
        assert local.usage(run_id) == registered  # the quota counts what is registered
        assert (await rt.artifacts.verify(run_id, record.artifact_id)).sha256 == kept.sha256
        assert await rt.artifacts.read_bytes(run_id, record.artifact_id) == b"k" * 1000
    logged = [r.getMessage() for r in caplog.records if r.name == "charter.artifacts.sweep"]
    assert len(logged) == 2
    assert all("left by a writer that died" in m for m in logged)
    assert any(m.startswith(f"removed {run_id}/.staging/w-") for m in logged)
