"""Writes ``recordings/``: the wire-format responses the replay server serves, one file per
model round (``<provider>/<scenario>.<round>.sse``, or ``.json`` with an HTTP status for an
error). They follow the providers' documented streaming formats byte for byte (chat
completions ``data:`` chunks ending ``[DONE]``; Anthropic ``event:``/``data:`` pairs). Run it
again only to change a scenario: ``python -m tests.providers.make_recordings``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "recordings"
CALLS = {
    "one_tool": [("call_1", "kv_echo", ['{"payl', 'oad": {"n": 1}}'])],
    "parallel": [
        ("call_a", "kv_echo", ['{"payload": ', '{"n": 1}}']),
        ("call_b", "kv_echo", ['{"payload": {"n": 2}', "}"]),
    ],
    "tool_error": [("call_x", "kv_boom", ['{"message": "bad"}'])],
}
AFTER = {"one_tool": ["Done."], "parallel": ["Both ", "done."], "tool_error": ["It ", "failed."]}


def _openai_chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    chunk = {
        "id": "chatcmpl-rec",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "recorded-model",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return f"data: {json.dumps(chunk)}\n\n"


def _openai_usage() -> str:
    """The last chunk servers send with ``stream_options.include_usage``: no choices at all."""
    chunk = {
        "id": "chatcmpl-rec",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "recorded-model",
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return f"data: {json.dumps(chunk)}\n\n"


def openai_text(parts: list[str]) -> str:
    out = [_openai_chunk({"role": "assistant", "content": ""})]
    out += [_openai_chunk({"content": p}) for p in parts]
    out.append(_openai_chunk({}, "stop"))
    out.append(_openai_usage())
    return "".join(out) + "data: [DONE]\n\n"


def openai_tools(calls: list[tuple[str, str, list[str]]]) -> str:
    out = [_openai_chunk({"role": "assistant", "content": None})]
    for index, (call_id, name, _) in enumerate(calls):
        first = {"index": index, "id": call_id, "type": "function"}
        out.append(
            _openai_chunk({"tool_calls": [{**first, "function": {"name": name, "arguments": ""}}]})
        )
    longest = max(len(c[2]) for c in calls)
    for step in range(longest):  # fragments interleaved across calls, as servers send them
        for index, (_, _, fragments) in enumerate(calls):
            if step < len(fragments):
                part = {"index": index, "function": {"arguments": fragments[step]}}
                out.append(_openai_chunk({"tool_calls": [part]}))
    out.append(_openai_chunk({}, "tool_calls"))
    out.append(_openai_usage())
    return "".join(out) + "data: [DONE]\n\n"


def _ev(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


def _start() -> str:
    message: dict[str, Any] = {
        "id": "msg_rec",
        "type": "message",
        "role": "assistant",
        "model": "recorded-model",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    return _ev("message_start", {"message": message})


def _stop(reason: str) -> str:
    return _ev(
        "message_delta",
        {"delta": {"stop_reason": reason, "stop_sequence": None}, "usage": {"output_tokens": 5}},
    ) + _ev("message_stop", {})


def anthropic_text(parts: list[str]) -> str:
    out = [
        _start(),
        _ev("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
    ]
    out.append(_ev("ping", {}))
    out += [
        _ev("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": p}})
        for p in parts
    ]
    out.append(_ev("content_block_stop", {"index": 0}))
    return "".join(out) + _stop("end_turn")


def anthropic_tools(calls: list[tuple[str, str, list[str]]]) -> str:
    out = [_start()]
    for index, (call_id, name, fragments) in enumerate(calls):
        block = {
            "type": "tool_use",
            "id": call_id.replace("call", "toolu"),
            "name": name,
            "input": {},
        }
        out.append(_ev("content_block_start", {"index": index, "content_block": block}))
        for fragment in fragments:
            delta = {"type": "input_json_delta", "partial_json": fragment}
            out.append(_ev("content_block_delta", {"index": index, "delta": delta}))
        out.append(_ev("content_block_stop", {"index": index}))
    return "".join(out) + _stop("tool_use")


def main() -> None:
    for provider, text, tools in (
        ("openai", openai_text, openai_tools),
        ("anthropic", anthropic_text, anthropic_tools),
    ):
        folder = HERE / provider
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "text.1.sse").write_text(text(["Hello", " there."]))
        for scenario, calls in CALLS.items():
            (folder / f"{scenario}.1.sse").write_text(tools(calls))
            (folder / f"{scenario}.2.sse").write_text(text(AFTER[scenario]))
    error_openai = {"error": {"message": "upstream exploded", "type": "server_error", "code": None}}
    (HERE / "openai" / "provider_error.1.json").write_text(
        json.dumps({"status": 500, "body": error_openai})
    )
    error_anthropic = {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    (HERE / "anthropic" / "provider_error.1.json").write_text(
        json.dumps({"status": 529, "body": error_anthropic})
    )


if __name__ == "__main__":
    main()
