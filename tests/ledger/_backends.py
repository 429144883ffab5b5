"""The store under test and the attacker's own connection to it: SQL run directly on the
database, outside Charter, the way someone with write access edits it. Each ledger-trust test
runs on SQLite and PostgreSQL through the ``backend`` fixture (tests/ledger/conftest.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

Rows = list[tuple[Any, ...]]
Run = Callable[[str, tuple[Any, ...]], tuple[Rows, int]]


class Backend:
    """A store URL and a way to run SQL on it directly (the attacker's access)."""

    def __init__(self, url: str, run: Run, placeholder: str) -> None:
        self.url = url
        self._run = run
        self.p = placeholder

    def sql(self, statement: str, *params: Any) -> Rows:
        """Run one statement (``?`` placeholders) and return its rows."""
        return self._run(statement.replace("?", self.p), params)[0]

    def edit(self, statement: str, *params: Any) -> None:
        """Run one statement that must change at least one row (an edit that misses is a
        broken test, not an attack the store resisted)."""
        changed = self._run(statement.replace("?", self.p), params)[1]
        assert changed >= 1, statement


def sqlite_backend(path: Path) -> Backend:
    def run(statement: str, params: tuple[Any, ...]) -> tuple[Rows, int]:
        conn = sqlite3.connect(path, isolation_level=None)  # another connection: the attacker's
        try:
            cur = conn.execute(statement, params)
            return list(cur.fetchall()), cur.rowcount
        finally:
            conn.close()

    return Backend(f"sqlite:////{path.resolve()}".replace("/////", "////"), run, "?")


def postgres_backend(url: str) -> Backend:
    def run(statement: str, params: tuple[Any, ...]) -> tuple[Rows, int]:
        with psycopg.connect(url, autocommit=True) as conn:
            cur = conn.execute(statement.encode(), params)
            return (list(cur.fetchall()) if cur.description else []), cur.rowcount

    return Backend(url, run, "%s")
