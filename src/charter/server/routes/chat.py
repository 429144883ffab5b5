"""``/v1/chat``: one chat turn as a resumable SSE stream.

``POST /v1/chat`` starts a turn that runs detached from the connection (a task of the
server's :class:`~charter.providers.turns.TurnHub`) and streams its events as SSE frames
``id: <sequence>``, ``event: <type>``, ``data: {type, conversationId, sequence, timestamp,
data}``. Every event is stored (redacted) as it is emitted, so a client that drops can
``GET /v1/chat/{conversation_id}/events`` with ``Last-Event-ID`` and gets exactly the events
after that sequence (a stored event found damaged ends the stream with an ``error`` frame
``{reason, sequence, message}``, as the runs' SSE does). A turn whose client never comes
back is cancelled after the grace window (``chat.grace_s``) and still ends with
``conversation.completed``.

Conversations belong to the user who started them: another user's or tenant's conversation
answers ``404``, and another user's conversation id sent to ``POST /v1/chat`` starts a new
conversation. The provider and settings come from the deployment's ``chat:`` section.

``GET /v1/chat/agents`` names the agents a caller may chat with — the Build's, the same for
every tenant — and the defaults a request that names none gets, so a client can refuse an
unknown agent before its user types a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request
from fastapi.responses import StreamingResponse
from fastapi.sse import KEEPALIVE_COMMENT, format_sse_event
from pydantic import BaseModel, ConfigDict, Field

from charter.errors import Failure, InvalidInput
from charter.kernel.principals import Principal
from charter.providers.base import Provider
from charter.providers.config import load_chat_config
from charter.providers.events import StreamEvent
from charter.providers.orchestrator import (
    MAX_MESSAGE_CHARS,
    ChatRequest,
    ChatSettings,
    Orchestrator,
)
from charter.providers.turns import Conversation, TurnHub
from charter.server.intake import JsonRoute
from charter.server.problems import problem_responses
from charter.server.routes.proposals import proposals_of
from charter.server.sse import RETRY_MS, parse_last_event_id
from charter.server.state import ServerState, get_principal, get_state, state_of
from charter.server.streams import HeldStream, retry_after_responses
from charter.stores.conversations import ConversationStore

router = APIRouter(tags=["chat"], route_class=JsonRoute)
logger = logging.getLogger("charter.chat")
_SSE_SCHEMA = {
    "type": "object",
    "description": "One SSE frame; data is a stream event {type, conversationId, sequence, "
    "timestamp, data} as JSON",
    "properties": {
        "id": {"type": "string"},
        "event": {"type": "string"},
        "data": {"type": "string"},
    },
}


class Attachment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str = Field(min_length=1, max_length=64)
    ref: str = Field(min_length=1, max_length=512)


class ChatBody(BaseModel):
    """One user message; ``conversationId`` continues one of your conversations."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    conversation_id: str | None = Field(default=None, alias="conversationId", max_length=128)
    profile: str | None = Field(default=None, max_length=128)
    agent: str | None = Field(default=None, max_length=128)
    attachments: list[Attachment] = Field(default_factory=list, max_length=32)
    time_range: dict[str, str] | None = Field(default=None, alias="timeRange")
    diagnostics_scope: str | None = Field(default=None, alias="diagnosticsScope", max_length=256)


class ChatAgentOut(BaseModel):
    name: str
    description: str


class ChatAgentsOut(BaseModel):
    """The agents a caller may chat with, and what a request that names none gets."""

    agents: list[ChatAgentOut] = Field(description="The Build's agents, by name")
    default_agent: str | None = Field(
        alias="defaultAgent", description="chat.agent: the agent of a request that names none"
    )
    default_profile: str | None = Field(
        alias="defaultProfile",
        description="chat.profile: the profile of a request that names none (else the agent's "
        "name)",
    )


def configure_chat(
    app: FastAPI,
    *,
    clock: Callable[[], datetime] | None = None,
    provider: Provider | None = None,
    settings: ChatSettings | None = None,
    sweep_s: float = 1.0,
) -> None:
    """Override what the deployment file says (tests: a fake clock, a fast sweep)."""
    app.state.charter_chat_options = {
        "clock": clock,
        "provider": provider,
        "settings": settings,
        "sweep_s": sweep_s,
    }


async def chat_hub(request: Request) -> TurnHub:
    """The app's turn hub, built on first use over its runtime, with its sweeper task."""
    hub: TurnHub | None = getattr(request.app.state, "charter_chat", None)
    if hub is not None:
        return hub
    state = state_of(request)
    options: dict[str, Any] = getattr(request.app.state, "charter_chat_options", None) or {}
    config = load_chat_config(state.runtime.deployment.source)
    provider = options.get("provider") or config.provider
    orchestrator = Orchestrator(
        state.runtime,
        provider=provider,
        proposals=proposals_of(request),
        settings=options.get("settings") or config.settings,
    )
    store = state.runtime.store
    hub = TurnHub(
        orchestrator,
        clock=options.get("clock") or state.runtime.clock,
        store=store if isinstance(store, ConversationStore) else None,
    )
    hub.defaults = {"profile": config.profile, "agent": config.agent}
    hub.sweeper = asyncio.get_running_loop().create_task(
        hub.watch(float(options.get("sweep_s", 1.0)))
    )
    request.app.state.charter_chat = hub
    return hub


