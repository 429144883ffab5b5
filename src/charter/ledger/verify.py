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
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import orjson

from charter.contracts.canonical import canonical_bytes
from charter.errors import Failure, InvalidInput, LedgerIntegrityError
from charter.ledger.chain import Head, LedgerKey
from charter.ledger.events import (
    EVENT_TYPES,
    GENESIS_HASH,
    SCHEMA_VERSION,
    StoredEvent,
)
from charter.ledger.gcpause import collector_paused
from charter.ledger.jsonload import SLOW, fast_loads
from charter.ledger.ports import Store
from charter.ledger.projections import HANDLERS, RUN_TABLES, TABLES, EventFacts, Row, RowKey

_BATCH = 5000


class LedgerProblem(Exception):
    """Internal: the first problem found; turned into a report or a LedgerIntegrityError."""

    def __init__(
        self,
        reason: str,
        seq: int | None,
        message: str,
        *,
        artifact_id: str | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.seq = seq
        self.message = message
        self.artifact_id = artifact_id
        self.path = path

    def report(self, run_id: str, *, events: int, head_seq: int | None) -> VerifyReport:
        return VerifyReport(
            run_id=run_id,
            ok=False,
            events=events,
            head_seq=head_seq,
            reason=self.reason,
            seq=self.seq,
            message=self.message,
            artifact_id=self.artifact_id,
            path=self.path,
        )


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


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyReport:
    run_id: str
    ok: bool
    events: int
    head_seq: int | None
    reason: str | None = None
    seq: int | None = None
    message: str | None = None
    artifact_id: str | None = None
    path: str | None = None
    head_hash: str | None = None
    """The hash of the head verified (an ok report only; not part of :meth:`to_dict`)."""
    notes: tuple[str, ...] = ()
    """What an ok run records that a reader should know (its metadata expired: retention)."""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "run_id": self.run_id,
            "ok": self.ok,
            "events": self.events,
            "head_seq": self.head_seq,
            "reason": self.reason,
            "seq": self.seq,
            "message": self.message,
            "artifact_id": self.artifact_id,
            "path": self.path,
        }
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def raise_for_problem(self) -> None:
        if not self.ok:
            raise LedgerIntegrityError(
                self.message or "the ledger failed verification",
                reason=self.reason or "LEDGER_INTEGRITY",
                seq=self.seq,
                run_id=self.run_id,
            )


def check_row(row: StoredEvent, *, last_seq: int, last_hash: str) -> None:
    """Check one stored row against its predecessor; raise :class:`LedgerProblem`."""
    check_values(
        row.run_id,
        row.seq,
        row.type,
        row.at,
        row.prev_hash,
        row.hash,
        row.data,
        last_seq=last_seq,
        last_hash=last_hash,
    )


def check_values(
    run_id: str,
    seq: int,
    type_: str,
    at: str,
    prev_hash: str,
    hash_: str,
    data: bytes,
    *,
    last_seq: int,
    last_hash: str,
) -> None:
    """:func:`check_row` on plain column values (the fast path scans rows as tuples)."""
    if seq != last_seq + 1:
        if seq <= last_seq:
            raise LedgerProblem("LEDGER_DUPLICATE_SEQ", seq, f"sequence {seq} repeats")
        raise LedgerProblem("LEDGER_GAP", last_seq + 1, f"event {last_seq + 1} is missing")
    if not (
        data.startswith(f'{{"at":"{at}","event_id":"{seq:08d}","payload":'.encode())
        and data.endswith(
            f',"prev_hash":"{prev_hash}","run_id":"{run_id}","schema_version":'
            f'{SCHEMA_VERSION},"seq":{seq},"type":"{type_}"}}'.encode()
        )
    ):
        _explain_frame(
            StoredEvent(
                run_id=run_id,
                seq=seq,
                type=type_,
                at=at,
                prev_hash=prev_hash,
                hash=hash_,
                data=data,
            ),
            last_seq,
        )
    if prev_hash != last_hash:
        raise LedgerProblem(
            "LEDGER_HASH_MISMATCH", seq, f"event {seq} does not link to event {last_seq}"
        )
    digest = hashlib.sha256(prev_hash.encode("ascii"))
    digest.update(data)
    if "sha256:" + digest.hexdigest() != hash_:
        raise LedgerProblem(
            "LEDGER_HASH_MISMATCH", seq, f"event {seq}'s bytes do not match its hash"
        )
    if type_ not in EVENT_TYPES:
        raise LedgerProblem("LEDGER_UNKNOWN_EVENT_TYPE", seq, f"event {seq} has an unknown type")


