"""SSE over a real server: ids are sequence numbers, keep-alives flow while idle, and a client
that drops the connection and comes back with Last-Event-ID misses nothing and sees nothing
twice; a run's terminal status ends the stream."""

from __future__ import annotations

import threading
import time

import anyio
import httpx2
import pytest

from charter.client import AsyncClient, Client
from charter.ledger.events import NewEvent
from tests.server._harness import Project, ThreadServer


def _read_frames(response: httpx2.Response, count: int) -> tuple[list[int], bool]:
    seqs: list[int] = []
    saw_ping = False
    for sse in httpx2.EventSource(response):
        if sse.id:
            seqs.append(int(sse.id))
        if len(seqs) >= count:
            break
    return seqs, saw_ping


def test_resume_after_a_dropped_connection(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    cl = clients["app"]
    run = cl.create_run()
    ctx = cl.resolve_context("reader", run_id=run["run_id"])
    for i in range(3):
        cl.call(ctx["context_id"], "kv.echo", f"a{i}", {"payload": {"i": i}})
    head = cl.get_run(run["run_id"])["event_count"]
    headers = {"Authorization": f"Bearer {project.keys['app']}", "Accept": "text/event-stream"}
    url = f"{server.url}/v1/runs/{run['run_id']}/events"
    with httpx2.Client(timeout=30) as http:
        with http.stream("GET", url, headers=headers) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            first, _ = _read_frames(response, 5)
        # the connection is gone; more events are appended meanwhile
        for i in range(3, 6):
            cl.call(ctx["context_id"], "kv.echo", f"a{i}", {"payload": {"i": i}})
        total = cl.get_run(run["run_id"])["event_count"]
        assert total > head
        resumed_headers = {**headers, "Last-Event-ID": str(first[-1])}
        with http.stream("GET", url, headers=resumed_headers) as response:
            second, _ = _read_frames(response, total - first[-1])
    assert first == [1, 2, 3, 4, 5]
    assert first + second == list(range(1, total + 1))


def test_keepalive_then_live_event_then_terminal_end(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    cl = clients["app"]
    run = cl.create_run()
    headers = {"Authorization": f"Bearer {project.keys['app']}", "Accept": "text/event-stream"}
    url = f"{server.url}/v1/runs/{run['run_id']}/events"
    lines: list[str] = []
    with (
        httpx2.Client(timeout=30) as http,
        http.stream("GET", url, headers={**headers, "Last-Event-ID": "3"}) as response,
    ):
        for line in response.iter_lines():
            lines.append(line)
            if line == ": ping":
                break  # idle: the server keeps the connection alive (0.5 s in tests)
    assert "id: 1" not in lines  # resumed after 3: nothing old again
    seen: list[dict[str, object]] = []

    def follow() -> None:
        seen.extend(cl.stream_events(run["run_id"], after=3))

    reader = threading.Thread(target=follow)
    reader.start()
    anyio.run(_finish_run, project, run["run_id"])
    reader.join(timeout=30)
    assert not reader.is_alive(), "the stream did not end with the run"
    assert [e["type"] for e in seen] == ["run_status_changed"]
    assert seen[0]["payload"] == {"status": "completed"}  # type: ignore[comparison-overlap]


async def _finish_run(project: Project, run_id: str) -> None:
    from charter.runtime import open_runtime

    await anyio.sleep(0.3)
    async with open_runtime(project.root, store="sqlite:///.charter/charter.db") as rt:
        await rt.store.append(
            run_id, [NewEvent(type="run_status_changed", payload={"status": "completed"})]
        )


@pytest.mark.anyio
async def test_async_client_streams_and_resumes(server: ThreadServer, project: Project) -> None:
    async with AsyncClient(server.url, project.keys["app"]) as cl:
        run = await cl.create_run()
        ctx = await cl.resolve_context("reader", run_id=run["run_id"])
        await cl.call(ctx["context_id"], "kv.echo", "x1", {"payload": {}})
        got: list[int] = []
        with anyio.fail_after(20):
            async for event in cl.stream_events(run["run_id"], after=2):
                got.append(event["seq"])
                if len(got) == 3:
                    break
        assert got == [3, 4, 5]


def test_the_accept_header_is_negotiated_with_its_weights(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    """``q=0`` means "not acceptable" (RFC 9110): such a client gets JSON, not a stream it
    refused; SSE when the stream is named and weighted at least as JSON."""
    run = clients["app"].create_run()
    url = f"{server.url}/v1/runs/{run['run_id']}/events"
    auth = {"Authorization": f"Bearer {project.keys['app']}"}
    with httpx2.Client(timeout=30, trust_env=False) as http:
        for accept in (
            "text/event-stream;q=0, application/json",
            "application/json, text/event-stream;q=0.5",
            "*/*",
            "",
        ):
            # streamed: a stream sent by mistake fails here instead of hanging the read
            with http.stream("GET", url, headers={**auth, "Accept": accept}) as answer:
                assert answer.headers["content-type"].startswith("application/json"), accept
                assert b'"run_id"' in answer.read()
        for accept in ("text/event-stream", "Text/Event-Stream, application/json;q=0.9"):
            with http.stream("GET", url, headers={**auth, "Accept": accept}) as response:
                assert response.headers["content-type"].startswith("text/event-stream"), accept
                assert _read_frames(response, 1)[0] == [1]


def test_resuming_past_the_head_waits_instead_of_reporting_a_gap(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    """A ``Last-Event-ID`` (or ``?after=``) the run has not reached is no ledger damage: the
    stream keeps waiting as at the head (JSON answers no events) and continues strictly after
    that id once the run gets there."""
    cl = clients["app"]
    run = cl.create_run()  # events 1-3
    headers = {"Authorization": f"Bearer {project.keys['app']}", "Accept": "text/event-stream"}
    url = f"{server.url}/v1/runs/{run['run_id']}/events"
    for extra, query in (({"Last-Event-ID": "1000"}, ""), ({}, "?after=5")):
        lines: list[str] = []
        with (
            httpx2.Client(timeout=30) as http,
            http.stream("GET", url + query, headers={**headers, **extra}) as response,
        ):
            assert response.status_code == 200
            for line in response.iter_lines():
                lines.append(line)
                if line == ": ping":
                    break
        assert not any(x.startswith("event: error") for x in lines), lines
        assert not any(x.startswith("id: ") for x in lines), lines
    seen: list[dict[str, object]] = []

    def follow() -> None:
        seen.extend(cl.stream_events(run["run_id"], after=5))

    reader = threading.Thread(target=follow)
    reader.start()
    anyio.run(_input_then_finish, project, run["run_id"])
    reader.join(timeout=30)
    assert not reader.is_alive(), "the stream did not end with the run"
    assert [(e["seq"], e["payload"]) for e in seen] == [(6, {"status": "completed"})]


async def _input_then_finish(project: Project, run_id: str, wait_s: float = 0.3) -> None:
    from charter.runtime import open_runtime

    await anyio.sleep(wait_s)
    async with open_runtime(project.root, store="sqlite:///.charter/charter.db") as rt:
        for status in ("input_required", "running", "completed"):  # events 4, 5, 6
            await rt.store.append(
                run_id, [NewEvent(type="run_status_changed", payload={"status": status})]
            )
            await anyio.sleep(wait_s / 3)


def test_a_stream_of_an_ended_run_ends_once_everything_is_sent(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    """A client resuming at or past the end of an ended run gets the rest, then the stream
    ends (it waited forever: the terminal event it ends on was already behind it)."""
    run = clients["app"].create_run()  # events 1-3
    anyio.run(_input_then_finish, project, run["run_id"], 0.0)  # 4-6, the run completed
    url = f"{server.url}/v1/runs/{run['run_id']}/events"
    headers = {"Authorization": f"Bearer {project.keys['app']}", "Accept": "text/event-stream"}
    with httpx2.Client(timeout=10, trust_env=False) as http:
        for resume, sent in (("5", [6]), ("6", []), ("60", [])):
            ids: list[int] = []
            deadline = time.monotonic() + 10  # pings keep a stream that never ends alive
            with http.stream("GET", url, headers={**headers, "Last-Event-ID": resume}) as stream:
                for line in stream.iter_lines():
                    assert time.monotonic() < deadline, f"the stream did not end ({resume})"
                    if line.startswith("id: "):
                        ids.append(int(line[4:]))
            assert ids == sent, resume
