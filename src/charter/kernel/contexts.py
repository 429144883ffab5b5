"""Contexts: what one principal may see and call, resolved once and recorded.

A context is resolved for a principal and a profile (plus optionally an agent, an objective,
attachments and a run). It fixes the tools offered — the profile's tools the principal may
see, intersected with the agent's scope — their model-facing schemas and a digest over them,
the resolved attachments, a token estimate checked against a budget, and an expiry. Calls
name a context; the kernel answers only for tools the context offered (the listing equals the
callable set). The context is recorded as a ``context_resolved`` event in its run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from charter.contracts.canonical import canonical_bytes, sha256_digest
from charter.contracts.model import ToolContract
from charter.errors import InvalidInput
from charter.kernel.principals import Principal
from charter.kernel.redaction import Redactor

SCHEMA_FORMATS = ("charter", "openai", "anthropic", "mcp")
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class OfferedTool:
    id: str
    name: str
    version: str
    digest: str
    effect: str
    call_limit: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "digest": self.digest,
            "effect": self.effect,
            "call_limit": self.call_limit,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    """One resolved attachment: text the model may read, attributed to its provider."""

    kind: str
    ref: str
    content: str
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "ref": self.ref,
            "bytes": len(self.content.encode("utf-8")),
            "truncated": self.truncated,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedContext:
    context_id: str
    run_id: str
    build_digest: str
    principal: str
    tenant: str
    kind: str
    profile: str
    agent: str | None
    objective: str | None
    tools: tuple[OfferedTool, ...]
    schema_digest: str
    token_estimate: int
    token_budget: int
    attachments: tuple[Attachment, ...] = ()
    unresolved: tuple[str, ...] = ()
    created_at: str = ""
    expires_at: str = ""
    metadata_expired_at: str | None = None  # the run's metadata expired (kernel/retention.py)
    _by_name: dict[str, OfferedTool] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_name.update({t.name: t for t in self.tools})
        self._by_name.update({t.id: t for t in self.tools})

    def offered(self, tool: str) -> OfferedTool | None:
        """The offered tool named ``tool`` (model-facing name or id), or None."""
        return self._by_name.get(tool)

    def payload(self) -> dict[str, Any]:
        """The ``context_resolved`` event payload (no attachment content, only its size)."""
        return {
            "context_id": self.context_id,
            "build_digest": self.build_digest,
            "principal": self.principal,
            "tenant": self.tenant,
            "kind": self.kind,
            "profile": self.profile,
            "agent": self.agent,
            "objective": self.objective,
            "tools": [t.to_dict() for t in self.tools],
            "schema_digest": self.schema_digest,
            "token_estimate": self.token_estimate,
            "token_budget": self.token_budget,
            "attachments": [a.to_dict() for a in self.attachments],
            "unresolved": list(self.unresolved),
            "expires_at": self.expires_at,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ResolvedContext:
        return cls(
            context_id=row["context_id"],
            run_id=row["run_id"],
            build_digest=row["build_digest"],
            principal=row["principal"],
            tenant=row["tenant"],
            kind=row["kind"],
            profile=row["profile"],
            agent=row.get("agent"),
            objective=row.get("objective"),
            tools=tuple(OfferedTool(**t) for t in row["tools"]),
            schema_digest=row["schema_digest"],
            token_estimate=row["token_estimate"],
            token_budget=row["token_budget"],
            attachments=(),
            unresolved=tuple(row.get("unresolved", ())),
            created_at=row["created_at"],
            expires_at=row["expires_at"],
            metadata_expired_at=row.get("metadata_expired_at"),
        )


def model_schema(contract: ToolContract) -> dict[str, Any]:
    """The model-facing description of one tool, in Charter's neutral form."""
    out: dict[str, Any] = {
        "name": contract.name,
        "description": contract.description,
        "input_schema": contract.args_schema,
    }
    if contract.result_schema is not None:
        out["output_schema"] = contract.result_schema
    return out


