"""Context tests and promotion with the inherited regression corpus."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from charter.ledger.chain import LedgerKey
from charter.ledger.projections import run_key
from charter.project.build import Build, build_project
from charter.project.suite import suite_from_build
from charter.proof.context_tests import run_tests
from charter.proof.promote import active_digest, promote
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from tests.workflows._project import CONFIG, TOOLS

EXPORT = """
  - id: data.export
    description: Export the data set to a partner (a human approves each export).
    approval: required
"""
EXPORT_WEAKENED = """
  - id: data.export
    description: Export the data set to a partner (a human approves each export).
"""
APPROVAL_TEST = """
tests:
  - name: export-needs-approval
    principal: {name: alice, tenant: acme, kind: operator}
    profile: exporting
    offers: [data.export]
    not_offers: [admin.wipe]
    calls:
      - {tool: data.export, arguments: {}, expect: pending_approval}
"""
OTHER_TEST = """
tests:
  - name: wipe-is-not-offered
    principal: {name: alice, tenant: acme, kind: operator}
    profile: exporting
    not_offers: [admin.wipe]
    calls:
      - tool: admin.wipe
        expect: denied
        code: permission_denied
        reason: TOOL_NOT_DISCLOSED
      - {tool: data.export, arguments: {unexpected: 1}, expect: rejected, code: invalid_input}
    executors:
      - {tool: data.export, version: 1.0.0, expect: compatible}
      - {tool: data.export, version: 2.0.0, expect: incompatible}
"""
KEY = LedgerKey("test-key", b"k" * 32)


def project(root: Path, *, export: str = EXPORT, tests: dict[str, str] | None = None) -> Build:
    root.mkdir(parents=True, exist_ok=True)
    config = CONFIG + "  exporting: {include: [data.export]}\n"
    (root / "charter.yaml").write_text(textwrap.dedent(config))
    (root / "tools.yaml").write_text(textwrap.dedent(TOOLS) + export[1:])
    tdir = root / "tests"
    if tdir.exists():
        for f in tdir.iterdir():
            f.unlink()
    for name, text in (tests or {}).items():
        tdir.mkdir(exist_ok=True)
        (tdir / name).write_text(textwrap.dedent(text))
    return build_project(root)


def test_context_tests_pass_and_fail_with_reasons(tmp_path: Path) -> None:
    b = project(tmp_path, tests={"a.yaml": APPROVAL_TEST, "b.yaml": OTHER_TEST})
    report = run_tests(b, suite_from_build(b.document))
    assert report.passed, report.to_dict()
    weak = project(tmp_path / "w", export=EXPORT_WEAKENED, tests={"a.yaml": APPROVAL_TEST})
    report = run_tests(weak, suite_from_build(weak.document))
    assert not report.passed
    assert report.failed[0].failures == (
        "call 0 (data.export): expected pending_approval, got allowed",
    )


def test_the_inherited_corpus_refuses_a_weakened_candidate(tmp_path: Path) -> None:
    root = tmp_path / "p"
    store = MemoryStore(key=KEY, clock=FakeClock(step=timedelta(0)))
    v1 = project(root, tests={"a.yaml": APPROVAL_TEST, "b.yaml": OTHER_TEST})

    async def go(b: Build) -> tuple[bool, list[str], str | None]:
        p = await promote(root, b, "prod", store=store, key=KEY)
        return p.promoted, [f"{r.origin}:{r.name}" for r in p.refusals], p.run_id

    ok, _, run1 = anyio.run(go, v1)
    assert ok
    assert active_digest(root, "prod") == v1.digest
    # The candidate removes the approval requirement and deletes the test that checked it.
    weakened = project(root, export=EXPORT_WEAKENED, tests={"b.yaml": OTHER_TEST})
    assert run_tests(weakened, suite_from_build(weakened.document)).passed
    ok, refused, run2 = anyio.run(go, weakened)
    assert not ok
    assert refused == ["inherited:export-needs-approval"]
    assert active_digest(root, "prod") == v1.digest
    # The same candidate with the requirement kept is promoted.
    kept = project(root, tests={"b.yaml": OTHER_TEST})
    ok, refused, run3 = anyio.run(go, kept)
    assert ok
    assert refused == []
    assert active_digest(root, "prod") == kept.digest

    async def rows() -> list[dict[str, object]]:
        out = []
        for rid in (run1, run2, run3):
            assert rid is not None
            row = await store.get_row(run_key(rid))
            assert row is not None
            out.append(row)
        return out

    r1, r2, r3 = anyio.run(rows)
    assert [r["status"] for r in (r1, r2, r3)] == ["completed", "failed", "completed"]
    assert "inherited:export-needs-approval" in str(r2["error"])


def test_guards_are_obligations_too(tmp_path: Path) -> None:
    root = tmp_path / "p"
    weak = project(root, export=EXPORT_WEAKENED)
    (root / "guards").mkdir()
    (root / "guards" / "incident-42.yaml").write_text(textwrap.dedent(APPROVAL_TEST))
    store = MemoryStore(key=KEY, clock=FakeClock(step=timedelta(0)))
    p = anyio.run(lambda: promote(root, weak, "staging", store=store, key=KEY))
    assert not p.promoted
    assert [f"{r.origin}:{r.name}" for r in p.refusals] == ["guard:export-needs-approval"]
    assert active_digest(root, "staging") is None


@pytest.mark.parametrize("env", ["Prod", "../x", ""])
def test_environment_names_are_checked(tmp_path: Path, env: str) -> None:
    from charter.errors import UserError

    b = project(tmp_path / "p")
    store = MemoryStore(key=KEY, clock=FakeClock(step=timedelta(0)))
    with pytest.raises(UserError):
        anyio.run(lambda: promote(tmp_path / "p", b, env, store=store, key=KEY))
