"""Schema migrations: one ordered list per dialect; position + 1 is the version.

Each database records the versions applied in ``charter_schema``. Opening a database applies
the missing migrations in order; a database whose version is higher than this code knows was
written by a newer Charter and is refused with a clear message (never downgraded or guessed).
Migrations are append-only: never edit one that has shipped, add the next.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from charter.contracts.canonical import canonical_text
from charter.contracts.preview import legacy_record
from charter.errors import MigrationError

SCHEMA_TABLE = "charter_schema"


def shaped_call_row(data: str) -> str:
    """A call row written before argument shapes, its redacted summary (values) replaced by
    the summary's shape: what the projection now builds from the same event (docs/privacy.md).
    """
    row = json.loads(data)
    row["summary"] = legacy_record(row.get("summary"))
    return canonical_text(row)


def _shape_sqlite_calls(conn: Any) -> None:
    rows = conn.execute("SELECT run_id, context_id, call_id, data FROM calls").fetchall()
    for run_id, context_id, call_id, data in rows:
        conn.execute(
            "UPDATE calls SET data = ? WHERE run_id = ? AND context_id = ? AND call_id = ?",
            (shaped_call_row(data), run_id, context_id, call_id),
        )


async def _shape_postgres_calls(conn: Any) -> None:
    cur = await conn.execute("SELECT run_id, context_id, call_id, data FROM calls")
    for run_id, context_id, call_id, data in await cur.fetchall():
        await conn.execute(
            "UPDATE calls SET data = %s WHERE run_id = %s AND context_id = %s AND call_id = %s",
            (shaped_call_row(data), run_id, context_id, call_id),
        )


# A migration is a tuple of SQL statements, or of callables taking the connection (a sync one
# for SQLite, an async one for PostgreSQL) for rewrites SQL cannot express.
Statement = str | Callable[[Any], Any]

ROW_TABLES = (
    "run_heads", "runs", "tasks", "artifacts", "contexts", "calls", "approvals", "run_calls",
    "proposals",
)  # fmt: skip
"""The tables holding a run's head and projection rows (each keyed by ``run_id``)."""

ID_LOOKUPS = {
    "contexts": "context_id",
    "approvals": "approval_id",
    "proposals": "proposal_id",
    "calls": "call_id",
}
"""Tables whose rows are also looked up by an id of their own, without the run: the column."""

LIFTED = "unquarantine run_ledger_flags"
"""The ``ledger_edits`` op of a quarantine mark lifted outside Charter (charter.stores.flags)."""
_MARKED = (
    "EXISTS (SELECT 1 FROM run_ledger_flags WHERE run_id = new.run_id "
    "AND quarantined_at IS NOT NULL)"
)
_KEPT = "ledger_edits keeps the note of a quarantine lifted outside Charter"
MARKED = "quarantine run_ledger_flags"
"""The ``ledger_edits`` op of a quarantine mark made or changed (charter.stores.flags): live
processes read the run's mark when they see it, and refuse the run from then on."""
_HAS_MARK = (
    "new.quarantined_at IS NOT NULL OR new.quarantined_by IS NOT NULL "
    "OR new.quarantine_mac IS NOT NULL"
)
_MARK_COLUMNS = "run_id, quarantined_at, quarantined_by, quarantine_mac"
_KEPT_MARK = "ledger_edits keeps the note of a quarantine"

_PARENT_INDEX_PARTIAL = (
    "DROP INDEX IF EXISTS calls_by_parent",
    "CREATE INDEX calls_by_parent ON calls (run_id, parent_span_id) "
    "WHERE parent_span_id IS NOT NULL",
)