def schema_digest(contracts: Sequence[ToolContract]) -> str:
    return sha256_digest([model_schema(c) for c in contracts])


def tool_schemas(contracts: Iterable[ToolContract], fmt: str = "charter") -> list[dict[str, Any]]:
    """Tool schemas for a provider: ``charter``, ``openai``, ``anthropic`` or ``mcp``."""
    out = []
    for c in contracts:
        if fmt == "openai":
            out.append(
                {
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "description": c.description,
                        "parameters": c.args_schema,
                    },
                }
            )
        elif fmt == "anthropic":
            out.append(
                {"name": c.name, "description": c.description, "input_schema": c.args_schema}
            )
        elif fmt == "mcp":
            entry: dict[str, Any] = {
                "name": c.name,
                "title": c.title or c.id,
                "description": c.description,
                "inputSchema": c.args_schema,
                "annotations": {
                    "title": c.title or c.id,
                    "readOnlyHint": c.read_only,
                    "destructiveHint": bool(c.annotations.destructive),
                    "idempotentHint": bool(c.annotations.idempotent),
                    "openWorldHint": c.annotations.open_world,
                },
            }
            if c.result_schema is not None:
                entry["outputSchema"] = c.result_schema
            out.append(entry)
        elif fmt == "charter":
            out.append(model_schema(c))
        else:
            raise ValueError(f"unknown schema format {fmt!r}; use one of {SCHEMA_FORMATS}")
    return out


def check_attachment(attachment: object, index: int, redactor: Redactor) -> None:
    """A context's attachment reference is a ``(kind, ref)`` pair of strings — anything else
    from a library caller is ``ATTACHMENT_INVALID`` (it raised ValueError or TypeError) —
    holding no secret (it is kept as an id: ``IDENTIFIER_SECRET``)."""
    if (
        not isinstance(attachment, tuple | list)
        or len(attachment) != 2
        or not all(isinstance(part, str) for part in attachment)
    ):
        raise InvalidInput(
            f"attachments[{index}] must be a (kind, ref) pair of strings",
            reason="ATTACHMENT_INVALID",
            details={"field": f"attachments[{index}]"},
        )
    for part in attachment:
        redactor.refuse_in_id(part, f"attachments[{index}]")


def estimate_tokens(contracts: Sequence[ToolContract], attachments: Sequence[Attachment]) -> int:
    """A conservative token estimate: about four bytes of JSON or text per token."""
    size = len(canonical_bytes([model_schema(c) for c in contracts]))
    size += sum(len(a.content.encode("utf-8")) for a in attachments)
    return (size + 3) // 4


# ---------------------------------------------------------------------------------------
# Context providers


class ContextProvider(Protocol):
    """Resolves attachment references for a principal, tenant-safely.

    A reference to another tenant's material must resolve to nothing (``None``), never to
    the material itself; the kernel records unresolved references in the context event.
    """

    kind: str

    async def resolve(self, principal: Principal, ref: str) -> Attachment | None: ...


class FileContextProvider:
    """The built-in provider: Markdown files under ``<root>/<tenant>/<ref>.md``.

    A reference is a plain name (no path separators); the tenant directory comes from the
    principal, never from the reference, so another tenant's file cannot be named.
    """

    def __init__(self, root: Path, *, kind: str = "docs", max_bytes: int = 64 * 1024) -> None:
        self.root = root
        self.kind = kind
        self.max_bytes = max_bytes

    async def resolve(self, principal: Principal, ref: str) -> Attachment | None:
        if not _REF.match(ref) or ".." in ref or not _REF.match(principal.tenant):
            return None
        path = self.root / principal.tenant / f"{ref}.md"
        try:
            resolved = path.resolve(strict=True)
            resolved.relative_to((self.root / principal.tenant).resolve(strict=True))
            data = resolved.read_bytes()
        except (OSError, ValueError):
            return None
        truncated = len(data) > self.max_bytes
        text = data[: self.max_bytes].decode("utf-8", errors="replace")
        return Attachment(kind=self.kind, ref=ref, content=text, truncated=truncated)