def _explain_frame(row: StoredEvent, last_seq: int) -> None:
    """The bytes disagree with the columns: say whether it is a sequence problem."""
    try:
        doc = json.loads(row.data)
        inner = doc["seq"]
    except (ValueError, KeyError, TypeError):
        doc, inner = None, None
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise LedgerProblem(
            "LEDGER_SCHEMA_TOO_NEW",
            row.seq,
            f"event {row.seq} has schema_version {version}; this Charter reads versions up "
            f"to {SCHEMA_VERSION} (upgrade Charter to verify this run)",
        )
    if isinstance(inner, int) and inner != row.seq:
        if inner <= last_seq:
            raise LedgerProblem(
                "LEDGER_DUPLICATE_SEQ", row.seq, f"position {row.seq} repeats event {inner}"
            )
        raise LedgerProblem(
            "LEDGER_SEQ_ORDER", row.seq, f"position {row.seq} holds event {inner} (reordered)"
        )
    raise LedgerProblem(
        "LEDGER_HASH_MISMATCH", row.seq, f"event {row.seq}'s bytes disagree with its columns"
    )


_fresh_sha256 = hashlib.sha256().copy  # copying an empty state beats a new OpenSSL context
_dumps = orjson.dumps
_SORTED = orjson.OPT_SORT_KEYS
# Rebuilt rows encoded to compare with stored rows: sorted keys, and anything but JSON values
# (dataclasses, dates, subclasses of str, int, dict, list) refused rather than converted.
_AS_STORED = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


class RebuiltRows:
    """Projection rows rebuilt by applying events in order (what ``projections.Rebuild`` does).

    The rows live in one dict keyed by :class:`RowKey` (a tuple), whose own ``get`` is the
    handlers' getter: a handler's read is a C-level lookup, without a Python frame.
    """

    def __init__(self) -> None:
        self.rows: dict[RowKey, Row] = {}

    def get(self, key: RowKey) -> Row | None:
        return self.rows.get(key)

    def apply(self, event: EventFacts) -> None:
        handler = HANDLERS.get(event.type)
        if handler is not None:
            rows = self.rows
            rows.update(handler.apply(event, rows.get))

    def run(self, run_id: str) -> Row | None:
        return self.rows.get(RowKey("runs", (run_id,)))

    def listed(self, table: str, run_id: str) -> list[Row]:
        """Like ``Rebuild.listed``: ``TableSpec.sort_key`` order, by one C-level getter."""
        rows = [r for (t, k), r in self.rows.items() if t == table and k[0] == run_id]
        return _sorted(table, rows)

    def tables_of(self, run_id: str) -> dict[str, list[Row]]:
        """:meth:`listed` for every table with rows of ``run_id``, in one pass over the rows."""
        grouped: dict[str, list[Row]] = {}
        for (table, key), row in self.rows.items():
            if key[0] == run_id:
                found = grouped.get(table)
                if found is None:
                    grouped[table] = [row]
                else:
                    found.append(row)
        return {table: _sorted(table, rows) for table, rows in grouped.items()}


def _sorted(table: str, rows: list[Row]) -> list[Row]:
    spec = TABLES[table]
    return sorted(rows, key=itemgetter(spec.order_by, *spec.keys))


class _ParsedEvent:
    """An event's document as the handlers read it (an :class:`EventFacts`).

    What :class:`Event` holds, in plain slots: building a frozen dataclass costs a call of
    ``object.__setattr__`` per field, for every event verification applies.
    """

    __slots__ = (
        "at",
        "event_id",
        "hash",
        "payload",
        "prev_hash",
        "run_id",
        "schema_version",
        "seq",
        "type",
    )

    def __init__(self, doc: Mapping[str, Any], hash_: str) -> None:
        self.schema_version: int = doc["schema_version"]
        self.run_id: str = doc["run_id"]
        self.seq: int = doc["seq"]
        self.event_id: str = doc["event_id"]
        self.type: str = doc["type"]
        self.at: str = doc["at"]
        self.payload: Mapping[str, Any] = doc["payload"]
        self.prev_hash: str = doc["prev_hash"]
        self.hash = hash_