SQLITE: tuple[tuple[Statement, ...], ...] = (
    (
        """CREATE TABLE events (
            run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, at TEXT NOT NULL,
            prev_hash TEXT NOT NULL, hash TEXT NOT NULL, data BLOB NOT NULL,
            PRIMARY KEY (run_id, seq)) WITHOUT ROWID""",
        """CREATE TABLE run_heads (
            run_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, hash TEXT NOT NULL,
            mac TEXT NOT NULL)""",
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY, status TEXT NOT NULL, workflow_slug TEXT NOT NULL,
            session_id TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
            data TEXT NOT NULL)""",
        "CREATE INDEX runs_by_created ON runs (created_at, run_id)",
        """CREATE TABLE tasks (
            run_id TEXT NOT NULL, task_id TEXT NOT NULL, status TEXT NOT NULL,
            seq INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run_id, task_id))""",
        """CREATE TABLE artifacts (
            run_id TEXT NOT NULL, artifact_id TEXT NOT NULL, seq INTEGER NOT NULL,
            data TEXT NOT NULL, PRIMARY KEY (run_id, artifact_id))""",
    ),
    (
        """CREATE TABLE contexts (
            run_id TEXT NOT NULL, context_id TEXT NOT NULL, tenant TEXT NOT NULL,
            principal TEXT NOT NULL, expires_at TEXT NOT NULL, created_at TEXT NOT NULL,
            data TEXT NOT NULL, PRIMARY KEY (run_id, context_id))""",
        "CREATE UNIQUE INDEX contexts_by_id ON contexts (context_id)",
        """CREATE TABLE calls (
            run_id TEXT NOT NULL, context_id TEXT NOT NULL, call_id TEXT NOT NULL,
            state TEXT NOT NULL, tool_id TEXT NOT NULL, tenant TEXT NOT NULL,
            updated_seq INTEGER NOT NULL, data TEXT NOT NULL,
            PRIMARY KEY (run_id, context_id, call_id))""",
        "CREATE INDEX calls_by_state ON calls (state, updated_seq)",
        """CREATE TABLE approvals (
            run_id TEXT NOT NULL, approval_id TEXT NOT NULL, status TEXT NOT NULL,
            tenant TEXT NOT NULL, context_id TEXT NOT NULL, call_id TEXT NOT NULL,
            requested_at TEXT NOT NULL, expires_at TEXT NOT NULL, data TEXT NOT NULL,
            PRIMARY KEY (run_id, approval_id))""",
        "CREATE UNIQUE INDEX approvals_by_id ON approvals (approval_id)",
        "CREATE INDEX approvals_by_tenant ON approvals (tenant, status, requested_at)",
        """CREATE TABLE run_calls (
            run_id TEXT PRIMARY KEY, total INTEGER NOT NULL, data TEXT NOT NULL)""",
    ),
    (
        """CREATE TABLE proposals (
            run_id TEXT NOT NULL, proposal_id TEXT NOT NULL, tenant TEXT NOT NULL,
            status TEXT NOT NULL, kind TEXT NOT NULL, created_at TEXT NOT NULL,
            data TEXT NOT NULL, PRIMARY KEY (run_id, proposal_id))""",
        "CREATE UNIQUE INDEX proposals_by_id ON proposals (proposal_id)",
        "CREATE INDEX proposals_by_tenant ON proposals (tenant, status, created_at)",
    ),
    (  # runs listed per tenant by an index instead of filtering the newest runs in Python
        "ALTER TABLE runs ADD COLUMN tenant TEXT",
        "UPDATE runs SET tenant = json_extract(data, '$.tenant')",
        "CREATE INDEX runs_by_tenant ON runs (tenant, created_at, run_id)",
    ),
    (  # a keyed MCP retry finds its call (and context) from any session, process or replica
        "CREATE INDEX calls_by_call_id ON calls (call_id, tenant)",
    ),
    # Events in a rowid table (append order) with (run_id, seq) unique in an index, instead of
    # a WITHOUT ROWID table clustered by (run_id, seq). A group commit appending to many runs
    # dirtied one full-row leaf per run (and split them often); now the rows go to the table's
    # last page and each run only dirties an index leaf of small entries. Measured on 32 runs,
    # one append each per commit: 1.3 ms per commit instead of 3.2-3.9 ms; one run alone is
    # unchanged. Reading a run stays one index range scan. Rows are copied run by run, so each
    # run's existing events stay together.
    (
        """CREATE TABLE events_v6 (
            run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, at TEXT NOT NULL,
            prev_hash TEXT NOT NULL, hash TEXT NOT NULL, data BLOB NOT NULL)""",
        "INSERT INTO events_v6 SELECT run_id, seq, type, at, prev_hash, hash, data "
        "FROM events ORDER BY run_id, seq",
        "DROP TABLE events",
        "ALTER TABLE events_v6 RENAME TO events",
        "CREATE UNIQUE INDEX events_by_run_seq ON events (run_id, seq)",
    ),
    # Chat conversations (charter.stores.conversations): message history and stream events,
    # deletable (retention), unlike the ledger, which keeps every turn without its text.
    (
        """CREATE TABLE conversations (
            conversation_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, user_name TEXT NOT NULL,
            run_id TEXT, turns INTEGER NOT NULL, updated_at TEXT NOT NULL,
            history TEXT NOT NULL, watched_at TEXT)""",
        "CREATE INDEX conversations_by_updated ON conversations (updated_at)",
        """CREATE TABLE conversation_events (
            conversation_id TEXT NOT NULL, sequence INTEGER NOT NULL, type TEXT NOT NULL,
            data TEXT NOT NULL, PRIMARY KEY (conversation_id, sequence)) WITHOUT ROWID""",
    ),
    # A conversation's open turn, so that a replica (or a restart) refuses to start a second
    # turn while one runs elsewhere, even before that turn has stored an event.
    ("ALTER TABLE conversations ADD COLUMN turn_open_since TEXT",),
    # Run-time trust (docs/ledger.md): every projection row carries the sequence of the event
    # that last wrote it and a MAC under the ledger key. Rows written before have none: a
    # process seals them the first time it touches their run, after verifying the whole run,
    # from the rows rebuilt out of the verified events (a row still holding that text gets
    # its MAC; any other row is refused). run_ledger_flags records runs found damaged and
    # runs an operator quarantined, outside their (damaged) ledgers.
    (
        "ALTER TABLE runs ADD COLUMN row_seq INTEGER",
        "ALTER TABLE runs ADD COLUMN row_mac TEXT",
        "ALTER TABLE tasks ADD COLUMN row_seq INTEGER",
        "ALTER TABLE tasks ADD COLUMN row_mac TEXT",
        "ALTER TABLE artifacts ADD COLUMN row_seq INTEGER",
        "ALTER TABLE artifacts ADD COLUMN row_mac TEXT",
        "ALTER TABLE contexts ADD COLUMN row_seq INTEGER",
        "ALTER TABLE contexts ADD COLUMN row_mac TEXT",
        "ALTER TABLE calls ADD COLUMN row_seq INTEGER",
        "ALTER TABLE calls ADD COLUMN row_mac TEXT",
        "ALTER TABLE approvals ADD COLUMN row_seq INTEGER",
        "ALTER TABLE approvals ADD COLUMN row_mac TEXT",
        "ALTER TABLE run_calls ADD COLUMN row_seq INTEGER",
        "ALTER TABLE run_calls ADD COLUMN row_mac TEXT",
        "ALTER TABLE proposals ADD COLUMN row_seq INTEGER",
        "ALTER TABLE proposals ADD COLUMN row_mac TEXT",
        """CREATE TABLE run_ledger_flags (
            run_id TEXT PRIMARY KEY, reason TEXT NOT NULL, seq BIGINT, message TEXT NOT NULL,
            found_at TEXT NOT NULL, quarantined_at TEXT, quarantined_by TEXT)""",
    ),
    # Argument values at rest: call rows keep the argument shape, not the redacted summary
    # (the events keep what they had: they are hash-chained). See docs/privacy.md.
    (_shape_sqlite_calls,),
    # Owner leases (charter.stores.leases): a heartbeat row per process that dispatches, so
    # calls a lost process left in flight are reconciled by any other process.
    (
        """CREATE TABLE leases (
            owner_id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL,
            start TEXT NOT NULL, renewed_at TEXT NOT NULL, expires_at TEXT NOT NULL)""",
    ),
    # Delegation (docs/kernel.md): a call made inside a delegating call names its span; the
    # column finds a call's children. Rows written before have no parent (NULL).
    (
        "ALTER TABLE calls ADD COLUMN parent_span_id TEXT",
        "CREATE INDEX calls_by_parent ON calls (run_id, parent_span_id)",
    ),
    # Events changed outside the append path (charter.stores.sqlite_edits): Charter only ever
    # inserts events, so an UPDATE or DELETE of one is someone editing the ledger. The
    # triggers note the run, and a running process that verified it verifies it again before
    # it builds on it or serves its rows (a restart would verify it anyway).
    (
        """CREATE TABLE ledger_edits (
            id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, seq, op TEXT NOT NULL)""",
        """CREATE TRIGGER events_updated AFTER UPDATE ON events BEGIN
            INSERT INTO ledger_edits (run_id, seq, op) VALUES (old.run_id, old.seq, 'update');
            INSERT INTO ledger_edits (run_id, seq, op) VALUES (new.run_id, new.seq, 'update');
        END""",
        """CREATE TRIGGER events_deleted AFTER DELETE ON events BEGIN
            INSERT INTO ledger_edits (run_id, seq, op) VALUES (old.run_id, old.seq, 'delete');
        END""",
    ),
    # A run's rows deleted outside Charter (which never deletes one): a row MAC finds a row
    # edited, not a row gone, so the same table notes the run of each deleted row, and a
    # running process verifies the run again before it serves or builds on its rows.
    tuple(
        f"""CREATE TRIGGER {table}_row_deleted AFTER DELETE ON {table} BEGIN
            INSERT INTO ledger_edits (run_id, seq, op) VALUES (old.run_id, NULL, 'delete {table}');
        END"""
        for table in ROW_TABLES
    ),
    # Rows looked up by their own id (a context, an approval, a proposal, a call by its call
    # id): a deleted row would answer "no such context". The entry now keeps the row's id, and
    # a changed id (or run) is noted too, so a lookup that finds nothing can name the run it
    # belonged to and refuse it (charter.stores.vanished).
    (
        "ALTER TABLE ledger_edits ADD COLUMN row_key TEXT",
        "CREATE INDEX ledger_edits_by_key ON ledger_edits (row_key)",
        *(
            statement
            for table, column in ID_LOOKUPS.items()
            for statement in (
                f"DROP TRIGGER {table}_row_deleted",
                f"""CREATE TRIGGER {table}_row_deleted AFTER DELETE ON {table} BEGIN
                    INSERT INTO ledger_edits (run_id, seq, op, row_key)
                        VALUES (old.run_id, NULL, 'delete {table}', old.{column});
                END""",
                f"""CREATE TRIGGER {table}_key_changed AFTER UPDATE OF run_id, {column}
                    ON {table} WHEN old.run_id IS NOT new.run_id
                        OR old.{column} IS NOT new.{column} BEGIN
                    INSERT INTO ledger_edits (run_id, seq, op, row_key)
                        VALUES (old.run_id, NULL, 'rekey {table}', old.{column});
                END""",
            )
        ),
    ),
    # A conversation's history is fed back to the model as what was said: its row carries a
    # MAC under the ledger key (charter.stores.conversations.history_mac). Rows from before
    # have none and are refused (CONVERSATION_DAMAGED): nothing can tell them from edited ones.
    ("ALTER TABLE conversations ADD COLUMN history_mac TEXT",),
    # A quarantine mark a database edit cannot lift or forge (charter.stores.flags): the mark
    # carries a MAC under the ledger key, and a mark deleted, cleared, moved or replaced is
    # noted in ledger_edits, whose notes of it cannot be deleted or changed. REPLACE deletes a
    # row without its delete triggers (unless recursive_triggers is on): the BEFORE triggers
    # note a row put in a marked row's place. Marks made before have no MAC and are refused
    # as not an operator's until the run is quarantined again.
    (
        "ALTER TABLE run_ledger_flags ADD COLUMN quarantine_mac TEXT",
        *(
            f"""CREATE TRIGGER run_ledger_flags_{name} {when} ON run_ledger_flags
                WHEN {condition} BEGIN
                INSERT INTO ledger_edits (run_id, seq, op, row_key)
                    VALUES ({run}, NULL, '{LIFTED}', {run});
            END"""
            for name, when, condition, run in (
                ("unmarked", "AFTER DELETE", "old.quarantined_at IS NOT NULL", "old.run_id"),
                (
                    "mark_cleared",
                    "AFTER UPDATE",
                    "old.quarantined_at IS NOT NULL AND (new.quarantined_at IS NULL "
                    "OR new.run_id IS NOT old.run_id)",
                    "old.run_id",
                ),
                (
                    "mark_replaced",
                    "BEFORE INSERT",
                    f"new.quarantined_at IS NULL AND {_MARKED}",
                    "new.run_id",
                ),
                (
                    "mark_overwritten",
                    "BEFORE UPDATE OF run_id",
                    f"new.run_id IS NOT old.run_id AND {_MARKED}",
                    "new.run_id",
                ),
            )
        ),
        f"""CREATE TRIGGER ledger_edits_unquarantine_kept BEFORE DELETE ON ledger_edits
            WHEN old.op = '{LIFTED}' BEGIN SELECT RAISE(ABORT, '{_KEPT}'); END""",
        f"""CREATE TRIGGER ledger_edits_unquarantine_unchanged BEFORE UPDATE ON ledger_edits
            WHEN old.op = '{LIFTED}' OR (new.id IS NOT old.id AND EXISTS (SELECT 1 FROM
                ledger_edits WHERE id = new.id AND op = '{LIFTED}'))
            BEGIN SELECT RAISE(ABORT, '{_KEPT}'); END""",
        f"""CREATE TRIGGER ledger_edits_unquarantine_not_replaced BEFORE INSERT ON ledger_edits
            WHEN EXISTS (SELECT 1 FROM ledger_edits WHERE id = new.id AND op = '{LIFTED}')
            BEGIN SELECT RAISE(ABORT, '{_KEPT}'); END""",
    ),
    # A quarantine takes effect in processes already running (charter.stores.sqlite_edits): a
    # mark made, made again or changed is noted in ledger_edits, which every process polls
    # when another connection committed; seeing the note, it reads the run's mark (checking
    # its MAC, as at its start) and refuses the run before its next append or read of it.
    # The note cannot be deleted or changed either: a process that has not read it yet would
    # otherwise go on serving the run.
    (
        *(
            f"""CREATE TRIGGER run_ledger_flags_{name} AFTER {event} ON run_ledger_flags
                WHEN {_HAS_MARK} BEGIN
                INSERT INTO ledger_edits (run_id, seq, op, row_key)
                    VALUES (new.run_id, NULL, '{MARKED}', new.run_id);
            END"""
            for name, event in (("marked", "INSERT"), ("remarked", f"UPDATE OF {_MARK_COLUMNS}"))
        ),
        f"""CREATE TRIGGER ledger_edits_quarantine_kept BEFORE DELETE ON ledger_edits
            WHEN old.op = '{MARKED}' BEGIN SELECT RAISE(ABORT, '{_KEPT_MARK}'); END""",
        f"""CREATE TRIGGER ledger_edits_quarantine_unchanged BEFORE UPDATE ON ledger_edits
            WHEN old.op = '{MARKED}' OR (new.id IS NOT old.id AND EXISTS (SELECT 1 FROM
                ledger_edits WHERE id = new.id AND op = '{MARKED}'))
            BEGIN SELECT RAISE(ABORT, '{_KEPT_MARK}'); END""",
        f"""CREATE TRIGGER ledger_edits_quarantine_not_replaced BEFORE INSERT ON ledger_edits
            WHEN EXISTS (SELECT 1 FROM ledger_edits WHERE id = new.id AND op = '{MARKED}')
            BEGIN SELECT RAISE(ABORT, '{_KEPT_MARK}'); END""",
    ),
    # The Build record (charter.stores.builds): each Build a runtime opened with, and the
    # order of activation, so that a replica of a Build the deployment has moved past never
    # retires what a context of the current Build holds (a rolling deploy; docs/kernel.md).
    (
        """CREATE TABLE builds (
            digest TEXT PRIMARY KEY, first_seen_at TEXT NOT NULL, activated_at TEXT NOT NULL,
            activation INTEGER NOT NULL)""",
        "CREATE UNIQUE INDEX builds_by_activation ON builds (activation)",
    ),
    # A call's children are found by its span; the calls that have no parent (nearly all)
    # are left out of the index, so writing their rows touches one index page fewer.
    _PARENT_INDEX_PARTIAL,
)

POSTGRES: tuple[tuple[Statement, ...], ...] = (
    (
        """CREATE TABLE events (
            run_id TEXT NOT NULL, seq BIGINT NOT NULL, type TEXT NOT NULL, at TEXT NOT NULL,
            prev_hash TEXT NOT NULL, hash TEXT NOT NULL, data BYTEA NOT NULL,
            PRIMARY KEY (run_id, seq))""",
        """CREATE TABLE run_heads (
            run_id TEXT PRIMARY KEY, seq BIGINT NOT NULL, hash TEXT NOT NULL, mac TEXT NOT NULL)""",
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY, status TEXT NOT NULL, workflow_slug TEXT NOT NULL,
            session_id TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
            data TEXT NOT NULL)""",
        "CREATE INDEX runs_by_created ON runs (created_at, run_id)",
        """CREATE TABLE tasks (
            run_id TEXT NOT NULL, task_id TEXT NOT NULL, status TEXT NOT NULL,
            seq BIGINT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run_id, task_id))""",
        """CREATE TABLE artifacts (
            run_id TEXT NOT NULL, artifact_id TEXT NOT NULL, seq BIGINT NOT NULL,
            data TEXT NOT NULL, PRIMARY KEY (run_id, artifact_id))""",
    ),
    (
        """CREATE TABLE contexts (
            run_id TEXT NOT NULL, context_id TEXT NOT NULL, tenant TEXT NOT NULL,
            principal TEXT NOT NULL, expires_at TEXT NOT NULL, created_at TEXT NOT NULL,
            data TEXT NOT NULL, PRIMARY KEY (run_id, context_id))""",
        "CREATE UNIQUE INDEX contexts_by_id ON contexts (context_id)",
        """CREATE TABLE calls (
            run_id TEXT NOT NULL, context_id TEXT NOT NULL, call_id TEXT NOT NULL,
            state TEXT NOT NULL, tool_id TEXT NOT NULL, tenant TEXT NOT NULL,
            updated_seq BIGINT NOT NULL, data TEXT NOT NULL,
            PRIMARY KEY (run_id, context_id, call_id))""",
        "CREATE INDEX calls_by_state ON calls (state, updated_seq)",
        """CREATE TABLE approvals (
            run_id TEXT NOT NULL, approval_id TEXT NOT NULL, status TEXT NOT NULL,
            tenant TEXT NOT NULL, context_id TEXT NOT NULL, call_id TEXT NOT NULL,
            requested_at TEXT NOT NULL, expires_at TEXT NOT NULL, data TEXT NOT NULL,
            PRIMARY KEY (run_id, approval_id))""",
        "CREATE UNIQUE INDEX approvals_by_id ON approvals (approval_id)",
        "CREATE INDEX approvals_by_tenant ON approvals (tenant, status, requested_at)",
        """CREATE TABLE run_calls (
            run_id TEXT PRIMARY KEY, total BIGINT NOT NULL, data TEXT NOT NULL)""",
    ),
    (
        """CREATE TABLE proposals (
            run_id TEXT NOT NULL, proposal_id TEXT NOT NULL, tenant TEXT NOT NULL,
            status TEXT NOT NULL, kind TEXT NOT NULL, created_at TEXT NOT NULL,
            data TEXT NOT NULL, PRIMARY KEY (run_id, proposal_id))""",
        "CREATE UNIQUE INDEX proposals_by_id ON proposals (proposal_id)",
        "CREATE INDEX proposals_by_tenant ON proposals (tenant, status, created_at)",
    ),
    (
        "ALTER TABLE runs ADD COLUMN tenant TEXT",
        "UPDATE runs SET tenant = data::jsonb ->> 'tenant'",
        "CREATE INDEX runs_by_tenant ON runs (tenant, created_at, run_id)",
    ),
    ("CREATE INDEX calls_by_call_id ON calls (call_id, tenant)",),
    (  # chat conversations (see the SQLite list's migration 7)
        """CREATE TABLE conversations (
            conversation_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, user_name TEXT NOT NULL,
            run_id TEXT, turns BIGINT NOT NULL, updated_at TEXT NOT NULL,
            history TEXT NOT NULL, watched_at TEXT)""",
        "CREATE INDEX conversations_by_updated ON conversations (updated_at)",
        """CREATE TABLE conversation_events (
            conversation_id TEXT NOT NULL, sequence BIGINT NOT NULL, type TEXT NOT NULL,
            data TEXT NOT NULL, PRIMARY KEY (conversation_id, sequence))""",
    ),
    ("ALTER TABLE conversations ADD COLUMN turn_open_since TEXT",),
    # run-time trust: row MACs and run flags (see the SQLite list's migration 9)
    (
        "ALTER TABLE runs ADD COLUMN row_seq BIGINT",
        "ALTER TABLE runs ADD COLUMN row_mac TEXT",
        "ALTER TABLE tasks ADD COLUMN row_seq BIGINT",
        "ALTER TABLE tasks ADD COLUMN row_mac TEXT",
        "ALTER TABLE artifacts ADD COLUMN row_seq BIGINT",
        "ALTER TABLE artifacts ADD COLUMN row_mac TEXT",
        "ALTER TABLE contexts ADD COLUMN row_seq BIGINT",
        "ALTER TABLE contexts ADD COLUMN row_mac TEXT",
        "ALTER TABLE calls ADD COLUMN row_seq BIGINT",
        "ALTER TABLE calls ADD COLUMN row_mac TEXT",
        "ALTER TABLE approvals ADD COLUMN row_seq BIGINT",
        "ALTER TABLE approvals ADD COLUMN row_mac TEXT",
        "ALTER TABLE run_calls ADD COLUMN row_seq BIGINT",
        "ALTER TABLE run_calls ADD COLUMN row_mac TEXT",
        "ALTER TABLE proposals ADD COLUMN row_seq BIGINT",
        "ALTER TABLE proposals ADD COLUMN row_mac TEXT",
        """CREATE TABLE run_ledger_flags (
            run_id TEXT PRIMARY KEY, reason TEXT NOT NULL, seq BIGINT, message TEXT NOT NULL,
            found_at TEXT NOT NULL, quarantined_at TEXT, quarantined_by TEXT)""",
    ),
    (_shape_postgres_calls,),  # argument shapes in call rows (see the SQLite list)
    (  # owner leases (see the SQLite list's migration 11)
        """CREATE TABLE leases (
            owner_id TEXT PRIMARY KEY, host TEXT NOT NULL, pid BIGINT NOT NULL,
            start TEXT NOT NULL, renewed_at TEXT NOT NULL, expires_at TEXT NOT NULL)""",
    ),
    (  # delegation: the parent span of a delegated call (see the SQLite list's migration 12)
        "ALTER TABLE calls ADD COLUMN parent_span_id TEXT",
        "CREATE INDEX calls_by_parent ON calls (run_id, parent_span_id)",
    ),
    (  # events changed outside the append path (the SQLite list's migration 13)
        """CREATE TABLE ledger_edits (
            id BIGSERIAL PRIMARY KEY, run_id TEXT, seq BIGINT, op TEXT NOT NULL)""",
        """CREATE FUNCTION charter_note_event_edit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO ledger_edits (run_id, seq, op) VALUES (OLD.run_id, OLD.seq, lower(TG_OP));
            IF TG_OP = 'UPDATE' THEN
                INSERT INTO ledger_edits (run_id, seq, op) VALUES (NEW.run_id, NEW.seq, 'update');
            END IF;
            RETURN NULL;
        END $$""",
        """CREATE TRIGGER events_edited AFTER UPDATE OR DELETE ON events
            FOR EACH ROW EXECUTE FUNCTION charter_note_event_edit()""",
    ),
    (  # a run's rows deleted outside Charter (the SQLite list's migration 14)
        """CREATE FUNCTION charter_note_row_delete() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO ledger_edits (run_id, seq, op)
                VALUES (OLD.run_id, NULL, 'delete ' || TG_TABLE_NAME);
            RETURN NULL;
        END $$""",
        *(
            f"""CREATE TRIGGER {table}_row_deleted AFTER DELETE ON {table}
                FOR EACH ROW EXECUTE FUNCTION charter_note_row_delete()"""
            for table in ROW_TABLES
        ),
    ),
    (  # the id of a deleted or re-keyed row (the SQLite list's migration 15)
        "ALTER TABLE ledger_edits ADD COLUMN row_key TEXT",
        "CREATE INDEX ledger_edits_by_key ON ledger_edits (row_key)",
        """CREATE FUNCTION charter_note_row_gone() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO ledger_edits (run_id, seq, op, row_key) VALUES (
                OLD.run_id, NULL,
                CASE TG_OP WHEN 'DELETE' THEN 'delete ' ELSE 'rekey ' END || TG_TABLE_NAME,
                to_jsonb(OLD) ->> TG_ARGV[0]);
            RETURN NULL;
        END $$""",
        *(
            statement
            for table, column in ID_LOOKUPS.items()
            for statement in (
                f"DROP TRIGGER {table}_row_deleted ON {table}",
                f"""CREATE TRIGGER {table}_row_deleted AFTER DELETE ON {table}
                    FOR EACH ROW EXECUTE FUNCTION charter_note_row_gone('{column}')""",
                f"""CREATE TRIGGER {table}_key_changed AFTER UPDATE OF run_id, {column}
                    ON {table} FOR EACH ROW WHEN (OLD.run_id IS DISTINCT FROM NEW.run_id
                        OR OLD.{column} IS DISTINCT FROM NEW.{column})
                    EXECUTE FUNCTION charter_note_row_gone('{column}')""",
            )
        ),
    ),
    ("ALTER TABLE conversations ADD COLUMN history_mac TEXT",),  # (the SQLite list's 16)
    (  # quarantine marks a database edit cannot lift or forge (the SQLite list's 17)
        "ALTER TABLE run_ledger_flags ADD COLUMN quarantine_mac TEXT",
        f"""CREATE FUNCTION charter_note_unquarantine() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'TRUNCATE' THEN
                INSERT INTO ledger_edits (run_id, seq, op, row_key)
                    SELECT run_id, NULL, '{LIFTED}', run_id FROM run_ledger_flags
                    WHERE quarantined_at IS NOT NULL;
            ELSIF OLD.quarantined_at IS NOT NULL THEN
                IF TG_OP = 'DELETE' THEN
                    INSERT INTO ledger_edits (run_id, seq, op, row_key)
                        VALUES (OLD.run_id, NULL, '{LIFTED}', OLD.run_id);
                ELSIF NEW.quarantined_at IS NULL OR NEW.run_id IS DISTINCT FROM OLD.run_id THEN
                    INSERT INTO ledger_edits (run_id, seq, op, row_key)
                        VALUES (OLD.run_id, NULL, '{LIFTED}', OLD.run_id);
                END IF;
            END IF;
            RETURN NULL;
        END $$""",
        """CREATE TRIGGER run_ledger_flags_unmarked AFTER UPDATE OR DELETE ON run_ledger_flags
            FOR EACH ROW EXECUTE FUNCTION charter_note_unquarantine()""",
        """CREATE TRIGGER run_ledger_flags_truncated BEFORE TRUNCATE ON run_ledger_flags
            FOR EACH STATEMENT EXECUTE FUNCTION charter_note_unquarantine()""",
        f"""CREATE FUNCTION charter_keep_unquarantine() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'TRUNCATE' THEN
                IF EXISTS (SELECT 1 FROM ledger_edits WHERE op = '{LIFTED}') THEN
                    RAISE EXCEPTION '{_KEPT}';
                END IF;
                RETURN NULL;
            END IF;
            IF OLD.op = '{LIFTED}' THEN
                RAISE EXCEPTION '{_KEPT}';
            END IF;
            IF TG_OP = 'UPDATE' THEN
                RETURN NEW;
            END IF;
            RETURN OLD;
        END $$""",
        """CREATE TRIGGER ledger_edits_unquarantine_kept BEFORE UPDATE OR DELETE ON ledger_edits
            FOR EACH ROW EXECUTE FUNCTION charter_keep_unquarantine()""",
        """CREATE TRIGGER ledger_edits_unquarantine_truncated BEFORE TRUNCATE ON ledger_edits
            FOR EACH STATEMENT EXECUTE FUNCTION charter_keep_unquarantine()""",
    ),
    (  # a quarantine noted for processes already running (the SQLite list's 18)
        f"""CREATE FUNCTION charter_note_quarantine() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO ledger_edits (run_id, seq, op, row_key)
                VALUES (NEW.run_id, NULL, '{MARKED}', NEW.run_id);
            RETURN NULL;
        END $$""",
        f"""CREATE TRIGGER run_ledger_flags_marked
            AFTER INSERT OR UPDATE OF {_MARK_COLUMNS} ON run_ledger_flags FOR EACH ROW
            WHEN ({_HAS_MARK.replace("new.", "NEW.")})
            EXECUTE FUNCTION charter_note_quarantine()""",
        f"""CREATE FUNCTION charter_keep_quarantine() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'TRUNCATE' THEN
                IF EXISTS (SELECT 1 FROM ledger_edits WHERE op = '{MARKED}') THEN
                    RAISE EXCEPTION '{_KEPT_MARK}';
                END IF;
                RETURN NULL;
            END IF;
            IF OLD.op = '{MARKED}' THEN
                RAISE EXCEPTION '{_KEPT_MARK}';
            END IF;
            IF TG_OP = 'UPDATE' THEN
                RETURN NEW;
            END IF;
            RETURN OLD;
        END $$""",
        """CREATE TRIGGER ledger_edits_quarantine_kept BEFORE UPDATE OR DELETE ON ledger_edits
            FOR EACH ROW EXECUTE FUNCTION charter_keep_quarantine()""",
        """CREATE TRIGGER ledger_edits_quarantine_truncated BEFORE TRUNCATE ON ledger_edits
            FOR EACH STATEMENT EXECUTE FUNCTION charter_keep_quarantine()""",
    ),
    (  # the Build record (the SQLite list's 19)
        """CREATE TABLE builds (
            digest TEXT PRIMARY KEY, first_seen_at TEXT NOT NULL, activated_at TEXT NOT NULL,
            activation BIGINT NOT NULL)""",
        "CREATE UNIQUE INDEX builds_by_activation ON builds (activation)",
    ),
    _PARENT_INDEX_PARTIAL,  # the SQLite list's 20
)


