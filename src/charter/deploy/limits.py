"""The deployment's call limits: ``limits.rate``, ``limits.concurrency``,
``limits.pending_approvals`` and ``limits.policy_hook_deadline_ms`` (see ``docs/deploy.md``).

::

    limits:
      rate:                                   # token buckets; default: none
        principal: {per_s: 10, burst: 20}     # each principal
        tenant: {per_s: 50, burst: 100}       # each tenant
        tools: {notes.add: {per_s: 1, burst: 5}}   # each named tool, all callers together
      concurrency:                            # calls in flight; default: none
        principal: 8
        tenant: 32
        tools: {notes.add: 2}
      pending_approvals: {tenant: 1000, principal: 100}   # the defaults; null: unlimited
      policy_hook_deadline_ms: 250            # the default
      refusal_audit_interval_s: 1             # one audited refusal per key and interval
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from charter.errors import ConfigError
from charter.kernel.limits import LimitSettings, PendingCaps, Rate

KEYS = frozenset(
    {
        "rate",
        "concurrency",
        "pending_approvals",
        "policy_hook_deadline_ms",
        "refusal_audit_interval_s",
    }
)
_SCOPES = frozenset({"principal", "tenant", "tools"})


class Reader(Protocol):
    def mapping(self, value: Any, where: str, allowed: frozenset[str]) -> Mapping[str, Any]: ...
    def positive(self, value: Any, where: str, *, integer: bool = False) -> float: ...
    def fail(self, where: str, message: str) -> ConfigError: ...


def _rate(r: Reader, value: Any, where: str) -> Rate:
    section = r.mapping(value, where, frozenset({"per_s", "burst"}))
    if "per_s" not in section:
        raise r.fail(f"{where}.per_s", "is required")
    per_s = r.positive(section["per_s"], f"{where}.per_s")
    burst = section.get("burst", max(1, round(per_s)))
    return Rate(per_s=per_s, burst=int(r.positive(burst, f"{where}.burst", integer=True)))


def _tools(r: Reader, value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise r.fail(where, "must be a mapping of tool ids")
    for tool in value:
        if not isinstance(tool, str) or not tool:
            raise r.fail(where, "tool ids must be non-empty strings")
    return value


def call_limits(r: Reader, section: Mapping[str, Any]) -> LimitSettings:
    """``limits.rate`` and ``limits.concurrency`` (absent: no limit)."""
    rate = r.mapping(section.get("rate") or {}, "limits.rate", _SCOPES)
    cap = r.mapping(section.get("concurrency") or {}, "limits.concurrency", _SCOPES)

    def one_cap(value: Any, where: str) -> int:
        return int(r.positive(value, where, integer=True))

    interval = section.get("refusal_audit_interval_s", 1.0)
    return LimitSettings(
        rate_principal=_rate(r, rate["principal"], "limits.rate.principal")
        if rate.get("principal") is not None
        else None,
        rate_tenant=_rate(r, rate["tenant"], "limits.rate.tenant")
        if rate.get("tenant") is not None
        else None,
        rate_tools={
            tool: _rate(r, v, f"limits.rate.tools.{tool}")
            for tool, v in _tools(r, rate.get("tools") or {}, "limits.rate.tools").items()
        },
        concurrency_principal=one_cap(cap["principal"], "limits.concurrency.principal")
        if cap.get("principal") is not None
        else None,
        concurrency_tenant=one_cap(cap["tenant"], "limits.concurrency.tenant")
        if cap.get("tenant") is not None
        else None,
        concurrency_tools={
            tool: one_cap(v, f"limits.concurrency.tools.{tool}")
            for tool, v in _tools(r, cap.get("tools") or {}, "limits.concurrency.tools").items()
        },
        audit_interval_s=r.positive(interval, "limits.refusal_audit_interval_s"),
    )


def pending_caps(r: Reader, section: Mapping[str, Any]) -> PendingCaps:
    """``limits.pending_approvals`` (defaults: 1000 per tenant, 100 per principal)."""
    base = PendingCaps()
    value = section.get("pending_approvals")
    if value is None:
        return base
    tenant, principal = tenant_principal_caps(
        r, value, "limits.pending_approvals", base.tenant, base.principal
    )
    return PendingCaps(tenant=tenant, principal=principal)


def tenant_principal_caps(
    r: Reader, value: Any, where: str, tenant: int | None, principal: int | None
) -> tuple[int | None, int | None]:
    """A ``{tenant, principal}`` mapping of caps at ``where`` (``limits.pending_approvals``,
    ``limits.streams``): each a positive integer, ``null`` (no cap) or left out (the default
    given)."""
    caps = r.mapping(value, where, frozenset({"tenant", "principal"}))

    def one(key: str, default: int | None) -> int | None:
        if key not in caps:
            return default
        if caps[key] is None:
            return None
        return int(r.positive(caps[key], f"{where}.{key}", integer=True))

    return one("tenant", tenant), one("principal", principal)


def hook_deadline_s(r: Reader, section: Mapping[str, Any]) -> float:
    """``limits.policy_hook_deadline_ms`` in seconds (default 250 ms)."""
    ms = section.get("policy_hook_deadline_ms", 250)
    return r.positive(ms, "limits.policy_hook_deadline_ms") / 1000.0
