"""Kernel envelopes as MCP tool results.

- ``succeeded`` → the data as structured content (when it is a JSON object) and as text;
- ``pending_approval`` → an ``isError`` result naming the approval id, its expiry, how an
  operator approves it and how to retry (the identical call with the same
  ``idempotency_key``);
- everything else (``rejected``, ``denied``, ``conflict``, ``failed``, ``unknown``, …) → an
  ``isError`` result whose text starts with ``<code> <REASON>: <message>``; the envelope's
  ``error`` object is also given as structured content for programs.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from charter.errors import Failure
from charter.kernel.envelope import CallStatus, Envelope, error_dict

APPROVE_COMMAND = "charter approvals approve {id} --as OPERATOR"


_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True)
"""``json.dumps(value, ensure_ascii=False, sort_keys=True)``, without a new encoder per call."""


def _text(value: Any) -> types.TextContent:
    return types.TextContent(text=_ENCODER.encode(value))


def envelope_result(env: Envelope, *, name: str, call_id: str, keyed: bool) -> types.CallToolResult:
    """The MCP result for one kernel answer (see the module docstring)."""
    meta = {"charter/call_id": call_id, "charter/status": env.status.value}
    if env.context_id is not None:
        meta["charter/context_id"] = env.context_id
    if env.run_id is not None:
        meta["charter/run_id"] = env.run_id
    if env.status is CallStatus.SUCCEEDED:
        structured = env.data if isinstance(env.data, dict) else None
        return types.CallToolResult(
            content=[_text(env.data)],
            structured_content=structured,
            is_error=False,
            _meta=meta,
        )
    if env.status is CallStatus.PENDING_APPROVAL and env.approval is not None:
        approval_id = env.approval.get("id")
        retry = (
            f"retry the identical call (same arguments, idempotency_key={call_id!r})"
            if keyed
            else f"retry the identical call with idempotency_key={call_id!r}"
        )
        text = (
            f"pending_approval APPROVAL_REQUIRED: the call of {name} needs a human approval. "
            f"Approval {approval_id} expires at {env.approval.get('expires_at')}. "
            f"An operator approves it with: {APPROVE_COMMAND.format(id=approval_id)} — "
            f"then {retry}."
        )
        return types.CallToolResult(
            content=[types.TextContent(text=text)],
            structured_content={
                "status": "pending_approval",
                "call_id": call_id,
                "approval": dict(env.approval),
            },
            is_error=True,
            _meta=meta,
        )
    error = dict(env.error or {})
    code = error.get("code", "internal")
    reason = error.get("reason", env.status.value.upper())
    message = error.get("message", f"the call ended {env.status.value}")
    text = f"{code} {reason}: {message} (call {call_id} {env.status.value})"
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content={"status": env.status.value, "call_id": call_id, "error": error},
        is_error=True,
        _meta=meta,
    )


def failure_result(exc: Failure, *, name: str) -> types.CallToolResult:
    """An ``isError`` result for a call refused before the kernel saw it (no context)."""
    error = error_dict(exc)
    return types.CallToolResult(
        content=[types.TextContent(text=f"{error['code']} {error['reason']}: {error['message']}")],
        structured_content={"status": "denied", "tool": name, "error": error},
        is_error=True,
    )
