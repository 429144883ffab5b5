"""Artifacts on a full disk (a real one: a 1 MiB tmpfs as the artifact store's root). Before,
an upload that filled the disk ended with the bare ``OSError`` text — ``error: No space left
on device`` from ``charter artifacts put``, a bare 500 over HTTP — naming neither the reason
nor the artifact. Now it is ``ARTIFACT_STORE_FULL`` with the artifact's path in ``details``
(507 over HTTP), nothing is published or registered, no staging file is left behind, and an
upload that fits still works once space is freed."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import httpx2

from charter.runtime import open_runtime
from tests.artifacts_kernel.conftest import write_files_project
from tests.cli.test_first_hour import charter
from tests.conftest import copy_demo
from tests.faults.test_full_disk import (
    _fill,
    disk,  # noqa: F401  (the 1 MiB tmpfs)
)
from tests.server._harness import spawn_serve


def _demo_with_artifacts_on(demo_template: Path, tmp_path: Path, root: Path) -> Path:
    demo = copy_demo(demo_template, tmp_path)
    with (demo / "charter.deploy.yaml").open("a") as f:
        f.write(f"artifacts:\n  store: local\n  root: {root}\n")
    return demo


def _files_under(root: Path) -> list[str]:
    return sorted(str(Path(d, n).relative_to(root)) for d, _, names in os.walk(root) for n in names)


def _run_of(demo: Path) -> str:
    made = charter("contexts", "resolve", "--profile", "reader", "--as", "app", "--json", cwd=demo)
    assert made.returncode == 0, made.stderr
    return str(json.loads(made.stdout)["run_id"])


def test_charter_artifacts_put_on_a_full_disk(
    demo_template: Path,
    tmp_path: Path,
    disk: Path,  # noqa: F811
) -> None:
    demo = _demo_with_artifacts_on(demo_template, tmp_path, disk / "art")
    run_id = _run_of(demo)
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 * 1024 * 1024))

    done = charter("artifacts", "put", run_id, str(big), "--as", "app", cwd=demo)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "Traceback" not in out
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: internal (ARTIFACT_STORE_FULL): the file system holding"), last
    assert "free some space and try again" in last
    assert _files_under(disk / "art") == []  # the staging file is gone

    listed = charter("artifacts", "ls", run_id, "--as", "app", "--json", cwd=demo)
    assert listed.returncode == 0, listed.stderr
    assert "big.bin" not in listed.stdout

    small = tmp_path / "small.bin"
    small.write_bytes(b"fits")
    fits = charter("artifacts", "put", run_id, str(small), "--as", "app", cwd=demo)
    assert fits.returncode == 0, fits.stderr
    assert _files_under(disk / "art") == [f"{run_id}/small.bin"]


def test_an_http_upload_on_a_full_disk(
    demo_template: Path,
    tmp_path: Path,
    disk: Path,  # noqa: F811
) -> None:
    demo = _demo_with_artifacts_on(demo_template, tmp_path, disk / "art")
    key = (demo / ".charter" / "secrets" / "app.key").read_text().strip()
    auth = {"Authorization": f"Bearer {key}"}
    with spawn_serve(demo, f"sqlite:///{demo / '.charter' / 'charter.db'}") as url:
        ctx = httpx2.post(f"{url}/v1/contexts", json={"profile": "reader"}, headers=auth)
        assert ctx.status_code == 201, ctx.text
        run_id = ctx.json()["run_id"]
        uploads = f"{url}/v1/runs/{run_id}/artifacts"
        answer = httpx2.post(
            uploads,
            params={"name": "big.bin"},
            content=os.urandom(3 * 1024 * 1024),
            headers=auth | {"Content-Type": "application/octet-stream"},
            timeout=60,
        )
        assert answer.status_code == 507, answer.text
        problem = answer.json()
        assert problem["reason"] == "ARTIFACT_STORE_FULL"
        assert "free some space" in problem["detail"]
        assert _files_under(disk / "art") == []

        listed = httpx2.get(uploads, headers=auth)
        assert listed.status_code == 200, listed.text
        assert listed.json() == []
        fits = httpx2.post(
            uploads,
            params={"name": "small.bin"},
            content=b"fits",
            headers=auth | {"Content-Type": "application/octet-stream"},
        )
        assert fits.status_code == 201, fits.text


def test_a_tool_writing_an_artifact_on_a_full_disk(
    tmp_path: Path,
    disk: Path,  # noqa: F811
) -> None:
    """A tool's ``ctx.artifacts.put`` that meets the full disk: the call is ``failed`` with
    ``ARTIFACT_STORE_FULL`` (the tool did not catch it), and nothing of it stays on disk."""
    project = write_files_project(tmp_path / "proj")
    with (project.root / "charter.deploy.yaml").open("a") as f:
        f.write(f"artifacts:\n  store: local\n  root: {disk / 'art'}\n")

    async def calls() -> None:
        async with open_runtime(project.root) as rt:
            ctx = await rt.resolve_context("app", "all")
            args = {"name": "a.md", "text": "fits"}
            first = await rt.call(ctx.context_id, "files.write", "c0", args, as_="app")
            assert first.ok, first.error
            _fill(disk)
            args = {"name": "r/report.md", "text": "# hi" * 1000}
            full = await rt.call(ctx.context_id, "files.write", "c1", args, as_="app")
            assert full.status.value == "failed"
            assert full.error is not None
            assert full.error["reason"] == "ARTIFACT_STORE_FULL", full.error
            assert _files_under(disk / "art") == [f"{ctx.run_id}/a.md"]

    asyncio.run(calls())


def test_cli_output_on_a_full_disk_names_the_output(
    demo_template: Path,
    tmp_path: Path,
    disk: Path,  # noqa: F811
) -> None:
    """``charter runs export`` and ``charter artifacts get`` writing to a full disk: one line
    naming the output (a failed ``write`` carries no path of its own; before, the line was
    only "error: No space left on device") and what to do, nothing left behind."""
    demo = copy_demo(demo_template, tmp_path)
    run_id = _run_of(demo)
    small = tmp_path / "small.bin"
    small.write_bytes(os.urandom(200_000))
    put = charter("artifacts", "put", run_id, str(small), "--as", "app", "--json", cwd=demo)
    assert put.returncode == 0, put.stderr
    artifact_id = json.loads(put.stdout)["artifact_id"]
    _fill(disk)
    before = sorted(p.name for p in disk.iterdir())

    export, got = disk / "export", disk / "got.bin"
    for args, out in (
        (("runs", "export", run_id, str(export)), export),
        (("artifacts", "get", run_id, artifact_id, "-o", str(got), "--as", "app"), got),
    ):
        done = charter(*args, cwd=demo)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "Traceback" not in done.stdout + done.stderr
        last = done.stderr.strip().splitlines()[-1]
        # the output as typed (a long typed value is cut to its first 64 characters)
        assert last.startswith(f"error: {str(out)[:48]}"), last
        assert last.endswith(
            ": No space left on device (the disk is full: free some space and try again)"
        ), last
        assert sorted(p.name for p in disk.iterdir()) == before
