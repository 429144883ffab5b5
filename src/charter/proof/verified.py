"""A verified replay: one read of a run verifies its ledger and feeds replay and evaluation.

:func:`replay_verified` is what ``charter runs replay`` runs (and ``bench/replay.py``
measures): the stored rows are read once, and each event is checked (chain, frame, lifecycles,
projections rebuilt and compared, head MAC — :func:`charter.ledger.verify.take_verified`) and
parsed by the same pass, which hands each parsed event straight on to replay
(:class:`~charter.proof.replay.Replay`) and evaluation
(:class:`~charter.proof.evaluate.Evaluator`): the run's events are never all held at once.
A ledger that fails verification is not replayed: its report says why, and what replay and
evaluation saw of it is dropped. The result is what :func:`~charter.proof.replay.replay_events`
and :func:`~charter.proof.evaluate.evaluate_events` give for the verified events, errors
included (an exception replay raises wins over one evaluation raises, as when they ran one
after the other).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from charter.kernel.authorize import Enablement
from charter.kernel.principals import Principal
from charter.ledger.chain import LedgerKey
from charter.ledger.gcpause import collector_paused
from charter.ledger.ports import Store
from charter.ledger.verify import Take, VerifyReport, take_verified
from charter.project.build import Build
from charter.proof.evaluate import Evaluation, Evaluator
from charter.proof.replay import BuildOf, Replay, ReplayReport


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
    build: Build | BuildOf,
    key: LedgerKey,
    *,
    principals: Mapping[str, Principal] | None = None,
    enablement: Enablement | None = None,
    agents: frozenset[str] | None = None,
) -> VerifiedReplay:
    """Verify ``run_id`` and, when it verifies, replay it against ``build`` (a candidate, or
    the function giving each context's pinned Build) and evaluate it (as the deployment's
    ``principals`` and ``enablement``; ``None``: assumed, and said)."""
    replay = Replay(run_id, build, principals=principals, enablement=enablement)
    evaluator = Evaluator(run_id, agents=agents)
    feed = _Feed(replay.take, evaluator.take)
    with collector_paused():  # replay and evaluation build up state through the whole read
        report = await take_verified(store, run_id, key, feed)
        if not report.ok:
            return VerifiedReplay(verify=report, replay=None, evaluation=None)
        if feed.replay_error is not None:
            raise feed.replay_error
        if feed.evaluation_error is not None:
            raise feed.evaluation_error
        return VerifiedReplay(verify=report, replay=replay.report(), evaluation=evaluator.result())


class _Feed:
    """Hands each event to replay and to evaluation; keeps the first exception of each.

    Verification must not be cut short by them: the ledger might still fail it, and then its
    report is the answer. A consumer that raised is fed no more (as its loop would have
    stopped there).
    """

    __slots__ = ("evaluate", "evaluation_error", "replay", "replay_error")

    def __init__(self, replay: Take, evaluate: Take) -> None:
        self.replay = replay
        self.evaluate = evaluate
        self.replay_error: Exception | None = None
        self.evaluation_error: Exception | None = None

    def __call__(self, typ: Any, payload: Any, seq: Any) -> None:
        # A consumer that raised is replaced by _fed_no_more: no test of the errors per event.
        try:
            self.replay(typ, payload, seq)
        except Exception as exc:  # raised once verification has passed
            self.replay_error = exc
            self.replay = _fed_no_more
        try:
            self.evaluate(typ, payload, seq)
        except Exception as exc:
            self.evaluation_error = exc
            self.evaluate = _fed_no_more


def _fed_no_more(typ: Any, payload: Any, seq: Any) -> None:
    """What :class:`_Feed` hands events to in place of a consumer that raised."""
