"""Creating, deciding and applying proposals; every step is a ledger event with its actor.

Apply (the only step with an effect) is: approved status, the apply permission, a fresh
validation through the kind's validation tool, an unchanged baseline, then the kind's
applier tool called **through the kernel** under one context and call id bound to the
proposal by ``proposal_apply_started`` — so it is audited, its intent is durable before it
runs, and a retried apply returns the recorded outcome instead of running twice. An applier
that crashes mid-apply leaves the call ``unknown`` and the proposal ``approved``.

Deployment settings (``proposals:`` in ``charter.deploy.yaml``)::

    proposals:
      requester_may_approve: true    # the default
      lifetime_s: 604800
      kinds:
        workflow:
          profile: appliers          # the profile the apply context is resolved with
          validate: workflow.validateDraft
          apply: workflow.applyProposal
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import yaml

from charter.contracts.text import MAX_REASON, bounded
from charter.errors import ConfigError, InvalidInput, PermissionDenied, TransientExternal
from charter.kernel.envelope import CallStatus, Envelope
from charter.kernel.principals import Principal
from charter.kernel.run_notes import scrub_run_note
from charter.ledger.events import NewEvent, format_at
from charter.ledger.ids import new_id
from charter.ledger.trust import refuse_vanished
from charter.ledger.views import ProposalRow

if TYPE_CHECKING:
    from charter.runtime import Runtime

APPROVE_PERMISSION = "proposals:approve"
APPLY_PERMISSION = "proposals:apply"
DEFAULT_LIFETIME_S = 7 * 24 * 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ProposalKind:
    kind: str
    profile: str
    validate: str
    apply: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ProposalSettings:
    requester_may_approve: bool = True
    lifetime_s: float = DEFAULT_LIFETIME_S
    kinds: Mapping[str, ProposalKind] = field(default_factory=dict)


def parse_proposal_settings(doc: Any, *, where: str = "proposals") -> ProposalSettings:
    if doc is None:
        return ProposalSettings()
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where}: must be a mapping")
    kinds: dict[str, ProposalKind] = {}
    for name, spec in (doc.get("kinds") or {}).items():
        if not isinstance(spec, Mapping) or not {"profile", "validate", "apply"} <= set(spec):
            raise ConfigError(f"{where}.kinds.{name}: needs profile, validate and apply")
        kinds[str(name)] = ProposalKind(
            kind=str(name),
            profile=str(spec["profile"]),
            validate=str(spec["validate"]),
            apply=str(spec["apply"]),
        )
    return ProposalSettings(
        requester_may_approve=bool(doc.get("requester_may_approve", True)),
        lifetime_s=float(doc.get("lifetime_s", DEFAULT_LIFETIME_S)),
        kinds=kinds,
    )


def load_proposal_settings(source: Any) -> ProposalSettings:
    """The ``proposals:`` section of the deployment file ``source`` (a path or None)."""
    if source is None or not source.is_file():
        return ProposalSettings()
    doc = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
    return parse_proposal_settings(doc.get("proposals"), where=f"{source}: proposals")


def draft_from_result(data: Any) -> Mapping[str, Any] | None:
    """The draft in a proposal tool's result (``{"proposal": {kind, payload, ...}}``)."""
    if isinstance(data, Mapping):
        draft = data.get("proposal")
        if isinstance(draft, Mapping) and isinstance(draft.get("kind"), str):
            return draft
    return None


def _not_found() -> PermissionDenied:
    return PermissionDenied("no such proposal", reason="PROPOSAL_NOT_FOUND")


def _illegal(row: Mapping[str, Any], action: str) -> InvalidInput:
    return InvalidInput(
        f"cannot {action} the proposal: it is {row['status']}",
        reason="PROPOSAL_ILLEGAL_TRANSITION",
    )


