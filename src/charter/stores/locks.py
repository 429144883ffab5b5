"""Per-run write locks that hold across processes: write tools of one run never overlap.

* :class:`LocalRunLocks` — one ``asyncio.Lock`` per run (one process; the memory store).
* :class:`FileRunLocks` — ``flock`` on a lock file per run beside a SQLite database, taken in
  a worker thread after the in-process lock (so one process queues its own callers without
  tying up threads). The kernel holds it for the dispatch only; the OS releases it if the
  process dies.
* PostgreSQL takes a session advisory lock on a pooled connection
  (:meth:`charter.stores.postgres.PostgresStore.run_lock`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio


class LocalRunLocks:
    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def _lock(self, run_id: str) -> asyncio.Lock:
        lock = self._locks.get(run_id)
        if lock is None:
            lock = self._locks[run_id] = asyncio.Lock()
        return lock

    @contextlib.asynccontextmanager
    async def hold(self, run_id: str) -> AsyncIterator[None]:
        async with self._lock(run_id):
            yield


class FileRunLocks(LocalRunLocks):
    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory

    def _path(self, run_id: str) -> Path:
        name = hashlib.sha256(run_id.encode()).hexdigest()[:32]
        return self.directory / f"{name}.lock"

    @contextlib.asynccontextmanager
    async def hold(self, run_id: str) -> AsyncIterator[None]:
        async with self._lock(run_id):
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._path(run_id), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                await anyio.to_thread.run_sync(fcntl.flock, fd, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
