"""Events: what a provider yields (:class:`ProviderEvent`) and what a chat streams
(:class:`StreamEvent`, the Elsa REST contract's types and wire shape).

Provider events are Charter-owned records; adapters build them from SDK objects so that no
SDK type reaches the orchestrator, the server, the ledger or a client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STREAM_EVENT_TYPES = (
    "conversation.started",
    "assistant.delta",
    "assistant.completed",
    "tool.started",
    "tool.progress",
    "tool.result",
    "approval.required",
    "proposal.created",
    "proposal.updated",
    "task.started",
    "task.ended",
    "conversation.error",
    "conversation.completed",
)
"""Every stream event type; ``conversation.completed`` is always a conversation turn's last."""

SAFE_ERROR_MESSAGE = "The assistant could not complete this turn. Details are in the server log."


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    text: str = field(repr=False)  # never printed


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageCompleted:
    text: str = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRequested:
    call_id: str
    name: str
    arguments: str = field(repr=False)  # the model's raw JSON text; never printed


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultReady:
    call_id: str
    name: str
    status: str
    content: str = field(repr=False)  # what the model sees (clamped); never printed


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCompleted:
    rounds: int = 1
    usage: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderError:
    """A provider failure; ``detail`` is for the log only, never streamed."""

    kind: str
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequested:
    """One request is being sent to the model: the tool names it carries and its size in
    tokens — the provider's count when it has one, else an estimate (about four bytes of the
    request's JSON per token; ``estimated``). The orchestrator reports it as a disclosure."""

    tools: tuple[str, ...]
    tokens: int
    estimated: bool = True
    model: str | None = None


ProviderEvent = (
    ModelRequested
    | TextDelta
    | MessageCompleted
    | ToolCallRequested
    | ToolResultReady
    | TurnCompleted
    | ProviderError
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEvent:
    """``{type, conversationId, sequence, timestamp, data}`` — sequence is monotonic per
    conversation (the SSE ``id``)."""

    type: str
    conversation_id: str
    sequence: int
    timestamp: str
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "conversationId": self.conversation_id,
            "sequence": self.sequence,
            "timestamp": self.timestamp,
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> StreamEvent:
        return cls(
            type=doc["type"],
            conversation_id=doc["conversationId"],
            sequence=int(doc["sequence"]),
            timestamp=doc["timestamp"],
            data=dict(doc.get("data") or {}),
        )
