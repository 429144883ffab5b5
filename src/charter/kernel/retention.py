"""Run-metadata retention: when a run's metadata expires, its keyed fingerprints go.

With ``limits.run_metadata_retention_s`` set in the deployment, a run that has **ended**
(completed, partial, failed, cancelled) and has had no event for that long has its metadata
expired by the upkeep (``Runtime.operations.maintain``, run by ``charter serve`` every 15 s
and by every runtime when it opens — so by any CLI command): one ``run_metadata_expired``
event names the run's contexts, calls and approvals, and its projection erases from those
rows the keyed argument fingerprints, result fingerprints and idempotency keys, and marks
them ``metadata_expired_at``. From then on deduplication and replay for the run end: a call
naming one of its contexts — even an identical resubmission — is denied
``permission_denied`` / ``RUN_METADATA_EXPIRED``, and replay refuses the run with the same
reason. The run's events, receipts and audit records stay readable, and ``charter runs
verify`` still passes: the erasure is itself a ledger event, applied again when the rows are
rebuilt (the events written before it keep the fingerprints they were written with — the
chain cannot be rewritten; see docs/privacy.md).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from charter.errors import InvalidInput, StoreConflict
from charter.kernel.core import KernelState, _parse_at
from charter.ledger.events import NewEvent
from charter.ledger.trust import LEDGER_DAMAGE, skipped_damaged
from charter.ledger.views import ApprovalRow, CallRow, ContextRow, RunRow

logger = logging.getLogger("charter.kernel.retention")
ENDED = ("completed", "partial", "failed", "cancelled")
_MANY = 100_000


async def expire_run_metadata(state: KernelState, *, limit: int = 1000) -> list[str]:
    """Expire the metadata of every ended run idle past the retention; the run ids."""
    retention_s = state.settings.run_metadata_retention_s
    if retention_s is None:
        return []
    cutoff = state.now() - timedelta(seconds=retention_s)
    expired: list[str] = []
    for status in ENDED:
        for run in await state.store.find_views(RunRow, status=status, limit=limit):
            try:
                done = await _expire(state, run, cutoff, retention_s)
            except LEDGER_DAMAGE as exc:  # refused and reported; the other runs go on
                skipped_damaged(logger, "metadata retention", run.run_id, exc)
                continue
            if done:
                expired.append(run.run_id)
    return expired


async def _expire(state: KernelState, run: RunRow, cutoff: Any, retention_s: float) -> bool:
    store, run_id = state.store, run.run_id
    head = await store.head(run_id)
    if head is None:
        return False
    last = await store.read_stored(run_id, after=head.seq - 1, limit=1)
    if not last or last[0].type == "run_metadata_expired" or _parse_at(last[0].at) > cutoff:
        return False
    contexts = await store.find_views(ContextRow, run_id=run_id, limit=_MANY)
    if contexts and all(c.row.get("metadata_expired_at") for c in contexts):
        return False  # expired before (a later event, e.g. an approval's expiry, came after)
    calls = await store.find_views(CallRow, run_id=run_id, limit=_MANY)
    approvals = await store.find_views(ApprovalRow, run_id=run_id, limit=_MANY)
    payload: dict[str, Any] = {
        "reason": "RETENTION",
        "retention_s": retention_s,
        "contexts": sorted(c.context_id for c in contexts),
        "calls": sorted([c.context_id, c.call_id] for c in calls),
        "approvals": sorted(a.approval_id for a in approvals),
    }
    try:
        await store.append(
            run_id,
            [NewEvent(type="run_metadata_expired", payload=payload)],
            expected_seq=head.seq + 1,
        )
    except (InvalidInput, StoreConflict):
        return False  # another process expired it, or the run moved: decide next round
    for context in contexts:
        state.contexts.pop(context.context_id, None)
    return True
