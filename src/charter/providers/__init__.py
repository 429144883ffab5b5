"""Providers and chat: the provider boundary, the scripted model, network adapters and the
orchestrator that turns one chat message into Charter's own stream events.

No provider SDK type crosses this package's public names: adapters map SDK objects into
:mod:`charter.providers.events` before anything else sees them.
"""

from charter.providers.base import (
    ChatMessage,
    Provider,
    ToolInvocation,
    ToolInvoker,
    ToolOutcome,
    ToolSpec,
    TurnRequest,
)
from charter.providers.events import (
    STREAM_EVENT_TYPES,
    ProviderError,
    StreamEvent,
    TextDelta,
    ToolCallRequested,
    ToolResultReady,
    TurnCompleted,
)
from charter.providers.orchestrator import ChatRequest, ChatSettings, Orchestrator
from charter.providers.scripted import ScriptedProvider

__all__ = [
    "STREAM_EVENT_TYPES",
    "ChatMessage",
    "ChatRequest",
    "ChatSettings",
    "Orchestrator",
    "Provider",
    "ProviderError",
    "ScriptedProvider",
    "StreamEvent",
    "TextDelta",
    "ToolCallRequested",
    "ToolInvocation",
    "ToolInvoker",
    "ToolOutcome",
    "ToolResultReady",
    "ToolSpec",
    "TurnCompleted",
    "TurnRequest",
]
