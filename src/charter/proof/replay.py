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

Replay *as someone*: the deployment's principals (their permissions) and enablement (which
tools may run) are inputs. When they are not given — or a recorded principal is not in the
deployment — replay assumes the most permissive answer (every permission held, every tool
enabled) and says so: the report names each assumption, and each call lists the assumptions
its replayed decision depended on (``assumed``), found by deciding again with the assumption
withdrawn — no permissions for an unknown principal; for enablement, the deployment default
(read tools on, proposal and write tools only when enabled by name).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from charter.errors import PermissionDenied
from charter.kernel.authorize import Enablement
from charter.kernel.principals import Principal, PrincipalKind
from charter.ledger.jsonload import loads
from charter.ledger.ports import Store
from charter.ledger.slots import slot_setters
from charter.project.build import Build
from charter.proof.decide import ALL_ENABLED, decide, synthetic_context

DISPATCHED = ("allowed",)
_REFUSED = ("denied", "rejected")  # the outcomes of tool_call_recorded that are decisions


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
    assumed: tuple[str, ...] = ()  # "permissions" / "enablement": what the decision rests on

    def to_dict(self) -> dict[str, Any]:
        return {
            "assumed": list(self.assumed),
            "context_id": self.context_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "seq": self.seq,
            "recorded": self.recorded,
            "replayed": self.replayed,
            "reason": self.reason,
            "changed": self.changed,
        }


_new = object.__new__
(
    _set_context_id,
    _set_call_id,
    _set_tool,
    _set_seq,
    _set_recorded,
    _set_replayed,
    _set_reason,
    _set_changed,
    _set_assumed,
) = slot_setters(
    CallReplay,
    (
        "context_id",
        "call_id",
        "tool",
        "seq",
        "recorded",
        "replayed",
        "reason",
        "changed",
        "assumed",
    ),
)


def _call_replay(
    context_id: str,
    call_id: str,
    tool: str,
    recorded: str,
    replayed: str,
    reason: str | None,
    changed: bool,
    assumed: tuple[str, ...],
    seq: int,
) -> CallReplay:
    """``CallReplay(...)`` built through its slots' setters (:mod:`charter.ledger.slots`):
    the same frozen object at under half the cost, once per replayed call."""
    call: CallReplay = _new(CallReplay)
    _set_context_id(call, context_id)
    _set_call_id(call, call_id)
    _set_tool(call, tool)
    _set_seq(call, seq)
    _set_recorded(call, recorded)
    _set_replayed(call, replayed)
    _set_reason(call, reason)
    _set_changed(call, changed)
    _set_assumed(call, assumed)
    return call


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayReport:
    run_id: str
    build_digest: str
    """The candidate Build's digest, or — replayed against each context's pinned Build — the
    pinned digest when the run's contexts share one (their digests, comma-separated, when a
    deploy changed the Build during the run)."""
    events: int
    pinned: bool = False  # against the Builds the contexts were resolved under
    calls: tuple[CallReplay, ...] = field(default_factory=tuple)
    assumed_permissions: bool = False
    assumed_principals: tuple[str, ...] = ()  # recorded principals the deployment lacks
    assumed_enablement: bool = False  # no deployment enablement: every tool assumed enabled

    @property
    def assumptions(self) -> tuple[str, ...]:
        """What this replay assumed instead of knowing (empty: it replayed as the deployment)."""
        return tuple(
            name
            for name, on in (
                ("permissions", self.assumed_permissions),
                ("enablement", self.assumed_enablement),
            )
            if on
        )

    @property
    def depends_on_assumption(self) -> tuple[CallReplay, ...]:
        return tuple(c for c in self.calls if c.assumed)

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
            "pinned": self.pinned,
            "events": self.events,
            "assumed_permissions": self.assumed_permissions,
            "assumed_principals": list(self.assumed_principals),
            "assumed_enablement": self.assumed_enablement,
            "assumptions": list(self.assumptions),
            "depends_on_assumption": [c.call_id for c in self.depends_on_assumption],
            "calls": [c.to_dict() for c in self.calls],
            "changed": [c.to_dict() for c in self.changed],
            "now_denied": [c.call_id for c in self.now_denied],
        }