class ChainChecker:
    """Feed rows in order; then :meth:`finish` with the head and, optionally, stored rows.

    With ``events`` (a list), every event's parsed document (``{at, event_id, payload, …}``,
    as ``json.loads`` of its stored bytes gives it) is appended to it as the event is checked,
    so replay and evaluation need not read and parse the run again; with ``visit``, each
    document is handed to it instead (and not kept). An event whose bytes are not JSON is then
    noted in :attr:`unreadable` and skipped (verification itself parses only the events a
    projection handler needs, and its verdict does not change).
    """

    def __init__(
        self,
        run_id: str,
        *,
        events: list[dict[str, Any]] | None = None,
        visit: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.run_id = run_id
        self.last_seq = 0
        self.last_hash = GENESIS_HASH
        self.rebuild = RebuiltRows()
        self.events = events
        self._visit = events.append if events is not None else visit
        self.unreadable: int | None = None
        # Whether every event a handler applied was parsed by orjson (so every float in the
        # rebuilt rows is finite): the condition of compare_stored's byte comparison.
        self._finite = True
        # The part of every frame's suffix between prev_hash and seq (fixed for the run).
        self._middle = f'","run_id":"{run_id}","schema_version":{SCHEMA_VERSION},"seq":'

    @property
    def count(self) -> int:
        """Rows accepted so far (sequence numbers run 1, 2, … without gaps)."""
        return self.last_seq

    def feed(self, row: StoredEvent) -> None:
        if row.run_id != self.run_id:
            raise LedgerProblem(
                "LEDGER_HASH_MISMATCH", row.seq, f"event {row.seq} belongs to another run"
            )
        self.feed_values(row.seq, row.type, row.at, row.prev_hash, row.hash, row.data)

    def feed_values(
        self, seq: int, type_: str, at: str, prev_hash: str, hash_: str, data: bytes
    ) -> None:
        """Check and apply one row of this run given as column values (no row object)."""
        self.feed_batch([(seq, type_, at, prev_hash, hash_, data)])

    def feed_batch(self, rows: Iterable[tuple[int, str, str, str, str, bytes]]) -> None:
        """Check and apply rows of this run, in order, given as column tuples.

        The checks of :func:`check_values`, inlined on the common path and run in one loop
        with its lookups hoisted (verification reads every event of a run, so each microsecond
        here is a second per million events). ``str(seq).zfill(8)`` is ``f"{seq:08d}"`` for
        every int, at half the cost.
        """
        middle, types, handlers = self._middle, EVENT_TYPES, HANDLERS
        visit = self._visit
        fresh = _fresh_sha256
        # The last accepted row, in locals while the loop runs (stored back even on a problem).
        last_seq, last_hash = self.last_seq, self.last_hash
        try:
            for seq, type_, at, prev_hash, hash_, data in rows:
                text = str(seq)
                if (
                    seq != last_seq + 1
                    or prev_hash != last_hash
                    or not data.startswith(
                        f'{{"at":"{at}","event_id":"{text.zfill(8)}","payload":'.encode()
                    )
                    or not data.endswith(
                        f',"prev_hash":"{prev_hash}{middle}{text},"type":"{type_}"}}'.encode()
                    )
                    or type_ not in types
                ):
                    # Something is wrong: let the full check say what, in the documented order.
                    check_values(
                        self.run_id,
                        seq,
                        type_,
                        at,
                        prev_hash,
                        hash_,
                        data,
                        last_seq=last_seq,
                        last_hash=last_hash,
                    )
                digest = fresh()
                digest.update(prev_hash.encode())
                digest.update(data)
                if "sha256:" + digest.hexdigest() != hash_:
                    raise LedgerProblem(
                        "LEDGER_HASH_MISMATCH", seq, f"event {seq}'s bytes do not match its hash"
                    )
                if seq == 1 and type_ != "run_created":
                    raise LedgerProblem(
                        "LEDGER_BAD_TRANSITION", 1, "the first event is not run_created"
                    )
                if type_ in handlers:
                    self._apply(seq, hash_, data)
                elif visit is not None:  # loads(data), inlined: most events take this path
                    doc = fast_loads(data)
                    if doc is SLOW:
                        try:
                            doc = json.loads(data)
                        except ValueError:
                            if self.unreadable is None:
                                self.unreadable = seq
                            doc = SLOW
                    if doc is not SLOW:
                        visit(doc)
                last_seq, last_hash = seq, hash_
        finally:
            self.last_seq, self.last_hash = last_seq, last_hash

    def _apply(self, seq: int, hash_: str, data: bytes) -> None:
        """Parse the event and apply its projection handler; hand its document on if asked."""
        try:
            doc = fast_loads(data)
            if doc is SLOW:
                doc = json.loads(data)
                self._finite = False
            self.rebuild.apply(_ParsedEvent(doc, hash_))
        except Failure as exc:  # the live append path would have refused this event
            raise LedgerProblem(
                "LEDGER_BAD_TRANSITION", seq, f"event {seq}: {exc.message}"
            ) from None
        except (ValueError, KeyError, TypeError):
            raise LedgerProblem(
                "LEDGER_HASH_MISMATCH", seq, f"event {seq} is not valid JSON"
            ) from None
        if self._visit is not None:
            self._visit(doc)

    def check_head(self, head: Head | None, key: LedgerKey | None) -> None:
        """Check the head against the events, and its MAC unless ``key`` is None (an export
        checked without the key: the chain is checked, the MAC is not)."""
        if head is None:
            raise LedgerProblem("LEDGER_HEAD_MISMATCH", None, "the run has no head record")
        if head.seq > self.last_seq:
            raise LedgerProblem(
                "LEDGER_HEAD_MISMATCH",
                self.last_seq + 1,
                f"the head is at {head.seq} but the events end at {self.last_seq}",
            )
        if head.seq < self.last_seq:
            raise LedgerProblem(
                "LEDGER_HEAD_MISMATCH",
                head.seq + 1,
                f"events continue past the head ({head.seq})",
            )
        if head.hash != self.last_hash:
            raise LedgerProblem(
                "LEDGER_HEAD_MISMATCH", head.seq, "the head hash is not the last event's hash"
            )
        if key is not None and not key.mac_matches(self.run_id, head.seq, head.hash, head.mac):
            raise LedgerProblem(
                "LEDGER_MAC_INVALID",
                head.seq,
                f"the head MAC does not verify with ledger key {key.key_id}",
            )

    def compare(self, name: str, stored: Any, rebuilt: Any) -> None:
        if not same_json(stored, rebuilt):
            plural = name.endswith("rows")
            raise self._diverged(name, "disagree" if plural else "disagrees", "with the events")

    def _diverged(self, name: str, verb: str, what: str) -> LedgerProblem:
        run = self.rebuild.run(self.run_id)
        seq = run["snapshot_seq"] if run else None
        return LedgerProblem("SNAPSHOT_DIVERGENCE", seq, f"the stored {name} {verb} {what}")

    def _parsed(self, name: str, data: bytes) -> Any:
        """A stored row's value, parsed as the stores parse their text; a row that is not
        JSON text disagrees with the events like any other damaged row."""
        try:
            return json.loads(data.decode())
        except ValueError:  # not UTF-8 (UnicodeDecodeError) or not JSON
            plural = name.endswith("rows")
            raise self._diverged(
                name, "hold" if plural else "holds", "text that is not JSON"
            ) from None

    def compare_tables(self, run: Row | None, tables: Mapping[str, Sequence[Row]]) -> None:
        self.compare("run row", run, self.rebuild.run(self.run_id))
        for table in RUN_TABLES:
            self.compare(
                f"{table} rows",
                list(tables.get(table, ())),
                self.rebuild.listed(table, self.run_id),
            )

    def compare_stored(self, run: bytes | None, tables: Mapping[str, Sequence[bytes]]) -> None:
        """:meth:`compare_tables` on rows as stored (:class:`~charter.ledger.ports.StoredSnapshot`).

        The rebuilt rows of a table are encoded as the store's text would be written (sorted
        keys, no whitespace) and compared with the stored bytes; only a table that differs is
        parsed (``json.loads``) and compared as :meth:`compare_tables` compares it, so the
        verdict and its reason are the same.

        Equal bytes decide equality because ``json.loads`` of orjson's encoding of a row gives
        the row back — the same strings, integers and (finite) floats, lists for tuples —
        which :func:`same_json` accepts. orjson writes a non-finite float as ``null``, so the
        byte comparison is used only when every float in the rebuilt rows is finite: every
        event applied was parsed by orjson (it refuses ``NaN``, ``Infinity`` and overflowing
        numbers) and handlers build rows from events' JSON values without computing floats.
        A value orjson cannot or must not encode (an integer beyond 64 bits, a lone
        surrogate, anything but a JSON value) also sends its table to the full comparison.
        """
        rebuilt = self.rebuild.run(self.run_id)
        if not self._encodes_to([] if rebuilt is None else [rebuilt], [] if run is None else [run]):
            self.compare("run row", None if run is None else self._parsed("run row", run), rebuilt)
        listed = self.rebuild.tables_of(self.run_id)
        for table in RUN_TABLES:
            stored = tables.get(table, ())
            rows = listed.get(table, [])
            if not self._encodes_to(rows, stored):
                name = f"{table} rows"
                self.compare(name, [self._parsed(name, r) for r in stored], rows)

    def _encodes_to(self, rows: Sequence[Row], stored: Sequence[bytes]) -> bool:
        """Whether ``stored`` is, row for row, the bytes of ``rows`` (False decides nothing)."""
        if not self._finite or len(rows) != len(stored):
            return False
        dumps, option = _dumps, _AS_STORED
        try:
            for row, data in zip(rows, stored, strict=True):
                if dumps(row, option=option) != data:
                    return False
        except TypeError:  # orjson.JSONEncodeError
            return False
        return True


def same_json(a: Any, b: Any) -> bool:
    """``canonical_bytes(a) == canonical_bytes(b)``, without canonicalizing equal values.

    Python's ``==`` agrees with canonical JSON except that it takes ``True`` for ``1`` (and
    ``False`` for ``0``), which orjson's output tells apart; values equal under both are equal
    canonically. Anything else (unequal values, lists against tuples, integers orjson cannot
    write) is decided by the canonical bytes, as before.
    """
    if a == b:
        try:
            if _dumps(a, option=_SORTED) == _dumps(b, option=_SORTED):
                return True
        except TypeError:  # orjson.JSONEncodeError
            pass
    return _canon(a) == _canon(b)


def _canon(value: Any) -> bytes:
    return canonical_bytes(value)


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
        report, checker = await _verify(store, run_id, key, artifacts, visit)
    if report.ok and checker.unreadable is not None:
        raise LedgerIntegrityError(
            f"event {checker.unreadable} is not valid JSON",
            reason="LEDGER_HASH_MISMATCH",
            seq=checker.unreadable,
            run_id=run_id,
        )
    return report


async def _verify(
    store: Store,
    run_id: str,
    key: LedgerKey,
    artifacts: ArtifactSource | None,
    visit: Callable[[dict[str, Any]], None] | None,
) -> tuple[VerifyReport, ChainChecker]:
    snap = await store.stored_snapshot(run_id)
    if snap is None:
        raise InvalidInput("no such run", reason="RUN_NOT_FOUND", run_id=run_id)
    checker = ChainChecker(run_id, visit=visit)
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
        checker.compare_stored(snap.run, snap.tables)
        if artifacts is not None:
            registered = checker.rebuild.listed("artifacts", run_id)
            if registered:
                await asyncio.to_thread(check_artifacts, registered, artifacts)
    except LedgerProblem as problem:
        return problem.report(run_id, events=count, head_seq=snap.head.seq), checker
    expired = {
        str(row["metadata_expired_at"])
        for row in checker.rebuild.listed("contexts", run_id)
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
