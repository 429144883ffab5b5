"""What every route needs: the runtime, the authenticator, metrics, readiness checks.

The state lives on ``app.state.charter``; routes get it (and the caller's principal) through
the dependencies below, never from module globals, so several apps can live in one process.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from charter.errors import PermissionDenied
from charter.kernel.principals import Principal
from charter.ledger.chain import LedgerKey
from charter.ledger.trust import LEDGER_DAMAGE
from charter.runtime import Runtime
from charter.server.auth import Authenticator, credential_header
from charter.server.metrics import ServerMetrics
from charter.server.streams import StreamSlots

ReadinessCheck = Callable[[Runtime], Awaitable[Sequence[dict[str, Any]]]]
"""An extra readiness check: returns ``[{"name", "ok", "reason"?, ...}]`` entries; any entry
with ``ok: false`` makes ``/readyz`` answer 503 (executor readiness plugs in here)."""


@dataclass(kw_only=True)
class ServerState:
    runtime: Runtime
    authenticator: Authenticator
    ledger_key: LedgerKey | None
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
    streams: StreamSlots = field(default_factory=StreamSlots)  # open SSE (limits.streams)
    readiness: Sequence[ReadinessCheck] = ()
    max_body_bytes: int = 1024 * 1024 + 64 * 1024
    body_timeout_s: float = 30.0  # a request body still arriving after this: 408 BODY_TIMEOUT
    sse_keepalive_s: float = 15.0
    run_tenant_cache: int = 10_000
    requests: int = 0  # HTTP requests being served (the middleware counts them)
    _run_tenants: OrderedDict[str, str | None] = field(default_factory=OrderedDict)

    async def run_tenant(self, run_id: str) -> str | None:
        """The tenant a run belongs to (its run row, from ``run_created``; runs never move).

        The answers for the most recently asked ``run_tenant_cache`` runs are kept.
        """
        if run_id in self._run_tenants:
            self._run_tenants.move_to_end(run_id)
            return self._run_tenants[run_id]
        run = await self.runtime.run(run_id)
        if run is None:
            return None  # not cached: the run may be created later under this id
        found = run.tenant
        self._run_tenants[run_id] = found
        if len(self._run_tenants) > self.run_tenant_cache:
            self._run_tenants.popitem(last=False)
        return found

    async def check_run(self, run_id: str, principal: Principal) -> None:
        """Another tenant's run answers exactly like a missing one."""
        if await self.run_tenant(run_id) != principal.tenant:
            raise PermissionDenied("no such run", reason="RUN_NOT_FOUND", run_id=run_id)

    async def check_refused_run(self, run_id: str, principal: Principal) -> None:
        """:meth:`check_run` for what may still be done with a run refused for its ledger
        (verify it): the tenant comes from its first event as stored, since its rows are not
        served; a run without a readable ``run_created`` answers like a missing one."""
        try:
            await self.check_run(run_id, principal)
            return
        except LEDGER_DAMAGE:  # refused, or its head row unreadable: its events tell
            pass
        tenant = await self.runtime.stored_tenant(run_id)
        if tenant is None or tenant != principal.tenant:
            raise PermissionDenied("no such run", reason="RUN_NOT_FOUND", run_id=run_id)


def state_of(request: Request) -> ServerState:
    state: ServerState = request.app.state.charter
    return state


def principal_of(request: Request) -> Principal:
    """The authenticated caller (``401`` problem otherwise); remembered for the access log."""
    authorization = credential_header(request.headers, "Authorization")
    principal = state_of(request).authenticator.principal(authorization)
    request.state.principal = principal
    return principal


# The dependencies are coroutines: FastAPI would run plain functions in its thread pool, two
# thread hops per request for work that never blocks (the key check is a hash comparison).
async def get_state(request: Request) -> ServerState:
    return state_of(request)


async def get_principal(request: Request) -> Principal:
    return principal_of(request)
