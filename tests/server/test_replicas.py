"""Two ``charter serve`` processes on one PostgreSQL database behave as one gateway:
concurrent duplicates spread over both execute once (counted in the tool's own journal) and
all answer the same outcome; an approval granted through B lets the call dispatch through A;
an SSE client of B receives events appended through A (LISTEN/NOTIFY across processes)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from charter.client import AsyncClient, Client
from charter.kernel.envelope import CallStatus
from tests.kernel._project import journal
from tests.server._harness import Project, spawn_serve, write_served_project
from tests.stores.conftest import create_database, drop_database

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Project, str, str]]:
    project = write_served_project(tmp_path_factory.mktemp("replicas"))
    name = create_database()
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    try:
        with spawn_serve(project.root, url) as a, spawn_serve(project.root, url) as b:
            yield project, a, b
    finally:
        drop_database(name)


def test_concurrent_duplicates_across_replicas_execute_once(
    replicas: tuple[Project, str, str],
) -> None:
    project, a, b = replicas
    key = project.keys["app"]
    with Client(a, key) as cl:
        ctx = cl.resolve_context("all")
    answers: list[Any] = []

    async def one(url: str) -> None:
        async with AsyncClient(url, key) as client:
            env = await client.call(ctx["context_id"], "kv.slow", "dup-1", {"seconds": 0.5})
            answers.append(env)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(one, a if i % 2 else b)

    anyio.run(main)
    assert len(answers) == 50
    assert {env.status for env in answers} == {CallStatus.SUCCEEDED}
    assert len({repr(env.data) for env in answers}) == 1
    assert sum(1 for line in journal(project.root) if line["tool"] == "kv.slow") == 1


def test_approval_through_b_dispatches_through_a(replicas: tuple[Project, str, str]) -> None:
    project, a, b = replicas
    with Client(a, project.keys["app"]) as app_a, Client(b, project.keys["alice"]) as alice_b:
        ctx = app_a.resolve_context("all")
        args = {"key": "replicated", "value": "yes"}
        pending = app_a.call(ctx["context_id"], "kv.put", "r1", args)
        assert pending.status is CallStatus.PENDING_APPROVAL
        assert pending.approval
        assert alice_b.approve(pending.approval["id"])["status"] == "approved"
        done = app_a.call(ctx["context_id"], "kv.put", "r1", args)
        assert done.status is CallStatus.SUCCEEDED
        assert alice_b.get_call(ctx["context_id"], "r1")["state"] == "succeeded"
        assert alice_b.verify_run(ctx["run_id"])["ok"] is True


def test_sse_on_b_sees_events_appended_through_a(replicas: tuple[Project, str, str]) -> None:
    project, a, b = replicas
    key = project.keys["app"]
    with Client(a, key) as via_a, Client(b, key) as via_b:
        run = via_a.create_run()
        ctx = via_a.resolve_context("reader", run_id=run["run_id"])
        start = via_b.get_run(run["run_id"])["event_count"]
        seen: list[dict[str, Any]] = []
        arrived = threading.Event()

        def follow() -> None:
            for event in via_b.stream_events(run["run_id"], after=start):
                seen.append(event)
                if event["payload"].get("stage") == "completed" or len(seen) >= 10:
                    arrived.set()
                    return

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        env = via_a.call(ctx["context_id"], "kv.echo", "s1", {"payload": {"x": 1}})
        assert env.status is CallStatus.SUCCEEDED
        assert arrived.wait(timeout=30), "replica B never streamed A's events"
    seqs = [e["seq"] for e in seen]
    assert seqs == list(range(start + 1, start + 1 + len(seqs)))
    assert any(e["payload"].get("call_id") == "s1" for e in seen)