class ProposalService:
    def __init__(self, runtime: Runtime, settings: ProposalSettings | None = None) -> None:
        self.runtime = runtime
        self.settings = settings or ProposalSettings()

    # -- reading

    async def get(self, proposal_id: str, tenant: str) -> dict[str, Any]:
        rows = await self.runtime.store.find_views(ProposalRow, proposal_id=proposal_id, limit=1)
        if not rows:  # its row deleted outside Charter: its run is refused
            await refuse_vanished(self.runtime.store, "proposals", proposal_id, tenant)
        if not rows or rows[0].tenant != tenant:
            raise _not_found()
        return rows[0].to_dict()

    async def list(
        self, *, tenant: str, status: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        where: dict[str, Any] = {"tenant": tenant}
        if status is not None:
            where["status"] = status
        rows = await self.runtime.store.find_views(ProposalRow, limit=limit, **where)
        return [r.to_dict() for r in rows]

    # -- creating

    async def create(
        self,
        *,
        run_id: str,
        tenant: str,
        requested_by: str,
        tool_id: str,
        call_id: str,
        draft: Mapping[str, Any],
        conversation_id: str | None = None,
        proposal_id: str | None = None,
    ) -> dict[str, Any]:
        """Store a draft; validated, or blocked when any diagnostic is an error."""
        diagnostics = [dict(d) for d in draft.get("diagnostics") or [] if isinstance(d, Mapping)]
        blocked = any(d.get("severity", "error") == "error" for d in diagnostics)
        pid = proposal_id or new_id("prop")
        now = self.runtime.clock()
        expires = format_at(now + timedelta(seconds=self.settings.lifetime_s))
        redactor = self.runtime.redactor
        created = {
            "proposal_id": pid,
            "tenant": tenant,
            "conversation_id": conversation_id,
            "requested_by": requested_by,
            "tool_id": tool_id,
            "call_id": call_id,
            "kind": draft["kind"],
            "target": draft.get("target"),
            "baseline_version": draft.get("baseline_version"),
            "payload": redactor.redact(draft.get("payload")),
            "rationale": redactor.redact_text(str(draft.get("rationale") or "")),
            "warnings": list(draft.get("warnings") or []),
            "diagnostics": diagnostics,
            "diff": draft.get("diff"),
            "expires_at": expires,
        }
        outcome = "proposal_blocked" if blocked else "proposal_validated"
        await self.runtime.record(
            run_id,
            [
                NewEvent(type="proposal_created", payload=created),
                NewEvent(
                    type=outcome,
                    payload={"proposal_id": pid, "actor": "charter", "diagnostics": diagnostics},
                ),
            ],
        )
        row = await self.runtime.store.read_view(ProposalRow, run_id, pid)
        assert row is not None
        return row.to_dict()

    # -- deciding

    async def _expire_if_due(self, row: dict[str, Any]) -> dict[str, Any]:
        if row["status"] in ("applied", "rejected", "expired"):
            return row
        if format_at(self.runtime.clock()) < row["expires_at"]:
            return row
        await self._append(row, "proposal_expired", "charter")
        return await self.get(row["proposal_id"], row["tenant"])

    async def _append(
        self, row: Mapping[str, Any], type_: str, actor: str, **extra: Any
    ) -> dict[str, Any]:
        payload = {"proposal_id": row["proposal_id"], "actor": actor, **extra}
        await self.runtime.record(row["run_id"], [NewEvent(type=type_, payload=payload)])
        return await self.get(row["proposal_id"], row["tenant"])

    def _may_decide(self, row: Mapping[str, Any], principal: Principal, permission: str) -> None:
        if not principal.has(permission):
            raise PermissionDenied(
                f"this principal lacks the {permission} permission",
                reason="PROPOSAL_PERMISSION_MISSING",
            )
        if not self.settings.requester_may_approve and row["requested_by"] == principal.name:
            raise PermissionDenied(
                "this deployment does not let a requester decide their own proposal",
                reason="PROPOSAL_SELF_DECISION",
            )

    async def decide(
        self, proposal_id: str, *, approve: bool, principal: Principal, reason: str | None = None
    ) -> dict[str, Any]:
        bounded(reason, field="reason", limit=MAX_REASON, reason="REASON_TOO_LONG")
        row = await self._expire_if_due(await self.get(proposal_id, principal.tenant))
        self._may_decide(row, principal, APPROVE_PERMISSION)
        allowed = ("validated",) if approve else ("validated", "blocked")
        if row["status"] not in allowed:
            raise _illegal(row, "approve" if approve else "reject")
        extra = {"reason": await self._note(row, reason)} if reason else {}
        type_ = "proposal_approved" if approve else "proposal_rejected"
        return await self._append(row, type_, principal.name, **extra)

    async def _note(self, row: Mapping[str, Any], reason: str) -> str:
        """A decision's reason as recorded: redacted, and scrubbed of the secret argument
        values of every call of the proposal's run (:mod:`charter.kernel.run_notes`)."""
        runtime = self.runtime
        return await scrub_run_note(
            reason,
            run_id=row["run_id"],
            store=runtime.store,
            fingerprinter=runtime.fingerprinter,
            redactor=runtime.redactor,
        )

    # -- applying

    async def apply(
        self, proposal_id: str, *, principal: Principal, reason: str | None = None
    ) -> dict[str, Any]:
        bounded(reason, field="reason", limit=MAX_REASON, reason="REASON_TOO_LONG")
        row = await self._expire_if_due(await self.get(proposal_id, principal.tenant))
        self._may_decide(row, principal, APPLY_PERMISSION)
        if row["status"] != "approved":
            raise _illegal(row, "apply")
        kind = self.settings.kinds.get(row["kind"])
        if kind is None:
            raise InvalidInput(
                f"no applier is configured for proposals of kind {row['kind']!r}",
                reason="PROPOSAL_KIND_UNKNOWN",
            )
        apply = row.get("apply")
        if apply is None:
            ctx = await self.runtime.resolve_context(principal, kind.profile, run_id=row["run_id"])
            apply = {"context_id": ctx.context_id, "call_id": f"apply-{proposal_id}"}
        else:
            ctx_found = await self.runtime.get_context(apply["context_id"])
            if ctx_found is None:
                raise _not_found()
        # A fresh validation against the current state, then the baseline check.
        check = await self.runtime.call(
            apply["context_id"],
            kind.validate,
            f"validate-{secrets.token_hex(6)}",
            {
                "target": row["target"],
                "baseline_version": row["baseline_version"],
                "payload": row["payload"],
            },
            as_=principal,
        )
        if check.status is not CallStatus.SUCCEEDED:
            raise TransientExternal(
                "the proposal could not be re-validated", reason="PROPOSAL_VALIDATION_FAILED"
            )
        diagnostics = list((check.data or {}).get("diagnostics") or [])
        if any(d.get("code") == "baseline.stale" for d in diagnostics):
            raise InvalidInput(
                "the target changed since the proposal was made; propose again",
                reason="PROPOSAL_BASELINE_STALE",
                details={"diagnostics": diagnostics},
            )
        if any(d.get("severity", "error") == "error" for d in diagnostics):
            raise InvalidInput(
                "the proposal no longer validates",
                reason="PROPOSAL_INVALID",
                details={"diagnostics": diagnostics},
            )
        if row.get("apply") is None:
            row = await self._append(
                row,
                "proposal_apply_started",
                principal.name,
                context_id=apply["context_id"],
                call_id=apply["call_id"],
            )
        envelope = await self._apply_call(row, kind, apply, principal)
        if envelope.status is CallStatus.SUCCEEDED:
            extra = {"reason": await self._note(row, reason)} if reason else {}
            return await self._append(
                row, "proposal_applied", principal.name, result=envelope.data, **extra
            )
        error = envelope.error or {}
        raise TransientExternal(
            f"the applier answered {envelope.status.value}; the proposal stays approved",
            reason="PROPOSAL_APPLY_" + envelope.status.value.upper(),
            details={"call_id": apply["call_id"], "status": envelope.status.value, "error": error},
        )

    async def _apply_call(
        self,
        row: Mapping[str, Any],
        kind: ProposalKind,
        apply: Mapping[str, Any],
        principal: Principal,
    ) -> Envelope:
        arguments = {
            "proposal_id": row["proposal_id"],
            "target": row["target"],
            "baseline_version": row["baseline_version"],
            "payload": row["payload"],
        }
        envelope = await self.runtime.call(
            apply["context_id"], kind.apply, apply["call_id"], arguments, as_=principal
        )
        if envelope.status is CallStatus.PENDING_APPROVAL and envelope.approval:
            # The operator's approval of the proposal is the human decision for its applier.
            await self.runtime.approve(
                envelope.approval["id"],
                as_=principal,
                reason=f"applying approved proposal {row['proposal_id']}",
            )
            envelope = await self.runtime.call(
                apply["context_id"], kind.apply, apply["call_id"], arguments, as_=principal
            )
        return envelope
