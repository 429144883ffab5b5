"""A verified replay: one read of a run verifies its ledger and feeds replay and evaluation.

:func:`replay_verified` is what ``charter runs replay`` runs (and ``bench/replay.py``
measures): the stored rows are read once, and each event is checked (chain, frame, lifecycles,
projections rebuilt and compared, head MAC — :func:`charter.ledger.verify.read_verified`) and
parsed by the same pass; the parsed events then go to :func:`~charter.proof.replay.replay_events`
and :func:`~charter.proof.evaluate.evaluate_events`. A ledger that fails verification is not
replayed: its report says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from charter.kernel.principals import Principal
from charter.ledger.chain import LedgerKey
from charter.ledger.gcpause import collector_paused
from charter.ledger.ports import Store
from charter.ledger.verify import VerifyReport, read_verified
from charter.project.build import Build
from charter.proof.evaluate import Evaluation, evaluate_events
from charter.proof.replay import ReplayReport, replay_events


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedReplay:
    verify: VerifyReport
    replay: ReplayReport | None  # None when the ledger failed verification
    evaluation: Evaluation | None

    @property
    def ok(self) -> bool:
        return self.verify.ok

    def to_dict(self) -> dict[str, Any]:
        return {
            "verify": self.verify.to_dict(),
            "replay": None if self.replay is None else self.replay.to_dict(),
            "evaluation": None if self.evaluation is None else self.evaluation.to_dict(),
        }


async def replay_verified(
    store: Store,
    run_id: str,
    build: Build,
    key: LedgerKey,
    *,
    principals: Mapping[str, Principal] | None = None,
    agents: frozenset[str] | None = None,
) -> VerifiedReplay:
    """Verify ``run_id`` and, when it verifies, replay it against ``build`` and evaluate it."""
    with collector_paused():  # the parsed events stay alive through replay and evaluation
        got = await read_verified(store, run_id, key)
        if not got.report.ok:
            return VerifiedReplay(verify=got.report, replay=None, evaluation=None)
        return VerifiedReplay(
            verify=got.report,
            replay=replay_events(run_id, got.events, build, principals=principals),
            evaluation=evaluate_events(run_id, got.events, agents=agents),
        )
