"""Run-time trust in the ledger: a damaged run is never continued.

A store keeps one :class:`LedgerTrust` per process. It records, per run, the last
``(seq, hash)`` this process verified, and the runs it found damaged:

* the first time the process touches a run (:meth:`LedgerTrust.ensure`: an append, or a read
  of one of the run's rows) it verifies the whole run — chain, lifecycles, head and MAC,
  projections (:func:`~charter.ledger.verify.verify_run`) — and remembers the head;
* every append checks, inside its transaction, that the stored head it builds on is the head
  this process verified (:meth:`LedgerTrust.check_head`); when another process moved it, the
  events in between are verified first (:meth:`LedgerTrust.catch_up`: chain from the verified
  point, head and MAC) and the append is tried again;
* a projection row is served only if its MAC verifies (see :mod:`charter.stores._sql`);
* an append reads, inside its transaction, no row older than the one this process last
  wrote under that key (:meth:`LedgerTrust.check_fresh`): a MAC cannot tell an earlier
  version of a row from the current one, so a row put back to an earlier version (or deleted)
  under a running process would otherwise let it build on stale state — decide an approval
  twice, dispatch a call again.

A run that fails any of these is refused from then on, in this process, with
:class:`RunLedgerInvalid` (``internal`` / ``RUN_LEDGER_INVALID``, the first problem in its
details); listeners (the runtime: audit sink and log) hear about it once. A run an operator
quarantined is refused the same way.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from charter.errors import CharterError, Failure, InternalFailure, LedgerIntegrityError
from charter.ledger.chain import Head, LedgerKey
from charter.ledger.checker import headless_problem, storage_class
from charter.ledger.events import StoredEvent, created_tenant
from charter.ledger.rows import RowKey

logger = logging.getLogger("charter.ledger.trust")

_CATCH_UP_BATCH = 1000
_WRITTEN_LIMIT = 50_000
"""Row keys whose last written sequence a process remembers (the half written longest ago is
forgotten beyond it: a row forgotten is checked by its MAC only, until the next first touch)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunProblem:
    """Why a run is refused: the verify reason, the first bad sequence, a safe message."""

    run_id: str
    reason: str
    seq: int | None
    message: str
    quarantined: bool = False
    marked: bool = field(default=False, compare=False)
    """Read from the run's quarantine mark (an operator's, or one forged, altered or lifted
    outside Charter: :mod:`charter.stores.flags`), not found by verification: every process
    refuses the run from its start, whatever its ledger says. Not part of :meth:`to_dict`."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "reason": self.reason,
            "seq": self.seq,
            "message": self.message,
            "quarantined": self.quarantined,
        }


class RunLedgerInvalid(InternalFailure):
    """The run's ledger failed verification (or was quarantined): it is not continued."""

    default_reason = "RUN_LEDGER_INVALID"

    def __init__(self, problem: RunProblem) -> None:
        what = "is quarantined" if problem.quarantined else "failed verification"
        super().__init__(
            f"the ledger of run {problem.run_id} {what} ({problem.reason}"
            + (f" at event {problem.seq}" if problem.seq is not None else "")
            + f"): {problem.message}. It can only be exported, verified or quarantined.",
            reason="RUN_LEDGER_INVALID",
            run_id=problem.run_id,
            details={"problem": problem.reason, "seq": problem.seq},
        )
        self.problem = problem


LEDGER_DAMAGE: tuple[type[Failure], ...] = (RunLedgerInvalid, LedgerIntegrityError)
"""What a read or an append of a damaged run raises: the run refused (run-time trust), or
its ledger found damaged by a read that checks as it goes (a head row a hand edit left
unreadable, an event that breaks the chain). Upkeep that walks many runs skips such a run
and logs it: one damaged run never stops the others' upkeep or a server's start."""


def damage_reason(exc: Exception) -> str:
    """The ledger problem a :data:`LEDGER_DAMAGE` error names (``LEDGER_GAP``…): a refused
    run's first problem, or the read's own reason."""
    problem = getattr(exc, "problem", None)
    return str(getattr(problem, "reason", None) or getattr(exc, "reason", "RUN_LEDGER_INVALID"))


def skipped_damaged(log: logging.Logger, what: str, run_id: str, exc: CharterError) -> None:
    """Log that ``what`` (an upkeep) skipped ``run_id``: one of :data:`LEDGER_DAMAGE`."""
    log.warning("%s skipped run %s, its ledger damaged: %s", what, run_id, exc)


