"""What the two network adapters share: configuration, the credential, running a round's tool
calls through the invoker, and turning an SDK error into a safe :class:`ProviderError`."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence

from charter.providers.base import SessionHandle, ToolInvocation, ToolInvoker, ToolOutcome
from charter.providers.events import (
    ProviderError,
    ProviderEvent,
    ToolCallRequested,
    ToolResultReady,
)


def credential(api_key_env: str | None) -> str | None:
    """The key the named environment variable holds (``None``: not set)."""
    if api_key_env is None:
        return None
    return os.environ.get(api_key_env) or None


class SdkProvider:
    """A provider reached through an official SDK: model, endpoint, credential by reference."""

    name = "sdk"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key_env: str | None = None,
        max_tokens: int = 1024,
        timeout_s: float = 60.0,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s

    def __repr__(self) -> str:  # never the credential
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    async def create_session(self, conversation_id: str) -> SessionHandle:
        return SessionHandle(provider=self.name, session_id=conversation_id)


async def invoke_all(
    invocations: Sequence[ToolInvocation], invoker: ToolInvoker, outcomes: list[ToolOutcome]
) -> AsyncIterator[ProviderEvent]:
    """Announce a round's tool calls, then run each through the invoker (the governed kernel)
    in order; each outcome is appended to ``outcomes`` as its result event is yielded."""
    for inv in invocations:
        yield ToolCallRequested(call_id=inv.call_id, name=inv.name, arguments=inv.arguments)
    for inv in invocations:
        outcome = await invoker.invoke(inv)
        outcomes.append(outcome)
        yield ToolResultReady(
            call_id=inv.call_id, name=inv.name, status=outcome.status, content=outcome.content
        )


def sdk_error(exc: Exception) -> ProviderError:
    """Any SDK failure: a kind safe to show (``http_<status>`` or the class), details for logs."""
    status = getattr(exc, "status_code", None)
    return ProviderError(
        kind=f"http_{status}" if status else type(exc).__name__,
        detail=f"{type(exc).__name__}: {exc}",
    )
