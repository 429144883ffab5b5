"""How the console shows a proposal's diff, diagnostics, warnings and status (no I/O)."""

from __future__ import annotations

from charter.proposals import graph_diff, json_diff
from charter.server.console.proposal_views import (
    Change,
    Diff,
    diagnostics_of,
    diff_of,
    effective_status,
    hint_for,
    signature,
    warnings_of,
)


def test_an_id_graph_diff_shows_the_new_activities() -> None:
    payload = {"activities": [{"id": "a1", "type": "SendEmail"}, {"id": "a3", "type": "Delay"}]}
    shown = diff_of({"added": ["a3"], "removed": ["a2"], "changed": ["a1"]}, payload)
    assert shown.added == (Change(label="a3", detail='{"id": "a3", "type": "Delay"}'),)
    assert shown.removed == (Change(label="a2"),)
    assert shown.changed == (Change(label="a1", detail='{"id": "a1", "type": "SendEmail"}'),)
    assert shown.raw is None


def test_a_graph_diff_with_changes_and_a_json_diff() -> None:
    before = [{"id": "a1", "type": "SendEmail"}, {"id": "a2", "type": "Delay"}]
    after = [{"id": "a1", "type": "Delay"}, {"id": "a3", "type": "Delay"}]
    shown = diff_of(graph_diff(before, after), {"activities": after})
    assert [c.label for c in shown.added] == ["a3"]
    assert [c.label for c in shown.removed] == ["a2"]
    assert shown.changed == (Change(label="a1", detail='/type: "SendEmail" → "Delay"'),)

    ops = json_diff({"a": 1, "b": 2}, {"b": 3, "c": 4})
    shown = diff_of(ops, None)
    assert shown.added == (Change(label="/c", detail="4"),)
    assert shown.removed == (Change(label="/a", detail="1"),)
    assert shown.changed == (Change(label="/b", detail="2 → 3"),)


def test_unknown_or_empty_diffs() -> None:
    assert diff_of(None, None).empty
    assert diff_of({}, None) == Diff()
    assert diff_of({"renamed": "x"}, None).raw == {"renamed": "x"}
    extra = diff_of({"added": ["a"], "note": "also"}, None)
    assert [c.label for c in extra.added] == ["a"]
    assert extra.raw == {"note": "also"}


def test_diagnostics_warnings_status_and_hints() -> None:
    rows = diagnostics_of(
        [
            {"code": "w", "message": "m", "severity": "warning", "path": "/x"},
            {"code": "e", "message": "n"},
            "not a diagnostic",
        ]
    )
    assert [(d["code"], d["severity"], d["path"]) for d in rows] == [
        ("e", "error", ""),
        ("w", "warning", "/x"),
    ]
    assert diagnostics_of(None) == []
    assert warnings_of(["plain", {"code": "W1"}]) == ["plain", '{"code": "W1"}']
    past, future = "2000-01-01T00:00:00Z", "2999-01-01T00:00:00Z"
    assert effective_status({"status": "approved", "expires_at": past}) == "expired"
    assert effective_status({"status": "approved", "expires_at": future}) == "approved"
    assert effective_status({"status": "applied", "expires_at": past}) == "applied"
    row = {"proposal_id": "p", "status": "validated", "expires_at": future, "updated_at": "1"}
    assert signature([row]) != signature([row | {"updated_at": "2"}])
    assert len(signature([row] * 500)) == 32
    assert "new proposal" in hint_for("PROPOSAL_BASELINE_STALE")
    assert "Needs attention" in hint_for("PROPOSAL_APPLY_UNKNOWN")
    assert hint_for("SOMETHING_ELSE") == ""
