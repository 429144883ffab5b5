"""The owner-lease port: which processes that dispatch tool calls are still alive.

Every process that dispatches holds a lease — one row, ``(owner_id, host, pid, start,
renewed_at, expires_at)`` — and renews it while a call of its is between intent and outcome.
A call left ``dispatching`` whose owner's lease has lapsed (or was released) belongs to a
process that is gone, on this host or another replica: any other process sharing the store
reconciles it (:meth:`charter.kernel.operators.Operators.reconcile`); the ledger's call
transition makes that happen exactly once.

Leases are not ledger events: they are liveness, not history, and are overwritten on every
renewal. Implemented by the memory, SQLite and PostgreSQL stores (``leases`` table, SQLite
migration 11 / PostgreSQL 10). Timestamps are :func:`~charter.ledger.events.format_at` text,
so they compare as strings in SQL and in Python alike; each renewal carries the renewing
process's clock, so replicas sharing a store need clocks that agree to well within a lease's
lifetime.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from charter.errors import StoreError
from charter.stores.sqlite_errors import (
    write_transaction,
)
from charter.stores.sqlite_files import OpenedFiles
from charter.stores.working_rows import typed_row

if TYPE_CHECKING:
    from collections.abc import Callable

    from psycopg_pool import AsyncConnectionPool

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    owner_id: str
    host: str
    pid: int
    start: str  # the process start token (changes when a pid is reused)
    renewed_at: str
    expires_at: str


@runtime_checkable
class LeaseStore(Protocol):
    async def renew_lease(self, lease: Lease) -> None:
        """Insert or replace the owner's lease."""
        ...

    async def read_leases(self, owner_ids: Collection[str]) -> dict[str, Lease]:
        """The stored leases of these owners (an owner without one is absent)."""
        ...

    async def release_lease(self, owner_id: str) -> None:
        """Delete the owner's lease (a clean shutdown)."""
        ...


class MemoryLeases:
    """The port in process memory (the memory store's)."""

    @property
    def _leases(self) -> dict[str, Lease]:
        leases: dict[str, Lease] | None = self.__dict__.get("_lease_rows")
        if leases is None:
            leases = self.__dict__["_lease_rows"] = {}
        return leases

    async def renew_lease(self, lease: Lease) -> None:
        self._leases[lease.owner_id] = lease

    async def read_leases(self, owner_ids: Collection[str]) -> dict[str, Lease]:
        return {i: self._leases[i] for i in owner_ids if i in self._leases}

    async def release_lease(self, owner_id: str) -> None:
        self._leases.pop(owner_id, None)


# -- SQL shared by the SQLite and PostgreSQL implementations ------------------------------

_COLUMNS = "owner_id, host, pid, start, renewed_at, expires_at"


def _renew_sql(p: str) -> str:
    return (
        f"INSERT INTO leases ({_COLUMNS}) VALUES ({', '.join([p] * 6)}) "
        "ON CONFLICT (owner_id) DO UPDATE SET host = excluded.host, pid = excluded.pid, "
        "start = excluded.start, renewed_at = excluded.renewed_at, "
        "expires_at = excluded.expires_at"
    )


def _read_sql(p: str, n: int) -> str:
    return f"SELECT {_COLUMNS} FROM leases WHERE owner_id IN ({', '.join([p] * n)})"


def _params(lease: Lease) -> tuple[object, ...]:
    return (lease.owner_id, lease.host, lease.pid, lease.start, lease.renewed_at, lease.expires_at)


_KINDS = (
    ("owner_id", str),
    ("host", str),
    ("pid", int),
    ("start", str),
    ("renewed_at", str),
    ("expires_at", str),
)
_FIX = "put the value back (its owner renews the row while its calls run)"


def _as_lease(row: Sequence[Any]) -> Lease:
    owner_id, host, pid, start, renewed_at, expires_at = typed_row("leases", row, _KINDS, _FIX)
    return Lease(
        owner_id=owner_id,
        host=host,
        pid=pid,
        start=start,
        renewed_at=renewed_at,
        expires_at=expires_at,
    )


class SQLiteLeases:
    """Lease writes go through the ledger writer's own connection, each in a short transaction
    of its own (never inside a group commit): a commit of another connection would make the
    writer forget the projection rows it keeps (``HotRows``), and a lease is renewed every few
    seconds while calls run. Reads use the reader pool."""

    if TYPE_CHECKING:

        async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

        _closed: bool
        _write_lock: threading.Lock
        _conn: sqlite3.Connection | None
        failure: str | None
        files: OpenedFiles

        def _refusal(self) -> StoreError: ...

        def _fail_stop(self, exc: BaseException, committing: bool) -> StoreError: ...

    async def _side_write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a transaction of its own on the writer's connection, in a worker
        thread (a write beside the ledger's, such as a lease: see ``SQLiteLeases``)."""
        if self._closed:
            raise StoreError("the store is closed", reason="STORE_CLOSED")
        return await asyncio.to_thread(self._side_transaction, fn)

    def _side_transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._write_lock:  # no batch or inline commit meanwhile
            conn = self._conn
            if conn is None:
                raise StoreError("the store is closed", reason="STORE_CLOSED")
            if self.failure is not None:
                raise self._refusal()
            return write_transaction(conn, fn, self._fail_stop, self.files.check)

    async def renew_lease(self, lease: Lease) -> None:
        params = _params(lease)
        await self._side_write(lambda c: c.execute(_renew_sql("?"), params))

    async def read_leases(self, owner_ids: Collection[str]) -> dict[str, Lease]:
        ids = sorted(owner_ids)
        if not ids:
            return {}

        def go(conn: sqlite3.Connection) -> dict[str, Lease]:
            rows = conn.execute(_read_sql("?", len(ids)), ids).fetchall()
            return {r[0]: _as_lease(r) for r in rows}

        return await self._read(go)

    async def release_lease(self, owner_id: str) -> None:
        await self._side_write(
            lambda c: c.execute("DELETE FROM leases WHERE owner_id = ?", (owner_id,))
        )


class PostgresLeases:
    _pool: AsyncConnectionPool[Any]

    async def renew_lease(self, lease: Lease) -> None:
        from charter.stores.postgres_errors import translated as _translated  # needs psycopg

        with _translated():
            async with self._pool.connection() as conn:
                await conn.execute(_renew_sql("%s"), _params(lease))

    async def read_leases(self, owner_ids: Collection[str]) -> dict[str, Lease]:
        from charter.stores.postgres_errors import translated as _translated

        ids = sorted(owner_ids)
        if not ids:
            return {}
        with _translated():
            async with self._pool.connection() as conn:
                cur = await conn.execute(_read_sql("%s", len(ids)), ids)
                rows = await cur.fetchall()
        return {r[0]: _as_lease(r) for r in rows}

    async def release_lease(self, owner_id: str) -> None:
        from charter.stores.postgres_errors import translated as _translated

        with _translated():
            async with self._pool.connection() as conn:
                await conn.execute("DELETE FROM leases WHERE owner_id = %s", (owner_id,))


__all__ = ["Lease", "LeaseStore", "MemoryLeases", "PostgresLeases", "SQLiteLeases"]
