"""Verification: replay the chain and the state machines, rebuild projections, compare.

:class:`ChainChecker` is fed stored rows in order — from a database or an exported directory —
and reports the first problem with its own reason and sequence number:

==========================  =============================================================
``LEDGER_GAP``              a sequence number is missing
``LEDGER_DUPLICATE_SEQ``    an event repeats an earlier sequence number
``LEDGER_SEQ_ORDER``        an event sits at another event's position (reordered)
``LEDGER_HASH_MISMATCH``    stored bytes do not hash to the recorded hash, the chain link is
                            broken, or the bytes disagree with the indexed columns
``LEDGER_UNKNOWN_EVENT_TYPE``  an event type this code does not know
``LEDGER_SCHEMA_TOO_NEW``   an event's ``schema_version`` is newer than this code reads
``LEDGER_BAD_TRANSITION``   replaying the lifecycles refuses an event
``LEDGER_HEAD_MISMATCH``    the events end before or after, or elsewhere than, the head
``LEDGER_MAC_INVALID``      the head's MAC does not verify with the configured key
``SNAPSHOT_DIVERGENCE``     a stored projection disagrees with the one rebuilt from events
``LEDGER_TORN_TAIL``        an exported event file ends mid-line (see :mod:`.export`)
``ARTIFACT_MISSING``        a registered artifact's file is not there
``ARTIFACT_INTEGRITY_MISMATCH``  an artifact's file differs from its registered sha256 or
                            size, or is not a regular file
``ARTIFACT_UNREGISTERED``   an exported directory holds a file under ``artifacts/files/``
                            that the artifact index does not list
==========================  =============================================================

Artifact files are checked after everything else, when a reader for them is given
(:data:`ArtifactSource`; the ledger never opens the artifact store itself). Their problems
carry the ``artifact_id`` (and the ``path``) and the ``seq`` of the registration.

Stored bytes are hashed as they are and never re-serialized. Their agreement with the indexed
columns is checked byte for byte against the frame those columns imply (prefix and suffix
around the payload); the payload is parsed (:func:`charter.ledger.jsonload.loads`) where a
projection handler needs it — or for every event when :func:`read_verified` (a list) or
:func:`visit_verified` (a callback) hands the parsed events on to replay and evaluation, so
that one read of a run serves all three.

Stored projection rows are compared with the rebuilt ones as the bytes the store holds
(:meth:`ChainChecker.compare_stored`); only a table whose bytes differ is parsed and compared
by value, which decides the verdict as before.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from charter.errors import InvalidInput, LedgerIntegrityError
from charter.ledger.chain import LedgerKey
from charter.ledger.checker import ChainChecker as ChainChecker
from charter.ledger.checker import LedgerProblem as LedgerProblem
from charter.ledger.checker import RebuiltRows as RebuiltRows
from charter.ledger.checker import Take as Take
from charter.ledger.checker import VerifyReport as VerifyReport
from charter.ledger.checker import check_row as check_row
from charter.ledger.checker import check_values as check_values
from charter.ledger.checker import headless_problem
from charter.ledger.checker import same_json as same_json
from charter.ledger.events import StoredEvent
from charter.ledger.gcpause import collector_paused
from charter.ledger.ports import Store
from charter.ledger.projections import Row

_BATCH = 5000


class ArtifactUnreadable(Exception):
    """Raised by an :data:`ArtifactSource`: the file is missing, or is not a plain file."""

    def __init__(self, *, missing: bool) -> None:
        super().__init__("missing" if missing else "not a regular file")
        self.missing = missing


ArtifactSource = Callable[[str], Iterable[bytes]]
"""The bytes of one registered artifact, in chunks, given its run-relative path.

