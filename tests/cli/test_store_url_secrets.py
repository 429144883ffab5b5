"""A PostgreSQL store URL with a password, through the real ``charter`` executable: a store
that cannot be opened is refused at once, with libpq's reason and the password masked — never
printed (psycopg_pool used to log the whole URI on every retry, for ten seconds)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.cli.test_first_hour import charter

pytestmark = pytest.mark.postgres

SECRET = "SECRETPW123"


@pytest.mark.parametrize(
    ("url", "reason", "why"),
    [
        (f"postgresql://bob:{SECRET}@[::1", "CONFIG_INVALID", 'matching "]" in IPv6'),
        (f"postgresql://u:{SECRET}@127.0.0.1:1/x", "STORE_UNAVAILABLE", "Connection refused"),
        (
            f"postgresql://nobody_here:{SECRET}@127.0.0.1:5432/postgres",
            "STORE_UNAVAILABLE",
            'role "nobody_here" does not exist',
        ),
        (
            f"postgresql://bob@127.0.0.1:5432/postgres?password={SECRET}&bogus=1",
            "CONFIG_INVALID",
            'invalid URI query parameter: "bogus"',
        ),
    ],
)
def test_runs_ls_on_an_unreachable_store_says_why_without_the_password(
    tmp_path: Path, url: str, reason: str, why: str
) -> None:
    started = time.monotonic()
    plain = charter("runs", "ls", "--store", url, cwd=tmp_path)
    assert time.monotonic() - started < 8.0  # not the pool's 10 s open timeout
    out = plain.stdout + plain.stderr
    assert plain.returncode == 1, out
    assert SECRET not in out
    assert "Traceback" not in out
    assert "PoolTimeout" not in out
    assert plain.stderr.count("error:") == 1, out
    assert why in plain.stderr
    assert "***" in plain.stderr or "[REDACTED]" in plain.stderr

    as_json = charter("runs", "ls", "--store", url, "--json", cwd=tmp_path)
    assert SECRET not in as_json.stdout + as_json.stderr
    body = json.loads(as_json.stdout)
    assert body["reason"] == reason
    assert why in body["error"]
