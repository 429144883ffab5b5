"""A small workflow store (``data/workflows.json``) and the copilot's tools over it.

Definitions have versions and a JSON graph (a list of activities); instances have a status
and timestamps; each tenant has its own activity catalog. Proposal tools never write: they
return a draft ``{"proposal": {...}}`` with diagnostics and a diff, and Charter stores it.
Only ``workflow.applyProposal`` writes, and only an approved proposal reaches it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import charter

DATA = Path(__file__).resolve().parent.parent / "data" / "workflows.json"

SEED: dict[str, Any] = {
    "acme": {
        "catalog": ["SendEmail", "Delay", "HttpRequest", "Approve"],
        "definitions": {},
        "instances": [
            {
                "id": "i-1",
                "definition_id": "billing",
                "status": "Finished",
                "started_at": "2025-01-01T10:00:00Z",
                "finished_at": "2025-01-01T10:05:00Z",
            },
            {
                "id": "i-2",
                "definition_id": "billing",
                "status": "Faulted",
                "started_at": "2025-01-02T10:00:00Z",
                "finished_at": "2025-01-02T10:01:00Z",
            },
        ],
    },
    "globex": {"catalog": ["Delay"], "definitions": {}, "instances": []},
}


def _load() -> dict[str, Any]:
    if not DATA.exists():
        DATA.parent.mkdir(parents=True, exist_ok=True)
        DATA.write_text(json.dumps(SEED, indent=2))
    loaded: dict[str, Any] = json.loads(DATA.read_text())
    return loaded


def _tenant(ctx: charter.Context) -> dict[str, Any]:
    data = _load()
    found: dict[str, Any] = data.get(
        ctx.tenant or "", {"catalog": [], "definitions": {}, "instances": []}
    )
    return found


def _validate(
    tenant: dict[str, Any], target: str | None, baseline: int | None, payload: dict[str, Any]
) -> tuple[list[dict[str, Any]], int | None]:
    diagnostics: list[dict[str, Any]] = []
    activities = payload.get("activities") or []
    if not activities:
        diagnostics.append(
            {
                "code": "draft.empty",
                "message": "the draft has no activities",
                "severity": "error",
                "path": "/activities",
            }
        )
    for index, activity in enumerate(activities):
        if activity.get("type") not in tenant["catalog"]:
            diagnostics.append(
                {
                    "code": "activity.unavailable",
                    "message": f"activity type {activity.get('type')!r} is not available",
                    "severity": "error",
                    "path": f"/activities/{index}/type",
                }
            )
    ids = [a.get("id") for a in activities]
    if len(ids) != len(set(ids)):
        diagnostics.append(
            {
                "code": "activity.duplicate_id",
                "message": "activity ids repeat",
                "severity": "error",
                "path": "/activities",
            }
        )
    current = None
    if target is not None:
        definition = tenant["definitions"].get(target)
        current = definition["version"] if definition else None
        if definition is None:
            diagnostics.append(
                {
                    "code": "target.missing",
                    "message": f"no definition {target!r}",
                    "severity": "error",
                    "path": "/target",
                }
            )
        elif baseline != current:
            diagnostics.append(
                {
                    "code": "baseline.stale",
                    "message": f"the definition is at version {current}, not {baseline}",
                    "severity": "error",
                    "path": "/baseline_version",
                }
            )
    elif payload.get("name") in tenant["definitions"]:
        diagnostics.append(
            {
                "code": "definition.exists",
                "message": "a definition has this name",
                "severity": "error",
                "path": "/name",
            }
        )
    return diagnostics, current


def graph_diff(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, Any]:
    old = {a["id"]: a for a in before}
    new = {a["id"]: a for a in after}
    return {
        "added": sorted(k for k in new if k not in old),
        "removed": sorted(k for k in old if k not in new),
        "changed": sorted(k for k in old.keys() & new.keys() if old[k] != new[k]),
    }


@charter.tool("workflow.getDefinition", permissions=["workflows:read"])
def get_definition(definition_id: str, ctx: charter.Context) -> dict[str, Any]:
    """Retrieve an authorized workflow definition summary and graph payload."""
    found = _tenant(ctx)["definitions"].get(definition_id)
    return found or {"definition_id": definition_id, "version": None, "activities": []}


@charter.tool("workflow.listDefinitions", permissions=["workflows:read"])
def list_definitions(ctx: charter.Context, query: str = "") -> dict[str, Any]:
    """Search authorized workflow definitions."""
    defs = _tenant(ctx)["definitions"].values()
    return {
        "definitions": [
            {"definition_id": d["definition_id"], "version": d["version"]}
            for d in defs
            if query in d["definition_id"]
        ]
    }


@charter.tool("instance.get", permissions=["workflows:read"])
def instance_get(instance_id: str, ctx: charter.Context) -> dict[str, Any]:
    """Retrieve an authorized workflow instance summary and state."""
    found = [i for i in _tenant(ctx)["instances"] if i["id"] == instance_id]
    return {"instance": found[0] if found else None}


@charter.tool("instance.search", permissions=["workflows:read"])
def instance_search(
    ctx: charter.Context,
    status: str | None = None,
    definition_id: str | None = None,
    started_after: str | None = None,
    started_before: str | None = None,
) -> dict[str, Any]:
    """Search authorized workflow instances by status, workflow, and time range."""
    out = []
    for i in _tenant(ctx)["instances"]:
        if (status and i["status"] != status) or (
            definition_id and i["definition_id"] != definition_id
        ):
            continue
        if started_after and i["started_at"] < started_after:
            continue
        if started_before and i["started_at"] >= started_before:
            continue
        out.append(i)
    return {"instances": out}


@charter.tool("activities.catalog", permissions=["workflows:read"])
def activities_catalog(ctx: charter.Context) -> dict[str, Any]:
    """Retrieve activity descriptors available to the tenant."""
    catalog = _tenant(ctx)["catalog"]
    return {"activities": [{"type": t} for t in catalog], "count": len(catalog)}


@charter.tool("workflow.validateDraft", effect="proposal", permissions=["workflows:propose"])
def validate_draft(
    payload: dict[str, Any],
    ctx: charter.Context,
    target: str | None = None,
    baseline_version: int | None = None,
) -> dict[str, Any]:
    """Validate a structured workflow draft without persisting it."""
    diagnostics, current = _validate(_tenant(ctx), target, baseline_version, payload)
    return {
        "diagnostics": diagnostics,
        "current_version": current,
        "valid": not any(d["severity"] == "error" for d in diagnostics),
    }


@charter.tool("workflow.proposeCreate", effect="proposal", permissions=["workflows:propose"])
def propose_create(
    name: str, activities: list[dict[str, Any]], ctx: charter.Context, rationale: str = ""
) -> dict[str, Any]:
    """Create a workflow proposal from structured draft output."""
    payload = {"name": name, "activities": activities}
    diagnostics, _ = _validate(_tenant(ctx), None, None, payload)
    return {
        "proposal": {
            "kind": "workflow",
            "target": None,
            "baseline_version": None,
            "payload": payload,
            "rationale": rationale,
            "warnings": [],
            "diagnostics": diagnostics,
            "diff": graph_diff([], activities),
        }
    }


@charter.tool("workflow.proposeUpdate", effect="proposal", permissions=["workflows:propose"])
def propose_update(
    definition_id: str,
    baseline_version: int,
    activities: list[dict[str, Any]],
    ctx: charter.Context,
    rationale: str = "",
) -> dict[str, Any]:
    """Create an update proposal from a baseline and structured patch."""
    tenant = _tenant(ctx)
    payload = {"name": definition_id, "activities": activities}
    diagnostics, _ = _validate(tenant, definition_id, baseline_version, payload)
    before = (tenant["definitions"].get(definition_id) or {}).get("activities", [])
    return {
        "proposal": {
            "kind": "workflow",
            "target": definition_id,
            "baseline_version": baseline_version,
            "payload": payload,
            "rationale": rationale,
            "warnings": [],
            "diagnostics": diagnostics,
            "diff": graph_diff(before, activities),
        }
    }


@charter.tool("workflow.applyProposal", effect="write", permissions=["workflows:apply"])
def apply_proposal(
    proposal_id: str,
    payload: dict[str, Any],
    ctx: charter.Context,
    target: str | None = None,
    baseline_version: int | None = None,
) -> dict[str, Any]:
    """Write a new definition version from an approved proposal (Charter calls this)."""
    data = _load()
    tenant = data[ctx.tenant or ""]
    name = target or payload["name"]
    current = tenant["definitions"].get(name)
    if current is not None and current.get("applied_by") == ctx.idempotency_key:
        return {"definition_id": name, "version": current["version"]}
    version = (current["version"] + 1) if current else 1
    tenant["definitions"][name] = {
        "definition_id": name,
        "version": version,
        "activities": payload["activities"],
        "proposal_id": proposal_id,
        "applied_by": ctx.idempotency_key,
    }
    DATA.write_text(json.dumps(data, indent=2))
    return {"definition_id": name, "version": version}
