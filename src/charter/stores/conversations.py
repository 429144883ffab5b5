"""The conversation-storage port: chat conversations that outlive a process and are shared by
replicas, in tables of their own.

The ledger records every chat turn (``chat_turn_*``, ``chat_tool_call``) but deliberately not
its text: the ledger is immutable and could not honour ``chat.retention_days``. A
conversation's message history and its stream events (already redacted by the turn hub) live
here instead, in rows that are deleted when the conversation has been idle past retention.

* :class:`ConversationRecord` — one row per conversation: owner (tenant + user), ledger run,
  turn count, message history (JSON text), ``updated_at`` (last activity, what retention
  measures) and ``watched_at`` (last time a subscriber on *another* replica followed it);
* :class:`ConversationEvent` — one stream event, keyed ``(conversation_id, sequence)``; a
  sequence stored twice is :class:`~charter.errors.StoreConflict`
  (``CONVERSATION_SEQUENCE_CONFLICT``), so two writers can never interleave one stream.

Implemented by the memory, SQLite and PostgreSQL stores (:class:`MemoryConversations` here,
:mod:`charter.stores.sqlite_conversations`, :mod:`charter.stores.postgres_conversations`).
Timestamps are :func:`~charter.ledger.events.format_at` text: fixed width, so they compare
as strings in SQL and in Python alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from charter.errors import InternalFailure, StoreConflict
from charter.ledger.chain import LedgerKey, same_mac

SEQUENCE_CONFLICT = "CONVERSATION_SEQUENCE_CONFLICT"


class ConversationDamaged(InternalFailure):
    """A stored conversation row cannot be read back (edited or damaged in the database):
    ``internal`` / ``CONVERSATION_DAMAGED``, naming what is wrong, never the text found.
    ``tenant`` and ``user`` are its owner as the row names them (None: not known), so the
    damage is told to the owner only; anyone else is answered as for a missing one."""

    default_reason = "CONVERSATION_DAMAGED"

    def __init__(
        self,
        conversation_id: str,
        what: str,
        *,
        tenant: str | None = None,
        user: str | None = None,
        sequence: int | None = None,
    ) -> None:
        super().__init__(
            f"the stored conversation {conversation_id} is damaged ({what}); "
            "it cannot be continued or replayed",
            reason="CONVERSATION_DAMAGED",
            details={"conversation_id": conversation_id, "sequence": sequence},
        )
        self.tenant = tenant
        self.user = user
        self.sequence = sequence


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationRecord:
    conversation_id: str
    tenant: str
    user: str
    run_id: str | None
    turns: int
    updated_at: str
    history: str = "[]"  # the provider-neutral messages as JSON text
    watched_at: str | None = None
    turn_open_since: str | None = None
    """When the turn now running started (None: no turn is open). A replica that finds it set
    knows a turn runs elsewhere — or was lost with its process, once it is old."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationEvent:
    sequence: int
    type: str
    data: str  # the wire form {type, conversationId, sequence, timestamp, data} as JSON text


def sequence_conflict(conversation_id: str) -> StoreConflict:
    return StoreConflict(
        "a stream event with this sequence is already stored for the conversation",
        reason=SEQUENCE_CONFLICT,
        details={"conversation_id": conversation_id},
    )


@runtime_checkable
class ConversationStore(Protocol):
    async def save_conversation(self, record: ConversationRecord) -> None:
        """Insert or replace the record; ``watched_at`` is kept as stored (see ``touch``)."""
        ...

    async def claim_turn(self, record: ConversationRecord) -> bool:
        """Save the record of a turn being started — only if the stored record counts one
        turn fewer (or there is none). False: another process started a turn of this
        conversation first (nothing is written). ``watched_at`` is kept as stored."""
        ...

    async def load_conversation(self, conversation_id: str) -> ConversationRecord | None: ...

    async def append_conversation_events(
        self, conversation_id: str, events: Sequence[ConversationEvent], *, updated_at: str
    ) -> None:
        """Store ``events`` atomically (all or none) and move the record's ``updated_at``."""
        ...

    async def read_conversation_events(
        self, conversation_id: str, *, after: int, limit: int = 500
    ) -> Sequence[ConversationEvent]:
        """Events with ``sequence > after`` in order, at most ``limit``."""
        ...

    async def conversation_tail(self, conversation_id: str) -> ConversationEvent | None:
        """The stored event with the highest sequence (None: nothing stored)."""
        ...

    async def touch_conversation(self, conversation_id: str, *, watched_at: str) -> None:
        """Record that a subscriber follows the conversation (keeps its turn from the grace
        window on the replica running it)."""
        ...

    async def delete_idle_conversations(self, *, before: str) -> int:
        """Delete conversations whose ``updated_at`` is before ``before``, with their events;
        return how many conversations went."""
        ...


