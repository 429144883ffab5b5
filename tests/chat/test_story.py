"""The workflow-copilot story with the scripted provider, through the library (no HTTP)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from charter.errors import InvalidInput, PermissionDenied
from charter.ledger.verify import verify_run
from charter.project.init import init_project
from charter.proposals import ProposalService, load_proposal_settings
from charter.providers import ChatRequest, Orchestrator, ScriptedProvider
from charter.runtime import open_runtime


async def _turn(orch: Orchestrator, rt: Any, message: str, conv: str) -> list[dict[str, Any]]:
    request = ChatRequest(
        conversation_id=conv,
        principal=rt.principal("app"),
        message=message,
        profile="copilot",
        agent="copilot",
    )
    return [e.to_dict() async for e in orch.execute_chat(request)]


def test_story(tmp_path: Path) -> None:
    init_project(tmp_path, template="workflow-copilot")

    async def go() -> None:
        async with open_runtime(tmp_path, store="memory:") as rt:
            proposals = ProposalService(rt, load_proposal_settings(rt.deployment.source))
            orch = Orchestrator(
                rt,
                provider=ScriptedProvider.from_file(tmp_path / "script.yaml"),
                proposals=proposals,
            )
            events = await _turn(orch, rt, "please create a workflow for onboarding", "conv-1")
            types = [e["type"] for e in events]
            assert types[0] == "conversation.started"
            assert types[-1] == "conversation.completed"
            assert events[0]["data"]["provider"] == "scripted"
            assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
            results = [e["data"] for e in events if e["type"] == "tool.result"]
            assert [r["status"] for r in results] == ["succeeded"] * 3
            created = [e["data"] for e in events if e["type"] == "proposal.created"]
            assert len(created) == 1
            assert created[0]["status"] == "validated"
            assert created[0]["diff"]["added"] == ["a1", "a2"]
            pid = created[0]["proposalId"]
            alice, app = rt.principal("alice"), rt.principal("app")
            with pytest.raises(InvalidInput) as exc:
                await proposals.apply(pid, principal=alice)
            assert exc.value.reason == "PROPOSAL_ILLEGAL_TRANSITION"
            with pytest.raises(PermissionDenied):
                await proposals.get(pid, "globex")
            await proposals.decide(pid, approve=True, principal=alice)
            with pytest.raises(PermissionDenied) as denied:
                await proposals.apply(pid, principal=app)
            assert denied.value.reason == "PROPOSAL_PERMISSION_MISSING"
            applied = await proposals.apply(pid, principal=alice)
            assert applied["status"] == "applied"
            assert applied["applied"]["result"] == {"definition_id": "onboarding", "version": 1}

            # a second conversation proposes two updates on the same baseline
            events = await _turn(orch, rt, "update the onboarding workflow", "conv-2")
            created = [e["data"] for e in events if e["type"] == "proposal.created"]
            assert [c["status"] for c in created] == ["validated", "validated"]
            first, second = (c["proposalId"] for c in created)
            for pid in (first, second):
                await proposals.decide(pid, approve=True, principal=alice)
            assert (await proposals.apply(first, principal=alice))["status"] == "applied"
            with pytest.raises(InvalidInput) as stale:
                await proposals.apply(second, principal=alice)
            assert stale.value.reason == "PROPOSAL_BASELINE_STALE"
            row = await proposals.get(second, "acme")
            assert row["status"] == "approved"
            for run_id in {row["run_id"], applied["run_id"]}:
                report = await verify_run(rt.store, run_id, key=rt.store.key)  # type: ignore[attr-defined]
                assert report.ok, report

    asyncio.run(go())
