"""Per-run artifact usage as running totals: files and bytes, updated with each publication.

A store checks its per-run quotas (:data:`DEFAULT_QUOTA_FILES` files, the byte quota) against
:class:`RunUsage` instead of walking the run's files or listing its keys on every write: the
totals of a run are computed once, the first time this store object touches the run (one walk
or one listing), and from then on updated by every publication, accepted staging area and
rollback — so the cost of a write does not grow with the number of artifacts in the run.

What the totals count: published files (staging areas and writes in progress are not counted
until they are published). They are kept per store object (per process), and a run's totals are
measured again when they are older than :data:`REFRESH_S` (one walk or listing a minute per run
being written, whatever the number of writes): what another process or replica published into
the same run is seen within that time. Concurrent writers in one process each check the totals
as they stand, so together they can pass the byte quota by at most what they have in flight.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from charter.artifacts import failures

DEFAULT_QUOTA_FILES = 10_000
"""Files per run, by default."""

REFRESH_S = 60.0
"""A run's totals are measured again when they are older than this (seconds)."""

MAX_TRACKED_RUNS = 4096
"""Runs whose totals are kept; the least recently used run is forgotten (and recomputed)."""


@dataclass(frozen=True, slots=True)
class Totals:
    files: int
    bytes: int


class RunUsage:
    """Running totals per run, with the quotas checked against them (thread-safe)."""

    def __init__(
        self,
        *,
        quota_bytes: int | None,
        quota_files: int | None,
        measure: Callable[[str], Totals],
        max_runs: int = MAX_TRACKED_RUNS,
        refresh_s: float = REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quota_bytes = quota_bytes
        self.quota_files = quota_files
        self._measure = measure
        self._max_runs = max_runs
        self._refresh_s = refresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._runs: OrderedDict[str, Totals] = OrderedDict()
        self._measured: dict[str, float] = {}

    @property
    def enabled(self) -> bool:
        return self.quota_bytes is not None or self.quota_files is not None

    def totals(self, run_id: str) -> Totals:
        """The run's totals: measured once (a walk or a listing), then kept up to date."""
        with self._lock:
            found = self._runs.get(run_id)
            fresh = self._clock() - self._measured.get(run_id, 0.0) < self._refresh_s
            if found is not None and fresh:
                self._runs.move_to_end(run_id)
                return found
        measured = self._measure(run_id)  # outside the lock: it does I/O
        with self._lock:
            self._runs[run_id] = measured
            self._measured[run_id] = self._clock()
            self._runs.move_to_end(run_id)
            while len(self._runs) > self._max_runs:
                old, _ = self._runs.popitem(last=False)
                self._measured.pop(old, None)
            return measured

    def check_bytes(self, run_id: str, used: int, pending: int) -> None:
        """Refuse when ``used`` (the totals when the write began) + ``pending`` is over quota."""
        if self.quota_bytes is not None and used + pending > self.quota_bytes:
            raise failures.quota(self.quota_bytes, run_id=run_id)

    def check_add(self, run_id: str, files: int, size: int) -> None:
        """Refuse publishing ``files`` more files of ``size`` bytes in all (``ResourceLimit``)."""
        if not self.enabled:
            return
        now = self.totals(run_id)
        if self.quota_files is not None and now.files + files > self.quota_files:
            raise failures.quota_files(self.quota_files, run_id=run_id)
        if self.quota_bytes is not None and now.bytes + size > self.quota_bytes:
            raise failures.quota(self.quota_bytes, run_id=run_id)

    def add(self, run_id: str, files: int, size: int) -> None:
        """Count published (positive) or removed (negative) files."""
        if not self.enabled:
            return
        with self._lock:
            found = self._runs.get(run_id)
            if found is None:
                return  # not tracked: the next measurement sees the change
            self._runs[run_id] = Totals(
                files=max(0, found.files + files), bytes=max(0, found.bytes + size)
            )
