"""The executor's own durable journal: idempotency keys and seen request nonces (SQLite).

- ``executions``: one row per idempotency key. The row is inserted (``running``) *before*
  the tool runs and completed with the exact response afterwards, so a key that arrives
  twice runs the tool once: the duplicate receives the recorded response, or — while the
  first is still running, or if the process died mid-call — waits, then answers 503
  ``IN_FLIGHT`` (the client reads that as ``unknown`` for a write, which is the truth).
- ``nonces``: request nonces seen within the signature tolerance window; a nonce seen twice
  is a replay.

``synchronous=FULL`` and one transaction per write: a recorded row survives a crash. The
file may be shared by several executor processes; SQLite's primary key decides races.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS executions ("
    " idempotency_key TEXT PRIMARY KEY, call_id TEXT NOT NULL, tool_id TEXT NOT NULL,"
    " request_sha256 TEXT NOT NULL, state TEXT NOT NULL, http_status INTEGER,"
    " response BLOB, started_at REAL NOT NULL, finished_at REAL)",
    "CREATE TABLE IF NOT EXISTS nonces (nonce TEXT PRIMARY KEY, seen_at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS nonces_seen ON nonces (seen_at)",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """What :meth:`Journal.claim` found for an idempotency key."""

    state: Literal["new", "done", "running", "conflict"]
    http_status: int | None = None
    response: bytes | None = None


class Journal:
    """A small SQLite journal; every method is synchronous and thread-safe."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            str(path), check_same_thread=False, isolation_level=None, timeout=30.0
        )
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            for statement in _SCHEMA:
                self._db.execute(statement)
        self._checks = 0

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def remember_nonce(self, nonce: str, now: float, window_s: float) -> bool:
        """Record ``nonce``; ``False`` if it was already seen (a replay)."""
        with self._lock:
            self._checks += 1
            if self._checks % 256 == 0:
                self._db.execute("DELETE FROM nonces WHERE seen_at < ?", (now - 2 * window_s,))
            try:
                self._db.execute("INSERT INTO nonces (nonce, seen_at) VALUES (?, ?)", (nonce, now))
            except sqlite3.IntegrityError:
                return False
            return True

    def claim(
        self, key: str, *, call_id: str, tool_id: str, request_sha256: str, now: float
    ) -> Claim:
        """Insert ``key`` as running, or report what is already recorded under it."""
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO executions (idempotency_key, call_id, tool_id, request_sha256,"
                    " state, started_at) VALUES (?, ?, ?, ?, 'running', ?)",
                    (key, call_id, tool_id, request_sha256, now),
                )
                return Claim(state="new")
            except sqlite3.IntegrityError:
                pass
            return self._existing(key, call_id, tool_id, request_sha256)

    def lookup(self, key: str, *, call_id: str, tool_id: str, request_sha256: str) -> Claim:
        with self._lock:
            return self._existing(key, call_id, tool_id, request_sha256)

    def _existing(self, key: str, call_id: str, tool_id: str, request_sha256: str) -> Claim:
        row = self._db.execute(
            "SELECT call_id, tool_id, request_sha256, state, http_status, response"
            " FROM executions WHERE idempotency_key = ?",
            (key,),
        ).fetchone()
        if row is None:  # pragma: no cover - rows are never deleted
            return Claim(state="conflict")
        if (row[0], row[1], row[2]) != (call_id, tool_id, request_sha256):
            return Claim(state="conflict")
        if row[3] == "done":
            return Claim(state="done", http_status=int(row[4]), response=bytes(row[5]))
        return Claim(state="running")

    def finish(self, key: str, *, http_status: int, response: bytes, now: float) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE executions SET state = 'done', http_status = ?, response = ?,"
                " finished_at = ? WHERE idempotency_key = ?",
                (http_status, response, now, key),
            )

    def count(self, *, tool_id: str | None = None, state: str | None = None) -> int:
        """How many keys are recorded (for tests and operators)."""
        query = "SELECT count(*) FROM executions WHERE 1 = 1"
        params: list[str] = []
        if tool_id is not None:
            query += " AND tool_id = ?"
            params.append(tool_id)
        if state is not None:
            query += " AND state = ?"
            params.append(state)
        with self._lock:
            return int(self._db.execute(query, params).fetchone()[0])
