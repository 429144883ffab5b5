"""A context's tools as LangChain tools (``langchain-core``; the ``langchain`` extra).

    tools = charter.adapters.langchain.tools(runtime, ctx, "app")
    result = await tools[0].ainvoke({"key": "a"})

Each is a ``StructuredTool`` with the contract's model-facing name, description and exact
argument schema; invoking it is a governed call. The tools are asynchronous (``ainvoke``, or
any LangChain/LangGraph runner in async mode). Each invocation is a new call unless the model
passes ``idempotency_key``; the result is the JSON text described in :mod:`charter.adapters`.
"""

from __future__ import annotations

from typing import Any

try:
    from langchain_core.tools import StructuredTool
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError(
        "charter.adapters.langchain needs langchain-core: pip install -e '.[langchain]'"
    ) from exc

from charter.adapters import RESULT_MAX_BYTES, GovernedTool, governed_tools
from charter.kernel.contexts import ResolvedContext
from charter.kernel.principals import Principal
from charter.runtime import Runtime


def tool(governed: GovernedTool) -> StructuredTool:
    async def invoke(**arguments: Any) -> str:
        return await governed.call(arguments)

    return StructuredTool.from_function(
        coroutine=invoke,
        name=governed.name,
        description=governed.description,
        args_schema=dict(governed.parameters),
        infer_schema=False,
    )


def tools(
    runtime: Runtime,
    context: ResolvedContext,
    principal: Principal | str,
    *,
    result_max_bytes: int = RESULT_MAX_BYTES,
) -> list[StructuredTool]:
    """The tools ``context`` offers, as LangChain tools calling as ``principal``."""
    return [
        tool(g)
        for g in governed_tools(runtime, context, principal, result_max_bytes=result_max_bytes)
    ]
