"""A context's tools as OpenAI Agents SDK function tools (``openai-agents``; the
``openai-agents`` extra).

    agent = Agent(name="helper", tools=charter.adapters.openai_agents.tools(rt, ctx, "app"))

Each is a ``FunctionTool`` with the contract's model-facing name, description and exact
argument schema (``strict_json_schema`` off: the contract's schema is passed as it is, and the
kernel validates). The SDK's tool-call id is the Charter call id; the result is the JSON text
described in :mod:`charter.adapters`.
"""

from __future__ import annotations

from typing import Any

try:
    from agents import FunctionTool
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError(
        "charter.adapters.openai_agents needs openai-agents: pip install -e '.[openai-agents]'"
    ) from exc

from charter.adapters import RESULT_MAX_BYTES, GovernedTool, governed_tools
from charter.kernel.contexts import ResolvedContext
from charter.kernel.principals import Principal
from charter.runtime import Runtime


def tool(governed: GovernedTool) -> FunctionTool:
    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        call_id = ctx.tool_call_id if isinstance(ctx.tool_call_id, str) else None
        return await governed.call(arguments or "{}", call_id=call_id)

    return FunctionTool(
        name=governed.name,
        description=governed.description,
        params_json_schema=dict(governed.parameters),
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


def tools(
    runtime: Runtime,
    context: ResolvedContext,
    principal: Principal | str,
    *,
    result_max_bytes: int = RESULT_MAX_BYTES,
) -> list[FunctionTool]:
    """The tools ``context`` offers, as Agents SDK function tools calling as ``principal``."""
    return [
        tool(g)
        for g in governed_tools(runtime, context, principal, result_max_bytes=result_max_bytes)
    ]
