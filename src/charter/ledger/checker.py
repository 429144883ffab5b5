"""The chain checker: stored event rows fed in order, checked, parsed and applied.

:class:`ChainChecker` is what :mod:`charter.ledger.verify` (and the export checks) feed rows
to: it checks each row's sequence, frame, chain link and hash (:func:`check_values`), applies
the projection handlers to rebuild the rows (:class:`RebuiltRows`), hands each event on to a
consumer when asked, and finally compares the head and the stored rows. Its problems are
:class:`LedgerProblem` s, which :mod:`.verify` turns into a :class:`VerifyReport`; the reasons
are listed there.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from operator import eq, itemgetter
from typing import Any

import orjson

from charter.contracts.canonical import canonical_bytes
from charter.errors import Failure, LedgerIntegrityError
from charter.ledger.chain import Head, LedgerKey
from charter.ledger.events import EVENT_TYPES, GENESIS_HASH, SCHEMA_VERSION, StoredEvent
from charter.ledger.jsonload import SLOW, fast_loads
from charter.ledger.projections import HANDLERS, RUN_TABLES, TABLES, EventFacts, Row, RowKey


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

    def error(self, run_id: str) -> LedgerIntegrityError:
        """The problem as the error a read that cannot go on raises."""
        return LedgerIntegrityError(self.message, reason=self.reason, seq=self.seq, run_id=run_id)

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


def headless_problem(first: Sequence[StoredEvent]) -> LedgerProblem | None:
    """The problem of a run without a head row, given the read of its first event
    (``read_stored(run_id, after=0, limit=1)``): none when it has no events either (the run
    does not exist), else ``LEDGER_HEAD_MISMATCH`` — the head row was deleted outside
    Charter. Verify, export, ``runs events`` and run-time trust all answer with it."""
    if not first:
        return None
    return LedgerProblem(
        "LEDGER_HEAD_MISMATCH",
        first[0].seq,
        "the run has events but no head record (deleted outside Charter)",
    )


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
    if type(data) is not bytes:  # SQLite keeps what a hand edit stores (TEXT, a number)
        raise LedgerProblem(
            "LEDGER_HASH_MISMATCH",
            seq,
            f"event {seq}'s bytes are stored as {storage_class(data)}, not as a BLOB",
        )
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


_REFUSALS = (Failure, ValueError, KeyError, TypeError)
"""What applying an event's projection handler raises for an event the ledger must refuse."""


def _refused(seq: int, exc: Exception) -> LedgerProblem:
    """The problem an event is when its handler raised ``exc`` (one of :data:`_REFUSALS`):
    a transition the live append path would have refused, or bytes that are not the JSON the
    handler reads."""
    if isinstance(exc, Failure):
        return LedgerProblem("LEDGER_BAD_TRANSITION", seq, f"event {seq}: {exc.message}")
    return LedgerProblem("LEDGER_HASH_MISMATCH", seq, f"event {seq} is not valid JSON")


def storage_class(value: object) -> str:
    """The SQL storage class of a value as read (named in reports on hand-edited rows)."""
    return _STORAGE_CLASSES.get(type(value), type(value).__name__)


_STORAGE_CLASSES = {int: "INTEGER", float: "REAL", str: "TEXT", bytes: "BLOB", type(None): "NULL"}


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
_orjson_loads = orjson.loads
_SORTED = orjson.OPT_SORT_KEYS
# Rebuilt rows encoded to compare with stored rows: sorted keys, and anything but JSON values
# (dataclasses, dates, subclasses of str, int, dict, list) refused rather than converted.
_AS_STORED = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


_encode_as_stored = partial(_dumps, option=_AS_STORED)
_UNKNOWN: Any = object()  # feed_batch: the handler looked up for a type that is not known


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
    """``rows`` in list order: ``order_by``, ties broken by the key columns.

    When no two rows share an ``order_by`` value (every call row of a run has its own
    ``updated_seq``), the stable sort by that value alone is that order, without building a
    key tuple per row (a run's call rows are most of what verification sorts). Equal values —
    and values that are not hashable — take the sort by the whole key, as before.
    """
    spec = TABLES[table]
    by = itemgetter(spec.order_by)
    try:
        distinct = len(set(map(by, rows))) == len(rows)
    except TypeError:  # an unhashable value
        distinct = False
    if distinct:
        return sorted(rows, key=by)
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


class _View:
    """An event as the handlers read it (an :class:`EventFacts`), on the fast path of
    :meth:`ChainChecker.feed_batch`: one object per checker, its fields set from the
    verified columns and the parsed payload before each handler call (a handler must not keep
    the event beyond its call)."""

    __slots__ = ("at", "payload", "run_id", "seq", "type")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.seq = 0
        self.type = ""
        self.at = ""
        self.payload: Mapping[str, Any] = {}


def _plain(text: str) -> bool:
    """Whether ``"text"`` is a JSON string whose value is ``text`` and which orjson writes as
    it is (no quote, backslash or control character; anything unusual counts as not plain)."""
    return '"' not in text and "\\" not in text and text.isprintable()