@dataclass(slots=True)
class _Tables:
    records: dict[str, ConversationRecord] = field(default_factory=dict)
    events: dict[str, dict[int, ConversationEvent]] = field(default_factory=dict)


class MemoryConversations:
    """The port in process memory (the memory store's), with the SQL backends' invariants."""

    @property
    def _conversations(self) -> _Tables:
        tables: _Tables | None = self.__dict__.get("_conversation_tables")
        if tables is None:
            tables = self.__dict__["_conversation_tables"] = _Tables()
        return tables

    async def save_conversation(self, record: ConversationRecord) -> None:
        old = self._conversations.records.get(record.conversation_id)
        watched = old.watched_at if old is not None else record.watched_at
        self._conversations.records[record.conversation_id] = replace(record, watched_at=watched)

    async def claim_turn(self, record: ConversationRecord) -> bool:
        old = self._conversations.records.get(record.conversation_id)
        if old is not None and old.turns != record.turns - 1:
            return False
        await self.save_conversation(record)
        return True

    async def load_conversation(self, conversation_id: str) -> ConversationRecord | None:
        return self._conversations.records.get(conversation_id)

    async def append_conversation_events(
        self, conversation_id: str, events: Sequence[ConversationEvent], *, updated_at: str
    ) -> None:
        stored = self._conversations.events.setdefault(conversation_id, {})
        sequences = [e.sequence for e in events]
        if len(set(sequences)) != len(sequences) or any(s in stored for s in sequences):
            raise sequence_conflict(conversation_id)
        stored.update((e.sequence, e) for e in events)
        record = self._conversations.records.get(conversation_id)
        if record is not None:
            self._conversations.records[conversation_id] = replace(record, updated_at=updated_at)

    async def read_conversation_events(
        self, conversation_id: str, *, after: int, limit: int = 500
    ) -> Sequence[ConversationEvent]:
        stored = self._conversations.events.get(conversation_id, {})
        return [stored[s] for s in sorted(s for s in stored if s > after)[:limit]]

    async def conversation_tail(self, conversation_id: str) -> ConversationEvent | None:
        stored = self._conversations.events.get(conversation_id)
        return stored[max(stored)] if stored else None

    async def touch_conversation(self, conversation_id: str, *, watched_at: str) -> None:
        record = self._conversations.records.get(conversation_id)
        if record is not None:
            self._conversations.records[conversation_id] = replace(record, watched_at=watched_at)

    async def delete_idle_conversations(self, *, before: str) -> int:
        idle = [c for c, r in self._conversations.records.items() if r.updated_at < before]
        for conversation_id in idle:
            del self._conversations.records[conversation_id]
            self._conversations.events.pop(conversation_id, None)
        return len(idle)


# -- SQL shared by the SQLite and PostgreSQL implementations ------------------------------

_COLUMNS = (
    "conversation_id, tenant, user_name, run_id, turns, updated_at, history, watched_at, "
    "turn_open_since, history_mac"
)


def history_mac(key: LedgerKey, r: ConversationRecord) -> str:
    """The MAC of what a turn reads back from a record: its owner, run, turn count and message
    history (the history is fed to the model as what the user and the assistant said). Under
    the ledger key; ``updated_at``, ``watched_at`` and ``turn_open_since`` are bookkeeping
    moved by other writes and are not covered."""
    parts = (r.conversation_id, r.tenant, r.user, r.run_id or "", str(r.turns))
    return key.text_mac("conversation", (*(p.replace("\x00", "\\0") for p in parts), r.history))


