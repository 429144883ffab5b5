"""Conformance of the typed read port (:class:`charter.ledger.views.TypedReads`).

Part of :class:`charter.testing.store_conformance.StoreConformance` (a plain class: a runner
supplies ``store``), so memory, SQLite and
PostgreSQL each answer ``read_view`` / ``find_views`` with the same views of the same rows:
one run with a task, an artifact, a context, a call waiting for an approval that was
approved, a call whose outcome is unknown and a proposal.
"""

from __future__ import annotations

from typing import Any

from charter.kernel.store import KernelStore
from charter.ledger.projections import RowKey
from charter.ledger.views import (
    ApprovalRow,
    ArtifactRow,
    CallRow,
    ContextRow,
    ProposalRow,
    RunRow,
    TaskRow,
    table_of,
)
from charter.testing.raises import raises
from charter.testing.scenarios import artifact, ev

EXPIRES = "2030-01-01T00:00:00.000000Z"
DIGEST = "sha256:" + "ef" * 32
FINGERPRINT = "hmac-sha256:k1:" + "12" * 32


def _call(call_id: str, tool_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "context_id": "ctx-v",
        "call_id": call_id,
        "tool_id": tool_id,
        "tool_version": "1.0.0",
        "contract_digest": DIGEST,
        "fingerprint": FINGERPRINT,
        "tenant": "acme",
        "actor": "app",
        "summary": {"title": "t"},
        **extra,
    }


async def record_typed_run(store: KernelStore, run_id: str = "run-v") -> None:
    """A run whose projections fill every table the views read."""
    await store.append(
        run_id,
        [
            ev(
                "run_created",
                session_id="sess-v",
                workflow_slug="adhoc",
                workflow=None,
                tenant="acme",
                created_by="app",
            ),
            ev("run_status_changed", status="planning"),
            ev("task_created", task_id="t1", role="writer", profile="main", title="Write"),
            ev("run_status_changed", status="running"),
            ev("artifact_registered", **artifact("a-1", "out/report.csv", task_id="t1")),
            ev(
                "context_resolved",
                context_id="ctx-v",
                tenant="acme",
                principal="app",
                profile="main",
                agent=None,
                expires_at=EXPIRES,
                tools=[{"id": "notes.add", "call_limit": 5}],
            ),
            ev(
                "approval_requested",
                approval_id="ap-1",
                expires_at=EXPIRES,
                effect="write",
                danger="high",
                **_call("c-1", "notes.add"),
            ),
            ev("approval_approved", approval_id="ap-1", actor="alice", reason="fine"),
            ev(
                "tool_progress",
                stage="started",
                owner={"host": "h1", "pid": 1, "start": "s"},
                idempotency_key="idem-2",
                **_call("c-2", "notes.search"),
            ),
            ev(
                "tool_progress",
                stage="unknown",
                context_id="ctx-v",
                call_id="c-2",
                reason="DISPATCH_INTERRUPTED",
                receipt={"status": "unknown", "data": None},
            ),
            ev(
                "proposal_created",
                proposal_id="prop-1",
                tenant="acme",
                kind="workflow",
                requested_by="app",
                tool_id="workflow.propose",
                call_id="c-3",
                target="wf-1",
                baseline_version=3,
                payload={"steps": []},
                diagnostics=[],
                diff=None,
                expires_at=EXPIRES,
            ),
        ],
    )


