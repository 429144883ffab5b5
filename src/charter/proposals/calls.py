"""Storing a proposal tool's draft on the call path, whatever the entry point.

:meth:`charter.runtime.Runtime.call` — which the HTTP API, MCP, the chat orchestrator, the
CLI and Python callers all go through — hands every answer to :func:`store_proposal`. A
succeeded call of a ``proposal``-effect tool whose result carries a draft
(``{"proposal": {"kind": ..., ...}}``) leaves one stored proposal in the call's run and
tenant, requested by the caller; the answer's ``data.proposal`` then names it
(``proposal_id``, ``status``). The proposal's id is derived from the context and call id, so
a retried call (a cache hit) or a concurrent duplicate names the same proposal and never
stores a second one. If storing fails, the call's answer still goes out, with a
``PROPOSAL_NOT_STORED`` warning.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from charter.contracts.model import Effect
from charter.errors import Failure, StoreConflict
from charter.kernel.envelope import CallStatus, Envelope
from charter.kernel.principals import Principal
from charter.ledger.views import ProposalRow, RunRow
from charter.proposals.service import ProposalService, draft_from_result, load_proposal_settings

if TYPE_CHECKING:
    from charter.runtime import Runtime

_log = logging.getLogger("charter.proposals")
_SERVICES: WeakKeyDictionary[Any, ProposalService] = WeakKeyDictionary()


def service_for(runtime: Runtime) -> ProposalService:
    """The runtime's proposal service (the deployment's ``proposals:`` settings), cached."""
    service = _SERVICES.get(runtime)
    if service is None:
        settings = load_proposal_settings(runtime.deployment.source)
        service = _SERVICES[runtime] = ProposalService(runtime, settings)
    return service


def proposal_id_for(context_id: str, call_id: str) -> str:
    """The one proposal a call can leave: derived from its context and call id."""
    digest = hashlib.sha256(f"{context_id}\0{call_id}".encode()).hexdigest()
    return f"prop-{digest[:16]}"


async def store_proposal(runtime: Runtime, envelope: Envelope, principal: Principal) -> Envelope:
    """``envelope``, with its draft stored as a proposal when it is a proposal tool's."""
    if envelope.status is not CallStatus.SUCCEEDED or envelope.tool is None:
        return envelope
    bound = runtime.build.tools.get(envelope.tool)
    if bound is None or bound.contract.effect is not Effect.PROPOSAL:
        return envelope
    draft = draft_from_result(envelope.data)
    if draft is None:
        return envelope
    if envelope.run_id is None or envelope.context_id is None:
        return envelope
    try:
        row = await _stored(runtime, envelope, principal, draft)
    except Failure as exc:
        _log.warning("the proposal of call %r was not stored (%s)", envelope.call_id, exc.reason)
        warning = f"PROPOSAL_NOT_STORED: {exc.reason}; call again with the same call id"
        return replace(envelope, warnings=(*envelope.warnings, warning))
    assert isinstance(envelope.data, Mapping)
    named = {**draft, "proposal_id": row["proposal_id"], "status": row["status"]}
    return replace(envelope, data={**envelope.data, "proposal": named})


async def _stored(
    runtime: Runtime, envelope: Envelope, principal: Principal, draft: Mapping[str, Any]
) -> dict[str, Any]:
    run_id, context_id = envelope.run_id, envelope.context_id
    assert run_id is not None
    assert context_id is not None
    pid = proposal_id_for(context_id, envelope.call_id)
    existing = await runtime.store.read_view(ProposalRow, run_id, pid)
    if existing is not None:
        return existing.to_dict()
    run = await runtime.store.read_view(RunRow, run_id)
    service = service_for(runtime)
    try:
        return await service.create(
            run_id=run_id,
            tenant=principal.tenant,
            requested_by=principal.name,
            tool_id=envelope.tool or "",
            call_id=envelope.call_id,
            draft=draft,
            conversation_id=run.session_id if run is not None else None,
            proposal_id=pid,
        )
    except StoreConflict:  # a concurrent duplicate stored it first
        found = await runtime.store.read_view(ProposalRow, run_id, pid)
        if found is None:
            raise
        return found.to_dict()
