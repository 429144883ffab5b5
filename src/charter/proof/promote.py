"""Promotion with a regression corpus that only grows (SEIF ADR 006 point 8).

A candidate Build becomes active for an environment only if

1. its own tests pass,
2. the reviewed incident guards under ``guards/*.yaml`` pass against it, and
3. every obligation of the environment's corpus passes against it: the context tests and
   guards of *every* Build promoted there before, read from the ledger — not from the
   working tree and not from the candidate — so deleting a test file, or weakening a test,
   does not drop the obligation (:mod:`charter.proof.corpus`).

Only an operator's recorded :class:`~charter.proof.corpus.Waiver` drops an obligation.

Every attempt, promoted or refused, is a ledger run ``promotion.<env>.<generation>`` (the
generation counts attempts from 1; the ledger's uniqueness of run ids makes two concurrent
attempts at one generation conflict, so one is refused and nothing is lost). Its
``run_created`` carries the environment, the candidate, the active promotion before it, the
waivers with what each dropped, every result and — when promoted — the whole corpus it leaves
behind with its digest; the run ends ``completed`` (promoted) or ``failed`` (naming each
failed obligation). The latest attempt names the environment's active promotion
(``active_run``), so the corpus is found from the store alone; every read of it is verified
(chain, head MAC, projections). ``.charter/promotions/<env>.json`` is a local pointer (the
active digest and run) checked against the ledger: a store that lost the promotion it names
is refused rather than starting a fresh, empty corpus.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from charter.errors import LedgerIntegrityError, PermissionDenied, StoreConflict, UserError
from charter.kernel.principals import Principal, PrincipalKind
from charter.ledger.chain import LedgerKey
from charter.ledger.events import NewEvent
from charter.ledger.ports import Store
from charter.ledger.verify import read_verified
from charter.project.build import BUILDS_DIR, Build, build_filename, load_build
from charter.project.suite import load_test_dir, suite_from_build
from charter.proof.context_tests import CaseResult, SuiteReport, run_test
from charter.proof.corpus import Corpus, Obligation, Waiver, apply_waivers

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
    generation: int = 0
    corpus_digest: str | None = None  # the corpus the environment holds afterwards
    waivers: tuple[Mapping[str, Any], ...] = ()

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
            "generation": self.generation,
            "corpus_digest": self.corpus_digest,
            "waivers": [dict(w) for w in self.waivers],
            "report": self.report.to_dict(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Active:
    """The environment's promotion history as the ledger holds it."""

    generation: int  # the latest attempt's generation (0: none yet)
    run_id: str | None  # the active promotion's run
    digest: str | None  # the active Build
    corpus: Corpus


def check_env(env: str) -> str:
    if not ENV_NAME.match(env):
        raise UserError(f"environment name {env!r} must match {ENV_NAME.pattern}")
    return env


def attempt_run_id(env: str, generation: int) -> str:
    return f"promotion.{check_env(env)}.{generation:08d}"


def _state_file(root: Path, env: str) -> Path:
    return root / PROMOTIONS_DIR / f"{check_env(env)}.json"


def _state(root: Path, env: str) -> Mapping[str, Any]:
    path = _state_file(root, env)
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def active_digest(root: Path, env: str) -> str | None:
    """The Build promoted for ``env`` as this checkout last saw it (the local pointer)."""
    digest = _state(root, env).get("digest")
    return digest if isinstance(digest, str) else None


def active_build(root: Path, env: str) -> Build | None:
    digest = active_digest(root, env)
    if digest is None:
        return None
    return load_build(root / BUILDS_DIR / build_filename(digest))


async def _latest_generation(store: Store, env: str) -> int:
    """The highest attempt generation in the store (attempts are numbered without gaps)."""

    async def exists(n: int) -> bool:
        return await store.head(attempt_run_id(env, n)) is not None

    if not await exists(1):
        return 0
    low, high = 1, 2
    while await exists(high):
        low, high = high, high * 2
    while high - low > 1:  # low exists, high does not
        mid = (low + high) // 2
        if await exists(mid):
            low = mid
        else:
            high = mid
    return low


async def _promotion_record(store: Store, key: LedgerKey, run_id: str) -> Mapping[str, Any]:
    got = await read_verified(store, run_id, key)
    if not got.report.ok:
        raise LedgerIntegrityError(
            f"the promotion record {run_id} fails verification: {got.report.message}",
            reason=got.report.reason or "LEDGER_INTEGRITY",
            seq=got.report.seq,
            run_id=run_id,
        )
    first = got.events[0] if got.events else None
    record = first["payload"].get("promotion") if first and first["type"] == "run_created" else None
    if not isinstance(record, Mapping):
        raise LedgerIntegrityError(
            f"run {run_id} is not a promotion record", reason="NOT_A_PROMOTION", run_id=run_id
        )
    return record


