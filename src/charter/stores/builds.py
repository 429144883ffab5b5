"""The Build record: which Builds runtimes sharing a store have run, and which is current.

A rolling deploy runs two Builds on one store at once: old replicas on Build B1 while new
ones start on B2. A context is bound to the Build it was resolved under, so a call in a B2
context that reaches a B1 replica cannot run there — but whether that replica may also retire
what the context holds (its pending approval) depends on which Build the deployment is moving
to. This record answers that: every runtime that opens governed *activates* its Build
(:func:`charter.kernel.builds.activate`), and the Build activated last is the **current**
one. One row per Build digest:
``(digest, first_seen_at, activated_at, activation)``; ``activation`` counts activations
across the store (1, 2, …), so a Build opened again after another one (a rollback, B2 → B1)
becomes current again with a higher number, while a runtime opening with the Build that is
already current changes nothing.

Not ledger events: a deployment fact shared by every run, overwritten on each activation.
Implemented by the memory, SQLite and PostgreSQL stores (``builds`` table, SQLite migration 19
/ PostgreSQL 18); a store without it answers no current Build, and the kernel then keeps
its single-Build behaviour (docs/kernel.md).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from charter.stores.working_rows import typed_row

if TYPE_CHECKING:
    from collections.abc import Callable

    from psycopg_pool import AsyncConnectionPool

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildRecord:
    digest: str
    first_seen_at: str
    activated_at: str
    activation: int


@runtime_checkable
class BuildStore(Protocol):
    async def activate_build(self, digest: str, at: str) -> BuildRecord:
        """Make ``digest`` the current Build (a no-op when it already is); its record."""
        ...

    async def current_build(self) -> BuildRecord | None:
        """The Build activated last, or None when no runtime has activated one."""
        ...


class MemoryBuilds:
    """The port in process memory (the memory store's)."""

    @property
    def _builds(self) -> dict[str, BuildRecord]:
        builds: dict[str, BuildRecord] | None = self.__dict__.get("_build_rows")
        if builds is None:
            builds = self.__dict__["_build_rows"] = {}
        return builds

    async def activate_build(self, digest: str, at: str) -> BuildRecord:
        current = await self.current_build()
        if current is not None and current.digest == digest:
            return current
        seen = self._builds.get(digest)
        record = BuildRecord(
            digest=digest,
            first_seen_at=seen.first_seen_at if seen is not None else at,
            activated_at=at,
            activation=(current.activation if current is not None else 0) + 1,
        )
        self._builds[digest] = record
        return record

    async def current_build(self) -> BuildRecord | None:
        return max(self._builds.values(), key=lambda r: r.activation, default=None)


# -- SQL shared by the SQLite and PostgreSQL implementations ------------------------------

_COLUMNS = "digest, first_seen_at, activated_at, activation"
_CURRENT = f"SELECT {_COLUMNS} FROM builds ORDER BY activation DESC LIMIT 1"


def _upsert_sql(p: str) -> str:
    return (
        f"INSERT INTO builds ({_COLUMNS}) VALUES ({p}, {p}, {p}, {p}) "
        "ON CONFLICT (digest) DO UPDATE SET activated_at = excluded.activated_at, "
        "activation = excluded.activation"
    )


_KINDS = (("digest", str), ("first_seen_at", str), ("activated_at", str), ("activation", int))
_FIX = "put the value back, or delete the row (a runtime opening with that Build records it again)"


def _as_record(row: Any) -> BuildRecord:
    digest, first_seen_at, activated_at, activation = typed_row("builds", row, _KINDS, _FIX)
    return BuildRecord(
        digest=digest,
        first_seen_at=first_seen_at,
        activated_at=activated_at,
        activation=activation,
    )


def _next(current: BuildRecord | None, digest: str, at: str) -> tuple[Any, ...] | None:
    """The upsert's parameters, or None when ``digest`` is already current (the first-seen
    time of a Build activated again is kept by the upsert, which never updates it)."""
    if current is not None and current.digest == digest:
        return None
    return (digest, at, at, (current.activation if current is not None else 0) + 1)


class SQLiteBuilds:
    """An activation is one short write transaction on the writer's connection
    (``BEGIN IMMEDIATE``: processes sharing the file activate one at a time)."""

    if TYPE_CHECKING:

        async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

        async def _side_write(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    async def activate_build(self, digest: str, at: str) -> BuildRecord:
        def go(conn: sqlite3.Connection) -> BuildRecord:
            row = conn.execute(_CURRENT).fetchone()
            current = _as_record(row) if row is not None else None
            params = _next(current, digest, at)
            if params is None:
                assert current is not None
                return current
            conn.execute(_upsert_sql("?"), params)
            return _as_record(conn.execute(f"{_CURRENT}").fetchone())

        return await self._side_write(go)

    async def current_build(self) -> BuildRecord | None:
        def go(conn: sqlite3.Connection) -> BuildRecord | None:
            row = conn.execute(_CURRENT).fetchone()
            return _as_record(row) if row is not None else None

        return await self._read(go)


class PostgresBuilds:
    """An activation locks the table (``SHARE ROW EXCLUSIVE``, which conflicts with itself)
    for its one transaction, so replicas starting together activate one at a time."""

    _pool: AsyncConnectionPool[Any]

    async def activate_build(self, digest: str, at: str) -> BuildRecord:
        from charter.stores.postgres_errors import translated as _translated  # needs psycopg

        with _translated():
            async with self._pool.connection() as conn, conn.transaction():
                await conn.execute("LOCK TABLE builds IN SHARE ROW EXCLUSIVE MODE")
                row = await (await conn.execute(_CURRENT)).fetchone()
                current = _as_record(row) if row is not None else None
                params = _next(current, digest, at)
                if params is None:
                    assert current is not None
                    return current
                await conn.execute(_upsert_sql("%s"), params)
                return _as_record(await (await conn.execute(_CURRENT)).fetchone())

    async def current_build(self) -> BuildRecord | None:
        from charter.stores.postgres_errors import translated as _translated

        with _translated():
            async with self._pool.connection() as conn:
                row = await (await conn.execute(_CURRENT)).fetchone()
        return _as_record(row) if row is not None else None


__all__ = ["BuildRecord", "BuildStore", "MemoryBuilds", "PostgresBuilds", "SQLiteBuilds"]
