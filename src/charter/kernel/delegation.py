"""Delegation: a tool that runs other tools (the ChemSpace seed's ``delegates_execution``).

A contract that declares ``delegates_execution: true`` is dispatched without the run's write
lock, without artifact confinement and without registering artifacts: its own call records
only its events (``started`` with ``span_id`` and ``delegates_execution: true``, its outcome
and its audit record). Each call made inside it is governed on its own, one by one, and
records the delegating call's span as ``parent_span_id`` — in-process through
:data:`charter.contracts.delegation.CURRENT_SPAN` (set by the dispatcher while the delegating
tool runs), or from a remote executor, whose tool got the span with its request and whose
client passes it back (``X-Charter-Parent-Span``).

A parent must be a delegating call of the same run that is still ``dispatching``; anything
else is refused (``DELEGATION_PARENT_UNKNOWN``), so a caller cannot hang its call under
another call, and a call that arrives after its delegating call ended is not a child of it.

The ledger's in-flight guard (:mod:`charter.kernel.inflight`) watches only the delegated
calls: a delegating call in flight does not hold a run or task transition back — the calls it
makes do. Crash recovery (:meth:`charter.kernel.operators.Operators.reconcile`) records an
orphaned delegating call ``abandoned`` (``DELEGATION_ORPHANED``): it had no effect of its own;
its children are reconciled one by one like any call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from charter.contracts.delegation import SPAN_ID
from charter.errors import PermissionDenied
from charter.kernel.contexts import ResolvedContext
from charter.kernel.store import KernelStore
from charter.ledger.views import CallRow

ORPHANED = "DELEGATION_ORPHANED"


def delegates(row: CallRow | Mapping[str, Any]) -> bool:
    """Whether the call row is a delegating call's."""
    data = row.row if isinstance(row, CallRow) else row
    return bool(data.get("delegates_execution"))


def span_of(row: CallRow | Mapping[str, Any]) -> str | None:
    data = row.row if isinstance(row, CallRow) else row
    span = data.get("span_id")
    return span if isinstance(span, str) else None


def parent_of(row: CallRow | Mapping[str, Any]) -> str | None:
    data = row.row if isinstance(row, CallRow) else row
    span = data.get("parent_span_id")
    return span if isinstance(span, str) else None


async def parent_denial(
    store: KernelStore, ctx: ResolvedContext, parent_span_id: str | None, call_id: str
) -> PermissionDenied | None:
    """``None`` when the call names no parent, or a delegating call of its run that is still
    running, or is a resubmission of a call already recorded under that parent (it gets its
    receipt, or waits for it, as any repeated call id); otherwise the denial."""
    if parent_span_id is None:
        return None
    if not isinstance(parent_span_id, str) or SPAN_ID.fullmatch(parent_span_id) is None:
        return PermissionDenied(
            "parent_span_id is not a span id", reason="DELEGATION_PARENT_UNKNOWN"
        )
    rows = await store.find_views(CallRow, run_id=ctx.run_id, state="dispatching", limit=10_000)
    if any(delegates(r) and span_of(r) == parent_span_id for r in rows):
        return None
    known = await store.read_view(CallRow, ctx.run_id, ctx.context_id, call_id)
    if known is not None and parent_of(known) == parent_span_id:
        return None
    return PermissionDenied(
        "the parent span is not a delegating call still running in this run",
        reason="DELEGATION_PARENT_UNKNOWN",
        details={"parent_span_id": parent_span_id},
    )


def orphaned_receipt(attempts: int) -> dict[str, Any]:
    """The receipt crash recovery records for a delegating call whose process is gone."""
    return {
        "status": "abandoned",
        "data": None,
        "error": {
            "code": "internal",
            "reason": ORPHANED,
            "message": "the process running this delegating call stopped; the call had no "
            "effect of its own, and each call it made is reconciled on its own",
            "retryable": False,
        },
        "warnings": [],
        "artifact_ids": [],
        "output_bytes": 0,
        "attempts": attempts,
    }


def tree(rows: Iterable[CallRow | Mapping[str, Any]], root_span: str) -> list[dict[str, Any]]:
    """The calls made inside the delegating span ``root_span``, each with its own children
    (a delegated call may delegate again), in the order they were reserved."""
    by_parent: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        data = r.row if isinstance(r, CallRow) else r
        parent = parent_of(data)
        if parent is not None:
            by_parent.setdefault(parent, []).append(data)

    def node(data: Mapping[str, Any], seen: frozenset[str]) -> dict[str, Any]:
        span = span_of(data)
        out: dict[str, Any] = {
            "context_id": data.get("context_id"),
            "call_id": data.get("call_id"),
            "tool_id": data.get("tool_id"),
            "state": data.get("state"),
            "span_id": span,
            "parent_span_id": parent_of(data),
            "delegates_execution": delegates(data),
            "children": [],
        }
        if span is not None and span not in seen:
            out["children"] = [
                node(child, seen | {span})
                for child in sorted(
                    by_parent.get(span, ()), key=lambda d: int(d.get("reserved_seq") or 0)
                )
            ]
        return out

    children = sorted(by_parent.get(root_span, ()), key=lambda d: int(d.get("reserved_seq") or 0))
    return [node(c, frozenset({root_span})) for c in children]


def _brief(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "context_id": data.get("context_id"),
        "call_id": data.get("call_id"),
        "tool_id": data.get("tool_id"),
        "state": data.get("state"),
        "span_id": span_of(data),
    }


async def family(store: KernelStore, call: CallRow) -> dict[str, Any] | None:
    """A call's place in its delegation tree: ``{span_id, delegates_execution, parent,
    children}`` — the delegating call it was made in (or None) and, for a delegating call,
    the calls made inside it with theirs. ``None`` for a call that neither delegates nor was
    delegated. What ``charter calls show``, ``GET /v1/calls/…`` and the console show."""
    parent_span, span = parent_of(call), span_of(call)
    if parent_span is None and not delegates(call):
        return None
    parent: dict[str, Any] | None = None
    if parent_span is not None:
        calls = await store.find_views(CallRow, run_id=call.run_id, limit=10_000)
        found = next((c for c in calls if span_of(c) == parent_span and delegates(c)), None)
        parent = _brief(found.row) if found is not None else {"span_id": parent_span}
    children: list[dict[str, Any]] = []
    if span is not None and delegates(call):
        # every delegated call of the run (the parent_span_id column), then the tree of them
        rows: list[CallRow] = []
        frontier, seen = [span], {span}
        while frontier:
            current = frontier.pop()
            found_rows = await store.find_views(
                CallRow, run_id=call.run_id, parent_span_id=current, limit=10_000
            )
            rows.extend(found_rows)
            for r in found_rows:
                child = span_of(r)
                if child is not None and delegates(r) and child not in seen:
                    seen.add(child)
                    frontier.append(child)
        children = tree(rows, span)
    return {
        "span_id": span,
        "delegates_execution": delegates(call),
        "parent": parent,
        "children": children,
    }
