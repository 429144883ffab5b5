"""Effect-free replay: re-evaluate a run's recorded decisions against a Build.

The recorded events are the input; nothing is dispatched and no executor is contacted. For
each call the first recorded decision — ``pending_approval`` (``approval_requested``),
``allowed`` (the ``started`` intent), ``denied`` / ``rejected`` (``tool_call_recorded``) — is
compared with what :func:`charter.proof.decide.decide` answers under the Build (the pinned one
named in ``context_resolved``, or a candidate): disclosure (the context's profile and agent in
that Build), authorization, the approval requirement, the approval binding (tool version and
contract digest the approval was given for) and the per-context ``call_limit`` budget.

Arguments are stored only as fingerprints, so argument validation and argument-dependent
hooks (tenancy, ownership) cannot be re-run; calls are re-evaluated as recorded on those.
Principals' permissions come from the deployment when given; otherwise the recorded
principal is assumed to hold the permissions it held (checks marked ``assumed``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from charter.errors import PermissionDenied
from charter.kernel.principals import Principal, PrincipalKind
from charter.ledger.jsonload import loads
from charter.ledger.ports import Store
from charter.project.build import Build
from charter.proof.decide import decide, synthetic_context

DISPATCHED = ("allowed",)


@dataclass(frozen=True, slots=True, kw_only=True)
class CallReplay:
    context_id: str
    call_id: str
    tool: str
    seq: int
    recorded: str
    replayed: str
    reason: str | None
    changed: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "context_id": self.context_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "seq": self.seq,
            "recorded": self.recorded,
            "replayed": self.replayed,
            "reason": self.reason,
            "changed": self.changed,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayReport:
    run_id: str
    build_digest: str
    events: int
    calls: tuple[CallReplay, ...] = field(default_factory=tuple)
    assumed_permissions: bool = False

    @property
    def changed(self) -> tuple[CallReplay, ...]:
        return tuple(c for c in self.calls if c.changed)

    @property
    def now_denied(self) -> tuple[CallReplay, ...]:
        return tuple(c for c in self.changed if c.recorded in DISPATCHED and c.replayed == "denied")

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "build_digest": self.build_digest,
            "events": self.events,
            "assumed_permissions": self.assumed_permissions,
            "calls": [c.to_dict() for c in self.calls],
            "changed": [c.to_dict() for c in self.changed],
            "now_denied": [c.call_id for c in self.now_denied],
        }


def replay_events(
    run_id: str,
    events: Sequence[Mapping[str, Any]],
    build: Build,
    *,
    principals: Mapping[str, Principal] | None = None,
) -> ReplayReport:
    """Pure: ``events`` are ``{seq, type, payload}`` mappings in seq order."""
    replay = Replay(run_id, build, principals=principals)
    for ev in events:
        replay.add(ev)
    return replay.report()


class Replay:
    """:func:`replay_events` one event at a time: :meth:`add` each event in seq order, then
    :meth:`report` (a verified replay feeds it as verification parses each event)."""

    def __init__(
        self, run_id: str, build: Build, *, principals: Mapping[str, Principal] | None = None
    ) -> None:
        self.run_id = run_id
        self.build = build
        self.principals = principals or {}
        self.events = 0
        self.contexts: dict[str, Mapping[str, Any]] = {}
        # The decision without arguments depends only on the context row and the tool: decide
        # once per (context, tool). The call_limit budget and the approval binding stay per
        # call.
        self.decided: dict[str, dict[str, tuple[str, str | None]]] = {}
        self.approvals: dict[str, Mapping[str, Any]] = {}
        self.seen: set[tuple[str, str]] = set()
        self.counts: dict[tuple[str, str], int] = {}
        self.calls: list[CallReplay] = []
        self.assumed = False

    def _principal_of(self, ctx: Mapping[str, Any]) -> Principal:
        found = self.principals.get(ctx["principal"])
        if found is not None:
            return found
        self.assumed = True
        return Principal(
            name=ctx["principal"],
            tenant=ctx["tenant"],
            kind=PrincipalKind(ctx["kind"]),
            permissions=frozenset({"*"}),
        )

    def add(self, ev: Mapping[str, Any]) -> None:
        self.events += 1
        p = ev["payload"]
        typ = ev["type"]
        # Most events are tool_progress; only a call's first decision is replayed.
        if typ == "tool_progress":
            if p.get("stage") != "started":
                return
            recorded = "allowed"
        elif typ == "run_metadata_expired":
            # retention (kernel/retention.py): replay for the run has ended
            raise PermissionDenied(
                f"run {self.run_id}: its metadata expired (retention); it cannot be replayed",
                reason="RUN_METADATA_EXPIRED",
            )
        elif typ == "tool_call_recorded":
            if p.get("outcome") not in ("denied", "rejected"):
                return
            recorded = str(p["outcome"])
        elif typ == "context_resolved":
            self.contexts[p["context_id"]] = p
            self.decided.pop(p["context_id"], None)
            return
        elif typ == "approval_requested":
            self.approvals[p["approval_id"]] = p
            recorded = "pending_approval"
        else:
            return
        key = (p.get("context_id", ""), p.get("call_id", ""))
        if key in self.seen or key[0] not in self.contexts:
            return
        self.seen.add(key)
        build = self.build
        tool = p.get("tool_id") or ""
        by_tool = self.decided.get(key[0])
        if by_tool is None:
            by_tool = self.decided[key[0]] = {}
        cached = by_tool.get(tool)
        if cached is None:
            ctx_row = self.contexts[key[0]]
            who = self._principal_of(ctx_row)
            ctx = synthetic_context(build, who, ctx_row["profile"], ctx_row.get("agent"))
            got = decide(build, ctx, who, tool, None)
            cached = by_tool[tool] = (got.status, got.reason)
        replayed, reason = cached
        contract = build.tools[tool].contract if tool in build.tools else None
        if recorded == "rejected" and replayed in ("allowed", "pending_approval"):
            replayed, reason = "rejected", "AS_RECORDED"  # validation needs the arguments
        if replayed in ("allowed", "pending_approval") and contract is not None:
            n = self.counts.get((key[0], tool), 0) + 1
            self.counts[(key[0], tool)] = n
            if contract.call_limit is not None and n > contract.call_limit:
                replayed, reason = "denied", "CALL_LIMIT_EXCEEDED"
        approval_id = p.get("approval_id")
        if (
            replayed == "pending_approval"
            and recorded == "allowed"
            and isinstance(approval_id, str)
            and contract is not None
        ):
            bound = self.approvals.get(approval_id, {})
            if (bound.get("tool_version"), bound.get("contract_digest")) == (
                contract.version,
                contract.digest,
            ):
                replayed, reason = "allowed", "APPROVED"
            else:
                reason = "APPROVAL_BINDING_CHANGED"
        self.calls.append(
            CallReplay(
                context_id=key[0],
                call_id=key[1],
                tool=tool,
                seq=int(ev["seq"]),
                recorded=recorded,
                replayed=replayed,
                reason=reason,
                changed=replayed != recorded,
            )
        )

    def report(self) -> ReplayReport:
        return ReplayReport(
            run_id=self.run_id,
            build_digest=self.build.digest,
            events=self.events,
            calls=tuple(self.calls),
            assumed_permissions=self.assumed,
        )


async def read_events(store: Store, run_id: str, *, batch: int = 5000) -> list[dict[str, Any]]:
    """The run's events as stored, unverified (``proof.verified.replay_verified`` reads them
    verified, in one pass)."""
    out: list[dict[str, Any]] = []
    after = 0
    while True:
        rows = await store.read_stored(run_id, after=after, limit=batch)
        if not rows:
            return out
        for row in rows:
            out.append(loads(row.data))
        after = rows[-1].seq


async def replay_run(
    store: Store,
    run_id: str,
    build: Build,
    *,
    principals: Mapping[str, Principal] | None = None,
) -> ReplayReport:
    return replay_events(run_id, await read_events(store, run_id), build, principals=principals)
