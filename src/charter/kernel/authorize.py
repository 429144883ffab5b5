"""Authorization as a chain of pure hooks, in the Elsa seed's order.

Each hook receives one :class:`AuthorizationInput` and returns a :class:`Denial` or ``None``.
The first denial wins; a hook that raises denies (anything undecidable denies). The same
functions serve live calls and replay, because they do no I/O.

Order (the Elsa seed's "Tool Execution Rules", DESIGN §3 phase 2)::

    [actor and context, disclosure]  → validation →
    tenant → RBAC (permissions) → ownership hooks (deployment-supplied) → danger
    → enablement (global, disabled, per agent) → agent scope → task rules (the kernel's
    ``task_rules`` slot, after this chain)

Only the checks that need no contract run before validation: the context belongs to the
caller, and the tool was offered (a name the context never offered is denied before its
arguments are parsed, and never named). Everything else needs the validated arguments
(tenant arguments, ownership), so it runs after strict validation, in the order above, and
the first denial answers. The validated arguments reach the hooks as a read-only copy
(:func:`frozen`): a hook can not change what runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from charter.contracts.fastinit import maker
from charter.contracts.model import Danger, Effect, Tenancy, ToolContract
from charter.kernel.contexts import ResolvedContext
from charter.kernel.principals import Principal

DANGER_ORDER = {Danger.LOW: 0, Danger.MEDIUM: 1, Danger.HIGH: 2, Danger.CRITICAL: 3}
HOST_PERMISSION = "charter:host"
CROSS_TENANT_PERMISSION = "charter:cross-tenant"
CRITICAL_PERMISSION = "danger:critical"
TENANT_ARGUMENTS = ("tenant", "tenant_id", "tenantId")


@dataclass(frozen=True, slots=True, kw_only=True)
class Denial:
    reason: str
    message: str
    internal: bool = False
    """A hook that raised: the call is denied (authorization fails closed) with the error code
    ``internal`` instead of ``permission_denied`` — a fault, not a decision."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Enablement:
    """Read tools are on by default; proposal and write tools only when enabled by name."""

    enabled: frozenset[str] = frozenset()
    all_enabled: bool = False  # local development default: every tool enabled
    disabled: frozenset[str] = frozenset()
    kill_switch: bool = False
    agent_enabled: Mapping[str, frozenset[str]] = field(default_factory=dict)
    agent_disabled: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizationInput:
    principal: Principal
    context: ResolvedContext
    tool: str  # the name the caller used
    contract: ToolContract | None  # None when the context did not offer that name
    agent_tools: frozenset[str] | None  # the agent's allowed tools, None without an agent
    enablement: Enablement
    arguments: Mapping[str, Any] | None = field(default=None, repr=False)  # when known
    max_danger: Danger = Danger.HIGH

    def with_arguments(self, arguments: Mapping[str, Any] | None) -> AuthorizationInput:
        """This input with the parsed arguments (what ``dataclasses.replace`` makes, without
        its per-call walk over the fields: once per governed call)."""
        return make_input(
            principal=self.principal,
            context=self.context,
            tool=self.tool,
            contract=self.contract,
            agent_tools=self.agent_tools,
            enablement=self.enablement,
            arguments=arguments,
            max_danger=self.max_danger,
        )


Hook = Callable[[AuthorizationInput], Denial | None]
make_input = maker(AuthorizationInput)  # twice per governed call (kernel/fastinit.py)


def actor_and_tenant(inp: AuthorizationInput) -> Denial | None:
    ctx = inp.context
    if inp.principal.name != ctx.principal or inp.principal.tenant != ctx.tenant:
        return Denial(
            reason="CONTEXT_PRINCIPAL_MISMATCH",
            message="this context was resolved for another principal",
        )
    return None


def agent_scope(inp: AuthorizationInput) -> Denial | None:
    c = inp.contract
    if c is None:
        return None  # disclosure denies it next, without revealing anything
    if inp.agent_tools is not None and c.id not in inp.agent_tools:
        return Denial(reason="AGENT_SCOPE", message="the agent may not use this tool")
    if c.agent_scopes and (inp.context.agent is None or inp.context.agent not in c.agent_scopes):
        return Denial(reason="AGENT_SCOPE", message="this tool is limited to other agents")
    return None


def disclosure(inp: AuthorizationInput) -> Denial | None:
    if inp.contract is None or inp.context.offered(inp.tool) is None:
        return Denial(reason="TOOL_NOT_DISCLOSED", message="this context does not offer that tool")
    return None


