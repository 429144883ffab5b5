"""Parse ``workflows/<slug>/WORKFLOW.md`` and ``skills/<name>/SKILL.md`` (YAML front matter).

Parsing is pure: it turns file text into :class:`CatalogEntry` records and collects every
:class:`~charter.errors.Problem` with its file and field pointer. Cross-entry rules (unknown
dependencies, cycles, task DAGs, tools, permissions) live in
:mod:`charter.project.catalog_validate`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from charter.contracts.model import SEMVER, TOOL_ID
from charter.errors import Problem, ProjectError
from charter.project.yamlio import load_yaml_text, read_project_text

Kind = Literal["workflow", "skill"]
SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
ARTIFACT_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
PERMISSIONS = ("artifact:read", "artifact:write", "compute:execute", "network:read")
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n(.*))?\Z", re.S)
FILES: dict[Kind, tuple[str, str]] = {
    "workflow": ("workflows", "WORKFLOW.md"),
    "skill": ("skills", "SKILL.md"),
}


def _names(values: list[str], pattern: re.Pattern[str], what: str) -> list[str]:
    for v in values:
        if not pattern.match(v):
            raise ValueError(f"{v!r} is not a valid {what}")
    if len(set(values)) != len(values):
        raise ValueError(f"lists a {what} more than once")
    return values


class TaskModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    role: str = Field(min_length=1)
    profile: str = Field(min_length=1)
    title: str = ""
    depends_on: list[str] = Field(default_factory=list)
    required_tools: list[str] = Field(default_factory=list)
    input_artifacts: list[str] = Field(default_factory=list)
    output_artifacts: list[str] = Field(default_factory=list)
    acceptance_criteria: list[str] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not SLUG.match(v):
            raise ValueError(f"task id {v!r} must match {SLUG.pattern}")
        return v

    @field_validator("required_tools")
    @classmethod
    def _tools(cls, v: list[str]) -> list[str]:
        return _names(v, TOOL_ID, "tool id")

    @field_validator("input_artifacts", "output_artifacts")
    @classmethod
    def _arts(cls, v: list[str]) -> list[str]:
        return _names(v, ARTIFACT_TYPE, "artifact type")


class EntryModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = Field(min_length=1)
    version: str
    depends_on: list[str] = Field(default_factory=list)
    profiles: list[str] = Field(min_length=1)
    permissions: list[str] = Field(min_length=1)
    input_artifacts: list[str] = Field(default_factory=list)
    output_artifacts: list[str] = Field(default_factory=list)

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not SEMVER.match(v):
            raise ValueError(f"version {v!r} is not strict SemVer 2.0 (e.g. 1.0.0)")
        return v

    @field_validator("permissions")
    @classmethod
    def _perms(cls, v: list[str]) -> list[str]:
        for p in v:
            if p not in PERMISSIONS:
                raise ValueError(f"permission {p!r} is not one of {', '.join(PERMISSIONS)}")
        return v

    @field_validator("input_artifacts", "output_artifacts")
    @classmethod
    def _arts(cls, v: list[str]) -> list[str]:
        return _names(v, ARTIFACT_TYPE, "artifact type")


class WorkflowModel(EntryModel):
    tasks: list[TaskModel] = Field(default_factory=list)
    preflight_tools: list[str] = Field(default_factory=list)
    required_tools: list[str] = Field(default_factory=list)
    optional_tools: list[str] = Field(default_factory=list)

    @field_validator("preflight_tools", "required_tools", "optional_tools")
    @classmethod
    def _tools(cls, v: list[str]) -> list[str]:
        return _names(v, TOOL_ID, "tool id")


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskContract:
    id: str
    role: str
    profile: str
    title: str
    depends_on: tuple[str, ...]
    required_tools: tuple[str, ...]
    input_artifacts: tuple[str, ...]
    output_artifacts: tuple[str, ...]
    acceptance_criteria: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "role": self.role,
            "profile": self.profile,
            "title": self.title,
            "depends_on": list(self.depends_on),
            "required_tools": list(self.required_tools),
            "input_artifacts": list(self.input_artifacts),
            "output_artifacts": list(self.output_artifacts),
            "acceptance_criteria": list(self.acceptance_criteria),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskContract:
        return cls(
            id=d["id"],
            role=d["role"],
            profile=d["profile"],
            title=d.get("title", ""),
            depends_on=tuple(d["depends_on"]),
            required_tools=tuple(d["required_tools"]),
            input_artifacts=tuple(d["input_artifacts"]),
            output_artifacts=tuple(d["output_artifacts"]),
            acceptance_criteria=tuple(d["acceptance_criteria"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogEntry:
    """One parsed WORKFLOW.md or SKILL.md (without its dependencies' hashes)."""

    kind: Kind
    name: str
    source: str  # relative to the project, POSIX
    description: str
    version: str
    depends_on: tuple[str, ...]
    profiles: tuple[str, ...]
    permissions: tuple[str, ...]
    input_artifacts: tuple[str, ...]
    output_artifacts: tuple[str, ...]
    procedure: str
    tasks: tuple[TaskContract, ...] = ()
    preflight_tools: tuple[str, ...] = ()
    required_tools: tuple[str, ...] = ()
    optional_tools: tuple[str, ...] = ()

    @property
    def tools(self) -> tuple[str, ...]:
        """Every tool the workflow may use: preflight, required and optional."""
        seen = dict.fromkeys((*self.preflight_tools, *self.required_tools, *self.optional_tools))
        return tuple(seen)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "source": self.source,
            "description": self.description,
            "version": self.version,
            "depends_on": list(self.depends_on),
            "profiles": list(self.profiles),
            "permissions": sorted(self.permissions),
            "input_artifacts": list(self.input_artifacts),
            "output_artifacts": list(self.output_artifacts),
            "procedure": self.procedure,
        }
        if self.kind == "workflow":
            out |= {
                "tasks": [t.to_dict() for t in self.tasks],
                "preflight_tools": list(self.preflight_tools),
                "required_tools": list(self.required_tools),
                "optional_tools": list(self.optional_tools),
            }
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CatalogEntry:
        return cls(
            kind=d["kind"],
            name=d["name"],
            source=d["source"],
            description=d["description"],
            version=d["version"],
            depends_on=tuple(d["depends_on"]),
            profiles=tuple(d["profiles"]),
            permissions=tuple(d["permissions"]),
            input_artifacts=tuple(d["input_artifacts"]),
            output_artifacts=tuple(d["output_artifacts"]),
            procedure=d["procedure"],
            tasks=tuple(TaskContract.from_dict(t) for t in d.get("tasks", [])),
            preflight_tools=tuple(d.get("preflight_tools", [])),
            required_tools=tuple(d.get("required_tools", [])),
            optional_tools=tuple(d.get("optional_tools", [])),
        )


