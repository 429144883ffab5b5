"""Acceptance rules for staging areas, shared by every store (no I/O here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from charter.artifacts import failures
from charter.artifacts.records import StagingLimits, StoredObject


class Tally:
    """Counts staged files and bytes against :class:`StagingLimits` as they are found."""

    def __init__(self, limits: StagingLimits, run_id: str) -> None:
        self.limits = limits
        self.run_id = run_id
        self.files = 0
        self.total = 0

    def add(self, path: str, size: int) -> None:
        limits = self.limits
        self.files += 1
        if self.files > limits.max_files:
            raise failures.too_large("staged file count", limits.max_files, run_id=self.run_id)
        if limits.max_file_bytes is not None and size > limits.max_file_bytes:
            raise failures.too_large(
                "staged file size", limits.max_file_bytes, path=path, run_id=self.run_id
            )
        self.total += size
        if limits.max_total_bytes is not None and self.total > limits.max_total_bytes:
            raise failures.too_large(
                "staged total size", limits.max_total_bytes, run_id=self.run_id
            )


def check_declared(
    staged: Sequence[StoredObject], expected: Mapping[str, str] | None, run_id: str
) -> None:
    """The staged files are exactly the declared ones, with the declared checksums."""
    if expected is None:
        return
    by_path = {obj.path: obj for obj in staged}
    for obj in staged:
        if obj.path not in expected:
            raise failures.undeclared(obj.path, run_id=run_id)
    for path, sha in expected.items():
        found = by_path.get(path)
        if found is None:
            raise failures.not_found(path, run_id=run_id)
        if found.sha256 != sha:
            raise failures.integrity(path, run_id=run_id)
