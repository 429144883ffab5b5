"""``charter serve`` stopping (SIGTERM) while a governed call runs: once its 5-second grace
period is over the call is cut off, and its client is told what became of it.

Before: the client got uvicorn's bare ``500 Internal Server Error`` (plain text, no envelope)
and the log an "Exception in ASGI application" — a 5xx that generic retry logic reads as
"retry", for a call whose outcome is unknown (docs/server.md: failed and unknown are
deliberately never 5xx). Now the answer is the call's envelope as the kernel recorded it,
``unknown`` / ``CALL_CANCELLED`` with HTTP 200, and the same call id keeps answering it
after a restart without running the tool again.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import httpx2

from charter.client import Client
from tests.server._harness import spawn_serve, spawn_serve_process, write_served_project


def test_a_call_cut_off_by_the_servers_stop_answers_its_recorded_envelope(
    tmp_path: Path,
) -> None:
    project = write_served_project(tmp_path / "served")
    store = "sqlite:///.charter/charter.db"
    journal = project.root / "journal.txt"
    answers: list[httpx2.Response] = []
    body = {"tool": "kv.slow", "call_id": "cut-1", "arguments": {"seconds": 12}}
    with spawn_serve_process(project.root, store) as (url, proc):
        with Client(url, project.keys["app"]) as app:
            ctx = app.resolve_context("all")["context_id"]

        def call() -> None:
            answers.append(
                httpx2.post(
                    f"{url}/v1/contexts/{ctx}/calls",
                    json=body,
                    headers={"Authorization": f"Bearer {project.keys['app']}"},
                    timeout=60,
                )
            )

        caller = threading.Thread(target=call)
        caller.start()
        deadline = time.monotonic() + 30
        while not (journal.exists() and "cut-1" in journal.read_text()):
            assert time.monotonic() < deadline, "the tool never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        caller.join(timeout=60)
        proc.wait(timeout=60)
    log = (project.root / f"serve-{url.rsplit(':', 1)[1]}.log").read_text()
    [answer] = answers
    assert answer.status_code == 200, answer.text
    envelope = answer.json()
    assert (envelope["call_id"], envelope["status"]) == ("cut-1", "unknown"), envelope
    assert envelope["error"]["reason"] == "CALL_CANCELLED", envelope
    assert "Exception in ASGI application" not in log
    with spawn_serve(project.root, store) as url, Client(url, project.keys["app"]) as app:
        again = app.call(ctx, "kv.slow", "cut-1", {"seconds": 12})
        assert (again.status.value, again.metrics.cached) == ("unknown", True), again
    runs = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [r["call_id"] for r in runs if r["tool"] == "kv.slow"] == ["cut-1"]
