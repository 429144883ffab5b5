"""The kernel's knobs, derived from the deployment; defaults are the documented ones."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from charter.contracts.model import Danger
from charter.kernel.authorize import Enablement

__all__ = ["KernelSettings", "Mode", "ModeScopes"]


class Mode(StrEnum):
    """How much the kernel governs (DESIGN §3)."""

    ENFORCE = "enforce"  # everything is checked and recorded
    OBSERVE = "observe"  # calls run as if ungoverned; what enforce would do is recorded
    OFF = "off"  # no governance, no recording


def _empty() -> Mapping[str, Mode]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class ModeScopes:
    """Modes per tool, agent or profile; the most specific one set applies (tool, then
    agent, then profile), else the deployment's ``mode``."""

    tools: Mapping[str, Mode] = field(default_factory=_empty)
    agents: Mapping[str, Mode] = field(default_factory=_empty)
    profiles: Mapping[str, Mode] = field(default_factory=_empty)
    # tools that may run without their approval in observe mode (named one by one)
    observe_without_approval: frozenset[str] = frozenset()

    def resolve(self, default: Mode, *, tool: str | None, agent: str | None, profile: str) -> Mode:
        if tool is not None and tool in self.tools:
            return self.tools[tool]
        if agent is not None and agent in self.agents:
            return self.agents[agent]
        return self.profiles.get(profile, default)

    @property
    def scoped(self) -> bool:
        return bool(self.tools or self.agents or self.profiles)


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelSettings:
    mode: Mode = Mode.ENFORCE
    modes: ModeScopes = field(default_factory=ModeScopes)
    approval_lifetime_s: float = 300.0
    context_lifetime_s: float = 900.0
    token_budget: int = 32_000
    run_call_budget: int | None = None  # tool calls per run
    run_elapsed_budget_s: float | None = None  # seconds from the run's creation
    max_danger: Danger = Danger.HIGH
    enablement: Enablement = field(default_factory=Enablement)
    coalesce_grace_s: float = 30.0  # wait beyond the contract's timeout for a duplicate
    read_retry_attempts: int = 3  # read-only idempotent tools: attempts within one call
    read_retry_backoff_s: float = 0.05  # doubled each retry
    summary_max_bytes: int = 2048  # the redacted argument summary kept for operators
    policy_hook_deadline_s: float = 0.25  # each ownership hook; overrun → POLICY_ERROR
    pending_approvals_tenant: int | None = 1000  # approvals pending at once per tenant
    pending_approvals_principal: int | None = 100  # ... and per principal
    lease_ttl_s: float = 30.0  # an owner lease lapses this long after its last renewal
    session_idle_s: float | None = 3600.0  # session runs idle this long are ended (None: never)
    renew_session_budgets: bool = True  # a session past its run's budgets gets a fresh run
    run_metadata_retention_s: float | None = None  # ended runs' fingerprints erased (retention)
