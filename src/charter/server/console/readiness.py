"""Readiness: the Build, the deployment, each tool's binding and executor, expected against
reported versions and digests, and what is not ready and why."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from charter._version import __version__
from charter.server.console.web import Operator, console_of, operator, render
from charter.server.query import QueryRoute

router = APIRouter(route_class=QueryRoute)


@router.get("/readiness", response_class=HTMLResponse)
async def readiness_page(
    request: Request, who: Annotated[Operator, Depends(operator)], fresh: str = ""
) -> HTMLResponse:
    runtime = console_of(request).state.runtime
    report = await runtime.readiness(fresh=bool(fresh))
    checked = {t.tool_id: t for t in report.tools}
    deployment = runtime.deployment
    tools: list[dict[str, Any]] = []
    for tool_id, tool in sorted(runtime.build.tools.items()):
        found = checked.get(tool_id)
        contract = tool.contract
        binding = deployment.bindings.get(tool_id)
        enabled = deployment.enabled_tools is None or tool_id in deployment.enabled_tools
        tools.append(
            {
                "id": tool_id,
                "version": contract.version,
                "digest": contract.digest,
                "effect": contract.effect.value,
                "enabled": enabled or contract.effect.value == "read",
                "executor": (found.executor if found.bound else "—")
                if found
                else (binding.executor if binding else deployment.default_executor or "—"),
                "endpoint": found.endpoint if found else None,
                "address": found.address if found else None,
                "status": found.status if found else "not_checked",
                "reported_version": found.reported_version if found else None,
                "reported_digest": found.reported_digest if found else None,
                "reason": found.reason if found else None,
                "message": found.message if found else None,
                "required": found.required if found else False,
            }
        )
    tools.sort(key=lambda t: (t["status"] != "not_ready", t["id"]))
    return render(
        request,
        "readiness.html",
        {
            "report": report,
            "tools": tools,
            "build": runtime.build,
            "deployment": deployment,
            "version": __version__,
            "page": "readiness",
        },
        who=who,
    )
