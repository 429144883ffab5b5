"""The SQLite file (or its write-ahead log) deleted, replaced or emptied under a running
process. The process keeps writing through the descriptors it holds, into files nobody else
opens and that are gone once it ends: before, ``charter serve`` went on answering
``succeeded`` (and a call's outcome was "recorded") into the void, ``/readyz`` said ready,
and the restart found the calls missing. Now the next commit sees the file is not the one
opened and the store stops writing (fail-stop, ``STORE_FAILED`` naming the file): a call is
refused before its intent, a call whose tool already ran is ``unknown``
(``OUTCOME_NOT_RECORDED``), and ``/readyz`` is 503."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest

from charter.kernel.envelope import CallStatus
from charter.runtime import open_runtime
from tests.conftest import copy_demo
from tests.kernel._project import runs_of, write_runtime_project
from tests.server._harness import spawn_serve

SEARCH = {"tool": "notes.search", "arguments": {"query": "x"}}


def _wal_deleted(db: Path) -> str:
    os.unlink(f"{db}-wal")
    return f"the write-ahead log {db}-wal was deleted"


def _db_deleted(db: Path) -> str:
    os.unlink(db)
    return f"the database file {db} was deleted"


def _db_replaced(db: Path) -> str:
    """``mv copy.db charter.db``: a copy (the SQLite backup API) put in its place."""
    copy = db.with_name("copy.db")
    source, target = sqlite3.connect(f"file:{db}?mode=ro", uri=True), sqlite3.connect(copy)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    os.replace(copy, db)
    return f"the database file {db} was replaced by another file"


def _db_emptied(db: Path) -> str:
    """``> charter.db``."""
    os.truncate(db, 0)
    return f"the database file {db} was emptied"


@pytest.mark.parametrize(
    "damage",
    [_wal_deleted, _db_deleted, _db_replaced, _db_emptied],
    ids=["wal-deleted", "db-deleted", "db-replaced", "db-emptied"],
)
def test_a_live_server_stops_writing_when_its_file_is_not_the_one_it_opened(
    demo_template: Path, tmp_path: Path, damage: Callable[[Path], str]
) -> None:
    demo = copy_demo(demo_template, tmp_path)
    db = demo / ".charter" / "charter.db"
    key = (demo / ".charter" / "secrets" / "app.key").read_text().strip()
    auth = {"Authorization": f"Bearer {key}"}
    with spawn_serve(demo, f"sqlite:///{db}") as url:
        ctx = httpx2.post(f"{url}/v1/contexts", json={"profile": "reader"}, headers=auth)
        assert ctx.status_code == 201, ctx.text
        calls = f"{url}/v1/contexts/{ctx.json()['context_id']}/calls"
        first = httpx2.post(calls, json=SEARCH | {"call_id": "c1"}, headers=auth)
        assert first.json()["status"] == "succeeded", first.text

        said = damage(db)
        for call_id in ("c2", "c3"):  # the commit that finds it, then fail-stop's refusal
            answer = httpx2.post(calls, json=SEARCH | {"call_id": call_id}, headers=auth)
            body = answer.json()
            assert body["status"] == "failed", body  # refused before its intent
            assert body["error"]["reason"] == "STORE_FAILED", body
            assert said in body["error"]["message"], body["error"]["message"]
            assert "nothing was written" in body["error"]["message"]
        ready = httpx2.get(f"{url}/readyz")
        assert ready.status_code == 503, ready.text
        (store,) = [c for c in ready.json()["checks"] if c["name"] == "store"]
        assert store["reason"] == "STORE_FAILED", store
        assert said in store["message"], store
    log = next(demo.glob("serve-*.log")).read_text()
    assert "Traceback" not in log


@pytest.mark.anyio
async def test_a_call_whose_outcome_cannot_reach_the_file_is_unknown(tmp_path: Path) -> None:
    """The write-ahead log deleted while the tool runs: its outcome is not reported
    ``succeeded`` (it would have gone to the deleted file), and the call is not run again."""
    project = write_runtime_project(tmp_path / "kv")
    db = tmp_path / "store.db"
    async with open_runtime(project, store=f"sqlite:///{db}") as rt:
        ctx = await rt.resolve_context("app", "all")
        call = asyncio.ensure_future(
            rt.call(ctx.context_id, "kv.slow", "c1", {"seconds": 1.0}, as_="app")
        )
        while runs_of(project, "kv.slow") == 0:  # the tool runs: its intent is recorded
            await asyncio.sleep(0.01)
        os.unlink(f"{db}-wal")
        env = await call
        assert env.status is CallStatus.UNKNOWN, env
        assert env.error is not None
        assert env.error["reason"] == "OUTCOME_NOT_RECORDED", env
        again = await rt.call(ctx.context_id, "kv.slow", "c1", {"seconds": 1.0}, as_="app")
        assert again.status is not CallStatus.SUCCEEDED, again
        assert again.error is not None
        assert again.error["reason"].startswith("STORE_"), again
    assert runs_of(project, "kv.slow") == 1


@pytest.mark.anyio
async def test_a_chat_write_into_a_deleted_database_is_refused(tmp_path: Path) -> None:
    """Conversations have a writer of their own (stores/sqlite_conversations.py): it checks
    the files too, so a chat turn is not saved into a database that is gone, and the store
    stops writing as it does for the ledger."""
    from charter.errors import StoreError
    from charter.stores.sqlite import SQLiteStore
    from charter.testing.conversation_conformance import conversation_record
    from charter.testing.ids import fixed_ledger_key

    db = tmp_path / "charter.db"
    async with SQLiteStore.open(str(db), key=fixed_ledger_key()) as store:
        await store.save_conversation(conversation_record("conv-1"))
        said = _db_deleted(db)
        with pytest.raises(StoreError) as caught:
            await store.save_conversation(conversation_record("conv-2"))
        assert caught.value.reason == "STORE_FAILED"
        assert said in caught.value.message
        assert not db.exists()  # not made anew
        assert store.failure is not None  # the ledger's writes stop too