def check_not_newer(found: int, known: int, *, where: str) -> None:
    if found > known:
        raise MigrationError(
            f"the database {where} has schema version {found}, written by a newer Charter; "
            f"this Charter knows versions up to {known}. Upgrade Charter to open it.",
            reason="STORE_SCHEMA_TOO_NEW",
            details={"found": found, "known": known},
        )


_AHEAD = ("already exists", "duplicate column")
"""What a database says when a migration's table, index, trigger or column is there already."""


def schema_mismatch(version: int, exc: Exception, *, where: str) -> MigrationError | None:
    """The refusal of a database where migration ``version`` failed with ``exc`` because what
    it creates exists already — made by hand, or left by a migration half-applied outside
    Charter — or None when ``exc`` is another failure. Nothing is applied; the schema must be
    put back by hand (or the database restored) before Charter opens it."""
    text = str(exc)
    if not any(mark in text.lower() for mark in _AHEAD):
        return None
    return MigrationError(
        f"the database {where} cannot be migrated: migration {version} failed ({text}). Its "
        "schema was changed outside Charter (a table or column created by hand, or a "
        "migration half-applied); nothing was applied. Restore the database or undo the "
        "change by hand.",
        reason="STORE_SCHEMA_MISMATCH",
        details={"migration": version},
    )
