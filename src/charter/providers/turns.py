"""Conversations that survive disconnects, restarts and replicas: detached turns, stored
events, a grace window.

A :class:`TurnHub` runs each turn as a task of its own, not tied to any HTTP connection.
Every stream event is kept (redacted upstream) as it is emitted; subscribers read the kept
events after their last sequence and then wait for more, so a reconnect with
``Last-Event-ID`` gets exactly the missing events. When the last subscriber leaves, the
turn goes on for the grace window; if nobody comes back it is cancelled cleanly and a
``conversation.completed {status: cancelled}`` is stored as its last event. Time comes from
an injectable clock; :meth:`TurnHub.sweep` (run by :meth:`watch`) applies the window and the
retention (conversations idle longer than it are deleted; proposals and the ledger stay).

Where things live:

* **in memory**, this process's events of each conversation (the live path: local
  subscribers never wait for a database);
* **in the conversation store** (:mod:`charter.stores.conversations`, the same database as
  the ledger, in deletable tables), when the hub has one: the conversation's record (owner,
  run, turns, message history — saved when a turn starts and when it ends) and every stream
  event. Events are written through, coalesced: a non-delta event writes what is pending, an
  ``assistant.delta`` only when ~``flush_s`` passed since the last write (and the turn's end
  writes the rest), so a token stream costs a few writes a second, never one per token. The
  store's sequence numbers stay contiguous — a reader may miss the newest deltas for a moment,
  never see a gap or a reordering.

So after a restart, or on another replica, :meth:`TurnHub.find` loads a conversation from the
store (same owner rule: someone else's answers like a missing one), a new turn gets its
history, a subscriber replays the stored events, and a subscriber following a turn that runs
on another replica polls the store (every ``poll_s``) until ``conversation.completed``. A
conversation found only as a ledger run (no stored record: from before the store held them)
still resumes its run by ``session_id``, with an empty history.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from charter import telemetry
from charter.errors import Failure, PermissionDenied, StoreConflict
from charter.kernel.redaction import Redactor
from charter.ledger.events import decode, format_at
from charter.ledger.ids import new_id
from charter.providers.base import ChatMessage
from charter.providers.events import StreamEvent
from charter.providers.orchestrator import (
    ChatRequest,
    Orchestrator,
    check_request,
    history_from,
    windowed,
)
from charter.stores.conversations import (
    ConversationDamaged,
    ConversationEvent,
    ConversationRecord,
    ConversationStore,
)

logger = logging.getLogger("charter.chat")
COMPLETED = "conversation.completed"
DELTA = "assistant.delta"
_PAGE = 500  # stored events read per query


@dataclass(kw_only=True)
class Conversation:
    conversation_id: str
    tenant: str
    user: str
    run_id: str | None = None
    events: list[StreamEvent] = field(default_factory=list)  # this process's, after ``base``
    base: int = 0  # events up to this sequence are only in the store (a restart, a replica)
    history: list[ChatMessage] = field(default_factory=list)
    turns: int = 0
    task: asyncio.Task[None] | None = None
    subscribers: int = 0
    turn_start: int = 0  # the last sequence before the current turn's first event
    detached_at: datetime | None = None
    updated_at: datetime | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    unsaved: list[StreamEvent] = field(default_factory=list)  # kept, not yet in the store
    flushed_at: float = 0.0  # monotonic time of the last write to the store
    turn_open: bool = False  # from start() until the turn's completed event is kept
    turn_opened_at: str | None = None  # when this process opened the turn (stored with it)
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)  # one store writer at a time

    @property
    def running(self) -> bool:
        """A turn is open. Its task may still be writing its last events to the store; the
        next turn may start meanwhile (``writing`` keeps the writes in order)."""
        return self.turn_open

    @property
    def last_sequence(self) -> int:
        return self.events[-1].sequence if self.events else self.base


def _history_text(history: Sequence[ChatMessage], redactor: Redactor) -> str:
    """The history as stored: redacted like the stream events (the model saw the messages as
    written; what outlives the process keeps none of the deployment's secrets)."""
    messages = redactor.redact([asdict(m) for m in history])
    return json.dumps(messages, separators=(",", ":"), ensure_ascii=False)


def _stored_history(conv: Conversation, record: ConversationRecord) -> list[ChatMessage]:
    """The record's message history; ``CONVERSATION_DAMAGED`` (to its owner) when an edit in
    the store left it unreadable: refused, never half-read or taken as empty."""
    try:
        return history_from(json.loads(record.history))
    except json.JSONDecodeError:
        what = "its history is not JSON"
    except ValueError as exc:
        what = f"its history: {exc}"
    raise ConversationDamaged(conv.conversation_id, what, tenant=record.tenant, user=record.user)


def _parse_at(text: str) -> datetime | None:
    """A stored ``format_at`` timestamp as a datetime (None if it is not one)."""
    try:
        return datetime.fromisoformat(text.removesuffix("Z") + "+00:00")
    except ValueError:
        return None


def _stored_event(event: StreamEvent) -> ConversationEvent:
    data = json.dumps(event.to_dict(), separators=(",", ":"), ensure_ascii=False)
    return ConversationEvent(sequence=event.sequence, type=event.type, data=data)


def _contiguous(conv: Conversation, after: int, row: ConversationEvent) -> None:
    """The stored sequence numbers are contiguous (a writer never leaves a gap): a row past
    ``after + 1`` means the events between were deleted — ``CONVERSATION_DAMAGED``, not a
    stream that skips them."""
    if row.sequence != after + 1:
        raise ConversationDamaged(
            conv.conversation_id,
            f"its stored event {after + 1} is missing",
            tenant=conv.tenant,
            user=conv.user,
            sequence=after + 1,
        )


def _stream_event(conv: Conversation, row: ConversationEvent) -> StreamEvent:
    """A stored event as streamed; ``CONVERSATION_DAMAGED`` naming its sequence when an edit
    in the store left it unreadable or not the event its row is keyed as."""
    try:
        doc = json.loads(row.data)
        event = StreamEvent.from_dict(doc)
    except (ValueError, TypeError, KeyError, AttributeError):
        event = None
    if (
        event is None
        or event.sequence != row.sequence
        or event.type != row.type
        or event.conversation_id != conv.conversation_id
        or not isinstance(event.type, str)
        or not isinstance(event.timestamp, str)
        or not isinstance(doc.get("data", {}), dict)
    ):
        raise ConversationDamaged(
            conv.conversation_id,
            f"its stored event {row.sequence} is not the stream event it is keyed as",
            tenant=conv.tenant,
            user=conv.user,
            sequence=row.sequence,
        )
    return event


class TurnHub:
    def __init__(
        self,
        orchestrator: Orchestrator,
        *,
        clock: Callable[[], datetime],
        store: ConversationStore | None = None,
        flush_s: float = 0.1,
        poll_s: float = 0.2,
        store_sweep_s: float = 60.0,
    ) -> None:
        """``store`` None keeps conversations in this process only (the local CLI)."""
        self.orchestrator = orchestrator
        self.clock = clock
        self.store = store
        self.flush_s = flush_s
        self.poll_s = poll_s
        self.store_sweep_s = store_sweep_s
        self.conversations: dict[str, Conversation] = {}
        self.defaults: dict[str, str | None] = {}  # profile and agent when a request names none
        self.sweeper: asyncio.Task[None] | None = None
        self._store_swept: datetime | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # turns, until their last write is done

    # -- finding conversations ------------------------------------------------------------

    async def find(self, conversation_id: str, tenant: str, user: str) -> Conversation:
        """The caller's conversation (from memory, else from the store); anyone else's answers
        like a missing one. One whose stored rows are damaged is ``CONVERSATION_DAMAGED`` to
        its owner."""
        conv = self.conversations.get(conversation_id)
        if conv is None:
            try:
                conv = await self._load(conversation_id)
            except ConversationDamaged as exc:
                if exc.tenant == tenant and exc.user == user:
                    raise
                conv = None
        if conv is None or conv.tenant != tenant or conv.user != user:
            raise PermissionDenied("no such conversation", reason="CONVERSATION_NOT_FOUND")
        self.conversations.setdefault(conversation_id, conv)
        return self.conversations[conversation_id]

    async def _load(self, conversation_id: str) -> Conversation | None:
        if self.store is None:
            return None
        tail = await self.store.conversation_tail(conversation_id)
        record = await self.store.load_conversation(conversation_id)
        if record is None:
            return None
        conv = Conversation(conversation_id=conversation_id, tenant=record.tenant, user=record.user)
        self._adopt(conv, record, tail)
        return conv

    def _adopt(
        self,
        conv: Conversation,
        record: ConversationRecord | None,
        tail: ConversationEvent | None,
    ) -> None:
        """Take the store's state: its history, turns and run; its events stay stored.

        Callers read ``tail`` before ``record``: a turn's history is saved before its
        completed event is written, so the record is at least as new as the tail.
        """
        history = None if record is None else _stored_history(conv, record)
        conv.events = []
        conv.base = tail.sequence if tail is not None else 0
        conv.updated_at = self.clock()
        if record is not None and history is not None:
            conv.history = history
            conv.turns = record.turns
            conv.run_id = record.run_id or conv.run_id
            # Idle since the store says, not since this replica read it: the copy in memory
            # is forgotten when the stored one is deleted, so a later turn here cannot store
            # a deleted conversation's history again.
            conv.updated_at = _parse_at(record.updated_at) or conv.updated_at

    async def _sync(self, conv: Conversation) -> ConversationEvent | None:
        """Before a turn or a subscription on an idle conversation: if the store holds events
        past this process's (turns ran on another replica), adopt its state. Returns the
        stored tail (the one adopted)."""
        if self.store is None or conv.running:
            return None
        tail = await self.store.conversation_tail(conv.conversation_id)
        if tail is not None and tail.sequence > conv.last_sequence:
            record = await self.store.load_conversation(conv.conversation_id)
            self._adopt(conv, record, tail)
        return tail

    async def _run_of(self, conversation_id: str, tenant: str, user: str) -> str | None:
        """A conversation the store has no record of: its run, found by session id, if ours."""
        runtime = self.orchestrator.runtime
        runs = await runtime.runs(session_id=conversation_id, limit=1)
        if not runs or runs[0].tenant != tenant:
            return None
        first = await runtime.stored_events(runs[0].run_id, after=0, limit=1)
        if not first or decode(first[0]).payload.get("created_by") != user:
            return None
        return runs[0].run_id

    async def _resume(self, request: ChatRequest) -> Conversation | None:
        """The caller's conversation ``request.conversation_id``, if any (memory, store or,
        for one the store never held, its ledger run)."""
        principal = request.principal
        try:
            conv = await self.find(request.conversation_id, principal.tenant, principal.name)
        except PermissionDenied:
            run_id = await self._run_of(request.conversation_id, principal.tenant, principal.name)
            if run_id is None:
                return None
            conv = Conversation(
                conversation_id=request.conversation_id,
                tenant=principal.tenant,
                user=principal.name,
                run_id=run_id,
            )
            self.conversations[conv.conversation_id] = conv
            await self.orchestrator.runtime.reconcile()
            return conv
        if conv.last_sequence == conv.base and not conv.running:
            await self.orchestrator.runtime.reconcile()  # first turn here: calls left in flight
        tail = await self._sync(conv)
        if self.store is None or conv.running:
            return conv
        stored_events = (
            tail is not None and tail.type != COMPLETED and tail.sequence >= conv.last_sequence
        )
        record = await self.store.load_conversation(conv.conversation_id)
        # A turn started elsewhere may not have stored an event yet: its record says so.
        if stored_events or (record is not None and record.turn_open_since is not None):
            self._open_turn_elsewhere(conv, record, stored_events=stored_events)
        return conv

    def _open_turn_elsewhere(
        self, conv: Conversation, record: ConversationRecord | None, *, stored_events: bool
    ) -> None:
        """A turn this process is not running is open in the store: another replica runs it
        (refuse while it shows signs of life within the grace window) or it was lost with its
        process. A lost turn that stored events is closed with a cancelled completed event, so
        every turn in the stream ends with one; one that stored none is simply superseded."""
        window = format_at(self.clock() - timedelta(seconds=self.orchestrator.settings.grace_s))
        if record is not None and record.updated_at >= window:
            raise PermissionDenied(
                "a turn of this conversation is still running", reason="TURN_IN_PROGRESS"
            )
        if stored_events:
            self._keep(conv, self._event(conv, "cancelled", "TURN_LOST"))

    # -- running turns --------------------------------------------------------------------

    async def start(self, request: ChatRequest) -> Conversation:
        """Start a turn; another user's (or an unknown) conversation id starts a new one. A
        message that is empty or longer than ``MAX_MESSAGE_CHARS`` is refused before anything
        is recorded, as ``POST /v1/chat`` refuses it; so is a time range or diagnostics
        scope out of bounds, or text with a lone surrogate (:func:`check_request`)."""
        check_request(request)
        principal = request.principal
        conv = await self._resume(request) if request.conversation_id else None
        if conv is None:
            conv = Conversation(
                conversation_id=new_id("conv"), tenant=principal.tenant, user=principal.name
            )
            self.conversations[conv.conversation_id] = conv
        if conv.running:
            raise PermissionDenied(
                "a turn of this conversation is still running", reason="TURN_IN_PROGRESS"
            )
        conv.turns += 1
        conv.turn_start = conv.last_sequence
        # a conversation that lasts for days: the model gets, and the store keeps, a window
        conv.history = windowed(conv.history, self.orchestrator.settings.history_bytes)
        turn = replace(
            request,
            conversation_id=conv.conversation_id,
            run_id=conv.run_id,
            history=tuple(conv.history),
            turn_id=f"t{conv.turns}-{new_id('turn').rsplit('-', 1)[-1][:8]}",
        )
        conv.history.append(ChatMessage(role="user", text=request.message))
        conv.turn_open, conv.turn_opened_at = True, format_at(self.clock())
        if not await self._claim(conv):  # another replica started this turn first
            conv.turns -= 1
            conv.history.pop()
            conv.turn_open = False
            raise PermissionDenied(
                "a turn of this conversation is still running", reason="TURN_IN_PROGRESS"
            )
        conv.detached_at = None
        conv.task = asyncio.create_task(self._run(conv, turn, conv.turns))
        self._tasks.add(conv.task)
        conv.task.add_done_callback(self._tasks.discard)
        return conv

    async def _run(self, conv: Conversation, request: ChatRequest, turn_no: int) -> None:
        """Run turn ``turn_no`` as a ``chat_turn`` span, the parent of its tool calls'."""
        with telemetry.span(
            "chat_turn",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.conversation.id": conv.conversation_id,
                "charter.turn": turn_no,
            },
        ):
            await self._run_turn(conv, request, turn_no)

    async def _run_turn(self, conv: Conversation, request: ChatRequest, turn_no: int) -> None:
        """Run turn ``turn_no``. Its last writes may still be under way when the next turn
        starts: from then on they touch nothing of the next turn's."""
        text: list[str] = []
        try:
            first = conv.last_sequence + 1
            # aclosing: a cancel that lands in one of this loop's own writes still closes the
            # orchestrator's stream (and so its provider and tool calls) now, not at GC time.
            stream = self.orchestrator.execute_chat(request, first_sequence=first)
            async with contextlib.aclosing(stream):
                async for event in stream:
                    if event.type == "conversation.started":
                        conv.run_id = event.data.get("runId") or conv.run_id
                    if event.type == DELTA:
                        text.append(str(event.data.get("text", "")))
                    if event.type == COMPLETED:
                        self._end_turn(conv, turn_no, text)  # before a subscriber sees it
                        try:
                            # Saved first: a client that answers the moment it sees the turn
                            # end finds it closed in the store (not TURN_IN_PROGRESS), and a
                            # reader of the stored event finds the answer in the history.
                            await self._save(conv)
                        finally:
                            self._keep(conv, event)
                    else:
                        self._keep(conv, event)
                    if event.type != DELTA or time.monotonic() - conv.flushed_at >= self.flush_s:
                        await self._flush(conv)
        except asyncio.CancelledError:
            if self._end_turn(conv, turn_no, text):
                self._keep(conv, self._event(conv, "cancelled", "DISCONNECT_GRACE_EXPIRED"))
        finally:
            ended = self._end_turn(conv, turn_no, text)
            if ended or any(e.type == COMPLETED for e in conv.unsaved):
                await self._save(conv)
            await self._flush(conv)

    @staticmethod
    def _end_turn(conv: Conversation, turn_no: int, text: list[str]) -> bool:
        """Close turn ``turn_no`` if it is the open one (once): the model's answer joins the
        history, a next turn may start. True when this call closed it."""
        if not conv.turn_open or conv.turns != turn_no:
            return False
        conv.turn_open = False
        if text:
            conv.history.append(ChatMessage(role="assistant", text="".join(text)))
        return True

    def _event(self, conv: Conversation, status: str, reason: str) -> StreamEvent:
        return StreamEvent(
            type=COMPLETED,
            conversation_id=conv.conversation_id,
            sequence=conv.last_sequence + 1,
            timestamp=format_at(self.clock()),
            data={"status": status, "reason": reason},
        )

    def _keep(self, conv: Conversation, event: StreamEvent) -> None:
        # kept (and so streamed and stored) redacted: the deployment's secret values and patterns
        event = replace(event, data=self.orchestrator.runtime.redactor.redact(event.data))
        conv.events.append(event)
        conv.unsaved.append(event)
        conv.updated_at = self.clock()
        conv.changed.set()
        conv.changed = asyncio.Event()

    async def _flush(self, conv: Conversation) -> None:
        """Write the pending events, in order; on failure they stay pending for the next try.

        The write is shielded from cancellation (the grace window cancels turns): a
        cancelled turn lets its write finish, so it knows what the store holds and never
        writes an event twice or leaves a gap.
        """
        if self.store is None or not conv.unsaved:
            return
        async with conv.writing:
            batch, conv.unsaved = conv.unsaved, []
            if not batch:
                return
            conv.flushed_at = time.monotonic()
            write = asyncio.ensure_future(self._write(conv, [_stored_event(e) for e in batch]))
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                await asyncio.wait({write})
                if not write.result():
                    conv.unsaved = batch + conv.unsaved
                raise
            if not write.result():
                conv.unsaved = batch + conv.unsaved

    async def _write(self, conv: Conversation, rows: list[ConversationEvent]) -> bool:
        """Append ``rows``; False: retry them later. A conflict means the store holds some
        of them already (only those past its tail go) or another writer took these
        sequences (the store keeps theirs; logged)."""
        assert self.store is not None
        cid = conv.conversation_id
        try:
            try:
                await self.store.append_conversation_events(
                    cid, rows, updated_at=format_at(self.clock())
                )
            except StoreConflict:
                tail = await self.store.conversation_tail(cid)
                stored = tail.sequence if tail is not None else 0
                rest = [r for r in rows if r.sequence > stored]
                if rest and rest[0].sequence != stored + 1:
                    raise
                if rest:
                    await self.store.append_conversation_events(
                        cid, rest, updated_at=format_at(self.clock())
                    )
        except StoreConflict as exc:
            logger.warning("chat events of %s not stored: %s", cid, exc.reason)
        except Failure as exc:
            logger.warning("could not store chat events of %s: %s", cid, exc.reason)
            return False
        return True

    def _record(self, conv: Conversation) -> ConversationRecord:
        return ConversationRecord(
            conversation_id=conv.conversation_id,
            tenant=conv.tenant,
            user=conv.user,
            run_id=conv.run_id,
            turns=conv.turns,
            updated_at=format_at(self.clock()),
            history=_history_text(conv.history, self.orchestrator.runtime.redactor),
            turn_open_since=conv.turn_opened_at if conv.turn_open else None,
        )

    async def _claim(self, conv: Conversation) -> bool:
        """Record the turn being started (``conv.turns`` already counts it), unless another
        replica started this turn first: then False, and nothing is written. The record also
        lets other replicas find the conversation from now on."""
        if self.store is None:
            return True
        async with conv.writing:  # after the previous turn's last writes
            try:
                return await self.store.claim_turn(self._record(conv))
            except Failure as exc:  # the turn goes on; only its durability suffers (logged)
                logger.warning(
                    "could not store conversation %s: %s", conv.conversation_id, exc.reason
                )
                return True

    async def _save(self, conv: Conversation) -> None:
        if self.store is None:
            return
        async with conv.writing:  # the state as of now, after any earlier write
            try:
                await self.store.save_conversation(self._record(conv))
            except Failure as exc:  # the turn goes on; only its durability suffers (logged)
                logger.warning(
                    "could not store conversation %s: %s", conv.conversation_id, exc.reason
                )

    # -- subscribing ----------------------------------------------------------------------

    async def subscribe(
        self, conv: Conversation, *, after: int
    ) -> AsyncGenerator[StreamEvent, None]:
        """Events after ``after`` — stored ones, then new ones — until
        ``conversation.completed``; a turn running on another replica is followed through
        the store."""
        conv.subscribers += 1
        conv.detached_at = None
        try:
            await self._sync(conv)
            last, last_type = after, ""
            async for event in self._stored(conv, after=last, upto=conv.base):
                last, last_type = event.sequence, event.type
                yield event
            last = max(last, conv.base)
            while True:
                fresh = [e for e in conv.events if e.sequence > last]
                waiter = conv.changed
                for event in fresh:
                    last, last_type = event.sequence, event.type
                    yield event
                if not conv.running and (not fresh or last_type == COMPLETED):
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter.wait(), timeout=1.0)
            if last_type != COMPLETED and not conv.events:
                async for event in self._follow(conv, after=last):
                    yield event
        finally:
            conv.subscribers -= 1
            if conv.subscribers == 0:
                conv.detached_at = self.clock()

    async def _stored(
        self, conv: Conversation, *, after: int, upto: int
    ) -> AsyncIterator[StreamEvent]:
        """The stored events in ``(after, upto]``, page by page."""
        if self.store is None:
            return
        while after < upto:
            rows = await self.store.read_conversation_events(
                conv.conversation_id, after=after, limit=_PAGE
            )
            for row in rows:
                if row.sequence > upto:
                    return
                _contiguous(conv, after, row)
                after = row.sequence
                yield _stream_event(conv, row)
            if len(rows) < _PAGE:
                return

    async def _follow(self, conv: Conversation, *, after: int) -> AsyncIterator[StreamEvent]:
        """A turn this process is not running: poll the store until its completed event, or
        until nothing new came for the grace window (its replica may be gone). Touches the
        record so the replica running it sees a subscriber and keeps the turn."""
        assert self.store is not None
        grace = timedelta(seconds=self.orchestrator.settings.grace_s)
        tail = await self.store.conversation_tail(conv.conversation_id)
        if tail is None or (tail.sequence <= after and tail.type == COMPLETED):
            return
        last, quiet_since, touched = after, self.clock(), None
        while True:
            rows = await self.store.read_conversation_events(
                conv.conversation_id, after=last, limit=_PAGE
            )
            for row in rows:
                _contiguous(conv, last, row)
                last = row.sequence
                yield _stream_event(conv, row)
            now = self.clock()
            if rows:
                quiet_since = now
                if len(rows) == _PAGE:
                    continue
                if rows[-1].type == COMPLETED:
                    return
            if now - quiet_since >= grace:
                return
            if touched is None or now - touched >= grace / 3:
                touched = now
                with contextlib.suppress(Failure):
                    await self.store.touch_conversation(
                        conv.conversation_id, watched_at=format_at(now)
                    )
            await asyncio.sleep(self.poll_s)

    # -- the sweeper ----------------------------------------------------------------------

    async def sweep(self) -> None:
        """Cancel turns detached past the grace window (unless a subscriber on another replica
        follows them); delete conversations idle past retention, in memory and in the store."""
        now = self.clock()
        settings = self.orchestrator.settings
        for conv in list(self.conversations.values()):
            if (
                conv.running
                and conv.subscribers == 0
                and conv.detached_at is not None
                and (now - conv.detached_at).total_seconds() >= settings.grace_s
                and not await self._watched_elsewhere(conv, now)
            ):
                assert conv.task is not None
                conv.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await conv.task
            elif (
                not conv.running
                and conv.updated_at is not None
                and (now - conv.updated_at).total_seconds() >= settings.retention_s
            ):
                del self.conversations[conv.conversation_id]
        await self._sweep_store(now)

    async def _watched_elsewhere(self, conv: Conversation, now: datetime) -> bool:
        """A subscriber on another replica touched the record inside the grace window; the
        window restarts from now."""
        if self.store is None:
            return False
        try:
            record = await self.store.load_conversation(conv.conversation_id)
        except Failure:
            return False
        window = format_at(now - timedelta(seconds=self.orchestrator.settings.grace_s))
        if record is None or record.watched_at is None or record.watched_at < window:
            return False
        conv.detached_at = now
        return True

    async def _sweep_store(self, now: datetime) -> None:
        if self.store is None:
            return
        if self._store_swept is not None and (now - self._store_swept).total_seconds() < (
            self.store_sweep_s
        ):
            return
        self._store_swept = now
        cutoff = now - timedelta(seconds=self.orchestrator.settings.retention_s)
        try:
            await self.store.delete_idle_conversations(before=format_at(cutoff))
        except Failure as exc:
            logger.warning("could not delete idle conversations: %s", exc.reason)

    async def watch(self, interval_s: float = 1.0) -> None:
        while True:
            await asyncio.sleep(interval_s)
            await self.sweep()

    def detach(self, conv: Conversation) -> Any:
        conv.detached_at = self.clock()

    async def close(self) -> None:
        """Cancel every running turn (server shutdown); each ends with its completed event,
        written to the store before this returns."""
        if self.sweeper is not None:
            self.sweeper.cancel()
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
