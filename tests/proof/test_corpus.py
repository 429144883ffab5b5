"""The regression corpus only grows: obligations live in the ledger, not in the working tree."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from charter.errors import LedgerIntegrityError, PermissionDenied, UserError
from charter.kernel.principals import Principal, PrincipalKind
from charter.ledger.projections import run_key
from charter.ledger.verify import read_verified
from charter.project.build import Build
from charter.proof.corpus import Waiver
from charter.proof.promote import Promotion, active_digest, attempt_run_id, promote, read_active
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from tests.proof.test_promotion import (
    APPROVAL_TEST,
    EXPORT_WEAKENED,
    KEY,
    OTHER_TEST,
    project,
)

GUARD = """
tests:
  - name: incident-7-wipe-hidden
    principal: {name: alice, tenant: acme, kind: operator}
    profile: exporting
    not_offers: [admin.wipe]
"""
OPERATOR = Principal(
    name="olga", tenant="acme", kind=PrincipalKind.OPERATOR, permissions=frozenset()
)
APP = Principal(name="bot", tenant="acme", kind=PrincipalKind.APPLICATION, permissions=frozenset())


def _store() -> MemoryStore:
    return MemoryStore(key=KEY, clock=FakeClock(step=timedelta(0)))


def _go(root: Path, store: MemoryStore, b: Build, **kw: object) -> Promotion:
    return anyio.run(lambda: promote(root, b, "prod", store=store, key=KEY, **kw))  # type: ignore[arg-type]


def _origins(p: Promotion) -> dict[str, tuple[str, bool]]:
    return {r.name: (r.origin, r.passed) for r in p.report.results}


def _record(store: MemoryStore, run_id: str) -> dict[str, object]:
    got = anyio.run(read_verified, store, run_id, KEY)
    assert got.report.ok
    rec = got.events[0]["payload"]["promotion"]
    assert isinstance(rec, dict)
    return rec


def test_three_generations_a_deleted_test_still_blocks(tmp_path: Path) -> None:
    root = tmp_path / "p"
    store = _store()
    (root / "guards").mkdir(parents=True)
    (root / "guards" / "incident-7.yaml").write_text(textwrap.dedent(GUARD))
    # Generation 1: two test files and a guard.
    g1 = project(root, tests={"a.yaml": APPROVAL_TEST, "b.yaml": OTHER_TEST})
    p1 = _go(root, store, g1)
    assert p1.promoted
    assert p1.generation == 1
    assert _origins(p1) == {
        "export-needs-approval": ("own", True),
        "wipe-is-not-offered": ("own", True),
        "incident-7-wipe-hidden": ("guard", True),
    }
    # Generation 2 deletes a.yaml and the guard file but still satisfies both: promoted, and
    # both still run (from the ledger's corpus, as inherited obligations).
    (root / "guards" / "incident-7.yaml").unlink()
    g2 = project(root, tests={"b.yaml": OTHER_TEST})
    assert "export-needs-approval" not in json.dumps(g2.document["tests"])
    p2 = _go(root, store, g2)
    assert p2.promoted, p2.to_dict()
    assert _origins(p2) == {
        "wipe-is-not-offered": ("own", True),
        "export-needs-approval": ("inherited", True),
        "incident-7-wipe-hidden": ("inherited", True),
    }
    # The previous promotion (generation 2) has no such test file; generation 3 drops the
    # approval requirement and is refused by the obligation generation 1 took on.
    g3 = project(root, export=EXPORT_WEAKENED, tests={"b.yaml": OTHER_TEST})
    p3 = _go(root, store, g3)
    assert not p3.promoted
    assert [f"{r.origin}:{r.name}" for r in p3.refusals] == ["inherited:export-needs-approval"]
    assert active_digest(root, "prod") == g2.digest
    # Every attempt is a verified ledger record; the refused one names what failed.
    rows = [anyio.run(store.get_row, run_key(attempt_run_id("prod", n))) for n in (1, 2, 3)]
    assert [r["status"] for r in rows if r is not None] == ["completed", "completed", "failed"]
    rec3 = _record(store, attempt_run_id("prod", 3))
    assert rec3["promoted"] is False
    assert rec3["active_run"] == attempt_run_id("prod", 2)
    assert "corpus" not in rec3
    # The corpus is found from the store alone: the local pointer can go.
    (root / ".charter" / "promotions" / "prod.json").unlink()
    active = anyio.run(read_active, store, KEY, "prod")
    assert active.digest == g2.digest
    assert active.generation == 3
    assert sorted(o.name for o in active.corpus.obligations) == [
        "export-needs-approval",
        "incident-7-wipe-hidden",
        "wipe-is-not-offered",
    ]
    assert _go(root, store, g3).refusals[0].name == "export-needs-approval"


def test_an_edited_test_keeps_its_old_version(tmp_path: Path) -> None:
    root = tmp_path / "p"
    store = _store()
    assert _go(root, store, project(root, tests={"a.yaml": APPROVAL_TEST})).promoted
    # The candidate weakens the test in place (same name) and the contract with it.
    weakened_test = APPROVAL_TEST.replace("expect: pending_approval", "expect: allowed")
    cand = project(root, export=EXPORT_WEAKENED, tests={"a.yaml": weakened_test})
    p = _go(root, store, cand)
    assert not p.promoted
    assert [(r.origin, r.name, r.passed) for r in p.report.results] == [
        ("own", "export-needs-approval", True),
        ("inherited", "export-needs-approval", False),
    ]


def test_only_an_operators_recorded_waiver_drops_an_obligation(tmp_path: Path) -> None:
    root = tmp_path / "p"
    store = _store()
    assert _go(root, store, project(root, tests={"a.yaml": APPROVAL_TEST})).promoted
    weak = project(root, export=EXPORT_WEAKENED)
    waiver = Waiver(name="export-needs-approval", reason="exports are pre-approved", by="olga")
    # Without an operator, or with an application principal, nothing is recorded.
    with pytest.raises(UserError, match="operator"):
        _go(root, store, weak, waivers=[waiver])
    bot = Waiver(name="export-needs-approval", reason="r", by="bot")
    with pytest.raises(PermissionDenied) as denied:
        _go(root, store, weak, waivers=[bot], operator=APP)
    assert denied.value.reason == "WAIVER_NEEDS_OPERATOR"
    typo = Waiver(name="export-needs-aproval", reason="r", by="olga")
    with pytest.raises(UserError, match="no such obligation"):
        _go(root, store, weak, waivers=[typo], operator=OPERATOR)
    assert anyio.run(store.head, attempt_run_id("prod", 2)) is None
    with pytest.raises(UserError, match="reason"):
        Waiver(name="x", reason=" ", by="olga")
    # The operator's waiver: promoted, recorded with what it dropped, and gone for good.
    p = _go(root, store, weak, waivers=[waiver], operator=OPERATOR)
    assert p.promoted, p.to_dict()
    rec = _record(store, attempt_run_id("prod", 2))
    (w,) = rec["waivers"]  # type: ignore[misc]
    assert w["name"] == "export-needs-approval"
    assert w["by"] == "olga"
    assert w["reason"] == "exports are pre-approved"
    assert len(w["dropped"]) == 1
    p = _go(root, store, project(root, export=EXPORT_WEAKENED, tests={"b.yaml": OTHER_TEST}))
    assert p.promoted
    assert "export-needs-approval" not in _origins(p)


def test_a_store_that_lost_the_promotion_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "p"
    assert _go(root, _store(), project(root, tests={"a.yaml": APPROVAL_TEST})).promoted
    weak = project(root, export=EXPORT_WEAKENED)
    with pytest.raises(UserError, match="is this the store"):
        _go(root, _store(), weak)


def test_a_tampered_corpus_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "p"
    store = _store()
    assert _go(root, store, project(root, tests={"a.yaml": APPROVAL_TEST})).promoted
    run_id = attempt_run_id("prod", 1)
    # Rewrite the stored corpus in place (the obligation's expectation weakened).
    first = store.events[(run_id, 1)]
    forged = first.data.replace(b"pending_approval", b"allowed")
    assert forged != first.data
    store.events[(run_id, 1)] = dataclasses.replace(first, data=forged)
    with pytest.raises(LedgerIntegrityError):
        _go(root, store, project(root, export=EXPORT_WEAKENED))