def split_front_matter(text: str, *, file: str) -> tuple[Any, str]:
    """``(front matter data, Markdown procedure)``; raises :class:`ProjectError`."""
    m = _FRONT.match(text.lstrip("\ufeff"))
    if m is None:
        raise ProjectError("must start with YAML front matter between '---' lines", file=file)
    return load_yaml_text(m.group(1), file=file), (m.group(2) or "").strip() + "\n"


def parse_entry(
    kind: Kind, slug: str, text: str, *, file: str
) -> tuple[CatalogEntry | None, list[Problem]]:
    """Parse one catalog file whose folder is ``slug``; never raises for a bad file."""
    try:
        data, procedure = split_front_matter(text, file=file)
    except ProjectError as exc:
        return None, [exc.problem]
    if not isinstance(data, dict):
        return None, [Problem(message="front matter must be a YAML mapping", file=file, pointer="")]
    model_cls = WorkflowModel if kind == "workflow" else EntryModel
    try:
        model = model_cls.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_input=False, include_url=False):
            pointer = "".join(f"/{part}" for part in err["loc"])
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = "unknown field (see docs/workflows.md for the fields allowed here)"
            problems.append(Problem(message=message, file=file, pointer=pointer))
        return None, problems
    if model.name != slug:
        return None, [
            Problem(
                message=f"name {model.name!r} must equal the folder name {slug!r}",
                file=file,
                pointer="/name",
            )
        ]
    extra: dict[str, Any] = {}
    if isinstance(model, WorkflowModel):
        extra = {
            "tasks": tuple(
                TaskContract(
                    id=t.id,
                    role=t.role,
                    profile=t.profile,
                    title=t.title,
                    depends_on=tuple(t.depends_on),
                    required_tools=tuple(t.required_tools),
                    input_artifacts=tuple(t.input_artifacts),
                    output_artifacts=tuple(t.output_artifacts),
                    acceptance_criteria=tuple(t.acceptance_criteria),
                )
                for t in model.tasks
            ),
            "preflight_tools": tuple(model.preflight_tools),
            "required_tools": tuple(model.required_tools),
            "optional_tools": tuple(model.optional_tools),
        }
    entry = CatalogEntry(
        kind=kind,
        name=model.name,
        source=file,
        description=model.description,
        version=model.version,
        depends_on=tuple(model.depends_on),
        profiles=tuple(model.profiles),
        permissions=tuple(model.permissions),
        input_artifacts=tuple(model.input_artifacts),
        output_artifacts=tuple(model.output_artifacts),
        procedure=procedure,
        **extra,
    )
    return entry, []


def load_catalog(root: Path) -> tuple[list[CatalogEntry], list[Problem]]:
    """Every ``workflows/*/WORKFLOW.md`` and ``skills/*/SKILL.md`` under ``root``."""
    entries: list[CatalogEntry] = []
    problems: list[Problem] = []
    for kind, (folder, filename) in FILES.items():
        base = root / folder
        if not base.is_dir():
            continue
        for sub in sorted(p for p in base.iterdir() if p.is_dir()):
            file = f"{folder}/{sub.name}/{filename}"
            path = sub / filename
            if path.is_symlink() or not path.is_file():
                problems.append(
                    Problem(message=f"missing {filename} (or not a regular file)", file=file)
                )
                continue
            if not SLUG.match(sub.name):
                problems.append(
                    Problem(message=f"folder name must match {SLUG.pattern}", file=file)
                )
                continue
            try:
                text = read_project_text(path, display=file)
            except ProjectError as exc:
                problems.append(exc.problem)
                continue
            entry, found = parse_entry(kind, sub.name, text, file=file)
            problems.extend(found)
            if entry is not None:
                entries.append(entry)
    return entries, problems
