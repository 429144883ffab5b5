"""A rolling deploy over HTTP: ``charter serve`` on the old Build and on a new one (the
write tool's contract changed), sharing one store — a SQLite file or PostgreSQL.

Before: the old replica answered a call in a new-Build context ``403`` and retired its
pending approval (``APPROVAL_STALE``): the person's decision vanished. Now it answers ``503``
with ``Retry-After`` and the envelope (``CONTEXT_BUILD_CHANGED``, retryable, naming the Build
the context needs) and changes nothing; the approval granted meanwhile runs on the new one.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from charter.client import Client
from charter.kernel.envelope import CallStatus
from tests.kernel._project import runs_of
from tests.server._harness import spawn_serve, write_served_project
from tests.stores.conftest import create_database, drop_database

pytestmark = pytest.mark.slow
ARGS = {"key": "k", "value": "v"}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
        return
    name = create_database()
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


def test_an_old_replica_answers_503_and_leaves_the_approval_pending(
    tmp_path: Path, store_url: str
) -> None:
    project = write_served_project(tmp_path / "old")
    new_dir = tmp_path / "new"
    shutil.copytree(project.root, new_dir)
    tools = (new_dir / "tools.py").read_text()
    assert tools.count('"""Write a key."""') == 1
    (new_dir / "tools.py").write_text(tools.replace('"""Write a key."""', '"""Write one key."""'))
    app, alice = project.keys["app"], project.keys["alice"]
    with spawn_serve(project.root, store_url) as old, Client(old, app) as app_old:
        app_old.resolve_context("all")  # the old replica serves before the new one starts
        with spawn_serve(new_dir, store_url) as new, Client(new, app) as app_new:
            ctx = app_new.resolve_context("all")
            b2 = ctx["build_digest"]
            pending = app_new.call(ctx["context_id"], "kv.put", "w1", ARGS)
            assert pending.status is CallStatus.PENDING_APPROVAL
            assert pending.approval is not None
            approval_id = pending.approval["id"]
            # the load balancer sends the retry to the old replica
            raw = httpx2.post(
                f"{old}/v1/contexts/{ctx['context_id']}/calls",
                json={"tool": "kv.put", "call_id": "w1", "arguments": ARGS},
                headers={"Authorization": f"Bearer {app}"},
                timeout=30,
            )
            assert raw.status_code == 503, raw.text
            assert raw.headers["retry-after"] == "1"
            error = raw.json()["error"]
            assert (error["code"], error["reason"], error["retryable"]) == (
                "transient_external",
                "CONTEXT_BUILD_CHANGED",
                True,
            )
            assert error["details"]["context_build"] == b2
            assert error["details"]["current_build"] == b2
            assert error["details"]["build"] != b2
            assert "no call was reserved or run" in error["message"], error
            assert "nothing was recorded" not in error["message"]
            # the Python client hands back the same envelope
            again = app_old.call(ctx["context_id"], "kv.put", "w1", ARGS)
            assert again.status is CallStatus.DENIED
            assert again.error is not None
            assert again.error["retryable"] is True
            with Client(old, alice) as alice_old:
                assert alice_old.get_approval(approval_id)["status"] == "pending"
                assert alice_old.approve(approval_id)["status"] == "approved"
            done = app_new.call(ctx["context_id"], "kv.put", "w1", ARGS)
            assert done.status is CallStatus.SUCCEEDED, done.error
            assert runs_of(new_dir, "kv.put") == 1
            assert runs_of(project.root, "kv.put") == 0
            # the reverse: an old-Build context on the new (current) replica is retired
            old_ctx = app_old.resolve_context("all")
            waiting = app_old.call(old_ctx["context_id"], "kv.put", "w2", ARGS)
            assert waiting.approval is not None
            stale = httpx2.post(
                f"{new}/v1/contexts/{old_ctx['context_id']}/calls",
                json={"tool": "kv.put", "call_id": "w2", "arguments": ARGS},
                headers={"Authorization": f"Bearer {app}"},
                timeout=30,
            )
            assert stale.status_code == 403, stale.text
            assert stale.json()["error"]["reason"] == "CONTEXT_BUILD_CHANGED"
            with Client(new, alice) as alice_new:
                retired = alice_new.get_approval(waiting.approval["id"])
            assert (retired["status"], retired["reason"]) == ("expired", "APPROVAL_STALE")
