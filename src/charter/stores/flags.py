"""Runs flagged outside their ledgers: found damaged by some process, or quarantined.

The ``run_ledger_flags`` table (SQLite and PostgreSQL) keeps one row per flagged run. A
process that refuses a run records the finding there (the first finding is kept), so that
``charter runs ls``, ``/readyz`` and the console show it to every process; an operator's
``charter runs quarantine RUN`` marks it quarantined, and every process refuses the run
whatever its ledger says (one already running from its next append or read of it: below).

A finding needs no protection: deleting it only makes a process verify the run again on
first touch, which finds the damage again. A quarantine mark does (the operator distrusts a
run whose ledger may verify), so since SQLite migration 17 / PostgreSQL 16:

* the mark carries ``quarantine_mac``, an HMAC under the ledger key over the run id, when and
  by whom (:func:`quarantine_mac`). A mark that fails it — forged, altered, under another
  key, or made before marks carried a MAC — is not shown as an operator's quarantine: the run
  is refused as ``ROW_MAC_INVALID`` by every process, and ``charter runs ls`` says so.
  Quarantining the run again writes a valid mark. The finding columns (``reason``, ``seq``,
  ``message``) are not covered: a quarantined run is refused whatever they say;
* triggers note a mark deleted, cleared (``quarantined_at`` set to NULL), moved to another
  run id or replaced (SQLite's ``INSERT OR REPLACE`` / ``UPDATE OR REPLACE``, and a
  PostgreSQL ``TRUNCATE``) in ``ledger_edits`` (op :data:`LIFTED`, ``row_key`` the run id),
  and refuse to delete or change such an entry. A run so noted stays quarantined for every
  process (``QUARANTINED``, its message says the mark was lifted outside Charter), whatever
  its flags row says now.

A quarantine takes effect in processes already running, not only in those opened afterwards:
a mark made or changed is noted in ``ledger_edits`` too (op :data:`MARKED`, SQLite migration
18 / PostgreSQL 17), and a process reading the entries added since it last looked
(:data:`NOTED_SQL`: at every append and read of a run's rows on PostgreSQL, whenever another
connection committed on SQLite) reads the marks they name in the same statement and refuses
those runs as at its start (:func:`refuse_noted`), before it appends to them or serves them.

Someone who can change the schema can drop the triggers first: a mark deleted then is gone
without a trace. Nothing kept only in the same database can prevent that; keep the operator's
record of a quarantine (the command's output, an export of the run) elsewhere too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from charter.contracts.canonical import canonical_text
from charter.ledger.chain import LedgerKey, same_mac
from charter.ledger.checker import storage_class
from charter.ledger.events import created_tenant
from charter.ledger.ports import RunSummary
from charter.ledger.trust import LedgerTrust, RunProblem
from charter.stores.migrations import LIFTED, MARKED

logger = logging.getLogger("charter.stores.flags")

FLAG_COLUMNS = (
    "reason", "seq", "message", "found_at", "quarantined_at", "quarantined_by", "quarantine_mac",
)  # fmt: skip


def listed_flags(run: str) -> str:
    """The select list of a run's flags row (alias ``f``, :data:`FLAG_COLUMNS`), then whether
    a quarantine mark of run ``run`` (a column) was lifted outside Charter (the entries'
    ``row_key`` index)."""
    lifted = f"EXISTS (SELECT 1 FROM ledger_edits e WHERE e.row_key = {run} AND e.op = '{LIFTED}')"
    return ", ".join(f"f.{c}" for c in FLAG_COLUMNS) + ", " + lifted


UPSERT_FINDING = (
    "INSERT INTO run_ledger_flags (run_id, reason, seq, message, found_at) "
    "VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT (run_id) DO NOTHING"
)
INSERT_FINDING_SQLITE = (
    "INSERT INTO run_ledger_flags (run_id, reason, seq, message, found_at) "
    "SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM run_ledger_flags WHERE run_id = ?) "
    "ON CONFLICT (run_id) DO NOTHING"
)
"""SQLite's :data:`UPSERT_FINDING` (the run id once more at the end): a row already there is
not inserted over, so the trigger that notes a mark replaced (which runs before an insert's
conflict is found) does not take a finding on a quarantined run for one."""
UPSERT_QUARANTINE = (
    "INSERT INTO run_ledger_flags "
    "(run_id, reason, seq, message, found_at, quarantined_at, quarantined_by, quarantine_mac) "
    "VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}) ON CONFLICT (run_id) DO UPDATE SET "
    "quarantined_at = excluded.quarantined_at, quarantined_by = excluded.quarantined_by, "
    "quarantine_mac = excluded.quarantine_mac"
)
ALL_FLAGS = (
    "SELECT f.run_id, "
    + listed_flags("f.run_id")
    + " FROM run_ledger_flags f UNION ALL SELECT e.row_key"
    + ", NULL" * len(FLAG_COLUMNS)
    + f", TRUE FROM ledger_edits e WHERE e.op = '{LIFTED}' AND e.row_key IS NOT NULL "
    "AND NOT EXISTS (SELECT 1 FROM run_ledger_flags g WHERE g.run_id = e.row_key) "
    "GROUP BY e.row_key"
)
"""Every flags row, and every run whose mark was lifted and that has no flags row now."""


NOTED_SQL = (
    "SELECT n.id, n.run_id, n.op, "
    + listed_flags("n.row_key")
    + " FROM ledger_edits n LEFT JOIN run_ledger_flags f ON f.run_id = n.row_key "
    f"AND n.op IN ('{MARKED}', '{LIFTED}') WHERE {{after}} ORDER BY n.id"
)
"""The ``ledger_edits`` entries not read yet (``{after}``: a condition on ``n.id``): id, run,
op, then the flags row (:func:`listed_flags` order) of the run of a quarantine made or
lifted. Run only when something was committed since (no row, and no cost, on the common
path)."""


def refuse_noted(rows: Sequence[Sequence[Any]], trust: LedgerTrust) -> set[str]:
    """The runs :data:`NOTED_SQL`'s rows name; a run whose quarantine was made or lifted is
    refused from now on as :meth:`SQLiteStore.start` / :meth:`PostgresStore.start` refuse a
    marked run (its mark checked with :func:`flag_problem`, the same code)."""
    key = checking_key(trust)
    for got in rows:
        if got[2] not in (MARKED, LIFTED):
            continue
        problem = flag_problem(str(got[1]), got[3:], key)
        if problem is not None and problem.marked and trust.problem(problem.run_id) != problem:
            logger.warning(
                "run %s was quarantined by another connection (%s): refused from now on",
                problem.run_id,
                problem.reason,
            )
            trust.quarantine(problem)
    return {str(got[1]) for got in rows if got[1] is not None}


def quarantine_mac(key: LedgerKey, run_id: str, at: str, by: str) -> str:
    """The MAC of a quarantine mark: the run, when and by whom (canonical JSON: any text)."""
    return key.text_mac("run_ledger_flags quarantine", (canonical_text([run_id, at, by]),))


def quarantine_row(
    key: LedgerKey, run_id: str, found: RunProblem | None, *, by: str, reason: str, now: str
) -> tuple[tuple[Any, ...], RunProblem]:
    """:data:`UPSERT_QUARANTINE`'s values for quarantining ``run_id`` (``found``: what this
    process found wrong with it, kept as the mark's problem — unless it is what the run's
    mark said: the operator's reason replaces it), and the problem refused."""
    if found is not None and found.marked:
        found = None
    problem = RunProblem(
        run_id=run_id,
        reason=found.reason if found else "QUARANTINED",
        seq=found.seq if found else None,
        message=found.message if found else reason,
        quarantined=True,
        marked=True,
    )
    mac = quarantine_mac(key, run_id, now, by)
    values = (run_id, problem.reason, problem.seq, problem.message, now, now, by, mac)
    return values, problem