_PLAIN_TYPES = all(_plain(t) for t in EVENT_TYPES)

Take = Callable[[Any, Any, Any], None]
"""A consumer of verified events as ``(type, payload, seq)`` — the values of the event
document's ``type``, ``payload`` and ``seq`` members (see :func:`take_verified`)."""


class ChainChecker:
    """Feed rows in order; then :meth:`finish` with the head and, optionally, stored rows.

    With ``events`` (a list), every event's parsed document (``{at, event_id, payload, …}``,
    as ``json.loads`` of its stored bytes gives it) is appended to it as the event is checked,
    so replay and evaluation need not read and parse the run again; with ``visit``, each
    document is handed to it instead (and not kept); with ``take``, each document's ``type``,
    ``payload`` and ``seq`` (no document is built). An event whose bytes are not JSON is then
    noted in :attr:`unreadable` and skipped (verification itself parses only the events a
    projection handler needs, and its verdict does not change).
    """

    def __init__(
        self,
        run_id: str,
        *,
        events: list[dict[str, Any]] | None = None,
        visit: Callable[[dict[str, Any]], None] | None = None,
        take: Take | None = None,
    ) -> None:
        self.run_id = run_id
        self.last_seq = 0
        self.last_hash = GENESIS_HASH
        self.rebuild = RebuiltRows()
        self.events = events
        self._visit = events.append if events is not None else visit
        self._take = take
        if take is not None and self._visit is None:
            self._visit = lambda doc: take(doc["type"], doc["payload"], doc["seq"])
        self.unreadable: int | None = None
        # Whether every event a handler applied was parsed by orjson (so every float in the
        # rebuilt rows is finite): the condition of compare_stored's byte comparison.
        self._finite = True
        # The part of every frame's suffix between prev_hash and seq (fixed for the run).
        self._middle = f'","run_id":"{run_id}","schema_version":{SCHEMA_VERSION},"seq":'
        # The fast path builds an event's document from its checked columns (see feed_batch).
        self._fast = _PLAIN_TYPES and _plain(run_id)
        self._plain_at = ""  # the last ``at`` found plain
        self._view = _View(run_id)
        self._listed: dict[str, list[Row]] | None = None  # compare_stored's grouping

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

        Fast path: once a row's bytes are its frame (the prefix and suffix its columns imply)
        around a payload, only the payload is parsed, and the event's document is built from
        the columns — exactly the document the whole bytes parse to, when the payload's bytes
        are orjson's encoding of what orjson parsed from them (:mod:`.jsonload`'s condition:
        a single JSON value, parsed as ``json.loads`` parses it), ``seq`` is an int and every
        string column written into the frame is plain (:func:`_plain`: the JSON string's value
        is the column's text; ``prev_hash`` is a checked hash, ``type`` a known type, the
        run id is checked once). Any other row takes the general path, as before.
        """
        middle, unknown = self._middle, _UNKNOWN
        # Every known type's handler (None: the type changes no row); an unknown type is absent.
        applies = {t: h.apply if (h := HANDLERS.get(t)) is not None else None for t in EVENT_TYPES}
        kind = applies.get
        visit, take = self._visit, self._take
        fresh, loads, dumps = _fresh_sha256, _orjson_loads, _dumps
        fast, plain_at, view, run_id = self._fast, self._plain_at, self._view, self.run_id
        rows_get, rows_update = self.rebuild.rows.get, self.rebuild.rows.update
        # The last accepted row, in locals while the loop runs (stored back even on a problem).
        last_seq, last_hash = self.last_seq, self.last_hash
        try:
            for seq, type_, at, prev_hash, hash_, data in rows:
                text = str(seq)
                event_id = text.zfill(8)
                prefix = f'{{"at":"{at}","event_id":"{event_id}","payload":'.encode()
                suffix = f',"prev_hash":"{prev_hash}{middle}{text},"type":"{type_}"}}'.encode()
                apply = kind(type_, unknown)
                if (
                    seq != last_seq + 1
                    or prev_hash != last_hash
                    or apply is unknown
                    or type(data) is not bytes
                    or not data.startswith(prefix)
                    or not data.endswith(suffix)
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
                if apply is None and visit is None:
                    last_seq, last_hash = seq, hash_
                    continue
                payload: Any = SLOW
                if (
                    fast
                    and type(seq) is int
                    # _plain(at), inlined: timestamps differ from one event to the next (a
                    # hand-forged row may hold another type: the general path reads it)
                    and (
                        at == plain_at
                        or (
                            type(at) is str
                            and '"' not in at
                            and "\\" not in at
                            and at.isprintable()
                        )
                    )
                ):
                    plain_at = at
                    body = data[len(prefix) : -len(suffix)]  # the suffix is never empty
                    try:
                        payload = loads(body)
                        if dumps(payload) != body:
                            payload = SLOW
                    except (ValueError, TypeError):  # orjson's decode and encode errors
                        payload = SLOW
                if payload is SLOW:
                    self._general(seq, hash_, data, handled=apply is not None)
                else:
                    if apply is not None:
                        view.seq, view.type, view.at, view.payload = seq, type_, at, payload
                        try:
                            rows_update(apply(view, rows_get))
                        except _REFUSALS as exc:
                            raise _refused(seq, exc) from None
                    if take is not None:
                        take(type_, payload, seq)
                    elif visit is not None:
                        visit(
                            {
                                "at": at,
                                "event_id": event_id,
                                "payload": payload,
                                "prev_hash": prev_hash,
                                "run_id": run_id,
                                "schema_version": SCHEMA_VERSION,
                                "seq": seq,
                                "type": type_,
                            }
                        )
                last_seq, last_hash = seq, hash_
        finally:
            self.last_seq, self.last_hash = last_seq, last_hash
            self._plain_at = plain_at

    def _general(self, seq: int, hash_: str, data: bytes, *, handled: bool) -> None:
        """An event off the fast path: parse its whole bytes, apply its handler if it has
        one, and hand its document on if asked."""
        if handled:
            self._apply(seq, hash_, data)
            return
        doc = fast_loads(data)
        if doc is SLOW:
            try:
                doc = json.loads(data)
            except ValueError:
                if self.unreadable is None:
                    self.unreadable = seq
                return
        if self._visit is not None:
            self._visit(doc)

    def _apply(self, seq: int, hash_: str, data: bytes) -> None:
        """Parse the event and apply its projection handler; hand its document on if asked."""
        try:
            doc = fast_loads(data)
            if doc is SLOW:
                doc = json.loads(data)
                self._finite = False
            self.rebuild.apply(_ParsedEvent(doc, hash_))
        except _REFUSALS as exc:
            raise _refused(seq, exc) from None
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

    def compare_stored(
        self,
        run: bytes | None,
        tables: Mapping[str, Sequence[bytes]],
        columns: Mapping[str, Sequence[tuple[Any, ...]]] | None = None,
    ) -> None:
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
        listed = self._listed = self.rebuild.tables_of(self.run_id)
        for table in RUN_TABLES:
            stored = tables.get(table, ())
            rows = listed.get(table, [])
            if not self._encodes_to(rows, stored):
                name = f"{table} rows"
                self.compare(name, [self._parsed(name, r) for r in stored], rows)
        if columns is not None:
            self._compare_columns("runs", [] if rebuilt is None else [rebuilt], columns)
            for table in RUN_TABLES:
                self._compare_columns(table, listed.get(table, []), columns)

    def _compare_columns(
        self, table: str, rows: Sequence[Row], columns: Mapping[str, Sequence[tuple[Any, ...]]]
    ) -> None:
        """The indexed columns (what queries filter on: a tenant, a state) are copies of row
        values, outside the rows' text: each must hold the rebuilt row's value. Runs after the
        rows compared equal, so row ``i`` stored is row ``i`` rebuilt."""
        spec = TABLES[table]
        compared = spec.compared
        if not compared:
            return
        stored = columns.get(table, ())
        values = _column_values(compared)
        if len(stored) == len(rows) and all(map(eq, map(values, rows), stored)):
            return
        for row, got in zip(rows, stored, strict=False):
            for name, a, b in zip(compared, values(row), got, strict=True):
                if a != b:
                    key = "/".join(str(row.get(k)) for k in spec.keys)
                    raise self._diverged(
                        f"{table} row {key}", "holds", f"a {name} column that disagrees with it"
                    )

    def listed(self, table: str) -> list[Row]:
        """The run's rebuilt rows of ``table`` in list order (``rebuild.listed``), as
        :meth:`compare_stored` grouped them when it has run (one pass over the rows)."""
        listed = self._listed
        if listed is None:
            return self.rebuild.listed(table, self.run_id)
        return list(listed.get(table, ()))

    def _encodes_to(self, rows: Sequence[Row], stored: Sequence[bytes]) -> bool:
        """Whether ``stored`` is, row for row, the bytes of ``rows`` (False decides nothing)."""
        if not self._finite or len(rows) != len(stored):
            return False
        try:  # one row at a time (the encodings of a whole table would all be held at once),
            # by C-level iteration: no bytecode per row
            return all(map(eq, map(_encode_as_stored, rows), stored))
        except TypeError:  # orjson.JSONEncodeError
            return False


@functools.cache
def _column_values(columns: tuple[str, ...]) -> Callable[[Row], tuple[Any, ...]]:
    """A function of a row to its values of ``columns`` (None where the row has none), as
    the stores copy them into their indexed columns. Generated once per table: half the cost
    of ``tuple(map(row.get, columns))`` per row over a large table. The names are the table
    specs' column names (identifiers in this code), never input."""
    if not all(c.isidentifier() for c in columns):
        raise ValueError(f"not column names: {columns!r}")
    body = "".join(f"row.get({c!r}), " for c in columns)
    fn: Callable[[Row], tuple[Any, ...]] = eval(f"lambda row: ({body})")
    return fn


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
