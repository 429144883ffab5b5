"""The kernel's settings and ownership hooks, derived from a loaded deployment."""

from __future__ import annotations

from pathlib import Path

from charter.deploy.deployment import Deployment
from charter.deploy.policy import load_hooks
from charter.kernel.authorize import Enablement, Hook
from charter.kernel.settings import KernelSettings


def kernel_settings(deployment: Deployment) -> KernelSettings:
    """Mode, lifetimes, limits and the ``policy:`` knobs as the kernel reads them."""
    policy = deployment.policy
    return KernelSettings(
        mode=deployment.mode,
        modes=policy.modes,
        approval_lifetime_s=deployment.approval_lifetime_s,
        context_lifetime_s=deployment.context_lifetime_s,
        token_budget=deployment.limits.context_tokens,
        run_call_budget=deployment.limits.run_tool_calls,
        run_elapsed_budget_s=deployment.limits.run_elapsed_s,
        policy_hook_deadline_s=deployment.limits.policy_hook_deadline_s,
        pending_approvals_tenant=deployment.limits.pending.tenant,
        pending_approvals_principal=deployment.limits.pending.principal,
        session_idle_s=deployment.limits.session_idle_s,
        renew_session_budgets=deployment.limits.renew_session_budgets,
        run_metadata_retention_s=deployment.limits.run_metadata_retention_s,
        max_danger=policy.max_danger,
        enablement=Enablement(
            enabled=deployment.enabled_tools
            if deployment.enabled_tools is not None
            else frozenset(),
            all_enabled=deployment.enabled_tools is None,
            kill_switch=deployment.kill_switch,
            disabled=policy.disabled,
            agent_enabled=policy.agent_enabled,
            agent_disabled=policy.agent_disabled,
        ),
    )


def ownership_hooks(deployment: Deployment, project_dir: Path | None) -> tuple[Hook, ...]:
    """The deployment's ownership hooks, imported (``ConfigError`` naming a bad entry)."""
    return load_hooks(deployment.policy, project_dir, source=deployment.source)