def enablement(inp: AuthorizationInput) -> Denial | None:
    c = inp.contract
    assert c is not None
    en = inp.enablement
    if en.kill_switch:
        return Denial(reason="KILL_SWITCH", message="all tool execution is switched off")
    if c.id in en.disabled:
        return Denial(reason="TOOL_DISABLED", message="this tool is disabled")
    agent = inp.context.agent
    per_agent = en.agent_enabled.get(agent) if agent is not None else None
    if agent is not None and c.id in en.agent_disabled.get(agent, frozenset()):
        return Denial(reason="TOOL_DISABLED", message="this tool is disabled for this agent")
    if c.effect is not Effect.READ:
        enabled = (
            en.all_enabled or c.id in en.enabled or (per_agent is not None and c.id in per_agent)
        )
        if not enabled:
            return Denial(
                reason="TOOL_NOT_ENABLED",
                message=f"{c.effect.value} tools run only when enabled by name in the deployment",
            )
    return None


def tenancy(inp: AuthorizationInput) -> Denial | None:
    c = inp.contract
    assert c is not None
    p = inp.principal
    if c.tenancy is Tenancy.HOST_SCOPED and not p.has(HOST_PERMISSION):
        return Denial(reason="HOST_SCOPE", message="this tool acts on the host, not a tenant")
    if (
        c.tenancy is not Tenancy.HOST_SCOPED
        and inp.arguments is not None
        # (no tenant argument, the usual case: nothing to look up)
        and not inp.arguments.keys().isdisjoint(TENANT_ARGUMENTS)
    ):
        for key in TENANT_ARGUMENTS:
            value = inp.arguments.get(key)
            if isinstance(value, str) and value != p.tenant:
                if c.tenancy is Tenancy.TENANT_SCOPED and p.has(CROSS_TENANT_PERMISSION):
                    continue
                return Denial(
                    reason="CROSS_TENANT",
                    message=f"argument {key!r} names another tenant",
                )
    return None


def permissions(inp: AuthorizationInput) -> Denial | None:
    c = inp.contract
    assert c is not None
    principal = inp.principal
    if type(principal) is Principal and principal.permissions.issuperset(c.permissions):
        return None  # each granted exactly (what Principal.has looks at first)
    missing = [perm for perm in c.permissions if not principal.has(perm)]
    if missing:
        return Denial(
            reason="PERMISSION_MISSING",
            message=f"the caller lacks permission {', '.join(sorted(missing))}",
        )
    return None


def danger_policy(inp: AuthorizationInput) -> Denial | None:
    c = inp.contract
    assert c is not None
    assert c.danger is not None
    if c.danger is Danger.CRITICAL and not inp.principal.has(CRITICAL_PERMISSION):
        return Denial(
            reason="DANGER_POLICY", message="critical tools need the danger:critical permission"
        )
    if DANGER_ORDER[c.danger] > DANGER_ORDER[inp.max_danger] and not inp.principal.has(
        CRITICAL_PERMISSION
    ):
        return Denial(
            reason="DANGER_POLICY",
            message=f"the deployment allows tools up to danger {inp.max_danger.value}",
        )
    return None


# The seed's order: tenant, RBAC, ownership (hooks between these two tuples), danger,
# enablement, agent scope.
BEFORE_VALIDATION: tuple[Hook, ...] = (actor_and_tenant, disclosure)
AFTER_VALIDATION: tuple[Hook, ...] = (tenancy, permissions)
FINAL: tuple[Hook, ...] = (danger_policy, enablement, agent_scope)
ORDER: tuple[str, ...] = (
    "tenant",
    "rbac",
    "ownership",
    "danger",
    "enablement",
    "agent_scope",
    "task",
)


def frozen(value: Any) -> Any:
    """A read-only deep copy: mappings become ``MappingProxyType``, lists become tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    return value


def read_only(inp: AuthorizationInput) -> AuthorizationInput:
    """``inp`` with its arguments as a read-only copy (what policy hooks receive)."""
    if inp.arguments is None or isinstance(inp.arguments, MappingProxyType):
        return inp
    return inp.with_arguments(frozen(inp.arguments))


def raised(exc: Exception) -> Denial:
    """The denial for a hook that raised ``exc`` (its type is named, never its text)."""
    return Denial(
        reason="POLICY_ERROR",
        message=f"a policy hook raised {type(exc).__name__}; denying",
        internal=True,
    )


def run_chain(inp: AuthorizationInput, hooks: Sequence[Hook]) -> Denial | None:
    """The first denial of ``hooks``; a hook that raises denies with ``internal`` /
    ``POLICY_ERROR``."""
    for hook in hooks:
        try:
            denial = hook(inp)
        except Exception as exc:
            return raised(exc)
        if denial is not None:
            return denial
    return None


def authorize(
    inp: AuthorizationInput, *, ownership: Sequence[Hook] = (), before_validation: bool = False
) -> Denial | None:
    """Run the chain: the part that needs no arguments, or all of it (with ownership hooks)."""
    if before_validation:
        return run_chain(inp, BEFORE_VALIDATION)
    hooks = (*BEFORE_VALIDATION, *AFTER_VALIDATION, *ownership, *FINAL)
    return run_chain(read_only(inp), hooks)
