"""How the console shows a proposal: its diff as added / removed / changed, its diagnostics
as table rows, its effective status, and what each refusal means — pure, without I/O.

Proposal tools write diffs in one of two shapes, both handled:

- a graph diff ``{"added": [...], "removed": [...], "changed": [...]}`` whose items are ids
  (the workflow-copilot example) or ``{"id": ..., "changes": [json ops]}``
  (:func:`charter.proposals.graph_diff`); ids are looked up in the payload's
  ``activities`` to show what was added or changed;
- a JSON diff ``[{"op": "add"|"remove"|"replace", "path", "before"?, "after"?}]``
  (:func:`charter.proposals.json_diff`).

Anything else is shown as raw JSON rather than dropped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from charter.server.console.views import compact, seconds_left

STATUSES = ("draft", "validated", "blocked", "approved", "rejected", "applied", "expired")
OPEN = frozenset({"draft", "validated", "blocked", "approved"})
SECTIONS = ("added", "removed", "changed")
_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    label: str
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Diff:
    added: tuple[Change, ...] = ()
    removed: tuple[Change, ...] = ()
    changed: tuple[Change, ...] = ()
    raw: Any = None  # a diff in a shape the console does not know

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed) and self.raw is None


def _by_id(payload: Any) -> dict[str, Any]:
    items = payload.get("activities") if isinstance(payload, Mapping) else None
    if not isinstance(items, list):
        return {}
    return {str(a["id"]): a for a in items if isinstance(a, Mapping) and "id" in a}


def _op_detail(op: Mapping[str, Any]) -> str:
    kind = op.get("op")
    if kind == "add":
        return compact(op.get("after"))
    if kind == "remove":
        return compact(op.get("before"))
    return f"{compact(op.get('before'))} → {compact(op.get('after'))}"


def _json_ops(ops: list[Any]) -> Diff:
    found: dict[str, list[Change]] = {s: [] for s in SECTIONS}
    section = {"add": "added", "remove": "removed"}
    for op in ops:
        if isinstance(op, Mapping):
            where = section.get(str(op.get("op")), "changed")
            found[where].append(Change(label=str(op.get("path") or "/"), detail=_op_detail(op)))
    return Diff(**{s: tuple(found[s]) for s in SECTIONS})


def _graph(diff: Mapping[str, Any], payload: Any) -> Diff:
    after = _by_id(payload)
    found: dict[str, list[Change]] = {s: [] for s in SECTIONS}
    for section in SECTIONS:
        items = diff.get(section) or []
        for item in items if isinstance(items, list) else [items]:
            if isinstance(item, Mapping):
                label = str(item.get("id", compact(item)))
                ops = item.get("changes")
                if isinstance(ops, list):
                    detail = "; ".join(
                        f"{o.get('path') or '/'}: {_op_detail(o)}"
                        for o in ops
                        if isinstance(o, Mapping)
                    )
                else:
                    detail = compact({k: v for k, v in item.items() if k != "id"})
            else:
                label = str(item)
                new = after.get(label) if section != "removed" else None
                detail = compact(new) if new is not None else ""
            found[section].append(Change(label=label, detail=detail))
    return Diff(**{s: tuple(found[s]) for s in SECTIONS})


def diff_of(diff: Any, payload: Any) -> Diff:
    """The proposal's diff in three sections (see the module docstring)."""
    if diff is None or diff == {} or diff == []:
        return Diff()
    if isinstance(diff, list):
        shown = _json_ops(diff)
    elif isinstance(diff, Mapping) and set(diff) & set(SECTIONS):
        shown = _graph(diff, payload)
        extra = {k: v for k, v in diff.items() if k not in SECTIONS}
        if extra:
            return Diff(added=shown.added, removed=shown.removed, changed=shown.changed, raw=extra)
    else:
        return Diff(raw=diff)
    return shown if not shown.empty else Diff(raw=diff)


def diagnostics_of(rows: Any) -> list[dict[str, str]]:
    """Diagnostics as ``{code, message, severity, path}`` strings, errors first."""
    out = []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, Mapping):
            out.append(
                {
                    "code": str(row.get("code") or "—"),
                    "message": str(row.get("message") or ""),
                    "severity": str(row.get("severity") or "error"),
                    "path": str(row.get("path") or ""),
                }
            )
    out.sort(key=lambda d: _SEVERITY_ORDER.get(d["severity"], 3))
    return out


def warnings_of(rows: Any) -> list[str]:
    items = rows if isinstance(rows, list) else []
    return [item if isinstance(item, str) else compact(item) for item in items]


def effective_status(row: Mapping[str, Any]) -> str:
    """The recorded status, or ``expired`` for an open proposal whose lifetime has passed
    (the ledger records the expiry at the next decision on it)."""
    status = str(row.get("status"))
    if status in OPEN and row.get("expires_at") and seconds_left(row["expires_at"]) <= 0:
        return "expired"
    return status


def signature(rows: Sequence[Mapping[str, Any]]) -> str:
    """What a live list or page compares to decide whether to re-send (short enough for
    the stream's URL)."""
    text = "|".join(f"{r['proposal_id']}:{effective_status(r)}:{r.get('updated_at')}" for r in rows)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


_HINTS = {
    "PROPOSAL_BASELINE_STALE": (
        "The target changed since this proposal was made against it. Nothing was applied and "
        "the proposal stays approved; ask for a new proposal against the current version."
    ),
    "PROPOSAL_INVALID": (
        "The proposal no longer validates against the current state. Nothing was applied; the "
        "fresh diagnostics are below."
    ),
    "PROPOSAL_ILLEGAL_TRANSITION": (
        "Only a validated proposal can be approved, a validated or blocked one rejected, and "
        "an approved one applied."
    ),
    "PROPOSAL_PERMISSION_MISSING": (
        "Your principal lacks the permission; the deployment file grants it."
    ),
    "PROPOSAL_SELF_DECISION": "This deployment wants another operator to decide it.",
    "PROPOSAL_KIND_UNKNOWN": (
        "The deployment's proposals: section names no validator and applier for this kind."
    ),
    "PROPOSAL_VALIDATION_FAILED": "The fresh validation could not run; nothing was applied.",
    "CONFIRMATION_REQUIRED": "Tick the confirmation box, then apply again.",
}


def hint_for(reason: str) -> str:
    if reason in _HINTS:
        return _HINTS[reason]
    if reason.startswith("PROPOSAL_APPLY_"):
        return (
            "The applier did not succeed and the proposal stays approved. If its outcome is "
            "unknown, settle the call under Needs attention before applying again."
        )
    return ""
