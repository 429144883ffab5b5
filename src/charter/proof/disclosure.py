"""Model-disclosure reports: what an application actually sent the model, compared with what
its context offered (the SEIF seed's "offered tools" versus "reported model disclosure").

An application (or the chat orchestrator, per model request) reports, for one context: the
tool ids and versions it put in front of the model, the digest of the schemas it sent, the
attachment ids it included and the number of tokens it sent. The report is recorded as a
``disclosure_reported`` event in the context's run, as given — a report naming a tool the
context never offered is kept, because that is exactly what the comparison must show.

:func:`compare` is pure: from a run's ``context_resolved`` and ``disclosure_reported``
events it says, per context, which tools were reported but never offered, which were offered
but never disclosed (in a context that has reports), versions and schema digests that differ
from the offer, attachments the context never resolved and token counts over the budget.
``charter runs disclosure RUN``, the console and ``GET /v1/runs/{id}/disclosures`` show it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from charter.errors import InvalidInput, PermissionDenied
from charter.kernel.principals import Principal
from charter.kernel.redaction import Redactor
from charter.ledger.events import Event, NewEvent

EVENT_TYPE = "disclosure_reported"
MAX_TOOLS = 512
MAX_ATTACHMENTS = 256

ToolIdText = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
]
VersionText = Annotated[
    str, StringConstraints(min_length=1, max_length=64, pattern=r"^[0-9A-Za-z][0-9A-Za-z.+-]*$")
]
DigestText = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
AttachmentText = Annotated[
    str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")
]
LabelText = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:/@+-]+$")
]


class DisclosedTool(BaseModel):
    """One tool as it was sent to the model: its Charter id and contract version."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: ToolIdText
    version: VersionText


class DisclosureReport(BaseModel):
    """``POST /v1/contexts/{id}/disclosures``: what one model request actually carried."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: list[DisclosedTool] = Field(max_length=MAX_TOOLS)
    schema_digest: DigestText = Field(
        description="sha256 over the model-facing schemas sent (as the context's schema_digest)"
    )
    attachment_ids: list[AttachmentText] = Field(
        default_factory=list, max_length=MAX_ATTACHMENTS, description="'kind:ref' of each"
    )
    tokens: int = Field(ge=0, le=100_000_000, strict=True, description="tokens actually sent")
    tokens_estimated: bool = Field(
        default=False, strict=True, description="the token count is an estimate, not a count"
    )
    request_id: LabelText | None = Field(default=None, description="the model request's id")
    model: LabelText | None = None

    @field_validator("tools")
    @classmethod
    def _once(cls, tools: list[DisclosedTool]) -> list[DisclosedTool]:
        ids = [t.id for t in tools]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"names {', '.join(dupes)} more than once")
        return tools


def parse_report(raw: Mapping[str, Any] | DisclosureReport) -> DisclosureReport:
    """A validated report, or ``InvalidInput`` (``DISCLOSURE_INVALID``) naming the field."""
    if isinstance(raw, DisclosureReport):
        return raw
    if not isinstance(raw, Mapping):
        raise InvalidInput("a disclosure report is an object", reason="DISCLOSURE_INVALID")
    try:
        return DisclosureReport.model_validate(dict(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "/".join(str(p) for p in first["loc"]) or "(body)"
        raise InvalidInput(
            f"disclosure report field {where}: {first['msg']}",
            reason="DISCLOSURE_INVALID",
            details={"field": where},
        ) from None


def report_event(
    report: DisclosureReport,
    *,
    context_id: str,
    reported_by: str,
    source: Literal["application", "chat"],
) -> NewEvent:
    """The ledger event recording ``report`` (facts only; the comparison is read later)."""
    payload: dict[str, Any] = {
        "context_id": context_id,
        "reported_by": reported_by,
        "source": source,
        "tools": [{"id": t.id, "version": t.version} for t in report.tools],
        "schema_digest": report.schema_digest,
        "attachment_ids": list(report.attachment_ids),
        "tokens": report.tokens,
        "tokens_estimated": report.tokens_estimated,
    }
    if report.request_id is not None:
        payload["request_id"] = report.request_id
    if report.model is not None:
        payload["model"] = report.model
    return NewEvent(type=EVENT_TYPE, payload=payload)


def check_context(context: Any, tenant: str) -> None:
    """An unknown context, or another tenant's, answers ``CONTEXT_NOT_FOUND`` (404)."""
    if context is None or context.tenant != tenant:
        raise PermissionDenied("no such context", reason="CONTEXT_NOT_FOUND")


# ---------------------------------------------------------------------------------------
# comparing offered with reported


@dataclass(slots=True, kw_only=True)
class ContextDisclosure:
    """One context: what it offered, what was reported, and what differs."""

    context_id: str
    profile: str | None
    agent: str | None
    offered: dict[str, str]  # tool id -> version
    schema_digest: str
    token_budget: int | None
    attachments: list[str]
    reports: list[dict[str, Any]] = field(default_factory=list)

    def flags(self) -> dict[str, Any]:
        reported: set[str] = set()
        unoffered: set[str] = set()
        versions: dict[str, list[str]] = {}
        attachments: set[str] = set()
        digests: set[str] = set()
        over: list[int] = []
        for r in self.reports:
            for t in r["tools"]:
                reported.add(t["id"])
                if t["id"] not in self.offered:
                    unoffered.add(t["id"])
                elif t["version"] != self.offered[t["id"]]:
                    versions.setdefault(t["id"], [])
                    if t["version"] not in versions[t["id"]]:
                        versions[t["id"]].append(t["version"])
            attachments.update(a for a in r["attachment_ids"] if a not in self.attachments)
            if r["schema_digest"] != self.schema_digest:
                digests.add(r["schema_digest"])
            if self.token_budget is not None and r["tokens"] > self.token_budget:
                over.append(r["tokens"])
        undisclosed = sorted(set(self.offered) - reported) if self.reports else []
        return {
            "reported_not_offered": sorted(unoffered),
            "offered_not_disclosed": undisclosed,
            "version_mismatch": dict(sorted(versions.items())),
            "schema_digest_mismatch": sorted(digests),
            "unknown_attachments": sorted(attachments),
            "over_token_budget": over,
        }

    def to_dict(self) -> dict[str, Any]:
        flags = self.flags()
        return {
            "context_id": self.context_id,
            "profile": self.profile,
            "agent": self.agent,
            "offered": [{"id": k, "version": v} for k, v in self.offered.items()],
            "schema_digest": self.schema_digest,
            "token_budget": self.token_budget,
            "attachments": self.attachments,
            "reports": self.reports,
            "flags": flags,
            "flagged": any(bool(v) for v in flags.values()),
        }


