"""Request and response models: the OpenAPI document's schemas, checked at the edge."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict
from pydantic.json_schema import SkipJsonSchema

from charter.contracts.text import MAX_OBJECTIVE, MAX_REASON

SchemaFormat = Literal["charter", "openai", "anthropic", "mcp"]
ApprovalStatus = Literal["pending", "approved", "rejected", "expired", "consumed"]
ProposalStatus = Literal[
    "draft", "validated", "blocked", "approved", "rejected", "applied", "expired"
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AttachmentRef(Strict):
    kind: str = Field(min_length=1, max_length=64)
    ref: str = Field(min_length=1, max_length=128)


class ContextRequest(Strict):
    profile: str = Field(min_length=1, max_length=128)
    agent: str | None = Field(default=None, max_length=128)
    objective: str | None = Field(default=None, json_schema_extra={"maxLength": MAX_OBJECTIVE})
    attachments: list[AttachmentRef] = Field(default_factory=list, max_length=64)
    run: str | None = Field(default=None, max_length=128, description="Record in this run.")


class OfferedToolOut(BaseModel):
    id: str
    name: str
    version: str
    digest: str
    effect: str
    call_limit: int | None = None


class ContextOut(BaseModel):
    context_id: str
    run_id: str
    build_digest: str
    principal: str
    tenant: str
    kind: str
    profile: str
    agent: str | None
    objective: str | None
    tools: list[OfferedToolOut]
    schema_digest: str
    token_estimate: int
    token_budget: int
    unresolved: list[str]
    created_at: str
    expires_at: str
    format: SchemaFormat
    tool_schemas: list[dict[str, Any]]


def _no_default(schema: dict[str, Any]) -> None:
    """An optional member that may not be null documents no ``default: null``."""
    schema.pop("default", None)


class CallRequest(BaseModel):
    """Documented shape of a call body (the server reads it strictly; see docs/server.md)."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(description="The tool's model-facing name or id.")
    call_id: str = Field(description="Your id for this call, unique within the context.")
    # Optional but never null: a member that is there is not an absent one (``null`` is
    # rejected ARGS_NOT_OBJECT; both members, one null included, are refused) — routes/calls.py
    arguments: dict[str, Any] | SkipJsonSchema[None] = Field(
        default=None,
        description="The arguments object (its exact text reaches the kernel); `{}` when "
        "neither this nor `arguments_json` is given. Not null.",
        json_schema_extra=_no_default,
    )
    arguments_json: str | SkipJsonSchema[None] = Field(
        default=None,
        description="Or: the arguments object as JSON text (not both). Not null.",
        json_schema_extra=_no_default,
    )
    approval_id: str | None = None
    task_id: str | None = Field(
        default=None,
        description="The running task of a catalog run this call belongs to (required there).",
    )


class ErrorOut(BaseModel):
    code: str
    reason: str
    message: str
    retryable: bool
    details: dict[str, Any] | None = None


class EnvelopeOut(BaseModel):
    schema_version: int
    call_id: str
    status: str
    data: Any = None
    artifact_ids: list[str]
    warnings: list[str]
    error: ErrorOut | None
    approval: dict[str, Any] | None = None
    metrics: dict[str, Any]
    trace: dict[str, str] | None
    context_id: str | None = None
    run_id: str | None = None
    tool: str | None = None


# Free text is bounded by the kernel, as on every other surface (``REASON_TOO_LONG``,
# ``OBJECTIVE_TOO_LONG``, naming the field and the limit: charter.contracts.text); the
# schema states the bound without checking it first as a bare REQUEST_INVALID.
_REASON_BOUND: JsonDict = {"maxLength": MAX_REASON}


class DecisionRequest(Strict):
    reason: str | None = Field(default=None, json_schema_extra=_REASON_BOUND)
    tenant: str | None = Field(
        default=None, max_length=128, description="With the approval token: whose approval."
    )


class EndRequest(Strict):
    reason: str = Field(
        min_length=1, json_schema_extra=_REASON_BOUND, description="Why (recorded, redacted)."
    )


class RunRequest(Strict):
    session_id: str | None = Field(default=None, max_length=128)


class EventsOut(BaseModel):
    run_id: str
    events: list[dict[str, Any]]
    next_after: int


class VerifyOut(BaseModel):
    run_id: str
    ok: bool
    events: int
    head_seq: int | None
    reason: str | None
    seq: int | None
    message: str | None
    artifact_id: str | None = None  # the artifact whose file failed its checksum or size
    path: str | None = None


class HealthOut(BaseModel):
    status: str
    version: str


class ReadyOut(BaseModel):
    status: str
    checks: list[dict[str, Any]]