class RowUnsealed(CharterError):
    """A row without a MAC in a run this process has not verified yet (written before rows
    carried MACs), or a row written past the head this process verified: verify the run up
    to its stored head (which seals old rows) and read again."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id


class HeadNotVerified(CharterError):
    """Raised inside an append's transaction: the stored head is not the verified one."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"the stored head of run {run_id} is not the one this process verified")
        self.run_id = run_id


class _Reader(Protocol):
    async def head(self, run_id: str) -> Head | None: ...

    async def read_stored(self, run_id: str, *, after: int = 0, limit: int = 1000) -> Any: ...


async def stored_tenant(store: _Reader, run_id: str) -> str | None:
    """The tenant a run's first event names as stored (unchecked), or None: who may still
    verify, or be told about, a run refused for its ledger (its rows are not served)."""
    first = await store.read_stored(run_id, after=0, limit=1)
    if not first or first[0].seq != 1 or first[0].type != "run_created":
        return None
    return created_tenant(first[0].data)


async def refuse_vanished(store: Any, table: str, key: str, tenant: str | None) -> None:
    """A lookup of a ``table`` row by its own id ``key`` (a context, an approval, a proposal)
    found nothing. When the store noted such a row deleted or its id changed outside Charter
    (``ledger_edits``), the run it belonged to is verified again — and refused: its row is
    missing — instead of answering that the row never existed. ``tenant``: only a run whose
    first event names that tenant is refused to this caller (None: any run); the others'
    callers are told nothing. Costs one indexed read of ``ledger_edits``, on a miss only."""
    gone = getattr(store, "vanished", None)
    trust = getattr(store, "trust", None)
    if gone is None or trust is None or not trust.enabled:
        return
    for run_id in await gone(table, key):
        if tenant is not None and await stored_tenant(store, run_id) != tenant:
            continue
        trust.forget([run_id])
        await trust.ensure(store, run_id)


