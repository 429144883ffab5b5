"""A store on a full disk (a real one: a 1 MiB tmpfs, filled), opened by the real ``charter``
executable. Before, the one-line error said only ``STORE_ERROR`` … "disk I/O error" (SQLite
cannot grow the ``-shm`` index of an existing database) or "database or disk is full": now
``STORE_FAILED`` / ``STORE_DISK_FULL`` with the file and what to check, on a call and at
``charter serve`` start — exit 1, never a traceback, the database left as it was."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_first_hour import CHARTER, charter
from tests.conftest import copy_demo


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (the tests run as root, as in CI's container), unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def _fill(mount: Path) -> None:
    with (mount / "filler").open("wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
        try:
            while True:
                f.write(b"\0")
        except OSError:
            pass


def _call(demo: Path, store: str, call_id: str) -> subprocess.CompletedProcess[str]:
    return charter(
        "call", "notes.search", "--args", '{"query": "x"}', "--call-id", call_id,
        "--profile", "reader", "--as", "app", "--store", store, cwd=demo,
    )  # fmt: skip


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_an_existing_store_on_a_full_disk(demo_template: Path, tmp_path: Path, disk: Path) -> None:
    demo = copy_demo(demo_template, tmp_path)
    db = disk / "charter.db"
    store = f"sqlite:///{db}"
    made = _call(demo, store, "c1")
    assert made.returncode == 0, made.stderr
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    _fill(disk)

    last = _one_line(_call(demo, store, "c2"))
    assert last.startswith("error: internal (STORE_FAILED): sqlite: cannot open the database"), last
    assert str(db) in last
    assert "the disk holding it is full or failing: check its free space" in last

    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    served = subprocess.run(
        [CHARTER, "serve", "--port", "0", "--store", store],
        cwd=demo, capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    last = _one_line(served)
    assert last.startswith("error: internal (STORE_FAILED)"), last
    assert str(db) in last
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_a_new_store_on_a_full_disk(demo_template: Path, tmp_path: Path, disk: Path) -> None:
    demo = copy_demo(demo_template, tmp_path)
    _fill(disk)
    db = disk / "new.db"
    last = _one_line(_call(demo, f"sqlite:///{db}", "c1"))
    assert last.startswith("error: internal (STORE_DISK_FULL): sqlite: cannot open the"), last
    assert str(db) in last
    assert "the disk is full: free some space and try again" in last


def test_a_refused_new_store_leaves_no_file_and_a_retry_starts_afresh(
    demo_template: Path, tmp_path: Path, disk: Path
) -> None:
    """Before, the refused open left ``new.db`` behind (created empty, with its ``-wal`` and
    ``-shm`` when SQLite got that far): a half-made database the next open took as an
    existing one. Now the files this open created are removed, and only those."""
    demo = copy_demo(demo_template, tmp_path)
    kept = disk / "kept.db"
    kept.write_bytes(b"")  # an (empty) file that was there before is not this open's
    _fill(disk)
    store = f"sqlite:///{disk / 'new.db'}"
    for db in (disk / "new.db", kept):
        last = _one_line(_call(demo, f"sqlite:///{db}", "c1"))
        assert "(STORE_DISK_FULL)" in last, last
    assert sorted(p.name for p in disk.iterdir()) == ["filler", "kept.db"]
    assert kept.read_bytes() == b""

    (disk / "filler").unlink()  # space freed: the retry opens a fresh database
    done = _call(demo, store, "c1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (disk / "new.db").stat().st_size > 0
