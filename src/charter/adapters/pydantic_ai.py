"""A context's tools as Pydantic AI tools (``pydantic-ai-slim``; the ``pydantic-ai`` extra).

    agent = Agent(model, tools=charter.adapters.pydantic_ai.tools(runtime, ctx, "app"))

Each is a ``Tool`` built from the contract's model-facing name, description and exact JSON
schema (``Tool.from_schema``); the run's tool-call id is the Charter call id; the result is
the JSON text described in :mod:`charter.adapters`.
"""

from __future__ import annotations

from typing import Any

try:
    from pydantic_ai import RunContext, Tool
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError(
        "charter.adapters.pydantic_ai needs pydantic-ai-slim: pip install -e '.[pydantic-ai]'"
    ) from exc

from charter.adapters import RESULT_MAX_BYTES, GovernedTool, governed_tools
from charter.kernel.contexts import ResolvedContext
from charter.kernel.principals import Principal
from charter.runtime import Runtime


def tool(governed: GovernedTool) -> Tool[Any]:
    async def invoke(ctx: RunContext[Any], **arguments: Any) -> str:
        return await governed.call(arguments, call_id=ctx.tool_call_id)

    return Tool.from_schema(
        invoke,
        name=governed.name,
        description=governed.description,
        json_schema=dict(governed.parameters),
        takes_ctx=True,
    )


def tools(
    runtime: Runtime,
    context: ResolvedContext,
    principal: Principal | str,
    *,
    result_max_bytes: int = RESULT_MAX_BYTES,
) -> list[Tool[Any]]:
    """The tools ``context`` offers, as Pydantic AI tools calling as ``principal``."""
    return [
        tool(g)
        for g in governed_tools(runtime, context, principal, result_max_bytes=result_max_bytes)
    ]
