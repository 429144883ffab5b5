"""A note about a whole run, scrubbed of the secrets its calls carried.

An operator's note that ends a run or a task (``charter.kernel.endings``) or decides a
proposal (``charter.proposals``) is about the run, not one call, so it may quote the secret
argument value of any call in it ("cancelled: key sk-… leaked in call 3"). It is scrubbed as
an approver's note is (:mod:`charter.kernel.secret_marks`), against the marks of **every**
call of the run: those its call rows keep (the intent's ``secret_marks``) and those of its
pending approvals (a call waiting for a decision has no intent yet).

A run with more rows than are read (:data:`MAX_ROWS`) cannot be checked whole: its note is
replaced by ``[REDACTED]``, failing closed as the scrub does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from charter.contracts.canonical import Fingerprinter
from charter.kernel.redaction import REDACTED, Redactor
from charter.kernel.secret_marks import scrub_note
from charter.kernel.store import KernelStore
from charter.ledger.views import ApprovalRow, CallRow

MAX_ROWS = 100_000
"""Call rows (and pending approvals) of a run read for their marks; more fail closed."""


def _marks_of(row: Mapping[str, Any], into: dict[str, dict[str, Any]]) -> None:
    marks = row.get("secret_marks")
    if not isinstance(marks, list):
        return
    for mark in marks:
        if isinstance(mark, Mapping):
            into.setdefault(f"{mark.get('bytes')}/{mark.get('mac')}", dict(mark))
        else:  # malformed: scrub_note cannot check it, so it fails closed
            into.setdefault(repr(mark), {"bytes": None, "mac": None})


async def run_marks(store: KernelStore, run_id: str) -> list[dict[str, Any]] | None:
    """The secret marks of every call of the run (each once); None when the run has more
    rows than :data:`MAX_ROWS` (they cannot all be read: the caller fails closed)."""
    found: dict[str, dict[str, Any]] = {}
    calls = await store.find_views(CallRow, run_id=run_id, limit=MAX_ROWS + 1)
    pending = await store.find_views(
        ApprovalRow, run_id=run_id, status="pending", limit=MAX_ROWS + 1
    )
    if len(calls) > MAX_ROWS or len(pending) > MAX_ROWS:
        return None
    for call in calls:
        _marks_of(call.row, found)
    for approval in pending:
        _marks_of(approval.row, found)
    return list(found.values())


async def scrub_run_note(
    note: str,
    *,
    run_id: str,
    store: KernelStore,
    fingerprinter: Fingerprinter,
    redactor: Redactor,
) -> str:
    """``note`` redacted by the deployment's ``redactor`` and scrubbed of the secret
    argument values of every call of ``run_id`` (``[REDACTED]`` whole when that cannot be
    made sure of)."""
    marks = await run_marks(store, run_id)
    if marks is None:
        return REDACTED
    return scrub_note(note, marks, fingerprinter, redactor)