BuildOf = Callable[[str], Build]
"""The Build of a digest a context was resolved under (raises when it cannot be found)."""


def replay_events(
    run_id: str,
    events: Sequence[Mapping[str, Any]],
    build: Build | BuildOf,
    *,
    principals: Mapping[str, Principal] | None = None,
    enablement: Enablement | None = None,
) -> ReplayReport:
    """Pure: ``events`` are ``{seq, type, payload}`` mappings in seq order."""
    replay = Replay(run_id, build, principals=principals, enablement=enablement)
    for ev in events:
        replay.add(ev)
    return replay.report()


class Replay:
    """:func:`replay_events` one event at a time: :meth:`add` each event in seq order, then
    :meth:`report` (a verified replay feeds it as verification parses each event).

    ``build`` is a candidate Build every context is replayed against, or a function giving
    the Build of a digest: each context is then replayed against the Build it was resolved
    under (its pinned Build, named in its ``context_resolved`` event)."""

    def __init__(
        self,
        run_id: str,
        build: Build | BuildOf,
        *,
        principals: Mapping[str, Principal] | None = None,
        enablement: Enablement | None = None,
    ) -> None:
        self.run_id = run_id
        self.candidate = build if isinstance(build, Build) else None
        self.pinned = None if isinstance(build, Build) else build
        self.builds: dict[str, Build] = {}  # context id -> its Build
        self.principals = principals or {}
        self.enablement = enablement if enablement is not None else ALL_ENABLED
        self.assumed_enablement = enablement is None
        self.assumed_principals: set[str] = set()
        self.events = 0
        self.contexts: dict[str, Mapping[str, Any]] = {}
        # The decision without arguments depends only on the context row and the tool: decide
        # once per (context, tool). The call_limit budget and the approval binding stay per
        # call.
        self.decided: dict[str, dict[str, tuple[str, str | None, tuple[str, ...]]]] = {}
        self.approvals: dict[str, Mapping[str, Any]] = {}
        # context -> the calls replayed (one level per part, not (context, call) tuples: a
        # run's calls would leave that many tuples for the cyclic collector to traverse)
        self.seen: dict[Any, set[Any]] = {}
        self.counts: dict[tuple[str, str], int] = {}
        self.calls: list[CallReplay] = []
        self.assumed = False

    def _principal_of(self, ctx: Mapping[str, Any]) -> tuple[Principal, bool]:
        found = self.principals.get(ctx["principal"])
        if found is not None:
            return found, False
        self.assumed = True
        self.assumed_principals.add(str(ctx["principal"]))
        return Principal(
            name=ctx["principal"],
            tenant=ctx["tenant"],
            kind=PrincipalKind(ctx["kind"]),
            permissions=frozenset({"*"}),
        ), True

    def _build_of(self, context_id: str) -> Build:
        """The Build a context's calls are replayed against."""
        if self.candidate is not None:
            return self.candidate
        return self.builds[context_id]

    def _decide(
        self, ctx_row: Mapping[str, Any], tool: str
    ) -> tuple[str, str | None, tuple[str, ...]]:
        """The decision, and the assumptions it depends on (it changes without them)."""
        build = self._build_of(ctx_row["context_id"])
        who, assumed_who = self._principal_of(ctx_row)
        profile, agent = ctx_row["profile"], ctx_row.get("agent")
        ctx = synthetic_context(build, who, profile, agent)
        got = decide(build, ctx, who, tool, None, enablement=self.enablement)
        assumed: list[str] = []
        if assumed_who:
            bare = replace(who, permissions=frozenset())
            alt = decide(
                build,
                synthetic_context(build, bare, profile, agent),
                bare,
                tool,
                None,
                enablement=self.enablement,
            )
            if alt.status != got.status:
                assumed.append("permissions")
        if self.assumed_enablement:
            alt = decide(build, ctx, who, tool, None, enablement=Enablement())
            if alt.status != got.status:
                assumed.append("enablement")
        return got.status, got.reason, tuple(assumed)

    def add(self, ev: Mapping[str, Any]) -> None:
        self.events += 1
        p = ev["payload"]
        found = self._replayed(ev["type"], p)
        if found is not None:
            self.calls.append(_call_replay(*found, int(ev["seq"])))

    def take(self, typ: Any, p: Any, seq: Any) -> None:
        """:meth:`add` given the event's ``type``, ``payload`` and ``seq`` (a verified replay
        hands them over without building the event's document).

        The events that record no decision — most of a run: a call's progress past its start,
        and its ``tool_call_recorded`` unless denied or rejected — are passed over here,
        without :meth:`_replayed`'s frame (which answers None for them too)."""
        self.events += 1
        if typ == "tool_progress":
            if p.get("stage") != "started":
                return
        elif typ == "tool_call_recorded" and p.get("outcome") not in _REFUSED:
            return
        found = self._replayed(typ, p)
        if found is not None:
            self.calls.append(_call_replay(*found, int(seq)))

    def _replayed(
        self, typ: Any, p: Any
    ) -> tuple[str, str, str, str, str, str | None, bool, tuple[str, ...]] | None:
        """The replayed decision of a call's first recorded decision (without its seq), or
        None for an event that records none."""
        # Most events are tool_progress; only a call's first decision is replayed.
        if typ == "tool_progress":
            if p.get("stage") != "started":
                return None
            recorded = "allowed"
        elif typ == "run_metadata_expired":
            # retention (kernel/retention.py): replay for the run has ended
            raise PermissionDenied(
                f"run {self.run_id}: its metadata expired (retention); it cannot be replayed",
                reason="RUN_METADATA_EXPIRED",
            )
        elif typ == "tool_call_recorded":
            if p.get("outcome") not in _REFUSED:
                return None
            recorded = str(p["outcome"])
        elif typ == "context_resolved":
            self.contexts[p["context_id"]] = p
            self.decided.pop(p["context_id"], None)
            if self.pinned is not None:
                digest = str(p.get("build_digest"))
                known = next((b for b in self.builds.values() if b.digest == digest), None)
                self.builds[p["context_id"]] = known or self.pinned(digest)
            return None
        elif typ == "approval_requested":
            self.approvals[p["approval_id"]] = p
            recorded = "pending_approval"
        else:
            return None
        key = (p.get("context_id", ""), p.get("call_id", ""))
        hash(key)  # an unhashable id raises here, as it did when the key was a set member
        seen = self.seen.get(key[0])
        if (seen is not None and key[1] in seen) or key[0] not in self.contexts:
            return None
        if seen is None:
            seen = self.seen[key[0]] = set()
        seen.add(key[1])
        build = self._build_of(key[0])
        tool = p.get("tool_id") or ""
        by_tool = self.decided.get(key[0])
        if by_tool is None:
            by_tool = self.decided[key[0]] = {}
        cached = by_tool.get(tool)
        if cached is None:
            cached = by_tool[tool] = self._decide(self.contexts[key[0]], tool)
        replayed, reason, assumed = cached
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
        return (key[0], key[1], tool, recorded, replayed, reason, replayed != recorded, assumed)

    def report(self) -> ReplayReport:
        if self.candidate is not None:
            digest = self.candidate.digest
        else:
            digest = ", ".join(dict.fromkeys(b.digest for b in self.builds.values()))
        return ReplayReport(
            run_id=self.run_id,
            build_digest=digest,
            pinned=self.candidate is None,
            events=self.events,
            calls=tuple(self.calls),
            assumed_permissions=self.assumed,
            assumed_principals=tuple(sorted(self.assumed_principals)),
            assumed_enablement=self.assumed_enablement,
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
    build: Build | BuildOf,
    *,
    principals: Mapping[str, Principal] | None = None,
    enablement: Enablement | None = None,
) -> ReplayReport:
    return replay_events(
        run_id,
        await read_events(store, run_id),
        build,
        principals=principals,
        enablement=enablement,
    )


def enablement_of(enabled_tools: frozenset[str] | None, *, kill_switch: bool) -> Enablement:
    """A deployment's enablement as the kernel holds it (``None``: every tool enabled)."""
    return Enablement(
        enabled=enabled_tools if enabled_tools is not None else frozenset(),
        all_enabled=enabled_tools is None,
        kill_switch=kill_switch,
    )
