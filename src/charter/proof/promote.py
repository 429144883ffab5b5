"""Promotion with the inherited regression corpus (SEIF ADR 006 point 8).

A candidate Build becomes active for an environment only if

1. its own tests pass,
2. the tests of the Build currently promoted there pass against it — even when the
   candidate deleted or weakened them (they are read from the *promoted* Build, not the
   candidate), and
3. the reviewed incident guards under ``guards/*.yaml`` pass against it.

The environment's active Build is kept in ``.charter/promotions/<env>.json``. Every attempt,
promoted or refused, is recorded in the ledger as a ``promotion`` run: ``run_created`` carries
the environment, the candidate and previous digests and the test results; the run ends
``completed`` (promoted) or ``failed`` (refused, naming the failed inherited tests).
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from charter.errors import UserError
from charter.ledger.events import NewEvent
from charter.ledger.ids import new_id
from charter.ledger.ports import Store
from charter.project.build import BUILDS_DIR, Build, build_filename, load_build
from charter.project.suite import load_test_dir, suite_from_build
from charter.proof.context_tests import CaseResult, SuiteReport, run_tests

PROMOTIONS_DIR = Path(".charter") / "promotions"
ENV_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Promotion:
    env: str
    candidate: str
    previous: str | None
    promoted: bool
    report: SuiteReport
    run_id: str | None

    @property
    def refusals(self) -> tuple[CaseResult, ...]:
        return self.report.failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "candidate": self.candidate,
            "previous": self.previous,
            "promoted": self.promoted,
            "run_id": self.run_id,
            "report": self.report.to_dict(),
        }


def _state_file(root: Path, env: str) -> Path:
    if not ENV_NAME.match(env):
        raise UserError(f"environment name {env!r} must match {ENV_NAME.pattern}")
    return root / PROMOTIONS_DIR / f"{env}.json"


def active_digest(root: Path, env: str) -> str | None:
    path = _state_file(root, env)
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    digest = data.get("digest")
    return digest if isinstance(digest, str) else None


def active_build(root: Path, env: str) -> Build | None:
    digest = active_digest(root, env)
    if digest is None:
        return None
    return load_build(root / BUILDS_DIR / build_filename(digest))


def evaluate(root: Path, candidate: Build, env: str) -> tuple[str | None, SuiteReport]:
    """Every obligation the candidate must meet, without promoting anything."""
    previous = active_build(root, env)
    results = list(run_tests(candidate, suite_from_build(candidate.document)).results)
    if previous is not None and previous.digest != candidate.digest:
        inherited = suite_from_build(previous.document)
        results += run_tests(candidate, inherited, origin="inherited").results
    guards, problems = load_test_dir(root, "guards")
    if problems:
        raise UserError("guards/ has problems: " + "; ".join(str(p) for p in problems))
    results += run_tests(candidate, guards, origin="guard").results
    return (previous.digest if previous else None), SuiteReport(results=tuple(results))


async def promote(
    root: Path,
    candidate: Build,
    env: str,
    *,
    store: Store | None = None,
    actor: str = "operator",
    hex_source: Any = secrets.token_hex,
) -> Promotion:
    """Promote ``candidate`` for ``env`` if every obligation passes; record the attempt."""
    state = _state_file(root, env)
    saved = root / BUILDS_DIR / build_filename(candidate.digest)
    if not saved.is_file():
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(candidate.to_json(), encoding="utf-8")
    previous, report = evaluate(root, candidate, env)
    run_id: str | None = None
    if store is not None:
        run_id = new_id("promotion", hex_source=hex_source)
        payload = {
            "session_id": run_id,
            "workflow_slug": "promotion",
            "tenant": None,
            "created_by": actor,
            "promotion": {
                "env": env,
                "candidate": candidate.digest,
                "previous": previous,
                "results": [r.to_dict() for r in report.results],
            },
        }
        events = [
            NewEvent(type="run_created", payload=payload),
            NewEvent(type="run_status_changed", payload={"status": "planning"}),
            NewEvent(type="run_status_changed", payload={"status": "running"}),
        ]
        if report.passed:
            events.append(NewEvent(type="run_status_changed", payload={"status": "completed"}))
        else:
            failed = [f"{r.origin}:{r.name}" for r in report.failed]
            error = {
                "code": "contract_violation",
                "message": "promotion refused: " + ", ".join(failed),
                "retryable": False,
                "details": {"failed": failed},
            }
            events.append(
                NewEvent(type="run_status_changed", payload={"status": "failed", "error": error})
            )
        await store.append(run_id, events)
    if report.passed:
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(
            json.dumps({"env": env, "digest": candidate.digest, "previous": previous}) + "\n",
            encoding="utf-8",
        )
    return Promotion(
        env=env,
        candidate=candidate.digest,
        previous=previous,
        promoted=report.passed,
        report=report,
        run_id=run_id,
    )
