"""How many event streams may be open at once: ``limits.streams`` in the deployment file.

::

    limits:
      streams:             # open SSE streams in this process; these are the defaults
        tenant: 100        # each tenant, its principals' streams together
        principal: 20      # each principal (tenant/name)

An event stream holds a connection, a task and the store's attention (``wait_for_events``; a
``LISTEN`` on PostgreSQL) for as long as it is open. Past either cap a new stream is refused
before it starts — ``429 TOO_MANY_STREAMS`` with ``Retry-After`` — and the streams already
open go on. ``null`` lifts a cap. Each process counts its own streams (replicas do not share
the count); see ``docs/server.md`` and :mod:`charter.server.streams`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from charter.deploy.limits import Reader, tenant_principal_caps

KEY = "streams"


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamLimits:
    """Open event streams allowed at once in one process; ``None``: unlimited."""

    tenant: int | None = 100
    principal: int | None = 20

    def describe(self) -> dict[str, int | None]:
        return {"tenant": self.tenant, "principal": self.principal}


def stream_limits(r: Reader, section: Any) -> StreamLimits:
    """``limits.streams`` of the deployment file (``section`` is the ``limits`` mapping)."""
    base = StreamLimits()
    if KEY not in section or section[KEY] is None:
        return base
    tenant, principal = tenant_principal_caps(
        r, section[KEY], f"limits.{KEY}", base.tenant, base.principal
    )
    return StreamLimits(tenant=tenant, principal=principal)