@dataclass(slots=True, kw_only=True)
class RunDisclosure:
    run_id: str
    contexts: list[ContextDisclosure]
    orphans: list[dict[str, Any]] = field(default_factory=list)  # reports naming no context

    @property
    def flagged(self) -> bool:
        return bool(self.orphans) or any(c.to_dict()["flagged"] for c in self.contexts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "flagged": self.flagged,
            "contexts": [c.to_dict() for c in self.contexts],
            "reports_without_context": self.orphans,
        }


def _report_view(event: Event) -> dict[str, Any]:
    p = event.payload
    return {
        "seq": event.seq,
        "at": event.at,
        "reported_by": p.get("reported_by"),
        "source": p.get("source"),
        "request_id": p.get("request_id"),
        "model": p.get("model"),
        "tools": list(p.get("tools") or []),
        "schema_digest": p.get("schema_digest"),
        "attachment_ids": list(p.get("attachment_ids") or []),
        "tokens": p.get("tokens", 0),
        "tokens_estimated": bool(p.get("tokens_estimated", False)),
    }


def compare(run_id: str, events: Iterable[Event]) -> RunDisclosure:
    """Offered against reported, per context, from a run's events. Pure: no I/O."""
    contexts: dict[str, ContextDisclosure] = {}
    orphans: list[dict[str, Any]] = []
    for event in events:
        p = event.payload
        if event.type == "context_resolved":
            contexts[p["context_id"]] = ContextDisclosure(
                context_id=p["context_id"],
                profile=p.get("profile"),
                agent=p.get("agent"),
                offered={t["id"]: t["version"] for t in p.get("tools") or []},
                schema_digest=p.get("schema_digest", ""),
                token_budget=p.get("token_budget"),
                attachments=[f"{a['kind']}:{a['ref']}" for a in p.get("attachments") or []],
            )
        elif event.type == EVENT_TYPE:
            found = contexts.get(p.get("context_id", ""))
            view = _report_view(event)
            if found is None:
                orphans.append({**view, "context_id": p.get("context_id")})
            else:
                found.reports.append(view)
    return RunDisclosure(run_id=run_id, contexts=list(contexts.values()), orphans=orphans)


def report_flags(
    context: Any, report: DisclosureReport, *, attachments: Sequence[str]
) -> dict[str, Any]:
    """The flags one report raises against its context (the answer to a report);
    ``attachments`` are the ids (``kind:ref``) the context resolved."""
    one = ContextDisclosure(
        context_id=context.context_id,
        profile=context.profile,
        agent=context.agent,
        offered={t.id: t.version for t in context.tools},
        schema_digest=context.schema_digest,
        token_budget=context.token_budget,
        attachments=list(attachments),
    )
    one.reports.append(
        {
            "tools": [{"id": t.id, "version": t.version} for t in report.tools],
            "schema_digest": report.schema_digest,
            "attachment_ids": list(report.attachment_ids),
            "tokens": report.tokens,
        }
    )
    return one.flags()


class _Runtime(Protocol):
    """What :func:`record` needs of the runtime (proof sits below it)."""

    async def get_context(self, context_id: str, *, tenant: str | None = None) -> Any: ...

    async def context_record(self, run_id: str, context_id: str) -> Any: ...

    async def record(self, run_id: str, events: Sequence[NewEvent]) -> None: ...

    @property
    def redactor(self) -> Redactor: ...


async def record(
    runtime: _Runtime,
    context_id: str,
    raw: Mapping[str, Any] | DisclosureReport,
    principal: Principal,
    source: str = "",
) -> dict[str, Any]:
    """Validate, check the context (the caller's tenant), append the event; the answer is the
    recorded facts with the flags this report raises against its context."""
    report = parse_report(raw)
    context = await runtime.get_context(context_id, tenant=principal.tenant)
    check_context(context, principal.tenant)
    row = await runtime.context_record(context.run_id, context_id)
    stored = (row.row.get("attachments") if row is not None else None) or []
    attachments = [f"{a['kind']}:{a['ref']}" for a in stored]
    kind: Literal["application", "chat"] = "chat" if source == "chat" else "application"
    event = report_event(report, context_id=context_id, reported_by=principal.name, source=kind)
    payload = dict(event.payload)
    for name in ("model", "request_id"):  # the client's free text: no known secret is kept
        if isinstance(payload.get(name), str):
            payload[name] = runtime.redactor.redact_text(payload[name])
    event = NewEvent(type=event.type, payload=payload, at=event.at)
    await runtime.record(context.run_id, [event])
    flags = report_flags(context, report, attachments=attachments)
    return {
        **event.payload,
        "run_id": context.run_id,
        "flags": flags,
        "flagged": any(bool(v) for v in flags.values()),
    }