Raises :class:`ArtifactUnreadable` (at the call or while iterating) for a missing file or one
that is not a regular file; any other exception propagates to the caller of verify/export.
It must not check the content itself: the ledger hashes it against the artifact index.
"""


def check_artifact(row: Row, chunks: Iterable[bytes]) -> None:
    """Hash ``chunks`` against an artifact index row (sha256 and size); raise LedgerProblem."""
    artifact_id = str(row["artifact_id"])
    seq = row.get("seq")
    seq = seq if isinstance(seq, int) else None
    digest = hashlib.sha256()
    size = 0
    try:
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
    except ArtifactUnreadable as exc:
        if exc.missing:
            raise LedgerProblem(
                "ARTIFACT_MISSING",
                seq,
                f"the file of artifact {artifact_id} is missing",
                artifact_id=artifact_id,
                path=str(row["path"]),
            ) from None
        raise LedgerProblem(
            "ARTIFACT_INTEGRITY_MISMATCH",
            seq,
            f"the file of artifact {artifact_id} is not a regular file",
            artifact_id=artifact_id,
            path=str(row["path"]),
        ) from None
    if size != row["size"] or "sha256:" + digest.hexdigest() != row["sha256"]:
        raise LedgerProblem(
            "ARTIFACT_INTEGRITY_MISMATCH",
            seq,
            f"the file of artifact {artifact_id} does not match its registered sha256 and size",
            artifact_id=artifact_id,
            path=str(row["path"]),
        )


def check_artifacts(rows: Iterable[Row], source: ArtifactSource) -> None:
    """:func:`check_artifact` for every row, in index order, reading through ``source``."""
    for row in rows:
        check_artifact(row, _chunks(source, str(row["path"])))


def _chunks(source: ArtifactSource, path: str) -> Iterable[bytes]:
    yield from source(path)  # a source that raises at the call is read like one that streams


async def verify_run(
    store: Store, run_id: str, key: LedgerKey, *, artifacts: ArtifactSource | None = None
) -> VerifyReport:
    """Verify one run in ``store``: chain, lifecycles, head and MAC, projections.

    With ``artifacts``, every registered artifact's file is then read through it (in a worker
    thread) and checked against its sha256 and size.
    """
    with collector_paused():
        report, _ = await _verify(store, run_id, key, artifacts, None)
    return report


async def verify_rebuilt(
    store: Store, run_id: str, key: LedgerKey
) -> tuple[VerifyReport, RebuiltRows]:
    """:func:`verify_run` (ledger only) that also hands back the projection rows it rebuilt
    from the verified events (run-time trust seals rows that carry no MAC yet with them)."""
    with collector_paused():
        report, checker = await _verify(store, run_id, key, None, None)
    return report, checker.rebuild


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedEvents:
    """A run's verification and its events, parsed once by the same pass."""

    report: VerifyReport
    events: Sequence[dict[str, Any]]
    """Every event's document in seq order (``json.loads`` of its stored bytes); when the
    report is not ok, only those read before the problem."""


async def read_verified(
    store: Store, run_id: str, key: LedgerKey, *, artifacts: ArtifactSource | None = None
) -> VerifiedEvents:
    """:func:`verify_run` that also returns the parsed events, reading the run only once.

    Replay and evaluation take these events, so a replay of a run is a verified replay at the
    cost of one read. Raises :class:`~charter.errors.LedgerIntegrityError` for a ledger that
    verifies but holds an event that is not JSON (verification parses only the events that
    change projections).
    """
    events: list[dict[str, Any]] = []
    report = await visit_verified(store, run_id, key, events.append, artifacts=artifacts)
    return VerifiedEvents(report=report, events=events)


async def visit_verified(
    store: Store,
    run_id: str,
    key: LedgerKey,
    visit: Callable[[dict[str, Any]], None],
    *,
    artifacts: ArtifactSource | None = None,
) -> VerifyReport:
    """:func:`read_verified` handing each event's document to ``visit`` instead of a list.

    ``visit`` sees the documents in seq order as each event passes its checks — on the
    thread that reads the store — and keeps what it needs: a verified replay consumes the
    run without holding every parsed event. When the report is not ok, ``visit`` has seen
    the events before the problem, and its work must be discarded. ``visit`` must not raise
    (an exception would abort verification). Raises as :func:`read_verified` does.
    """
    with collector_paused():
        report, checker = await _verify(store, run_id, key, artifacts, visit, None)
    _raise_unreadable(report, checker)
    return report


