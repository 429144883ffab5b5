"""Running totals of a run's artifacts: measured once, kept up to date, measured again when old."""

from __future__ import annotations

from pathlib import Path

import pytest

from charter.artifacts.local import LocalArtifactStore
from charter.artifacts.usage import RunUsage, Totals
from charter.deploy.deployment import load_deployment
from charter.errors import Failure
from charter.runtime import artifact_store


class Disk:
    """What a walk or listing would find, and how often it was asked."""

    def __init__(self) -> None:
        self.found = Totals(files=0, bytes=0)
        self.measured = 0

    def measure(self, run_id: str) -> Totals:
        self.measured += 1
        return self.found


def test_totals_are_measured_once_then_updated_then_refreshed() -> None:
    disk, now = Disk(), [1000.0]
    usage = RunUsage(
        quota_bytes=100, quota_files=3, measure=disk.measure, refresh_s=60, clock=lambda: now[0]
    )
    disk.found = Totals(files=1, bytes=10)
    assert usage.totals("r") == Totals(files=1, bytes=10)
    usage.add("r", 1, 20)
    usage.check_add("r", 1, 70)  # 3 files, 100 bytes: at the limits, allowed
    with pytest.raises(Failure) as info:
        usage.check_add("r", 1, 71)
    assert info.value.reason == "ARTIFACT_QUOTA_EXCEEDED"
    usage.add("r", 1, 1)
    with pytest.raises(Failure) as info:
        usage.check_add("r", 1, 0)
    assert info.value.reason == "ARTIFACT_QUOTA_FILES_EXCEEDED"
    assert disk.measured == 1
    disk.found = Totals(files=0, bytes=0)  # another process removed everything
    now[0] += 61
    usage.check_add("r", 3, 100)
    assert disk.measured == 2


def test_the_table_of_runs_is_bounded() -> None:
    disk = Disk()
    usage = RunUsage(quota_bytes=None, quota_files=10, measure=disk.measure, max_runs=2)
    for run in ("a", "b", "c", "a"):
        usage.totals(run)
    assert disk.measured == 4  # "a" was forgotten when "c" came, and measured again


def test_the_deployment_s_quotas_reach_the_local_store(tmp_path: Path) -> None:
    deploy = tmp_path / "charter.deploy.yaml"
    deploy.write_text("artifacts:\n  quota_files: 2\n  quota_bytes: 100\n")
    store = artifact_store(load_deployment(deploy, project_dir=tmp_path), tmp_path)
    assert isinstance(store, LocalArtifactStore)
    store.put("run-q", "a.txt", b"a")
    store.put("run-q", "b.txt", b"b")
    with pytest.raises(Failure) as info:
        store.put("run-q", "c.txt", b"c")
    assert info.value.reason == "ARTIFACT_QUOTA_FILES_EXCEEDED"
    with pytest.raises(Failure) as info:
        store.put("run-q2", "big.bin", b"x" * 101)
    assert info.value.reason == "ARTIFACT_QUOTA_EXCEEDED"
