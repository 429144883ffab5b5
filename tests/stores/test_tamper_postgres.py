"""Damage a PostgreSQL ledger in place; verification names the damage."""

from __future__ import annotations

import psycopg
import pytest

from charter.ledger.verify import verify_run
from charter.stores.postgres import PostgresStore
from charter.testing.clock import FakeClock
from charter.testing.ids import fixed_ledger_key
from charter.testing.scenarios import SAMPLE_RUN, record_sample_run

pytestmark = pytest.mark.postgres
N = len(SAMPLE_RUN)
CASES = [
    ("DELETE FROM events WHERE seq = 5", "LEDGER_GAP", 5),
    (
        "UPDATE events SET data = convert_to(replace(convert_from(data, 'UTF8'), "
        "'fetch actives', 'fetch ACTIVES'), 'UTF8') WHERE seq = 6",
        "LEDGER_HASH_MISMATCH",
        6,
    ),
    (f"DELETE FROM events WHERE seq > {N - 2}", "LEDGER_HEAD_MISMATCH", N - 1),
    ("UPDATE run_heads SET mac = 'hmac-sha256:x:00'", "LEDGER_MAC_INVALID", N),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("sql", "reason", "seq"), CASES)
async def test_damage_is_named(pg_url: str, sql: str, reason: str, seq: int) -> None:
    key = fixed_ledger_key()
    async with PostgresStore.open(pg_url, key=key, clock=FakeClock()) as store:
        await record_sample_run(store, "run-p")
        assert (await verify_run(store, "run-p", key)).ok
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]
        report = await verify_run(store, "run-p", key)
        assert (report.ok, report.reason, report.seq) == (False, reason, seq)
