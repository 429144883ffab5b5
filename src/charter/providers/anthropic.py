"""Anthropic messages through the official ``anthropic`` SDK (the ``anthropic`` extra).

Streaming raw events (``content_block_start`` opens a text or ``tool_use`` block,
``content_block_delta`` brings ``text_delta`` or ``input_json_delta`` fragments), tool-call
assembly per block index, and Charter's own continuation loop: tool calls go through the
invoker (the governed kernel), results go back as ``tool_result`` blocks (``is_error`` when the
call did not succeed), until the model stops asking for tools or ``max_rounds`` is reached.
SDK objects never leave this module; errors become a safe :class:`ProviderError`. The
credential is read from the variable ``api_key_env`` names and never logged.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from charter.errors import ConfigError
from charter.providers.base import (
    ChatMessage,
    SessionHandle,
    ToolInvocation,
    ToolInvoker,
    TurnRequest,
)
from charter.providers.events import (
    MessageCompleted,
    ProviderError,
    ProviderEvent,
    TextDelta,
    ToolCallRequested,
    ToolResultReady,
    TurnCompleted,
)
from charter.providers.openai_compat import credential


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError:  # pragma: no cover - the extra is installed in the test environment
        raise ConfigError(
            "the anthropic provider needs the anthropic extra: pip install 'charter[anthropic]'"
        ) from None
    return anthropic


def _input(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments else {}
    except ValueError:
        return {}


def history(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Charter's provider-neutral history as Anthropic messages (tool results as user turns)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.text}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.role == "assistant" and m.tool_calls:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.text}] if m.text else []
            blocks += [
                {"type": "tool_use", "id": c.call_id, "name": c.name, "input": _input(c.arguments)}
                for c in m.tool_calls
            ]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": m.role, "content": m.text})
    return out


class AnthropicProvider:
    """Anthropic messages with streaming and Charter's bounded continuation loop."""

    name = "anthropic"

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
        return f"AnthropicProvider(model={self.model!r}, base_url={self.base_url!r})"

    async def create_session(self, conversation_id: str) -> SessionHandle:
        return SessionHandle(provider=self.name, session_id=conversation_id)

    async def execute_turn(
        self, request: TurnRequest, invoker: ToolInvoker
    ) -> AsyncIterator[ProviderEvent]:
        anthropic = _sdk()
        key = credential(self.api_key_env)
        if key is None:
            yield ProviderError(kind="credential_missing", detail=f"${self.api_key_env} is unset")
            return
        client = anthropic.AsyncAnthropic(
            api_key=key, base_url=self.base_url, timeout=self.timeout_s, max_retries=0
        )
        messages = history(list(request.messages))
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
        try:
            for round_ in range(1, request.max_rounds + 1):
                options: dict[str, Any] = {"tools": tools} if tools else {}
                if request.instructions:
                    options["system"] = request.instructions
                stream = await client.messages.create(
                    model=self.model,
                    max_tokens=self.max_tokens,
                    messages=messages,
                    stream=True,
                    **options,
                )
                text: list[str] = []
                blocks: dict[int, dict[str, str]] = {}
                async for event in stream:
                    if event.type == "content_block_start":
                        block = event.content_block
                        if block.type == "tool_use":
                            blocks[event.index] = {"id": block.id, "name": block.name, "json": ""}
                    elif event.type == "content_block_delta":
                        delta = event.delta
                        if delta.type == "text_delta":
                            text.append(delta.text)
                            yield TextDelta(text=delta.text)
                        elif delta.type == "input_json_delta" and event.index in blocks:
                            blocks[event.index]["json"] += delta.partial_json
                if text:
                    yield MessageCompleted(text="".join(text))
                if not blocks:
                    yield TurnCompleted(rounds=round_)
                    return
                calls = [blocks[i] for i in sorted(blocks)]
                content: list[dict[str, Any]] = (
                    [{"type": "text", "text": "".join(text)}] if text else []
                )
                content += [
                    {
                        "type": "tool_use",
                        "id": c["id"],
                        "name": c["name"],
                        "input": _input(c["json"]),
                    }
                    for c in calls
                ]
                messages.append({"role": "assistant", "content": content})
                invocations = [
                    ToolInvocation(call_id=c["id"], name=c["name"], arguments=c["json"] or "{}")
                    for c in calls
                ]
                for inv in invocations:
                    yield ToolCallRequested(
                        call_id=inv.call_id, name=inv.name, arguments=inv.arguments
                    )
                results: list[dict[str, Any]] = []
                for inv in invocations:
                    outcome = await invoker.invoke(inv)
                    yield ToolResultReady(
                        call_id=inv.call_id,
                        name=inv.name,
                        status=outcome.status,
                        content=outcome.content,
                    )
                    results.append(
                        {
                            "type": "tool_result",
                            "tool_use_id": inv.call_id,
                            "content": outcome.content,
                            "is_error": outcome.status != "succeeded",
                        }
                    )
                messages.append({"role": "user", "content": results})
            yield ProviderError(kind="max_rounds", detail=f"{request.max_rounds} rounds")
        except anthropic.APIError as exc:  # every SDK failure: a safe kind, details for the log
            status = getattr(exc, "status_code", None)
            yield ProviderError(
                kind=f"http_{status}" if status else type(exc).__name__,
                detail=f"{type(exc).__name__}: {exc}",
            )
        finally:
            await client.close()
