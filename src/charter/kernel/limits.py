"""Rate and concurrency limits per principal, tenant and tool, checked before validation.

The kernel holds one :class:`Limiter` and asks it once per call, right after the context is
found and before anything else is read, parsed or written — so a flood costs one decision per
call, not a validation, a ledger append and an audit record each:

* **rate** — a token bucket per key (``per_s`` tokens a second, up to ``burst``); a call takes one
  token from each bucket that applies, all or none;
* **concurrency** — calls in flight per key; a call holds one slot of each key that applies
  until its answer is ready.

A refusal is ``resource_limit`` / ``RATE_LIMITED`` or ``CONCURRENCY_LIMITED`` with
``retry_after`` (seconds) in its details and envelope error; the HTTP API answers 429 with
``Retry-After``. Refusals are counted (:attr:`Limiter.refusals`, exported on ``/metrics``) and
audited, sampled: the first refusal of a key in each :attr:`LimitSettings.audit_interval_s`
is recorded, the others only counted.

Where the state lives is the :class:`LimitState` port: :class:`ProcessLimitState` keeps it in
the process (the SQLite and memory stores: one process), and
:class:`charter.stores.postgres_limits.PostgresLimitState` keeps it in PostgreSQL so that
replicas sharing the database share the limits.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from charter.errors import ResourceLimit
from charter.kernel.principals import Principal

__all__ = [
    "Admission",
    "LimitSettings",
    "LimitState",
    "Limiter",
    "ProcessLimitState",
    "Rate",
]


@dataclass(frozen=True, slots=True)
class Rate:
    """A token bucket: ``per_s`` tokens a second, at most ``burst`` saved up."""

    per_s: float
    burst: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitSettings:
    """The deployment's ``limits.rate`` / ``limits.concurrency`` (``None``: unlimited)."""

    rate_principal: Rate | None = None
    rate_tenant: Rate | None = None
    rate_tools: Mapping[str, Rate] = field(default_factory=dict)
    concurrency_principal: int | None = None
    concurrency_tenant: int | None = None
    concurrency_tools: Mapping[str, int] = field(default_factory=dict)
    lease_s: float = 900.0  # a slot held for a call of unknown length is freed after this
    audit_interval_s: float = 1.0  # at most one audited refusal per key in this interval

    @property
    def enabled(self) -> bool:
        return bool(
            self.rate_principal
            or self.rate_tenant
            or self.rate_tools
            or self.concurrency_principal
            or self.concurrency_tenant
            or self.concurrency_tools
        )


Verdict = tuple[str | None, str, float]
"""A state's answer: ``(None, "", 0)`` admitted, or ``(key, "rate" | "concurrency", retry
after seconds)`` for the first key that refused (a plain tuple: the PostgreSQL state lives in
the stores layer, below the kernel)."""
ADMIT: Verdict = (None, "", 0.0)


