"""One call's governance decision against a Build, without I/O and without dispatch.

Context tests and replay share it: which tools a principal/profile/agent context offers, and
what the kernel would answer for a call — ``denied`` (disclosure or authorization),
``rejected`` (invalid arguments), ``pending_approval`` or ``allowed`` (it would dispatch).
It uses the kernel's own pure authorization chain and argument intake.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from charter.contracts.canonical import Fingerprinter
from charter.contracts.intake import Intake
from charter.contracts.model import ToolContract
from charter.errors import InvalidInput
from charter.kernel.authorize import AuthorizationInput, Enablement, authorize
from charter.kernel.contexts import OfferedTool, ResolvedContext
from charter.kernel.principals import Principal
from charter.project.build import Build

_FINGERPRINTER = Fingerprinter("proof", b"charter-proof-fingerprints-only!")
ALL_ENABLED = Enablement(all_enabled=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    status: str  # allowed | pending_approval | denied | rejected
    code: str | None = None
    reason: str | None = None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "code": self.code, "reason": self.reason}


def offered(
    build: Build, principal: Principal, profile: str, agent: str | None
) -> list[ToolContract]:
    """The tools a context would offer (the kernel's rule: listing = callable set)."""
    if profile not in build.profiles:
        return []
    agent_tools = (
        frozenset(build.agents[agent].tools)
        if agent is not None and agent in build.agents
        else None
    )
    if agent is not None and agent_tools is None:
        return []
    out = []
    for c in build.profile_tools(profile):
        if agent_tools is not None and c.id not in agent_tools:
            continue
        if c.agent_scopes and (agent is None or agent not in c.agent_scopes):
            continue
        if all(principal.has(p) for p in c.permissions):
            out.append(c)
    return out


def synthetic_context(
    build: Build, principal: Principal, profile: str, agent: str | None
) -> ResolvedContext:
    tools = tuple(
        OfferedTool(
            id=c.id,
            name=c.name,
            version=c.version,
            digest=c.digest,
            effect=c.effect.value,
            call_limit=c.call_limit,
        )
        for c in offered(build, principal, profile, agent)
    )
    return ResolvedContext(
        context_id="ctx-proof",
        run_id="run-proof",
        build_digest=build.digest,
        principal=principal.name,
        tenant=principal.tenant,
        kind=principal.kind.value,
        profile=profile,
        agent=agent,
        objective=None,
        tools=tools,
        schema_digest="",
        token_estimate=0,
        token_budget=0,
    )


def decide(
    build: Build,
    ctx: ResolvedContext,
    principal: Principal,
    tool: str,
    arguments: Mapping[str, Any] | None,
    *,
    enablement: Enablement = ALL_ENABLED,
) -> Decision:
    """What the kernel would decide; ``arguments=None`` skips validation (replay)."""
    hit = ctx.offered(tool)
    contract = build.tools[hit.id].contract if hit is not None and hit.id in build.tools else None
    agent_tools = (
        frozenset(build.agents[ctx.agent].tools)
        if ctx.agent is not None and ctx.agent in build.agents
        else None
    )
    inp = AuthorizationInput(
        principal=principal,
        context=ctx,
        tool=tool,
        contract=contract,
        agent_tools=agent_tools,
        enablement=enablement,
    )
    denial = authorize(inp, before_validation=True)
    if denial is not None:
        return Decision(
            status="denied", code="permission_denied", reason=denial.reason, message=denial.message
        )
    assert contract is not None
    validated: Mapping[str, Any] | None = None
    if arguments is not None:
        try:
            validated = (
                Intake(contract.args_schema, _FINGERPRINTER).accept_value(dict(arguments)).arguments
            )
        except InvalidInput as exc:
            return Decision(
                status="rejected", code="invalid_input", reason=exc.reason, message=str(exc)
            )
    denial = authorize(replace(inp, arguments=validated))
    if denial is not None:
        return Decision(
            status="denied", code="permission_denied", reason=denial.reason, message=denial.message
        )
    if contract.requires_approval:
        return Decision(status="pending_approval", reason="APPROVAL_REQUIRED")
    return Decision(status="allowed")
