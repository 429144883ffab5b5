"""Fail-stop on PostgreSQL (issue 16): the server's own storage-failure answers (here
``disk_full``, SQLSTATE 53100, raised by the server from a trigger standing in for a full
disk) stop the store's writes: the call that met it is not dispatched, every later call
answers ``STORE_FAILED`` before any intent even once the disk is back, ``/readyz`` answers
503, and only a restart clears it. Executions are counted in the tool's own journal."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest

from charter.errors import Failure
from charter.kernel.envelope import CallStatus
from charter.runtime import open_runtime
from charter.server.routes.ops import readyz
from tests.kernel._project import runs_of, write_runtime_project
from tests.stores.conftest import create_database, drop_database

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

DISK_FULL = """
CREATE FUNCTION charter_test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'could not extend file: No space left on device'
  USING ERRCODE = 'disk_full'; END $$;
CREATE TRIGGER charter_test_disk_full BEFORE INSERT ON events
  FOR EACH ROW EXECUTE FUNCTION charter_test_disk_full();
"""
DISK_BACK = "DROP TRIGGER charter_test_disk_full ON events"


@pytest.fixture
def pg_url() -> Iterator[str]:
    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


def _sql(url: str, statement: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement.encode())


async def test_a_storage_failure_stops_the_stores_writes_until_a_restart(
    pg_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = write_runtime_project(tmp_path / "kv")
    async with open_runtime(project, store=pg_url) as rt:
        ctx = await rt.resolve_context("app", "all")
        ok = await rt.call(ctx.context_id, "kv.get", "c1", {"key": "k"}, as_="app")
        assert ok.status is CallStatus.SUCCEEDED
        _sql(pg_url, DISK_FULL)
        with caplog.at_level(logging.CRITICAL, logger="charter.stores.postgres"):
            first = await rt.call(ctx.context_id, "kv.get", "c2", {"key": "k"}, as_="app")
        assert first.status is CallStatus.FAILED, first
        assert first.error is not None
        assert first.error["code"] == "internal"
        assert "stopped accepting writes" in caplog.text
        _sql(pg_url, DISK_BACK)  # the disk is back, but this process wrote through a failure
        after = await rt.call(ctx.context_id, "kv.get", "c3", {"key": "k"}, as_="app")
        assert after.status is CallStatus.FAILED, after
        assert after.error is not None
        assert after.error["reason"] == "STORE_FAILED"
        ready = await readyz(SimpleNamespace(runtime=rt, readiness=()))  # type: ignore[arg-type]
        assert ready.status_code == 503
        [store] = [c for c in json.loads(bytes(ready.body))["checks"] if c["name"] == "store"]
        assert store["reason"] == "STORE_FAILED"
        assert runs_of(project, "kv.get") == 1  # c2 and c3 never dispatched
    async with open_runtime(project, store=pg_url) as rt:  # a restart clears it
        with pytest.raises(Failure) as caught:  # told "failed": its intent was not written
            await rt.get_call(ctx.context_id, "c2", as_="app")
        assert caught.value.reason == "CALL_NOT_FOUND"
        again = await rt.call(ctx.context_id, "kv.get", "c3", {"key": "k"}, as_="app")
        assert again.status is CallStatus.SUCCEEDED, again
    assert runs_of(project, "kv.get") == 2