def checking_key(trust: LedgerTrust) -> LedgerKey | None:
    """The key quarantine marks are checked with: None when the process checks nothing (a
    command without the ledger key), and then a mark is taken as it reads."""
    return trust.key if trust.enabled else None


def listed_problem(
    trust: LedgerTrust, run_id: str, flagged: RunProblem | None
) -> RunProblem | None:
    """A listed run's problem: why this process refuses it, else what its flags row says. A
    process that checks nothing (no ledger key) takes the row first: the marks it read at its
    start could not be checked with the key it has."""
    held = trust.problem(run_id)
    return (flagged or held) if not trust.enabled else (held or flagged)


def flag_problems(rows: Iterable[Sequence[Any]], key: LedgerKey | None) -> list[RunProblem]:
    """The problems :data:`ALL_FLAGS`' rows record (every flagged run), oldest first."""
    ordered = sorted(rows, key=lambda got: (str(got[4] or ""), str(got[0])))
    return [p for got in ordered if (p := flag_problem(str(got[0]), got[1:], key)) is not None]


def flag_problem(run_id: str, values: Sequence[Any], key: LedgerKey | None) -> RunProblem | None:
    """The problem a flags row (:func:`listed_flags` order) records, or None (no row): an
    intact quarantine mark, a mark lifted outside Charter, a mark that fails its MAC, or a
    finding. ``key``: None takes a mark without checking it (:func:`checking_key`)."""
    reason, seq, message, _found, at, by, mac, lifted = values
    marked = at is not None or by is not None or mac is not None
    if marked and (key is None or _mark_holds(key, run_id, at, by, mac)):
        return RunProblem(
            run_id=run_id,
            reason=str(reason or "QUARANTINED"),
            seq=seq if type(seq) is int else None,
            message=str(message),
            quarantined=True,
            marked=True,
        )
    if lifted:
        return RunProblem(
            run_id=run_id,
            reason="QUARANTINED",
            seq=None,
            message="its quarantine mark was deleted or cleared outside Charter (noted in "
            "ledger_edits); the run stays quarantined",
            quarantined=True,
            marked=True,
        )
    if marked:
        assert key is not None  # a mark taken unchecked was returned above
        return RunProblem(
            run_id=run_id,
            reason="ROW_MAC_INVALID",
            seq=None,
            message=_mark_failure(key, mac),
            marked=True,
        )
    if reason is None:
        return None
    return RunProblem(
        run_id=run_id,
        reason=str(reason),
        seq=seq if type(seq) is int else None,  # a hand edit may leave any value
        message=str(message),
    )