class TypedReadConformance:
    """The typed views every store returns (mixed into the store conformance suite)."""

    async def test_typed_views_of_every_table(self, store: KernelStore) -> None:
        await record_typed_run(store)
        run = await store.read_view(RunRow, "run-v")
        assert isinstance(run, RunRow)
        assert (run.run_id, run.session_id, run.tenant, run.status) == (
            "run-v",
            "sess-v",
            "acme",
            "running",
        )
        [task] = await store.find_views(TaskRow, run_id="run-v")
        assert (task.task_id, task.status, task.attempts, task.role) == (
            "t1",
            "pending",
            0,
            "writer",
        )
        [art] = await store.find_views(ArtifactRow, run_id="run-v")
        assert (art.artifact_id, art.path, art.size, art.trust) == (
            "a-1",
            "out/report.csv",
            1234,
            "internal",
        )
        assert art.producer["task_id"] == "t1"
        ctx = await store.read_view(ContextRow, "run-v", "ctx-v")
        assert ctx is not None
        assert (ctx.tenant, ctx.principal, ctx.profile, ctx.expires_at) == (
            "acme",
            "app",
            "main",
            EXPIRES,
        )
        assert ctx.calls_by_tool == {"notes.add": 1}

    async def test_typed_calls_and_approvals(self, store: KernelStore) -> None:
        await record_typed_run(store)
        [waiting] = await store.find_views(CallRow, call_id="c-1", tenant="acme")
        assert (waiting.state, waiting.approval_id, waiting.tool_id) == (
            "pending_approval",
            "ap-1",
            "notes.add",
        )
        [unknown] = await store.find_views(CallRow, state="unknown", tenant="acme")
        assert (unknown.call_id, unknown.actor, unknown.attempts) == ("c-2", "app", 1)
        assert unknown.owner == {"host": "h1", "pid": 1, "start": "s"}
        assert unknown.idempotency_key == "idem-2"
        assert unknown.receipt == {"status": "unknown", "data": None}
        assert await store.find_views(CallRow, state="unknown", tenant="globex") == []
        in_run = await store.list_views(CallRow, "run-v")
        assert sorted(c.call_id for c in in_run) == ["c-1", "c-2"]
        assert await store.list_views(CallRow, "run-missing") == []
        [approval] = await store.find_views(ApprovalRow, tenant="acme", status="approved")
        assert (approval.approval_id, approval.call_id, approval.decided_by, approval.reason) == (
            "ap-1",
            "c-1",
            "alice",
            "fine",
        )
        assert (approval.effect, approval.danger, approval.expires_at) == ("write", "high", EXPIRES)
        assert await store.find_views(ApprovalRow, tenant="acme", status="pending") == []
        same = await store.read_view(ApprovalRow, "run-v", "ap-1")
        assert same == approval

    async def test_typed_proposals(self, store: KernelStore) -> None:
        await record_typed_run(store)
        [proposal] = await store.find_views(ProposalRow, tenant="acme")
        assert (proposal.proposal_id, proposal.kind, proposal.status) == (
            "prop-1",
            "workflow",
            "draft",
        )
        assert (proposal.target, proposal.baseline_version) == ("wf-1", 3)
        assert [h["status"] for h in proposal.history] == ["draft"]
        assert await store.find_views(ProposalRow, tenant="acme", status="applied") == []

    async def test_a_view_keeps_its_stored_row(self, store: KernelStore) -> None:
        await record_typed_run(store)
        keys: list[tuple[Any, tuple[str, ...]]] = [
            (RunRow, ("run-v",)),
            (TaskRow, ("run-v", "t1")),
            (ArtifactRow, ("run-v", "a-1")),
            (ContextRow, ("run-v", "ctx-v")),
            (CallRow, ("run-v", "ctx-v", "c-2")),
            (ApprovalRow, ("run-v", "ap-1")),
            (ProposalRow, ("run-v", "prop-1")),
        ]
        for view, key in keys:
            found = await store.read_view(view, *key)
            assert isinstance(found, view)
            assert found.to_dict() == await store.get_row(RowKey(table_of(view), key))
        assert await store.read_view(CallRow, "run-v", "ctx-v", "missing") is None
        assert await store.read_view(RunRow, "run-missing") is None

    async def test_an_unindexed_column_is_refused(self, store: KernelStore) -> None:
        with raises(ValueError, match=r"calls\.actor"):
            await store.find_views(CallRow, actor="app")
        with raises(ValueError, match=r"approvals\.requested_by"):
            await store.find_views(ApprovalRow, requested_by="app")
