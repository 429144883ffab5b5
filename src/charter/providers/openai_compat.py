"""OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, LiteLLM, …) through the official
``openai`` SDK (the ``openai`` extra).

Streaming with tool-call assembly (a call's id and name arrive once, its JSON arguments in
fragments keyed by index), and Charter's own continuation loop: every round's tool calls go
through the invoker (the governed kernel), their results are sent back as ``tool`` messages,
and the loop stops when the model answers without tools or after ``max_rounds`` rounds. SDK
objects never leave this module: they become :mod:`charter.providers.events`. SDK errors
become a :class:`ProviderError` whose ``kind`` is safe to show and whose ``detail`` is for the
log. The credential is read from the environment variable ``api_key_env`` names, when a turn
starts; it is never logged or stored.
"""

from __future__ import annotations

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
        import openai
    except ImportError:  # pragma: no cover - the extra is installed in the test environment
        raise ConfigError(
            "the openai provider needs the openai extra: pip install -e '.[openai]'"
        ) from None
    return openai


def history(instructions: str, messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Charter's provider-neutral history as chat-completions messages."""
    out: list[dict[str, Any]] = []
    if instructions:
        out.append({"role": "system", "content": instructions})
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.text})
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.text or None,
                    "tool_calls": [
                        {
                            "id": c.call_id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": m.role, "content": m.text})
    return out


class OpenAICompatProvider(SdkProvider):
    """Chat completions with streaming and Charter's bounded continuation loop."""

    name = "openai"

    async def execute_turn(
        self, request: TurnRequest, invoker: ToolInvoker
    ) -> AsyncIterator[ProviderEvent]:
        openai = _sdk()
        key = credential(self.api_key_env)
        if key is None and self.api_key_env is not None:
            yield ProviderError(kind="credential_missing", detail=f"${self.api_key_env} is unset")
            return
        client = openai.AsyncOpenAI(
            api_key=key or "unused",  # local servers (vLLM, Ollama) take any key
            base_url=self.base_url,
            timeout=self.timeout_s,
            max_retries=0,
        )
        messages = history(request.instructions, list(request.messages))
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
        try:
            for round_ in range(1, request.max_rounds + 1):
                options: dict[str, Any] = {"tools": tools} if tools else {}
                yield ModelRequested(
                    tools=tuple(t.name for t in request.tools),
                    tokens=request_tokens([messages, tools]),
                    model=self.model,
                )
                stream = await client.chat.completions.create(
                    model=self.model,
                    messages=messages,
                    stream=True,
                    max_tokens=self.max_tokens,
                    **options,
                )
                text: list[str] = []
                calls: dict[int, dict[str, str]] = {}
                async for chunk in stream:
                    for choice in chunk.choices or ():
                        delta = choice.delta
                        if delta is None:
                            continue
                        if delta.content:
                            text.append(delta.content)
                            yield TextDelta(text=delta.content)
                        for part in delta.tool_calls or ():
                            call = calls.setdefault(
                                part.index, {"id": "", "name": "", "arguments": ""}
                            )
                            if part.id:
                                call["id"] = part.id
                            if part.function is not None:
                                call["name"] += part.function.name or ""
                                call["arguments"] += part.function.arguments or ""
                if text:
                    yield MessageCompleted(text="".join(text))
                if not calls:
                    yield TurnCompleted(rounds=round_)
                    return
                ordered = [calls[i] for i in sorted(calls)]
                messages.append(
                    {
                        "role": "assistant",
                        "content": "".join(text) or None,
                        "tool_calls": [
                            {
                                "id": c["id"],
                                "type": "function",
                                "function": {"name": c["name"], "arguments": c["arguments"]},
                            }
                            for c in ordered
                        ],
                    }
                )
                invocations = [
                    ToolInvocation(
                        call_id=c["id"] or f"call{i}", name=c["name"], arguments=c["arguments"]
                    )
                    for i, c in enumerate(ordered)
                ]
                outcomes: list[ToolOutcome] = []
                async for event in invoke_all(invocations, invoker, outcomes):
                    yield event
                messages += [
                    {"role": "tool", "tool_call_id": inv.call_id, "content": outcome.content}
                    for inv, outcome in zip(invocations, outcomes, strict=True)
                ]
            yield ProviderError(kind="max_rounds", detail=f"{request.max_rounds} rounds")
        except openai.APIError as exc:
            yield sdk_error(exc)
        finally:
            await client.close()