class LimitState(Protocol):
    """Where buckets and in-flight slots live; one call decides all keys at once."""

    async def admit(
        self,
        rates: Sequence[tuple[str, Rate]],
        caps: Sequence[tuple[str, int]],
        slot: str,
        lease_s: float,
    ) -> Verdict:
        """Take a token of every bucket and a slot of every cap, all or none."""
        ...

    async def release(self, caps: Sequence[tuple[str, int]], slot: str) -> None: ...


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class ProcessLimitState:
    """Buckets and slots in this process (a SQLite or memory store has one process)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}
        self._inflight: dict[str, int] = {}

    async def admit(
        self,
        rates: Sequence[tuple[str, Rate]],
        caps: Sequence[tuple[str, int]],
        slot: str,
        lease_s: float,
    ) -> Verdict:
        with self._lock:
            for key, cap in caps:
                if self._inflight.get(key, 0) >= cap:
                    return (key, "concurrency", 1.0)
            now = self._clock()
            filled: list[tuple[str, Rate, float]] = []
            for key, rate in rates:
                bucket = self._buckets.get(key)
                tokens = float(rate.burst) if bucket is None else bucket.tokens
                if bucket is not None:
                    tokens = min(float(rate.burst), tokens + (now - bucket.at) * rate.per_s)
                if tokens < 1.0:
                    return (key, "rate", (1.0 - tokens) / rate.per_s)
                filled.append((key, rate, tokens))
            for key, _, tokens in filled:
                self._buckets[key] = _Bucket(tokens - 1.0, now)
            for key, _ in caps:
                self._inflight[key] = self._inflight.get(key, 0) + 1
        return ADMIT

    async def release(self, caps: Sequence[tuple[str, int]], slot: str) -> None:
        with self._lock:
            for key, _ in caps:
                left = self._inflight.get(key, 0) - 1
                if left > 0:
                    self._inflight[key] = left
                else:
                    self._inflight.pop(key, None)


class Admission:
    """A call let through: holds its concurrency slots until :meth:`release`."""

    def __init__(
        self, state: LimitState | None, caps: Sequence[tuple[str, int]], slot: str
    ) -> None:
        self._state = state
        self._caps = caps
        self._slot = slot

    async def release(self) -> None:
        state, self._state = self._state, None
        if state is not None and self._caps:
            await state.release(self._caps, self._slot)


ADMITTED = Admission(None, (), "")


class Limiter:
    """The limits of one deployment over one :class:`LimitState`."""

    def __init__(
        self,
        settings: LimitSettings,
        state: LimitState,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.state = state
        self._clock = clock
        self._lock = threading.Lock()
        self._audited: dict[str, float] = {}
        self.refusals: dict[tuple[str, str], int] = {}  # (reason, scope) -> count

    def _keys(
        self, principal: Principal, tool_id: str | None
    ) -> tuple[list[tuple[str, Rate]], list[tuple[str, int]]]:
        s = self.settings
        who = f"principal:{principal.tenant}/{principal.name}"
        tenant = f"tenant:{principal.tenant}"
        rates: list[tuple[str, Rate]] = []
        caps: list[tuple[str, int]] = []
        if s.rate_principal is not None:
            rates.append((who, s.rate_principal))
        if s.rate_tenant is not None:
            rates.append((tenant, s.rate_tenant))
        if tool_id is not None and tool_id in s.rate_tools:
            rates.append((f"tool:{tool_id}", s.rate_tools[tool_id]))
        if s.concurrency_principal is not None:
            caps.append((who, s.concurrency_principal))
        if s.concurrency_tenant is not None:
            caps.append((tenant, s.concurrency_tenant))
        if tool_id is not None and tool_id in s.concurrency_tools:
            caps.append((f"tool:{tool_id}", s.concurrency_tools[tool_id]))
        return rates, caps

    async def admit(
        self,
        principal: Principal,
        tool_id: str | None,
        slot: str,
        *,
        lease_s: float | None = None,
    ) -> Admission | ResourceLimit:
        """An :class:`Admission` to release when the call is answered, or the refusal.

        ``lease_s``: how long the call can take at most (its slots are freed after that if
        the process holding them is lost); the settings' ``lease_s`` when not given.
        """
        rates, caps = self._keys(principal, tool_id)
        if not rates and not caps:
            return ADMITTED
        lease = lease_s if lease_s is not None else self.settings.lease_s
        key, kind, retry = await self.state.admit(rates, caps, slot, lease)
        if key is None:
            return Admission(self.state, caps, slot)
        scope = key.split(":", 1)[0]
        reason = "RATE_LIMITED" if kind == "rate" else "CONCURRENCY_LIMITED"
        retry_after = max(0.001, round(retry, 3))
        with self._lock:
            self.refusals[(reason, scope)] = self.refusals.get((reason, scope), 0) + 1
        what = "rate" if kind == "rate" else "calls-in-flight"
        return ResourceLimit(
            f"the {scope}'s {what} limit is reached; retry after {retry_after:g} s",
            reason=reason,
            retryable=True,
            details={"scope": scope, "retry_after": retry_after},
        )

    def sample(self, principal: Principal, refusal: ResourceLimit) -> bool:
        """True when this refusal is the one of its key and interval to audit."""
        key = f"{refusal.reason}:{refusal.details.get('scope')}:{principal.tenant}/{principal.name}"
        now = self._clock()
        with self._lock:
            last = self._audited.get(key)
            if last is not None and now - last < self.settings.audit_interval_s:
                return False
            self._audited[key] = now
            if len(self._audited) > 10_000:  # forget the oldest half; sampling stays bounded
                for old in sorted(self._audited, key=self._audited.__getitem__)[:5_000]:
                    del self._audited[old]
            return True


def retry_after_header(seconds: float) -> str:
    """``Retry-After`` in whole seconds (at least 1)."""
    return str(max(1, math.ceil(seconds)))


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingCaps:
    """Pending approvals allowed at once (``limits.pending_approvals``; ``None``: unlimited)."""

    tenant: int | None = 1000
    principal: int | None = 100


async def pending_approvals_refusal(
    store: KernelStoreLike, caps: PendingCaps, principal: Principal, now_at: str
) -> ResourceLimit | None:
    """``TOO_MANY_PENDING_APPROVALS`` when the tenant or principal is at its cap, else None.

    Counts the tenant's approvals that are ``pending`` and not yet expired (an approval that
    expired unanswered stays ``pending`` in the table until it is touched, and is not
    counted). Reads at most a few times the tenant cap in rows.
    """
    if caps.tenant is None and caps.principal is None:
        return None
    largest = max(c for c in (caps.tenant, caps.principal) if c is not None)
    window = max(4 * largest, 1000)
    rows = await store.query_rows(
        "approvals", {"tenant": principal.tenant, "status": "pending"}, limit=window
    )
    live = [row for row in rows if str(row.get("expires_at", "")) > now_at]
    scope: str | None = None
    cap = 0
    if caps.tenant is not None and len(live) >= caps.tenant:
        scope, cap = "tenant", caps.tenant
    elif caps.principal is not None:
        mine = sum(1 for row in live if row.get("requested_by") == principal.name)
        if mine >= caps.principal:
            scope, cap = "principal", caps.principal
    if scope is None:
        return None
    return ResourceLimit(
        f"the {scope} already has {cap} approvals pending (the limit); decide some first",
        reason="TOO_MANY_PENDING_APPROVALS",
        retryable=True,
        details={"scope": scope, "limit": cap},
    )


class KernelStoreLike(Protocol):
    async def query_rows(
        self, table: str, where: Mapping[str, object], *, limit: int = 100
    ) -> Sequence[Mapping[str, object]]: ...
