"""Conversations that survive disconnects: detached turns, stored events, a grace window.

A :class:`TurnHub` runs each turn as a task of its own, not tied to any HTTP connection.
Every stream event is stored (redacted upstream) as it is emitted; subscribers read the
stored events after their last sequence and then wait for more, so a reconnect with
``Last-Event-ID`` gets exactly the missing events. When the last subscriber leaves, the
turn goes on for the grace window; if nobody comes back it is cancelled cleanly and a
``conversation.completed {status: cancelled}`` is stored as its last event. Time comes from
an injectable clock; :meth:`TurnHub.sweep` (run by :meth:`watch`) applies the window and the
retention (conversations idle longer than it are forgotten; proposals and the ledger stay).

Conversations are kept in memory (the seed allows it for sessions); each one maps to its
ledger run, so a conversation resumed after a restart finds its run by ``session_id``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from charter.errors import PermissionDenied
from charter.ledger.events import format_at
from charter.ledger.ids import new_id
from charter.providers.base import ChatMessage
from charter.providers.events import StreamEvent
from charter.providers.orchestrator import ChatRequest, Orchestrator


@dataclass(kw_only=True)
class Conversation:
    conversation_id: str
    tenant: str
    user: str
    run_id: str | None = None
    events: list[StreamEvent] = field(default_factory=list)
    history: list[ChatMessage] = field(default_factory=list)
    turns: int = 0
    task: asyncio.Task[None] | None = None
    subscribers: int = 0
    turn_start: int = 0  # the last sequence before the current turn's first event
    detached_at: datetime | None = None
    updated_at: datetime | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()


class TurnHub:
    def __init__(self, orchestrator: Orchestrator, *, clock: Callable[[], datetime]) -> None:
        self.orchestrator = orchestrator
        self.clock = clock
        self.conversations: dict[str, Conversation] = {}
        self.defaults: dict[str, str | None] = {}  # profile and agent when a request names none
        self.sweeper: asyncio.Task[None] | None = None

    def find(self, conversation_id: str, tenant: str, user: str) -> Conversation:
        """The caller's conversation; anyone else's answers like a missing one."""
        conv = self.conversations.get(conversation_id)
        if conv is None or conv.tenant != tenant or conv.user != user:
            raise PermissionDenied("no such conversation", reason="CONVERSATION_NOT_FOUND")
        return conv

    async def _run_of(self, conversation_id: str, tenant: str, user: str) -> str | None:
        """After a restart: the conversation's run, found by session id, if it is ours."""
        store = self.orchestrator.kernel.store
        rows = await store.query_rows("runs", {"session_id": conversation_id}, limit=1)
        if not rows or rows[0].get("tenant") != tenant:
            return None
        first = await store.read_stored(rows[0]["run_id"], after=0, limit=1)
        from charter.ledger.events import decode

        if not first or decode(first[0]).payload.get("created_by") != user:
            return None
        return str(rows[0]["run_id"])

    async def start(self, request: ChatRequest) -> Conversation:
        """Start a turn; another user's (or an unknown) conversation id starts a new one."""
        principal = request.principal
        conv: Conversation | None = None
        if request.conversation_id:
            try:
                conv = self.find(request.conversation_id, principal.tenant, principal.name)
            except PermissionDenied:
                run_id = await self._run_of(
                    request.conversation_id, principal.tenant, principal.name
                )
                if run_id is not None:
                    conv = Conversation(
                        conversation_id=request.conversation_id,
                        tenant=principal.tenant,
                        user=principal.name,
                        run_id=run_id,
                    )
                    self.conversations[conv.conversation_id] = conv
                    await self.orchestrator.kernel.reconcile()
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
        conv.turn_start = conv.events[-1].sequence if conv.events else 0
        turn = replace(
            request,
            conversation_id=conv.conversation_id,
            run_id=conv.run_id,
            history=tuple(conv.history),
            turn_id=f"t{conv.turns}-{new_id('turn').rsplit('-', 1)[-1][:8]}",
        )
        conv.history.append(ChatMessage(role="user", text=request.message))
        conv.detached_at = None
        conv.task = asyncio.create_task(self._run(conv, turn))
        return conv

    async def _run(self, conv: Conversation, request: ChatRequest) -> None:
        first = conv.events[-1].sequence + 1 if conv.events else 1
        text: list[str] = []
        try:
            async for event in self.orchestrator.execute_chat(request, first_sequence=first):
                if event.type == "conversation.started":
                    conv.run_id = event.data.get("runId") or conv.run_id
                if event.type == "assistant.delta":
                    text.append(str(event.data.get("text", "")))
                self._store(conv, event)
        except asyncio.CancelledError:
            self._store(
                conv,
                StreamEvent(
                    type="conversation.completed",
                    conversation_id=conv.conversation_id,
                    sequence=(conv.events[-1].sequence + 1) if conv.events else 1,
                    timestamp=format_at(self.clock()),
                    data={"status": "cancelled", "reason": "DISCONNECT_GRACE_EXPIRED"},
                ),
            )
        finally:
            if text:
                conv.history.append(ChatMessage(role="assistant", text="".join(text)))

    def _store(self, conv: Conversation, event: StreamEvent) -> None:
        # stored (and so streamed) redacted: the deployment's secret values and patterns
        event = replace(event, data=self.orchestrator.kernel.redactor.redact(event.data))
        conv.events.append(event)
        conv.updated_at = self.clock()
        conv.changed.set()
        conv.changed = asyncio.Event()

    async def subscribe(
        self, conv: Conversation, *, after: int
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stored events after ``after``, then new ones, until ``conversation.completed``."""
        conv.subscribers += 1
        conv.detached_at = None
        try:
            last = after
            while True:
                fresh = [e for e in conv.events if e.sequence > last]
                waiter = conv.changed
                for event in fresh:
                    last = event.sequence
                    yield event
                if fresh and fresh[-1].type == "conversation.completed" and not conv.running:
                    return
                if not fresh and not conv.running:
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter.wait(), timeout=1.0)
        finally:
            conv.subscribers -= 1
            if conv.subscribers == 0:
                conv.detached_at = self.clock()

    async def sweep(self) -> None:
        """Cancel turns detached past the grace window; forget conversations past retention."""
        now = self.clock()
        settings = self.orchestrator.settings
        for conv in list(self.conversations.values()):
            if (
                conv.running
                and conv.subscribers == 0
                and conv.detached_at is not None
                and (now - conv.detached_at).total_seconds() >= settings.grace_s
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

    async def watch(self, interval_s: float = 1.0) -> None:
        while True:
            await asyncio.sleep(interval_s)
            await self.sweep()

    def detach(self, conv: Conversation) -> Any:
        conv.detached_at = self.clock()

    async def close(self) -> None:
        """Cancel every running turn (server shutdown); each ends with its completed event."""
        if self.sweeper is not None:
            self.sweeper.cancel()
        for conv in list(self.conversations.values()):
            if conv.task is not None and not conv.task.done():
                conv.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await conv.task