class LedgerTrust:
    """What this process verified of each run, and which runs it refuses (thread-safe)."""

    def __init__(self, key: LedgerKey, *, enabled: bool = True) -> None:
        self.key = key
        self.enabled = enabled
        self._verified: dict[str, tuple[int, str]] = {}
        self._invalid: dict[str, RunProblem] = {}
        self._lock = threading.Lock()
        self._run_locks: dict[str, asyncio.Lock] = {}
        self._listeners: list[Callable[[RunProblem], None]] = []
        self._written: dict[RowKey, int] = {}
        self.verifications = 0
        """Full verifications done (first touches), for tests and metrics."""

    # -- listeners and state ------------------------------------------------------------

    def on_invalid(self, listener: Callable[[RunProblem], None]) -> None:
        """Call ``listener`` once per run found invalid (from any thread the finding is on)."""
        self._listeners.append(listener)

    @property
    def invalid(self) -> Mapping[str, RunProblem]:
        with self._lock:
            return dict(self._invalid)

    def problem(self, run_id: str) -> RunProblem | None:
        return self._invalid.get(run_id)

    def verified(self, run_id: str) -> tuple[int, str] | None:
        return self._verified.get(run_id)

    def fail(self, problem: RunProblem) -> RunLedgerInvalid:
        """Record ``problem`` (the first one per run wins) and return the refusal to raise."""
        with self._lock:
            first = problem.run_id not in self._invalid
            if first:
                self._invalid[problem.run_id] = problem
                self._verified.pop(problem.run_id, None)
            kept = self._invalid[problem.run_id]
        if first:
            logger.error(
                "run %s refused: its ledger %s (%s%s): %s",
                problem.run_id,
                "is quarantined" if problem.quarantined else "failed verification",
                problem.reason,
                "" if problem.seq is None else f" at {problem.seq}",
                problem.message,
            )
            for listener in self._listeners:
                try:
                    listener(problem)
                except Exception as exc:  # a listener never hides the refusal
                    logger.error("ledger trust listener failed: %s", type(exc).__name__)
        return RunLedgerInvalid(kept)

    def quarantine(self, problem: RunProblem) -> None:
        """Refuse the run from now on as quarantined (an operator's mark, kept by the store)."""
        with self._lock:
            self._invalid[problem.run_id] = problem
            self._verified.pop(problem.run_id, None)

    def forget(self, run_ids: Iterable[str]) -> None:
        """Events of ``run_ids`` were changed outside the append path (a hand edit of the
        database): the next touch of each verifies it in full again, as a first one does."""
        if not self.enabled:
            return
        with self._lock:
            for run_id in run_ids:
                self._verified.pop(run_id, None)

    def refuse_if_invalid(self, run_id: str) -> None:
        problem = self._invalid.get(run_id)
        if problem is not None:
            raise RunLedgerInvalid(problem)

    def advance(self, head: Head) -> None:
        """An append of this process committed ``head`` (called after the commit)."""
        with self._lock:
            if head.run_id in self._invalid:
                return
            known = self._verified.get(head.run_id)
            if known is None or known[0] < head.seq:
                self._verified[head.run_id] = (head.seq, head.hash)

    def wrote(self, seqs: Mapping[RowKey, int]) -> None:
        """An append of this process committed these rows at these sequences (called after
        the commit, by the store's one writer: the SQLite writer thread, the event loop for
        PostgreSQL)."""
        if not self.enabled:
            return
        written = self._written
        if len(written) + len(seqs) > _WRITTEN_LIMIT:
            for key in list(written)[: _WRITTEN_LIMIT // 2]:
                del written[key]
        for key, seq in seqs.items():
            known = written.pop(key, 0)  # re-inserted: the newest keys are kept longest
            written[key] = max(known, seq)

    # -- in the append's transaction ----------------------------------------------------

    def check_fresh(self, key: RowKey, seq: Any) -> None:
        """Raise unless the row read under ``key`` in an append's transaction (its
        ``row_seq``; None: no row) is at least as new as the one this process last wrote
        there. Only the append path asks: its reads see every commit, so an older row was put
        back (or the row deleted) by someone else."""
        known = self._written.get(key)
        if known is None or not self.enabled or (type(seq) is int and seq >= known):
            return
        if seq is None:
            what = "is gone"
        elif type(seq) is int:
            what = f"is the one of event {seq}"
        else:  # SQLite keeps what a hand edit stores
            what = f"has its row_seq stored as {storage_class(seq)}"
        raise self.fail(
            RunProblem(
                run_id=key.key[0],
                reason="SNAPSHOT_DIVERGENCE",
                seq=known,
                message=f"the {key.table} row this process wrote at event {known} {what} "
                "(put back or deleted outside Charter)",
            )
        )

    def check_head(self, run_id: str, head: Head | None) -> None:
        """Raise unless ``head`` (read in the transaction) is the verified head.

        :class:`RunLedgerInvalid` for a refused run; :class:`HeadNotVerified` when the head is
        not the verified one (the caller verifies the difference and tries again). A run
        without a head is created by the append or refused by the planner.
        """
        if not self.enabled:
            return
        problem = self._invalid.get(run_id)
        if problem is not None:
            raise RunLedgerInvalid(problem)
        known = self._verified.get(run_id)
        if known is None:
            if head is None:
                return  # no such run (yet): the append creates it or is refused for that
            raise HeadNotVerified(run_id)
        if head is None or head.seq != known[0] or head.hash != known[1]:
            raise HeadNotVerified(run_id)

    # -- verification -------------------------------------------------------------------

    async def ensure(self, store: Any, run_id: str) -> None:
        """Verify ``run_id`` fully unless this process already did; raise if it fails."""
        if not self.enabled:
            return
        self.refuse_if_invalid(run_id)
        if run_id in self._verified:
            return
        lock = self._run_locks.get(run_id)
        if lock is None:
            lock = self._run_locks.setdefault(run_id, asyncio.Lock())
        async with lock:
            self.refuse_if_invalid(run_id)
            if run_id in self._verified:
                return
            await self._verify_fully(store, run_id)

    async def _verify_fully(self, store: Any, run_id: str) -> None:
        from charter.ledger.verify import verify_rebuilt  # verify imports the ports: no cycle

        try:
            head = await store.head(run_id)
        except LedgerIntegrityError as exc:  # a head row that cannot be read (a text seq)
            raise self.fail(
                RunProblem(run_id=run_id, reason=exc.reason, seq=exc.seq, message=exc.message)
            ) from None
        if head is None:
            # No head: a run that does not exist — unless events say it did.
            headless = headless_problem(await store.read_stored(run_id, after=0, limit=1))
            if headless is not None:
                raise self.fail(
                    RunProblem(
                        run_id=run_id,
                        reason=headless.reason,
                        seq=headless.seq,
                        message=headless.message,
                    )
                )
            return
        self.verifications += 1
        try:
            report, rebuilt = await verify_rebuilt(store, run_id, self.key)
        except RunLedgerInvalid:
            raise
        except CharterError as exc:
            raise self.fail(
                RunProblem(run_id=run_id, reason="LEDGER_UNREADABLE", seq=None, message=str(exc))
            ) from None
        if not report.ok or report.head_seq is None or report.head_hash is None:
            raise self.fail(
                RunProblem(
                    run_id=run_id,
                    reason=report.reason or "LEDGER_INTEGRITY",
                    seq=report.seq,
                    message=report.message or "the ledger failed verification",
                )
            )
        seal = getattr(store, "seal_rows", None)
        if seal is not None:
            # Rows written before projection rows carried a MAC get one now, from the rows
            # rebuilt out of the verified events (only where the stored row is still that).
            await seal(run_id, report.head_seq, rebuilt.rows)
        with self._lock:
            if run_id not in self._invalid:
                known = self._verified.get(run_id)
                if known is None or known[0] < report.head_seq:
                    self._verified[run_id] = (report.head_seq, report.head_hash)

    async def refresh(self, store: Any, run_id: str) -> None:
        """Verify ``run_id`` up to its stored head: fully if this process never did, else
        from the point it verified (:meth:`catch_up`)."""
        if run_id in self._verified:
            await self.catch_up(store, run_id)
        else:
            await self.ensure(store, run_id)

    def past_head(self, run_id: str) -> RunLedgerInvalid:
        """A row that still claims an event past the verified stored head: refuse the run."""
        return self.fail(
            RunProblem(
                run_id=run_id,
                reason="ROW_MAC_INVALID",
                seq=None,
                message="a projection row claims an event past the run's head",
            )
        )

    async def catch_up(self, store: _Reader, run_id: str) -> None:
        """Verify the events between the verified head and the stored head (chain, MAC)."""
        self.refuse_if_invalid(run_id)
        if run_id not in self._verified:
            await self.ensure(store, run_id)
            return
        head = await store.head(run_id)

        async def read(after: int) -> list[StoredEvent]:
            return list(await store.read_stored(run_id, after=after, limit=_CATCH_UP_BATCH))

        await self.verify_to(run_id, head, read)

    async def verify_to(
        self,
        run_id: str,
        head: Head | None,
        read: Callable[[int], Awaitable[list[StoredEvent]]],
    ) -> None:
        """Verify the events from the verified head up to ``head`` — read in batches by
        ``read(after)``, maybe inside the append's transaction — then move the verified head
        there; a problem refuses the run. :class:`HeadNotVerified` if the process never
        verified the run."""
        from charter.ledger.verify import LedgerProblem, check_values

        self.refuse_if_invalid(run_id)
        known = self._verified.get(run_id)
        if known is None:
            raise HeadNotVerified(run_id)
        last_seq, last_hash = known
        if head is None or head.seq < last_seq:
            raise self.fail(
                RunProblem(
                    run_id=run_id,
                    reason="LEDGER_HEAD_MISMATCH",
                    seq=last_seq,
                    message=f"the stored head moved back from event {last_seq}"
                    + ("" if head is None else f" to {head.seq}"),
                )
            )
        try:
            while last_seq < head.seq:
                rows = [r for r in await read(last_seq) if r.seq <= head.seq]
                if not rows:
                    raise LedgerProblem(
                        "LEDGER_HEAD_MISMATCH",
                        last_seq + 1,
                        f"the head is at {head.seq} but the events end at {last_seq}",
                    )
                for row in rows:
                    check_values(
                        run_id,
                        row.seq,
                        row.type,
                        row.at,
                        row.prev_hash,
                        row.hash,
                        row.data,
                        last_seq=last_seq,
                        last_hash=last_hash,
                    )
                    last_seq, last_hash = row.seq, row.hash
            if head.hash != last_hash:
                raise LedgerProblem(
                    "LEDGER_HEAD_MISMATCH", head.seq, "the head hash is not the last event's hash"
                )
            if not self.key.mac_matches(run_id, head.seq, head.hash, head.mac):
                raise LedgerProblem(
                    "LEDGER_MAC_INVALID",
                    head.seq,
                    f"the head MAC does not verify with ledger key {self.key.key_id}",
                )
        except LedgerProblem as problem:
            raise self.fail(
                RunProblem(
                    run_id=run_id, reason=problem.reason, seq=problem.seq, message=problem.message
                )
            ) from None
        self.advance(head)
