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
from charter.providers._sdk import SdkProvider, credential, invoke_all, sdk_error
from charter.providers.base import (
    ChatMessage,
    ToolInvocation,
    ToolInvoker,
    ToolOutcome,
    TurnRequest,
    request_tokens,
)
from charter.providers.events import (
    MessageCompleted,
    ModelRequested,
    ProviderError,
    ProviderEvent,
    TextDelta,
    TurnCompleted,
)


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError:  # pragma: no cover - the extra is installed in the test environment
        raise ConfigError(
            "the anthropic provider needs the anthropic extra: pip install -e '.[anthropic]'"
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


class AnthropicProvider(SdkProvider):
    """Anthropic messages with streaming and Charter's bounded continuation loop."""

    name = "anthropic"

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
                yield ModelRequested(
                    tools=tuple(t.name for t in request.tools),
                    tokens=request_tokens([request.instructions, messages, tools]),
                    model=self.model,
                )
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
                outcomes: list[ToolOutcome] = []
                async for event in invoke_all(invocations, invoker, outcomes):
                    yield event
                results = [
                    {
                        "type": "tool_result",
                        "tool_use_id": inv.call_id,
                        "content": outcome.content,
                        "is_error": outcome.status != "succeeded",
                    }
                    for inv, outcome in zip(invocations, outcomes, strict=True)
                ]
                messages.append({"role": "user", "content": results})
            yield ProviderError(kind="max_rounds", detail=f"{request.max_rounds} rounds")
        except anthropic.APIError as exc:
            yield sdk_error(exc)
        finally:
            await client.close()
