"""Events edited in the store file under a live HTTP server: the next call of the edited run
is refused as ledger damage (the problem found, and where) while the server keeps serving
other runs, and the run's verify report says the same — without a restart. The store's side
is tests/ledger/test_events_edited_live.py; MCP's, tests/mcp/test_ledger_edited_live.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx2

from tests.console.conftest import console_app
from tests.server._harness import ThreadServer, write_served_project

CALL = {"tool": "kv.get", "arguments": {"key": "k"}}


def test_a_live_server_refuses_a_run_whose_middle_event_was_deleted(tmp_path: Path) -> None:
    served = write_served_project(tmp_path / "served")
    app_key, operator = served.keys["app"], served.keys["alice"]
    bearer = {"Authorization": f"Bearer {app_key}"}
    with (
        ThreadServer(console_app(served.root)) as live,
        httpx2.Client(base_url=live.url, headers=bearer) as http,
    ):
        damaged, intact = (http.post("/v1/contexts", json={"profile": "all"}).json() for _ in "ab")
        for context in (damaged, intact):
            done = http.post(
                f"/v1/contexts/{context['context_id']}/calls", json=CALL | {"call_id": "c1"}
            )
            assert done.status_code == 200, done.text

        conn = sqlite3.connect(served.root / ".charter" / "charter.db", isolation_level=None)
        deleted = conn.execute(
            "DELETE FROM events WHERE run_id = ? AND seq = 3", (damaged["run_id"],)
        ).rowcount
        conn.close()
        assert deleted == 1

        refused = http.post(
            f"/v1/contexts/{damaged['context_id']}/calls", json=CALL | {"call_id": "c2"}
        )
        body = refused.json()
        problem = body.get("error") or body
        assert problem["reason"] == "RUN_LEDGER_INVALID", body
        assert "(LEDGER_GAP at event 3)" in problem["message"]
        assert "Traceback" not in refused.text

        goes_on = http.post(
            f"/v1/contexts/{intact['context_id']}/calls", json=CALL | {"call_id": "c2"}
        )
        assert goes_on.status_code == 200, goes_on.text
        assert goes_on.json()["status"] == "succeeded"

        verified = httpx2.get(
            f"{live.url}/v1/runs/{damaged['run_id']}/verify",
            headers={"Authorization": f"Bearer {operator}"},
        )
        assert verified.status_code == 200, verified.text
        assert (verified.json()["ok"], verified.json()["reason"]) == (False, "LEDGER_GAP")
