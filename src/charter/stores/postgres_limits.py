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

The two tables and the function are small working state, not ledger data, and are created
when the state opens (``CREATE TABLE IF NOT EXISTS``, ``CREATE OR REPLACE FUNCTION``, under an
advisory lock): ``charter_rate_buckets(key, tokens, at)`` and
``charter_inflight(key, slot, expires_at)``. The pool's connections commit with
``synchronous_commit=off``: this is working state, and a crash may forget the last few
milliseconds of it, never ledger data.

Cost (``docs/deploy.md``): one round trip and one commit per call with a rate limit, one more
(the release) with a concurrency limit — 0.6 ms and 1.8 ms on a loaded 2-core machine, against
~20 µs in the process and 0.3 ms for a bare ``SELECT 1``
(``tests/kernel/test_limits_postgres.py::test_the_cost_of_the_shared_state``).
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
CREATE OR REPLACE FUNCTION charter_limit_admit(
    lock_class int, rate_keys text[], per_s float8[], burst float8[],
    cap_keys text[], caps int[], p_slot text, lease float8
) RETURNS TABLE (refused text, kind text, retry float8) AS $$
DECLARE
    now_s float8;
    held int;
    tok float8;
    at_s float8;
    left_tokens float8[] := '{}';
BEGIN
    PERFORM pg_advisory_xact_lock(lock_class, hashtext(u.k))
        FROM (SELECT DISTINCT k FROM unnest(rate_keys || cap_keys) AS t(k) ORDER BY k) AS u;
    now_s := extract(epoch FROM clock_timestamp());
    IF cardinality(cap_keys) > 0 THEN
        DELETE FROM charter_inflight f WHERE f.key = ANY(cap_keys) AND f.expires_at < now_s;
        FOR i IN 1..cardinality(cap_keys) LOOP
            SELECT count(*) INTO held FROM charter_inflight f WHERE f.key = cap_keys[i];
            IF held >= caps[i] THEN
                RETURN QUERY SELECT cap_keys[i], 'concurrency'::text, 1.0::float8;
                RETURN;
            END IF;
        END LOOP;
    END IF;
    IF cardinality(rate_keys) > 0 THEN
        FOR i IN 1..cardinality(rate_keys) LOOP
            SELECT b.tokens, b.at INTO tok, at_s FROM charter_rate_buckets b
                WHERE b.key = rate_keys[i];
            IF NOT FOUND THEN
                tok := burst[i];
                at_s := now_s;
            END IF;
            tok := least(burst[i], tok + greatest(0, now_s - at_s) * per_s[i]);
            IF tok < 1 THEN
                RETURN QUERY SELECT rate_keys[i], 'rate'::text, (1 - tok) / per_s[i];
                RETURN;
            END IF;
            left_tokens := left_tokens || (tok - 1);
        END LOOP;
        INSERT INTO charter_rate_buckets AS b (key, tokens, at)
            SELECT rate_keys[j], left_tokens[j], now_s FROM generate_subscripts(rate_keys, 1) AS j
            ON CONFLICT (key) DO UPDATE SET tokens = EXCLUDED.tokens, at = EXCLUDED.at;
    END IF;
    IF cardinality(cap_keys) > 0 THEN
        INSERT INTO charter_inflight (key, slot, expires_at)
            SELECT k, p_slot, now_s + lease FROM unnest(cap_keys) AS t(k);
    END IF;
    RETURN QUERY SELECT NULL::text, ''::text, 0::float8;
END
$$ LANGUAGE plpgsql;
"""


class PostgresLimitState:
    """:class:`~charter.kernel.limits.LimitState` in PostgreSQL (see the module docstring)."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self._pool = pool

    @classmethod
    @asynccontextmanager
    async def open(cls, url: str, *, max_size: int = 4) -> AsyncIterator[PostgresLimitState]:
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            open=False,
            # Working state, not ledger data: a commit need not wait for its WAL flush (a crash
            # may forget the last few milliseconds of tokens and slots, never the ledger's).
            kwargs={"autocommit": True, "options": "-c synchronous_commit=off"},
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
        try:
            async with self._pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT * FROM charter_limit_admit(%s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        _CLASS,
                        [k for k, _ in rates],
                        [float(r.per_s) for _, r in rates],
                        [float(r.burst) for _, r in rates],
                        [k for k, _ in caps],
                        [int(c) for _, c in caps],
                        slot,
                        float(lease_s),
                    ),
                )
                row = await cur.fetchone()
        except psycopg.Error as exc:
            raise StoreError(
                "the limits state in PostgreSQL failed",
                reason="LIMITS_STORE_UNAVAILABLE",
                retryable=True,
            ) from exc
        if row is None or row[0] is None:
            return ADMIT
        return (str(row[0]), str(row[1]), float(row[2]))

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
