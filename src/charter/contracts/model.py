"""The tool contract: an immutable description of one callable tool (DESIGN §2).

A contract is what a Build pins and what every call is checked against. Its digest is
``sha256:`` + hex of the RFC 8785 canonical JSON of :meth:`ToolContract.canonical`, which
includes every field with its default applied, so two spellings of the same contract (one
omitting a default, one stating it) have the same digest.
"""

from __future__ import annotations

import re
from enum import StrEnum
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from charter.contracts.canonical import sha256_digest
from charter.errors import ContractError, Problem

TOOL_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?:[.-][A-Za-z0-9_]+)*$")
TOOL_ID_MAX = 128
MODEL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
PERMISSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:*-]{0,127}$")
JSON_POINTER = re.compile(r"^(?:/(?:[^~/]|~[01])*)*$")
MEDIA_TYPE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$")

EMPTY_ARGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}


class Effect(StrEnum):
    READ = "read"
    WRITE = "write"
    PROPOSAL = "proposal"


class Danger(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class Approval(StrEnum):
    NONE = "none"
    REQUIRED = "required"


class Tenancy(StrEnum):
    TENANT_SCOPED = "tenant_scoped"
    HOST_SCOPED = "host_scoped"
    CROSS_TENANT_DENIED = "cross_tenant_denied"


class Oversize(StrEnum):
    """What happens to a result larger than ``max_result_bytes``."""

    TRUNCATE = "truncate"  # replaced by {"truncated": true, "maxBytes": N}
    FAIL = "fail"  # the call fails with resource_limit


DEFAULT_DANGER = {
    Effect.READ: Danger.LOW,
    Effect.PROPOSAL: Danger.MEDIUM,
    Effect.WRITE: Danger.HIGH,
}


def default_name(tool_id: str) -> str:
    """The model-facing name derived from an id.

    ``workflow.getDefinition`` → ``workflow_getDefinition``.
    """
    return tool_id.replace(".", "_")


class Annotations(BaseModel):
    """MCP-style hints. ``None`` means "derive from the effect"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool = False


class Upstream(BaseModel):
    """A tool served by a downstream MCP server, pinned by digest (see ``docs/mcp.md``).

    ``digest`` covers the upstream tool's name, description and input schema; readiness
    compares it with what the server lists now, so a changed description or schema makes the
    tool not ready.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: str = Field(min_length=1, max_length=128)
    name: str = Field(min_length=1, max_length=128)
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")


class ArtifactSpec(BaseModel):
    """What a tool does with artifact files (see ``docs/artifacts.md``, "Tools that write").

    ``writes``: the kernel gives the call a confined, create-only writer for its run
    (``ctx.artifacts``) and registers what it wrote. ``inputs``: top-level argument names whose
    value is an artifact id (or a list of them) that must be a registered artifact of the same
    run, checksum-verified before the call. ``media_types``: the media types the tool may
    write (empty: any).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    writes: bool = False
    inputs: tuple[str, ...] = ()
    media_types: tuple[str, ...] = ()

    @field_validator("inputs")
    @classmethod
    def _check_inputs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", item):
                raise ValueError(f"{item!r} is not an argument name")
        return tuple(sorted(set(value)))

    @field_validator("media_types")
    @classmethod
    def _check_media_types(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not MEDIA_TYPE.fullmatch(item):
                raise ValueError(f"{item!r} is not a lower-case type/subtype media type")
        return tuple(sorted(set(value)))

    @property
    def empty(self) -> bool:
        return not (self.writes or self.inputs or self.media_types)


class ToolContract(BaseModel):
    """One tool's versioned contract. Immutable; build with :func:`make_contract`."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)

    id: str
    name: str = ""
    version: str = "1.0.0"
    title: str | None = None
    description: str
    args_schema: dict[str, Any] = Field(default_factory=lambda: dict(EMPTY_ARGS_SCHEMA))
    result_schema: dict[str, Any] | None = None
    effect: Effect = Effect.READ
    annotations: Annotations = Field(default_factory=Annotations)
    danger: Danger | None = None
    approval: Approval | None = None
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    call_limit: int | None = Field(default=None, ge=1)
    max_result_bytes: int = Field(default=65536, ge=64, le=64 * 1024 * 1024)
    on_oversize: Oversize = Oversize.TRUNCATE
    permissions: tuple[str, ...] = ()
    tenancy: Tenancy = Tenancy.TENANT_SCOPED
    agent_scopes: tuple[str, ...] = ()
    redact: tuple[str, ...] = ()
    # argument fields whose (redacted) values events and call rows keep; others: shape only
    audit: tuple[str, ...] = ()
    store_result: bool = True  # False: the receipt keeps the result's fingerprint only
    upstream: Upstream | None = None  # a downstream MCP server's tool, pinned by digest
    artifacts: ArtifactSpec | None = None  # files the tool writes or reads (docs/artifacts.md)
    # a tool that runs other tools (docs/kernel.md, "Delegation"): its own call records only
    # events; each call made inside it is governed on its own and names it as parent span
    delegates_execution: bool = False

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if len(value) > TOOL_ID_MAX or not TOOL_ID.match(value):
            raise ValueError(
                "a tool id is dotted words of letters, digits and underscores "
                f"(e.g. workflow.getDefinition), at most {TOOL_ID_MAX} characters"
            )
        return value

    @field_validator("version")
    @classmethod
    def _check_version(cls, value: str) -> str:
        if not SEMVER.match(value):
            raise ValueError("version must be SemVer 2.0 (e.g. 1.2.0)")
        return value

    @field_validator("description")
    @classmethod
    def _check_description(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("a tool needs a description: the model reads it to choose tools")
        return value

    @field_validator("permissions", "agent_scopes")
    @classmethod
    def _check_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not PERMISSION.match(item):
                raise ValueError(f"{item!r} is not a valid permission or scope name")
        return tuple(sorted(set(value)))

    @field_validator("redact", "audit")
    @classmethod
    def _check_pointers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not item or not JSON_POINTER.match(item):
                raise ValueError(f"{item!r} is not a JSON pointer (e.g. /password)")
        return tuple(sorted(set(value)))

    @model_validator(mode="after")
    def _apply_defaults(self) -> ToolContract:
        # Frozen model: fill derived defaults through object.__setattr__ once, here.
        name = self.name or default_name(self.id)
        if not MODEL_NAME.match(name):
            raise ValueError(
                f"model-facing name {name!r} must match {MODEL_NAME.pattern}; set `name` explicitly"
            )
        approval = self.approval
        if self.effect is Effect.WRITE:
            if approval is Approval.NONE:
                raise ValueError("every write tool requires approval: remove `approval: none`")
            approval = Approval.REQUIRED
        elif approval is None:
            approval = Approval.NONE
        ann = self.annotations
        annotations = Annotations(
            destructive=ann.destructive
            if ann.destructive is not None
            else self.effect is Effect.WRITE,
            idempotent=ann.idempotent if ann.idempotent is not None else self.effect is Effect.READ,
            open_world=ann.open_world,
        )
        if self.delegates_execution and self.artifacts is not None and not self.artifacts.empty:
            raise ValueError(
                "a tool that delegates execution writes and reads no artifacts: each call it "
                "makes declares and registers its own (remove `artifacts`)"
            )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "approval", approval)
        object.__setattr__(self, "danger", self.danger or DEFAULT_DANGER[self.effect])
        object.__setattr__(self, "annotations", annotations)
        return self

    def canonical(self) -> dict[str, Any]:
        """The JSON form that is hashed: every field, defaults applied, enums as strings.

        ``upstream``, ``artifacts``, ``audit``, ``store_result`` and ``delegates_execution``
        appear only when set (and not empty or not the default), so contracts without them
        keep their digests.
        """
        out = self.model_dump(mode="json")
        if not out.get("audit"):
            out.pop("audit", None)
        if out.get("store_result") is True:
            out.pop("store_result", None)
        if out.get("upstream") is None:
            out.pop("upstream", None)
        if self.artifacts is None or self.artifacts.empty:
            out.pop("artifacts", None)
        if not out.get("delegates_execution"):
            out.pop("delegates_execution", None)
        return out

    @cached_property
    def digest(self) -> str:
        return sha256_digest(self.canonical())

    @property
    def requires_approval(self) -> bool:
        return self.approval is Approval.REQUIRED

    @property
    def read_only(self) -> bool:
        return self.effect is Effect.READ

    @property
    def writes_artifacts(self) -> bool:
        return self.artifacts is not None and self.artifacts.writes

    @property
    def artifact_inputs(self) -> tuple[str, ...]:
        return self.artifacts.inputs if self.artifacts is not None else ()


def _pointer(loc: tuple[int | str, ...]) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in loc)


def make_contract(
    data: dict[str, Any], *, file: str | None = None, where: str = ""
) -> tuple[ToolContract | None, list[Problem]]:
    """Validate raw contract data; return the contract or every problem found.

    Schema-subset checks are not done here (see :func:`check_contract_schemas`), only the
    shape and defaults of the contract itself.
    """
    tool_id = data.get("id") if isinstance(data.get("id"), str) else None
    try:
        return ToolContract.model_validate(data), []
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_input=False, include_url=False):
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(
                Problem(
                    message=msg,
                    file=file,
                    tool=tool_id,
                    pointer=where + _pointer(tuple(err["loc"])),
                )
            )
        return None, problems


def contract_or_raise(data: dict[str, Any], *, file: str | None = None) -> ToolContract:
    contract, problems = make_contract(data, file=file)
    if contract is None:
        first = problems[0]
        raise ContractError(first.message, tool=first.tool, file=file, pointer=first.pointer)
    return contract
