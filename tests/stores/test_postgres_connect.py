"""Opening a PostgreSQL store that cannot be reached: at once, with the real reason, and never
with the URL's password (in the error, or in what psycopg and its pool log)."""

from __future__ import annotations

import logging
import time

import pytest

from charter.errors import CharterError, ConfigError, StoreError
from charter.stores.postgres import PostgresStore
from charter.stores.postgres_errors import mask_url, scrub
from charter.testing.ids import fixed_ledger_key

pytestmark = pytest.mark.postgres

SECRET = "SECRETPW123"


async def _open_failure(url: str) -> tuple[CharterError, float, str]:
    """What opening ``url`` raises, how long it took, and everything psycopg logged."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep()
    target = logging.getLogger("psycopg")
    target.addHandler(keep)
    started = time.monotonic()
    try:
        with pytest.raises(CharterError) as info:
            async with PostgresStore.open(url, key=fixed_ledger_key(), open_timeout=10.0):
                pass
    finally:
        target.removeHandler(keep)
    logged = "\n".join(logging.Formatter().format(r) for r in records)
    return info.value, time.monotonic() - started, logged


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("url", "kind", "why"),
    [
        (f"postgresql://bob:{SECRET}@[::1", ConfigError, 'matching "]" in IPv6 host'),
        (f"postgresql://u:{SECRET}@127.0.0.1:1/x", StoreError, "Connection refused"),
        (
            f"postgresql://nobody_here:{SECRET}@127.0.0.1:5432/postgres",
            StoreError,
            'role "nobody_here" does not exist',
        ),
        (f"postgresql://bob@127.0.0.1:5432/postgres?password={SECRET}&bogus=1", ConfigError,
         'invalid URI query parameter: "bogus"'),
    ],
)  # fmt: skip
async def test_a_failed_open_says_why_at_once_without_the_password(
    url: str, kind: type[CharterError], why: str
) -> None:
    exc, took, logged = await _open_failure(url)
    assert isinstance(exc, kind), exc
    assert why in str(exc)
    assert "PoolTimeout" not in str(exc)
    assert SECRET not in str(exc) + logged
    assert "***" in str(exc)
    assert took < 5.0  # not the pool's 10 s open_timeout
    if isinstance(exc, StoreError):
        assert exc.reason == "STORE_UNAVAILABLE"
        assert exc.retryable


def test_mask_url_hides_the_password_in_every_place_a_url_holds_one() -> None:
    assert mask_url(f"postgresql://bob:{SECRET}@h:5432/db") == "postgresql://bob:***@h:5432/db"
    assert mask_url(f"postgres://:{SECRET}@h/db") == "postgres://:***@h/db"
    assert mask_url(f"postgresql://bob:a@{SECRET}@h/db") == "postgresql://bob:***@h/db"
    assert mask_url(f"postgresql://h/db?user=bob&password={SECRET}&x=1") == (
        "postgresql://h/db?user=bob&password=***&x=1"
    )
    assert mask_url("postgresql://bob@h/db") == "postgresql://bob@h/db"
    encoded = "SECRET%40PW"
    url = f"postgresql://bob:{encoded}@h/db"
    assert "SECRET@PW" not in scrub("libpq said SECRET@PW and " + url, [url])


def test_psycopg_log_records_are_scrubbed_whatever_handler_prints_them() -> None:
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    keep = Keep()
    pool_log = logging.getLogger("psycopg.pool")
    pool_log.addHandler(keep)
    try:
        pool_log.warning(
            "error connecting in %r: %s",
            "pool-1",
            f'bad URI: "postgresql://bob:{SECRET}@[::1"',
        )
    finally:
        pool_log.removeHandler(keep)
    assert records == ["error connecting in 'pool-1': bad URI: \"postgresql://bob:***@[::1\""]
