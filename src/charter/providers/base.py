"""The provider boundary (Elsa's ``IAIProvider`` / ``IAIProviderToolInvoker``).

A provider executes one turn: given the conversation so far, the tools it may offer and a
tool invoker, it yields :mod:`~charter.providers.events`. Every tool call goes through the
invoker, which is the governed kernel: a provider never runs a tool itself.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from charter.providers.events import ProviderEvent


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool as a model sees it: model-facing name, description, JSON Schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRecord:
    call_id: str
    name: str
    arguments: str = field(repr=False)  # never printed


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    """One message of the provider-neutral history (role user | assistant | tool)."""

    role: str
    text: str = field(default="", repr=False)  # never printed
    tool_calls: tuple[ToolCallRecord, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRequest:
    conversation_id: str
    instructions: str
    messages: Sequence[ChatMessage]
    tools: Sequence[ToolSpec]
    max_rounds: int = 8
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInvocation:
    call_id: str
    name: str
    arguments: str = field(repr=False)  # never printed


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcome:
    """What the invoker answers: the call status and the (clamped) content for the model."""

    status: str
    content: str = field(repr=False)  # never printed
    data: Any = field(default=None, repr=False)


def request_tokens(payload: Any) -> int:
    """An estimate of a model request's size in tokens: about four bytes of its JSON each."""
    size = len(json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8"))
    return (size + 3) // 4


class ToolInvoker(Protocol):
    async def invoke(self, invocation: ToolInvocation) -> ToolOutcome: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionHandle:
    provider: str
    session_id: str


class Provider(Protocol):
    """A model provider. ``name`` is what the stream and the ledger say (``scripted``, …)."""

    @property
    def name(self) -> str: ...

    async def create_session(self, conversation_id: str) -> SessionHandle: ...

    def execute_turn(
        self, request: TurnRequest, invoker: ToolInvoker
    ) -> AsyncIterator[ProviderEvent]: ...
