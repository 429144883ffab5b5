"""``/healthz`` (the process answers), ``/readyz`` (it can serve), ``/metrics`` (Prometheus).

These three are not under ``/v1`` and need no credential: orchestrators and scrapers call
them. ``/readyz`` checks that the store answers (a read through the same pool the API uses;
the store applied its migrations when it opened and refuses a schema newer than this code)
and runs every extra check the app was given — executor readiness plugs in there — and
answers ``503`` with the reasons when any check fails. ``/metrics`` reveals counts by tool and
status, never arguments, tenants or ids.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response
from prometheus_client.core import Metric

from charter._version import __version__
from charter.errors import CharterError
from charter.server.intake import JsonRoute
from charter.server.metrics import CONTENT_TYPE, gauge
from charter.server.schemas import HealthOut, ReadyOut
from charter.server.state import ServerState, get_state

router = APIRouter(tags=["operations"], route_class=JsonRoute)

PROMETHEUS_TEXT = CONTENT_TYPE
_GAUGE_SCAN = 100_000


@router.get("/healthz", response_model=HealthOut, summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


async def _store_check(state: ServerState) -> dict[str, Any]:
    """The store answers, and its schema is the one this code was written for (a newer
    Charter may have migrated the database since this process started), and it has not
    stopped writing after a storage error (fail-stop: only a restart clears that)."""
    failure = getattr(state.runtime.store, "failure", None)
    if failure is not None:
        reason = getattr(state.runtime.store, "failure_reason", "STORE_FAILED")
        return {"name": "store", "ok": False, "reason": reason, "message": failure}
    try:
        recorded, known = await state.runtime.store.schema_versions()
    except CharterError as exc:
        return {"name": "store", "ok": False, "reason": getattr(exc, "reason", "STORE_ERROR")}
    except OSError:
        return {"name": "store", "ok": False, "reason": "STORE_UNREACHABLE"}
    if recorded != known:
        return {
            "name": "store",
            "ok": False,
            "reason": "STORE_SCHEMA_TOO_NEW" if recorded > known else "STORE_SCHEMA_OLD",
            "schema": {"recorded": recorded, "known": known},
        }
    return {"name": "store", "ok": True}


async def _ledger_check(state: ServerState) -> dict[str, Any]:
    """Runs refused because their ledger failed verification (found by this process or
    recorded by another) or was quarantined: counted by reason, without ids (this endpoint
    needs no credential; the console's attention page and ``charter runs ls`` name them).
    A refused run does not make the server unready: its other runs are served."""
    store = state.runtime.store
    refused = dict(store.trust.invalid)
    try:
        for problem in await store.run_flags():
            refused.setdefault(problem.run_id, problem)
    except CharterError:
        pass  # the store check says why
    reasons: dict[str, int] = {}
    for problem in refused.values():
        reasons[problem.reason] = reasons.get(problem.reason, 0) + 1
    return {
        "name": "ledger",
        "ok": True,
        "refused_runs": len(refused),
        "quarantined_runs": sum(1 for p in refused.values() if p.quarantined),
        "reasons": reasons,
    }


@router.get(
    "/readyz",
    response_model=ReadyOut,
    responses={503: {"model": ReadyOut, "description": "Not ready; checks say why"}},
    summary="The server can serve: store reachable, schema current, ledger readable, extra checks",
)
async def readyz(state: Annotated[ServerState, Depends(get_state)]) -> JSONResponse:
    checks = [await _store_check(state), await _ledger_check(state), _threads_check(state)]
    for check in state.readiness:
        try:
            checks.extend(await check(state.runtime))
        except CharterError as exc:
            checks.append({"name": "readiness", "ok": False, "reason": str(exc)})
    ok = all(c.get("ok") for c in checks)
    return JSONResponse(
        {"status": "ready" if ok else "not_ready", "checks": checks},
        status_code=200 if ok else 503,
    )


def _threads_check(state: ServerState) -> dict[str, Any]:
    """The sync-tool threads (``charter_tool_threads_*`` on /metrics). When every one is held
    by a tool whose call already answered, new sync calls fail ``TOOL_NOT_STARTED`` until one
    returns: a warning (the server still serves async, subprocess and remote tools)."""
    use = state.runtime.operations.tool_threads()
    if use is None:
        return {"name": "tool_threads", "ok": True}
    check: dict[str, Any] = {
        "name": "tool_threads",
        "ok": True,
        "capacity": use.capacity,
        "busy": use.busy,
        "stuck": use.stuck,
    }
    if use.stuck >= use.capacity:
        check["warning"] = (
            f"all {use.capacity} sync tool threads are held by tools whose calls already "
            "timed out: sync Python tools cannot start until one returns (restart to free them)"
        )
    return check


def _thread_gauges(state: ServerState) -> list[Metric]:
    use = state.runtime.operations.tool_threads()
    if use is None:
        return []
    return [
        gauge("charter_tool_threads", "Worker threads for sync Python tools.", {(): use.capacity}),
        gauge(
            "charter_tool_threads_busy",
            "Sync tool threads running a tool now.",
            {(): float(use.busy)},
        ),
        gauge(
            "charter_tool_threads_stuck",
            "Sync tool threads still running a tool whose call already answered (timed out).",
            {(): float(use.stuck)},
        ),
    ]


async def _shared_gauges(state: ServerState) -> list[Metric]:
    runtime = state.runtime
    try:
        pending = await runtime.approvals(status="pending", limit=_GAUGE_SCAN)
        unknown = await runtime.calls(tenant=None, state="unknown", limit=_GAUGE_SCAN)
    except CharterError:
        return []
    by_tool: dict[tuple[str, ...], float] = {}
    for call in unknown:
        key = (call.tool_id,)
        by_tool[key] = by_tool.get(key, 0.0) + 1
    return [
        gauge(
            "charter_pending_approvals",
            "Approvals waiting for a decision.",
            {(): float(len(pending))},
        ),
        gauge(
            "charter_unknown_calls",
            "Calls whose outcome is unknown and not yet resolved by an operator.",
            dict(sorted(by_tool.items())),
            labels=("tool",),
        ),
    ]


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {PROMETHEUS_TEXT: {"schema": {"type": "string"}}}}},
    summary="Prometheus metrics",
)
async def metrics(state: Annotated[ServerState, Depends(get_state)]) -> Response:
    body = state.metrics.render([*await _shared_gauges(state), *_thread_gauges(state)])
    return Response(body, media_type=PROMETHEUS_TEXT)