def save_sql(p: str) -> str:
    """Upsert a record, leaving a stored ``watched_at`` alone."""
    marks = ", ".join([p] * 10)
    return (
        f"INSERT INTO conversations ({_COLUMNS}) VALUES ({marks}) "
        "ON CONFLICT (conversation_id) DO UPDATE SET tenant = excluded.tenant, "
        "user_name = excluded.user_name, run_id = excluded.run_id, turns = excluded.turns, "
        "updated_at = excluded.updated_at, history = excluded.history, "
        "turn_open_since = excluded.turn_open_since, history_mac = excluded.history_mac"
    )


def claim_sql(p: str) -> str:
    """:func:`save_sql` that changes a stored record only when it counts one turn fewer."""
    return save_sql(p) + " WHERE conversations.turns = excluded.turns - 1"


def save_params(r: ConversationRecord, key: LedgerKey) -> tuple[object, ...]:
    return (
        r.conversation_id,
        r.tenant,
        r.user,
        r.run_id,
        r.turns,
        r.updated_at,
        r.history,
        r.watched_at,
        r.turn_open_since,
        history_mac(key, r),
    )


def load_sql(p: str) -> str:
    return f"SELECT {_COLUMNS} FROM conversations WHERE conversation_id = {p}"


def as_record(row: Sequence[object], key: LedgerKey) -> ConversationRecord:
    """The stored record, once its :func:`history_mac` verifies: a history edited in the
    database (or any covered column, or a record from before histories carried a MAC) is
    :class:`ConversationDamaged`, never fed to the model."""
    cid, tenant, user, run_id, turns, updated_at, history, watched_at, open_since, mac = row
    if not isinstance(turns, int) or turns < 0:  # SQLite keeps any value an edit wrote
        raise ConversationDamaged(
            str(cid), "its turn count is not a number", tenant=str(tenant), user=str(user)
        )
    record = ConversationRecord(
        conversation_id=str(cid),
        tenant=str(tenant),
        user=str(user),
        run_id=None if run_id is None else str(run_id),
        turns=turns,
        updated_at=str(updated_at),
        history=str(history),
        watched_at=None if watched_at is None else str(watched_at),
        turn_open_since=None if open_since is None else str(open_since),
    )
    if not same_mac(history_mac(key, record), mac):
        if mac is None:
            what = "its history carries no MAC: stored before histories were authenticated"
        elif isinstance(mac, str) and not mac.startswith(f"hmac-sha256:{key.key_id}:"):
            what = f"its history MAC is not under ledger key {key.key_id}"
        else:
            what = "its history does not match its MAC: edited outside Charter"
        raise ConversationDamaged(str(cid), what, tenant=str(tenant), user=str(user))
    return record


def insert_events_sql(p: str) -> str:
    return (
        "INSERT INTO conversation_events (conversation_id, sequence, type, data) "
        f"VALUES ({p}, {p}, {p}, {p})"
    )


def touch_updated_sql(p: str) -> str:
    return f"UPDATE conversations SET updated_at = {p} WHERE conversation_id = {p}"


def read_events_sql(p: str) -> str:
    return (
        "SELECT sequence, type, data FROM conversation_events "
        f"WHERE conversation_id = {p} AND sequence > {p} ORDER BY sequence LIMIT {p}"
    )


def tail_sql(p: str) -> str:
    return (
        "SELECT sequence, type, data FROM conversation_events "
        f"WHERE conversation_id = {p} ORDER BY sequence DESC LIMIT 1"
    )


def touch_watched_sql(p: str) -> str:
    return f"UPDATE conversations SET watched_at = {p} WHERE conversation_id = {p}"


def delete_events_sql(p: str) -> str:
    return (
        "DELETE FROM conversation_events WHERE conversation_id IN "
        f"(SELECT conversation_id FROM conversations WHERE updated_at < {p})"
    )


def delete_records_sql(p: str) -> str:
    return f"DELETE FROM conversations WHERE updated_at < {p}"


def as_event(row: Sequence[object]) -> ConversationEvent:
    sequence, type_, data = row
    return ConversationEvent(sequence=int(sequence), type=str(type_), data=str(data))  # type: ignore[call-overload]
