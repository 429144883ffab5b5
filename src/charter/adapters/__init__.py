"""Framework adapters: a resolved context's tools as LangChain, OpenAI Agents SDK and Pydantic AI
tools, each invocation a governed kernel call (DESIGN §6, "Framework adapters").

:func:`governed_tools` gives the framework-neutral :class:`GovernedTool` list; the modules
:mod:`charter.adapters.langchain`, :mod:`charter.adapters.openai_agents` and
:mod:`charter.adapters.pydantic_ai` wrap it in each framework's own tool type. Only the tools
the context offers are exposed (listing = callable set), under their model-facing names and
exact argument schemas, and every invocation goes through ``Runtime.call``: authorization,
validation, approval, the durable intent, at-most-once dispatch, the ledger.

What the model gets back is one JSON text, ``{"status", "data", "error"}`` (plus ``approval``
when the call waits for a human), clamped to ``result_max_bytes`` (64 KiB by default) as the
chat orchestrator clamps it. Call ids: the framework's own tool-call id when it has one, else
a fresh one; a model may pass ``idempotency_key`` (not in the schema it sees, removed before
validation unless the tool declares it) to retry a call — after an approval, say — under the
same call id, as over MCP.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from charter.kernel.acceptance import model_text
from charter.kernel.contexts import ResolvedContext
from charter.kernel.envelope import CallStatus, Envelope
from charter.kernel.principals import Principal
from charter.runtime import Runtime

IDEMPOTENCY_KEY = "idempotency_key"
RESULT_MAX_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class GovernedTool:
    """One offered tool of one context, callable only through the kernel."""

    runtime: Runtime
    context_id: str
    principal: Principal
    id: str
    name: str
    description: str
    parameters: Mapping[str, Any]
    result_max_bytes: int = RESULT_MAX_BYTES

    async def call(self, arguments: Mapping[str, Any] | str, *, call_id: str | None = None) -> str:
        """Make the governed call; the JSON text to hand back to the model."""
        args: Mapping[str, Any] | str = arguments
        key = None
        if isinstance(arguments, str):
            try:
                parsed = json.loads(arguments)
            except ValueError:
                parsed = None  # passed on as text: the kernel's intake says what is wrong
            if isinstance(parsed, dict):
                args = parsed
        if not isinstance(args, str) and self._strips_key():
            args = dict(args)
            key = args.pop(IDEMPOTENCY_KEY, None)
        chosen = str(key) if key is not None else call_id or f"adapter-{secrets.token_hex(8)}"
        envelope = await self.runtime.call(
            self.context_id, self.id, chosen, args, as_=self.principal
        )
        return result_text(envelope, self.result_max_bytes)

    def _strips_key(self) -> bool:
        return IDEMPOTENCY_KEY not in self.parameters.get("properties", {})


def governed_tools(
    runtime: Runtime,
    context: ResolvedContext,
    principal: Principal | str,
    *,
    result_max_bytes: int = RESULT_MAX_BYTES,
) -> list[GovernedTool]:
    """The tools ``context`` offers, as :class:`GovernedTool` s calling as ``principal``."""
    who = runtime.principal(principal)
    out = []
    for offered in context.tools:
        contract = runtime.build.tools[offered.id].contract
        out.append(
            GovernedTool(
                runtime=runtime,
                context_id=context.context_id,
                principal=who,
                id=contract.id,
                name=contract.name,
                description=contract.description,
                parameters=dict(contract.args_schema),
                result_max_bytes=result_max_bytes,
            )
        )
    return out


def result_text(envelope: Envelope, limit: int = RESULT_MAX_BYTES) -> str:
    """The envelope as the model reads it: status, data, error (and a pending approval)."""
    body: dict[str, Any] = {
        "status": envelope.status.value,
        "data": envelope.data,
        "error": envelope.error,
    }
    if envelope.status is CallStatus.PENDING_APPROVAL and envelope.approval:
        body["approval"] = {
            "id": envelope.approval.get("id"),
            "expires_at": envelope.approval.get("expires_at"),
            "retry": f"once approved, call again with the same arguments and "
            f"{IDEMPOTENCY_KEY}={envelope.call_id!r}",
        }
    return model_text(body, limit)[0]


__all__ = ["IDEMPOTENCY_KEY", "RESULT_MAX_BYTES", "GovernedTool", "governed_tools", "result_text"]
