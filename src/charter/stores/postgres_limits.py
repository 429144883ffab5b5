"""Rate buckets and in-flight slots in PostgreSQL, shared by every replica of a deployment.

The kernel's :class:`~charter.kernel.limits.Limiter` asks one :class:`PostgresLimitState` per
call; the decision for all the call's keys is one transaction:

1. ``pg_advisory_xact_lock(class, hashtext(key))`` on each key in sorted order (so two
   replicas deciding the same key queue instead of both reading the same count, and never
   deadlock; the two-integer key space never meets the store's one-integer run locks);
2. in-flight slots past their lease are deleted, the live slots of the keys counted;
3. the buckets of the keys read (inserted full the first time), refilled by the database's
   clock (so replicas with drifting clocks agree);
4. only when every key admits: one token taken from each bucket and one slot row inserted per
   capped key, and the transaction commits.

A release deletes the call's slot rows. A replica that dies holding slots frees them when
their lease (:attr:`~charter.kernel.limits.LimitSettings.lease_s`) passes.

The two tables are small working state, not ledger data, and are created on first use
(``CREATE TABLE IF NOT EXISTS``): ``charter_rate_buckets(key, tokens, at)`` and
``charter_inflight(key, slot, expires_at)``. Cost, measured in
``tests/stores/test_postgres_limits.py`` and ``docs/deploy.md``: one extra transaction per
admitted call (two with a concurrency limit: admit and release).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from charter.errors import StoreError

_CLASS = 0x4C_69_6D_74  # "Limt": the advisory lock class of limit keys
Verdict = tuple[str | None, str, float]  # (refused key or None, "rate"|"concurrency", retry)
ADMIT: Verdict = (None, "", 0.0)

_TABLES = """
CREATE TABLE IF NOT EXISTS charter_rate_buckets (
    key text PRIMARY KEY,
    tokens double precision NOT NULL,
    at double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS charter_inflight (
    key text NOT NULL,
    slot text NOT NULL,
    expires_at double precision NOT NULL,
    PRIMARY KEY (key, slot)
);
"""


class PostgresLimitState:
    """:class:`~charter.kernel.limits.LimitState` in PostgreSQL (see the module docstring)."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self._pool = pool

    @classmethod
    @asynccontextmanager
    async def open(cls, url: str, *, max_size: int = 4) -> AsyncIterator[PostgresLimitState]:
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            url, min_size=1, max_size=max_size, open=False, kwargs={"autocommit": True}
        )
        try:
            await pool.open(wait=True, timeout=10)
            async with pool.connection() as conn:
                await conn.execute("SELECT pg_advisory_lock(%s, 0)", (_CLASS,))
                try:
                    await conn.execute(_TABLES)
                finally:
                    await conn.execute("SELECT pg_advisory_unlock(%s, 0)", (_CLASS,))
        except (psycopg.Error, OSError) as exc:
            await pool.close()
            raise StoreError(
                "the limits state in PostgreSQL cannot be opened", reason="LIMITS_STORE_UNAVAILABLE"
            ) from exc
        try:
            yield cls(pool)
        finally:
            await pool.close()

    async def admit(
        self,
        rates: Sequence[tuple[str, Any]],
        caps: Sequence[tuple[str, int]],
        slot: str,
        lease_s: float,
    ) -> Verdict:
        keys = sorted({k for k, _ in rates} | {k for k, _ in caps})
        try:
            async with self._pool.connection() as conn, conn.transaction():
                cur = await conn.execute(  # the locks in key order, then the clock
                    "SELECT count(pg_advisory_xact_lock(%s, hashtext(k))), "
                    "extract(epoch FROM clock_timestamp())::float8 "
                    "FROM unnest(%s::text[]) AS t(k)",
                    (_CLASS, keys),
                )
                row = await cur.fetchone()
                assert row is not None
                now = float(row[1])
                if caps:
                    cap_keys = [k for k, _ in caps]
                    await conn.execute(
                        "DELETE FROM charter_inflight WHERE key = ANY(%s) AND expires_at < %s",
                        (cap_keys, now),
                    )
                    cur = await conn.execute(
                        "SELECT key, count(*) FROM charter_inflight WHERE key = ANY(%s) "
                        "GROUP BY key",
                        (cap_keys,),
                    )
                    held = {k: int(n) for k, n in await cur.fetchall()}
                    for key, cap in caps:
                        if held.get(key, 0) >= cap:
                            return (key, "concurrency", 1.0)
                taken: list[tuple[str, float]] = []
                if rates:
                    cur = await conn.execute(
                        "SELECT key, tokens, at FROM charter_rate_buckets WHERE key = ANY(%s)",
                        ([k for k, _ in rates],),
                    )
                    stored = {k: (float(t), float(a)) for k, t, a in await cur.fetchall()}
                    for key, rate in rates:
                        tokens, at = stored.get(key, (float(rate.burst), now))
                        tokens = min(float(rate.burst), tokens + max(0.0, now - at) * rate.per_s)
                        if tokens < 1.0:
                            return (key, "rate", (1.0 - tokens) / rate.per_s)
                        taken.append((key, tokens - 1.0))
                if taken:
                    await conn.cursor().executemany(
                        "INSERT INTO charter_rate_buckets (key, tokens, at) VALUES (%s, %s, %s) "
                        "ON CONFLICT (key) DO UPDATE "
                        "SET tokens = EXCLUDED.tokens, at = EXCLUDED.at",
                        [(k, t, now) for k, t in taken],
                    )
                if caps:
                    await conn.cursor().executemany(
                        "INSERT INTO charter_inflight (key, slot, expires_at) VALUES (%s, %s, %s)",
                        [(k, slot, now + lease_s) for k, _ in caps],
                    )
                return ADMIT
        except psycopg.Error as exc:
            raise StoreError(
                "the limits state in PostgreSQL failed",
                reason="LIMITS_STORE_UNAVAILABLE",
                retryable=True,
            ) from exc

    async def release(self, caps: Sequence[tuple[str, int]], slot: str) -> None:
        try:
            async with self._pool.connection() as conn:
                await conn.execute(
                    "DELETE FROM charter_inflight WHERE slot = %s AND key = ANY(%s)",
                    (slot, [k for k, _ in caps]),
                )
        except psycopg.Error as exc:
            raise StoreError(
                "the limits state in PostgreSQL failed",
                reason="LIMITS_STORE_UNAVAILABLE",
                retryable=True,
            ) from exc