Hub = Annotated[TurnHub, Depends(chat_hub)]
Caller = Annotated[Principal, Depends(get_principal)]


def _frame(event: StreamEvent) -> bytes:
    data = json.dumps(event.to_dict(), separators=(",", ":"), ensure_ascii=False)
    return format_sse_event(id=str(event.sequence), event=event.type, data_str=data)


def _error_frame(exc: Failure) -> bytes:
    """The frame that ends a stream which cannot go on (as the runs' SSE does): ``event:
    error``, no id, ``{reason, sequence, message}``."""
    data = {"reason": exc.reason, "sequence": exc.details.get("sequence"), "message": exc.message}
    return format_sse_event(event="error", data_str=json.dumps(data, separators=(",", ":")))


async def _stream(
    hub: TurnHub, conv: Conversation, *, after: int, keepalive_s: float
) -> AsyncIterator[bytes]:
    yield format_sse_event(comment="charter chat", retry=RETRY_MS)
    events = hub.subscribe(conv, after=after)
    next_event: asyncio.Task[StreamEvent] | None = None
    try:
        while True:
            if next_event is None:
                next_event = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({next_event}, timeout=keepalive_s)
            if not done:
                yield KEEPALIVE_COMMENT
                continue
            finished, next_event = next_event, None
            try:
                event = finished.result()
            except StopAsyncIteration:
                return
            except Failure as exc:  # a stored event damaged, the store failing: said, not cut
                logger.warning("chat stream of %s ended: %s", conv.conversation_id, exc)
                yield _error_frame(exc)
                return
            yield _frame(event)
    finally:
        if next_event is not None:
            next_event.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await next_event
        await events.aclose()  # the subscriber leaves: the grace window starts


def _profile(hub: TurnHub, body: ChatBody) -> tuple[str, str | None]:
    defaults = hub.defaults
    agent = body.agent or defaults.get("agent")
    profile = body.profile or defaults.get("profile") or agent
    if profile is None:
        raise InvalidInput(
            "name a profile (or configure chat.profile in the deployment file)",
            reason="PROFILE_REQUIRED",
        )
    return profile, agent


@router.get(
    "/chat/agents",
    response_model=ChatAgentsOut,
    response_model_by_alias=True,
    responses=problem_responses(401),
    summary="The agents you may chat with, and the default agent and profile",
)
async def chat_agents(
    principal: Caller, hub: Hub, state: Annotated[ServerState, Depends(get_state)]
) -> ChatAgentsOut:
    """Every agent of the Build: agents are not a tenant's, and any authenticated caller may
    chat with any of them (what each may *do* is its context's business). Their instructions
    are text for the model and are not shown."""
    # `principal` is resolved before `hub`: an anonymous request builds no turn hub
    agents = state.runtime.build.agents
    return ChatAgentsOut(
        agents=[
            ChatAgentOut(name=name, description=agent.description)
            for name, agent in sorted(agents.items())
        ],
        defaultAgent=hub.defaults.get("agent"),
        defaultProfile=hub.defaults.get("profile"),
    )


@router.post(
    "/chat",
    responses={
        200: {
            "description": "The turn's events as SSE (id = sequence)",
            "content": {"text/event-stream": {"schema": _SSE_SCHEMA}},
        },
        **problem_responses(401, 409, 422),
        **retry_after_responses(),
    },
    summary="Send a chat message; stream the turn (it runs on if you disconnect)",
)
async def post_chat(
    body: ChatBody,
    principal: Caller,
    hub: Hub,
    state: Annotated[ServerState, Depends(get_state)],
) -> StreamingResponse:
    profile, agent = _profile(hub, body)
    request = ChatRequest(
        conversation_id=body.conversation_id or "",
        principal=principal,
        message=body.message,
        profile=profile,
        agent=agent,
        attachments=tuple((a.kind, a.ref) for a in body.attachments),
        time_range=body.time_range,
        diagnostics_scope=body.diagnostics_scope,
    )
    slot = state.streams.open(principal, "chat")  # at the cap: 429, and no turn starts
    try:
        conv = await hub.start(request)
    except BaseException:
        slot.release()
        raise
    return HeldStream(
        _stream(hub, conv, after=conv.turn_start, keepalive_s=state.sse_keepalive_s),
        slot=slot,
        headers={"X-Conversation-Id": conv.conversation_id},
    )


@router.get(
    "/chat/{conversation_id}/events",
    responses={
        200: {
            "description": "The conversation's stored events after Last-Event-ID, then live ones",
            "content": {"text/event-stream": {"schema": _SSE_SCHEMA}},
        },
        **problem_responses(401, 404),
        **retry_after_responses(),
    },
    summary="Resume a conversation's event stream after a sequence number",
)
async def chat_events(
    conversation_id: str,
    principal: Caller,
    hub: Hub,
    state: Annotated[ServerState, Depends(get_state)],
    after: Annotated[int, Query(ge=0, le=2**62)] = 0,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    conv = await hub.find(conversation_id, principal.tenant, principal.name)
    resume = parse_last_event_id(last_event_id)
    start = max(after, resume) if resume is not None else after
    return HeldStream(
        _stream(hub, conv, after=start, keepalive_s=state.sse_keepalive_s),
        slot=state.streams.open(principal, "chat"),
    )