async def read_active(store: Store, key: LedgerKey, env: str) -> Active:
    """The environment's active promotion and corpus, read (verified) from the ledger."""
    generation = await _latest_generation(store, env)
    if generation == 0:
        return Active(generation=0, run_id=None, digest=None, corpus=Corpus())
    latest = await _promotion_record(store, key, attempt_run_id(env, generation))
    active_run = latest.get("active_run")
    if active_run is None:
        return Active(generation=generation, run_id=None, digest=None, corpus=Corpus())
    record = (
        latest
        if active_run == attempt_run_id(env, generation)
        else await _promotion_record(store, key, str(active_run))
    )
    corpus = Corpus.from_list(record.get("corpus", []))
    if corpus.digest != record.get("corpus_digest"):
        raise LedgerIntegrityError(
            f"the corpus recorded in {active_run} does not match its digest",
            reason="CORPUS_DIGEST_MISMATCH",
            run_id=str(active_run),
        )
    return Active(
        generation=generation,
        run_id=str(active_run),
        digest=str(record["candidate"]),
        corpus=corpus,
    )


def _check_pointer(root: Path, env: str, active: Active) -> None:
    named = _state(root, env).get("run_id")
    if isinstance(named, str) and named != active.run_id:
        raise UserError(
            f"{_state_file(root, env).relative_to(root)} names promotion {named}, but the "
            f"store's active promotion for {env!r} is {active.run_id or 'none'}: is this the "
            "store the environment was promoted with? (the corpus lives in the store)"
        )


def _run(candidate: Build, obligations: Sequence[Obligation], origin: str) -> list[CaseResult]:
    return [
        replace(run_test(candidate, o.test, origin=origin), digest=o.digest) for o in obligations
    ]


def evaluate(
    root: Path, candidate: Build, active: Active, waivers: Sequence[Waiver] = ()
) -> tuple[SuiteReport, Corpus, list[dict[str, Any]]]:
    """Every obligation the candidate must meet, and the corpus it would leave behind."""
    own = [
        Obligation.of(t, kind="test", since=candidate.digest)
        for t in suite_from_build(candidate.document)
    ]
    guard_tests, problems = load_test_dir(root, "guards")
    if problems:
        raise UserError("guards/ has problems: " + "; ".join(str(p) for p in problems))
    guards = [Obligation.of(t, kind="guard", since=candidate.digest) for t in guard_tests]
    enforced, records = apply_waivers(active.corpus, waivers)
    present = {o.digest for o in (*own, *guards)}
    inherited = [o for o in enforced.obligations if o.digest not in present]
    results = _run(candidate, own, "own") + _run(candidate, guards, "guard")
    results += _run(candidate, inherited, "inherited")
    return SuiteReport(results=tuple(results)), enforced.grown([*own, *guards]), records


async def promote(
    root: Path,
    candidate: Build,
    env: str,
    *,
    store: Store,
    key: LedgerKey,
    actor: str = "operator",
    waivers: Sequence[Waiver] = (),
    operator: Principal | None = None,
) -> Promotion:
    """Promote ``candidate`` for ``env`` if every obligation passes; record the attempt.

    ``waivers`` drop obligations from the corpus; they need ``operator``, a deployment
    principal of kind ``operator`` (a person: an application cannot waive a test)."""
    if waivers:
        if operator is None:
            raise UserError("a waiver needs the operator who grants it (--as OPERATOR)")
        if operator.kind is not PrincipalKind.OPERATOR:
            raise PermissionDenied(
                f"{operator.name} is an {operator.kind.value} principal: only an operator may "
                "waive an obligation of the regression corpus",
                reason="WAIVER_NEEDS_OPERATOR",
            )
        if any(w.by != operator.name for w in waivers):
            raise UserError("every waiver must be granted by the operator given (--as)")
        actor = operator.name
    state = _state_file(root, env)
    saved = root / BUILDS_DIR / build_filename(candidate.digest)
    if not saved.is_file():
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(candidate.to_json(), encoding="utf-8")
    active = await read_active(store, key, env)
    _check_pointer(root, env, active)
    report, corpus, waived = evaluate(root, candidate, active, waivers)
    generation = active.generation + 1
    run_id = attempt_run_id(env, generation)
    record: dict[str, Any] = {
        "env": env,
        "generation": generation,
        "candidate": candidate.digest,
        "previous": active.digest,
        "previous_run": active.run_id,
        "promoted": report.passed,
        "active_run": run_id if report.passed else active.run_id,
        "waivers": waived,
        "results": [r.to_dict() for r in report.results],
    }
    if report.passed:
        record["corpus_digest"] = corpus.digest
        record["corpus"] = corpus.to_list()
    events = [
        NewEvent(
            type="run_created",
            payload={
                "session_id": run_id,
                "workflow_slug": "promotion",
                "tenant": None,
                "created_by": actor,
                "promotion": record,
            },
        ),
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
    try:
        await store.append(run_id, events, expected_seq=1)
    except StoreConflict:
        raise UserError(
            f"another promotion for {env!r} was recorded as generation {generation} while this "
            "one was evaluated; run promote again (it is evaluated against that one)"
        ) from None
    if report.passed:
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(
            json.dumps(
                {
                    "env": env,
                    "digest": candidate.digest,
                    "previous": active.digest,
                    "run_id": run_id,
                    "corpus_digest": corpus.digest,
                }
            )
            + "\n",
            encoding="utf-8",
        )
    return Promotion(
        env=env,
        candidate=candidate.digest,
        previous=active.digest,
        promoted=report.passed,
        report=report,
        run_id=run_id,
        generation=generation,
        corpus_digest=corpus.digest if report.passed else active.corpus.digest,
        waivers=tuple(waived),
    )