async def take_verified(store: Store, run_id: str, key: LedgerKey, take: Take) -> VerifyReport:
    """:func:`visit_verified` handing each event's ``type``, ``payload`` and ``seq`` (the
    document's members) to ``take`` instead of the document: a consumer that reads only those
    spares building a document per event. Same checks, order, errors and report."""
    with collector_paused():
        report, checker = await _verify(store, run_id, key, None, None, take)
    _raise_unreadable(report, checker)
    return report


def _raise_unreadable(report: VerifyReport, checker: ChainChecker) -> None:
    if report.ok and checker.unreadable is not None:
        raise LedgerIntegrityError(
            f"event {checker.unreadable} is not valid JSON",
            reason="LEDGER_HASH_MISMATCH",
            seq=checker.unreadable,
            run_id=report.run_id,
        )


async def _verify(
    store: Store,
    run_id: str,
    key: LedgerKey,
    artifacts: ArtifactSource | None,
    visit: Callable[[dict[str, Any]], None] | None,
    take: Take | None = None,
) -> tuple[VerifyReport, ChainChecker]:
    checker = ChainChecker(run_id, visit=visit, take=take)
    try:
        snap = await store.stored_snapshot(run_id)
    except LedgerIntegrityError as exc:  # a head row a hand edit left unreadable: reported
        problem = LedgerProblem(exc.reason, exc.seq, exc.message)
        return problem.report(run_id, events=0, head_seq=None), checker
    if snap is None:
        headless = headless_problem(await store.read_stored(run_id, after=0, limit=1))
        if headless is not None:
            return headless.report(run_id, events=0, head_seq=None), checker
        raise InvalidInput("no such run", reason="RUN_NOT_FOUND", run_id=run_id)
    count = 0
    scan = getattr(store, "scan_stored", None)
    try:
        if scan is not None:
            # Fast path: the store feeds column values to the checker as it reads them.
            await scan(run_id, upto=snap.head.seq, visit=checker.feed_batch)
            count = checker.count
        after = 0 if scan is None else snap.head.seq
        pending: asyncio.Future[Sequence[StoredEvent]] | None = (
            asyncio.ensure_future(store.read_stored(run_id, after=after, limit=_BATCH))
            if scan is None
            else None
        )
        while pending is not None:
            rows = [r for r in await pending if r.seq <= snap.head.seq]
            pending = None
            if rows and rows[-1].seq < snap.head.seq:  # read the next batch while checking
                after = rows[-1].seq
                pending = asyncio.ensure_future(
                    store.read_stored(run_id, after=after, limit=_BATCH)
                )
            for row in rows:
                checker.feed(row)
                count += 1
        head = snap.head
        beyond = await store.read_stored(run_id, after=snap.head.seq, limit=1)
        if beyond:  # maybe a concurrent append: look at the head again
            fresh = await store.head(run_id)
            if fresh is None or fresh.seq < beyond[0].seq:
                raise LedgerProblem(
                    "LEDGER_HEAD_MISMATCH", beyond[0].seq, "events continue past the head"
                )
        checker.check_head(head, key)
        checker.compare_stored(snap.run, snap.tables, snap.columns)
        if artifacts is not None:
            registered = checker.listed("artifacts")
            if registered:
                await asyncio.to_thread(check_artifacts, registered, artifacts)
    except LedgerProblem as problem:
        return problem.report(run_id, events=count, head_seq=snap.head.seq), checker
    expired = {
        str(row["metadata_expired_at"])
        for row in checker.listed("contexts")
        if row.get("metadata_expired_at")
    }
    notes = [
        f"the run's metadata expired at {at} (retention): its fingerprints were erased from "
        "its rows on purpose (a run_metadata_expired event); deduplication and replay ended"
        for at in sorted(expired)
    ]
    return (
        VerifyReport(
            run_id=run_id,
            ok=True,
            events=count,
            head_seq=snap.head.seq,
            head_hash=snap.head.hash,
            notes=tuple(notes),
        ),
        checker,
    )
