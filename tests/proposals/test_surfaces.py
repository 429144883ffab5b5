"""A proposal tool called over HTTP and over MCP (the official SDK client) leaves a stored
proposal in the caller's tenant — the same record the chat leaves — that an operator
approves and applies in the console; a retried call names the same proposal; a stale
baseline is 409 over the API; another tenant never sees it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from charter.client import Client
from charter.errors import PermissionDenied
from charter.project.init import init_project
from charter.runtime import open_runtime
from charter.server import create_app
from tests.console._console import csrf_of, signed_in
from tests.server._harness import ThreadServer

ACTIVITIES = [{"id": "a1", "type": "SendEmail"}, {"id": "a2", "type": "Delay"}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    root = tmp_path_factory.mktemp("surfaces")
    init_project(root, template="workflow-copilot")
    secrets = root / ".charter" / "secrets"
    keys = {n: (secrets / f"{n}.key").read_text().strip() for n in ("alice", "app", "intruder")}

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store="sqlite:///.charter/charter.db")

    with ThreadServer(create_app(opener=opener)) as live:
        yield live.url, keys


def _propose_http(
    url: str, key: str, call_id: str, args: dict[str, Any], tool: str = "workflow.proposeCreate"
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx2.Client(base_url=url, headers=headers, timeout=30) as http:
        ctx = http.post("/v1/contexts", json={"profile": "copilot"}).json()["context_id"]
        body = {"tool": tool, "call_id": call_id, "arguments": args}
        first = http.post(f"/v1/contexts/{ctx}/calls", json=body).json()
        again = http.post(f"/v1/contexts/{ctx}/calls", json=body).json()
    assert first["status"] == "succeeded", first
    assert again["metrics"]["cached"] is True
    assert again["data"]["proposal"]["proposal_id"] == first["data"]["proposal"]["proposal_id"]
    proposal: dict[str, Any] = first["data"]["proposal"]
    return proposal


def _console_apply(url: str, key: str, pid: str) -> str:
    console = signed_in(url, key)
    page = console.get(f"/console/proposals/{pid}")
    assert page.status_code == 200
    token = csrf_of(page.text)
    approved = console.post(f"/console/proposals/{pid}/approve", data={"csrf_token": token})
    assert approved.status_code == 303, approved.text
    page = console.get(f"/console/proposals/{pid}")
    applied = console.post(
        f"/console/proposals/{pid}/apply", data={"csrf_token": csrf_of(page.text), "confirm": "yes"}
    )
    assert applied.status_code == 303, applied.text
    return str(applied.headers["location"])


def test_a_proposal_over_http_is_stored_and_applied_in_the_console(
    served: tuple[str, dict[str, str]],
) -> None:
    url, keys = served
    args = {"name": "onboarding-http", "activities": ACTIVITIES}
    draft = _propose_http(url, keys["app"], "http-1", args)
    pid = draft["proposal_id"]
    assert draft["status"] == "validated"
    with Client(url, keys["alice"]) as alice, Client(url, keys["intruder"]) as intruder:
        row = alice.get_proposal(pid)
        assert row["requested_by"] == "app"
        assert row["tool_id"] == "workflow.proposeCreate"
        assert row["call_id"] == "http-1"
        assert [p["proposal_id"] for p in alice.proposals()].count(pid) == 1  # one, not two
        with pytest.raises(PermissionDenied):
            intruder.get_proposal(pid)
        assert pid not in {p["proposal_id"] for p in intruder.proposals()}
        assert _console_apply(url, keys["alice"], pid).endswith("done=applied")
        assert alice.get_proposal(pid)["status"] == "applied"


def test_a_proposal_over_mcp_is_stored_and_applied(served: tuple[str, dict[str, str]]) -> None:
    url, keys = served

    async def propose() -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {keys['app']}"}
        async with (
            httpx2.AsyncClient(headers=headers, trust_env=False, timeout=30) as http,
            McpClient(streamable_http_client(f"{url}/mcp/copilot", http_client=http)) as mcp,
        ):
            args = {"name": "onboarding-mcp", "activities": ACTIVITIES}
            result = await mcp.call_tool("workflow_proposeCreate", args)
            assert not result.is_error, result
            content: dict[str, Any] = result.structured_content or {}
            return content

    content = anyio.run(propose)
    pid = content["proposal"]["proposal_id"]
    with Client(url, keys["alice"]) as alice:
        row = alice.get_proposal(pid)
        assert row["status"] == "validated"
        assert row["requested_by"] == "app"
        assert alice.approve_proposal(pid)["status"] == "approved"
        assert alice.apply_proposal(pid)["status"] == "applied"
        # two updates from the same baseline: the first applied, the second is stale (409)
        update = {
            "definition_id": "onboarding-mcp",
            "baseline_version": 1,
            "activities": ACTIVITIES,
        }
        first, second = (
            _propose_http(url, keys["app"], f"upd-{n}", update, tool="workflow.proposeUpdate")
            for n in (1, 2)
        )
        for proposal in (first, second):
            assert proposal["status"] == "validated"
            alice.approve_proposal(proposal["proposal_id"])
        assert alice.apply_proposal(first["proposal_id"])["status"] == "applied"
    stale = httpx2.post(
        f"{url}/v1/proposals/{second['proposal_id']}/apply",
        headers={"Authorization": f"Bearer {keys['alice']}"},
        timeout=30,
    )
    assert stale.status_code == 409
    assert stale.json()["reason"] == "PROPOSAL_BASELINE_STALE"