def _mark_holds(key: LedgerKey, run_id: str, at: object, by: object, mac: object) -> bool:
    if not isinstance(at, str) or not isinstance(by, str):
        return False
    return same_mac(quarantine_mac(key, run_id, at, by), mac)


def _mark_failure(key: LedgerKey, mac: object) -> str:
    where = "its quarantine mark in run_ledger_flags"
    if mac is None:
        return (
            f"{where} carries no MAC: made outside Charter, or before quarantine marks were "
            "authenticated (quarantine the run again); not an operator's quarantine"
        )
    if isinstance(mac, str) and not mac.startswith(f"hmac-sha256:{key.key_id}:"):
        return f"{where} is not under ledger key {key.key_id}: not an operator's quarantine"
    return f"{where} does not match its MAC: forged or altered outside Charter"


def listed_count(run_id: str, seq: object) -> tuple[int, RunProblem | None]:
    """A run listing's event count: its head's ``seq`` (read through a LEFT JOIN). A run
    without a head row (deleted outside Charter), or whose head ``seq`` a hand edit left of
    another type (SQLite keeps it), is listed as damaged with 0 events; the listing goes on."""
    if type(seq) is int:
        return seq, None
    if seq is None:
        message = "the run has no head record (deleted outside Charter)"
    else:
        message = f"its head row is damaged: its seq is stored as {storage_class(seq)}"
    return 0, RunProblem(run_id=run_id, reason="LEDGER_HEAD_MISMATCH", seq=None, message=message)


# Runs whose head is stored but whose run row is not (deleted outside Charter): a listing
# joins from ``runs``, so without this they would silently drop out of every list. The
# anti-join reads ``run_heads`` whole (~27 ms for 100k runs on SQLite here), so a listing
# runs it only when the gate says a run row may be missing: the two tables' row counts
# differ (~1 ms), or a deleted run or head row was noted (the ledger_edits triggers).
ROWLESS_GATE_SQL = (
    "SELECT (SELECT count(*) FROM run_heads) <> (SELECT count(*) FROM runs) OR EXISTS "
    "(SELECT 1 FROM ledger_edits WHERE op IN ('delete runs', 'delete run_heads'))"
)
ROWLESS_SQL = (
    "SELECT h.run_id, h.seq, e.data, "
    + listed_flags("h.run_id")
    + " FROM run_heads h LEFT JOIN runs r ON r.run_id = h.run_id "
    "LEFT JOIN events e ON e.run_id = h.run_id AND e.seq = 1 "
    "LEFT JOIN run_ledger_flags f ON f.run_id = h.run_id "
    "WHERE r.run_id IS NULL ORDER BY h.run_id"
)


def rowless_summaries(
    rows: Sequence[Sequence[Any]], tenant: str | None, key: LedgerKey | None
) -> list[RunSummary]:
    """Listing entries for :data:`ROWLESS_SQL`'s rows: each run listed by its id as damaged
    (``SNAPSHOT_DIVERGENCE``, or the finding a process recorded), for the tenant its
    ``run_created`` event names as stored — the run row that would say is gone, and a run
    whose first event names no tenant is listed for no tenant."""
    found = []
    for got in rows:
        run_id, seq, data = str(got[0]), got[1], got[2]
        if tenant is not None and created_tenant(data) != tenant:
            continue
        count = seq if type(seq) is int else 0
        problem = flag_problem(run_id, got[3:], key) or RunProblem(
            run_id=run_id,
            reason="SNAPSHOT_DIVERGENCE",
            seq=None,
            message="the run has events but no run row (deleted outside Charter)",
        )
        found.append(RunSummary(run={"run_id": run_id}, event_count=count, problem=problem))
    return found
