"""The shape of ``charter.yaml``: project identity, tool sources, profiles and agents.

Every field is documented in ``docs/projects.md``. Unknown keys are errors (a misspelt
``exlude`` must not silently disclose a tool).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from charter.contracts.model import SEMVER, TOOL_ID
from charter.errors import Problem

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
PROJECT_FILE = "charter.yaml"


def _check_name(value: str, what: str) -> str:
    if not NAME.match(value):
        raise ValueError(f"{what} {value!r} must match {NAME.pattern}")
    return value


def _check_tool_ids(values: list[str]) -> list[str]:
    for item in values:
        if not TOOL_ID.match(item):
            raise ValueError(f"{item!r} is not a tool id")
    if len(set(values)) != len(values):
        raise ValueError("lists a tool more than once")
    return values


class ToolSources(BaseModel):
    """Where a project's tool contracts come from, relative to the project directory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    files: list[str] = Field(default_factory=list)  # YAML tool files; globs allowed
    python: list[str] = Field(default_factory=list)  # Python modules (files) with @tool functions


class ProfileConfig(BaseModel):
    """A named tool set: explicit include, exclude wins, omission denies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str = ""
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)

    @field_validator("include", "exclude")
    @classmethod
    def _ids(cls, value: list[str]) -> list[str]:
        return _check_tool_ids(value)


class AgentConfig(BaseModel):
    """An agent: which tools and context providers it may use, and its instructions.

    Instructions are text for the model; they never grant a tool or a permission.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str = ""
    instructions: str = ""
    tools: list[str] = Field(default_factory=list)
    context_providers: list[str] = Field(default_factory=list)
    # agents this one may hand off to in a chat (docs/chat.md, "Handoffs")
    handoffs: list[str] = Field(default_factory=list)

    @field_validator("tools")
    @classmethod
    def _ids(cls, value: list[str]) -> list[str]:
        return _check_tool_ids(value)


class ProjectConfig(BaseModel):
    """The whole of ``charter.yaml``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str = "0.1.0"
    description: str = ""
    tools: ToolSources = Field(default_factory=ToolSources)
    profiles: dict[str, ProfileConfig] = Field(default_factory=dict)
    agents: dict[str, AgentConfig] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _check_name(value, "project name")

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not SEMVER.match(value):
            raise ValueError("version must be SemVer 2.0 (e.g. 0.1.0)")
        return value

    @field_validator("profiles", "agents")
    @classmethod
    def _keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            _check_name(key, "name")
        return value


def parse_config(
    data: Any, *, file: str = PROJECT_FILE
) -> tuple[ProjectConfig | None, list[Problem]]:
    if not isinstance(data, dict):
        return None, [Problem(message="must be a YAML mapping", file=file, pointer="")]
    try:
        return ProjectConfig.model_validate(data), []
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_input=False, include_url=False):
            pointer = "".join(f"/{part}" for part in err["loc"])
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = "unknown field (see docs/projects.md for the fields allowed here)"
            problems.append(Problem(message=message, file=file, pointer=pointer))
        return None, problems
