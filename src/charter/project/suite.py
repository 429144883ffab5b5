"""Context test files (``tests/*.yaml`` in a project, ``guards/*.yaml`` for incident guards).

Parsing only — pure and free of the kernel, so :mod:`charter.project.build` can compile tests
into the Build. Evaluation lives in :mod:`charter.proof.context_tests`. A file holds::

    tests:
      - name: notes-add-needs-approval
        principal: {name: alice, tenant: acme, kind: operator, permissions: ["notes:*"]}
        profile: default
        agent: null                      # optional
        offers: [notes.add]              # tool ids the context must offer
        not_offers: [notes.delete]       # tool ids it must not offer
        calls:                           # synthetic calls: validated and authorized, never run
          - tool: notes.add
            arguments: {text: hi}
            expect: pending_approval     # allowed | pending_approval | denied | rejected
            code: permission_denied      # optional, for denied / rejected
            reason: TOOL_NOT_DISCLOSED   # optional
        executors:                       # what an executor describes, and whether it fits
          - {tool: notes.add, version: 1.0.0, digest: "sha256:…", expect: compatible}
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from charter.errors import Problem, ProjectError
from charter.project.yamlio import load_yaml

TEST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class PrincipalSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "test-principal"
    tenant: str = "test"
    kind: Literal["application", "operator"] = "application"
    permissions: list[str] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)


class CallSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    expect: Literal["allowed", "pending_approval", "denied", "rejected"]
    code: str | None = None
    reason: str | None = None


class ExecutorSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    version: str
    digest: str | None = None
    expect: Literal["compatible", "incompatible"] = "compatible"


class ContextTest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=TEST_NAME.pattern)
    description: str = ""
    principal: PrincipalSpec = Field(default_factory=PrincipalSpec)
    profile: str
    agent: str | None = None
    offers: list[str] = Field(default_factory=list)
    not_offers: list[str] = Field(default_factory=list)
    calls: list[CallSpec] = Field(default_factory=list)
    executors: list[ExecutorSpec] = Field(default_factory=list)
    source: str = ""  # the file it came from (set by the loader)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tests: list[dict[str, Any]]


def parse_tests(data: Any, *, file: str) -> tuple[list[ContextTest], list[Problem]]:
    problems: list[Problem] = []
    try:
        parsed = _File.model_validate(data)
    except ValidationError:
        return [], [
            Problem(message="a test file holds `tests:` with a list", file=file, pointer="")
        ]
    tests = []
    for i, raw in enumerate(parsed.tests):
        try:
            tests.append(ContextTest.model_validate({**raw, "source": file}))
        except ValidationError as exc:
            for err in exc.errors(include_input=False, include_url=False):
                pointer = f"/tests/{i}" + "".join(f"/{part}" for part in err["loc"])
                message = err["msg"].removeprefix("Value error, ")
                problems.append(Problem(message=message, file=file, pointer=pointer))
    return tests, problems


def load_test_dir(root: Path, folder: str) -> tuple[list[ContextTest], list[Problem]]:
    """Every ``<folder>/*.yaml`` under ``root``; duplicate test names are problems."""
    tests: list[ContextTest] = []
    problems: list[Problem] = []
    base = root / folder
    if not base.is_dir():
        return [], []
    for path in sorted([*base.glob("*.yaml"), *base.glob("*.yml")]):
        file = f"{folder}/{path.name}"
        try:
            data = load_yaml(path, display=file)
        except ProjectError as exc:
            problems.append(exc.problem)
            continue
        found, bad = parse_tests(data, file=file)
        tests.extend(found)
        problems.extend(bad)
    seen: dict[str, str] = {}
    for t in tests:
        if t.name in seen:
            problems.append(
                Problem(
                    message=f"test name {t.name!r} is also used in {seen[t.name]}", file=t.source
                )
            )
        seen.setdefault(t.name, t.source)
    return tests, problems


def suite_section(tests: list[ContextTest]) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json") for t in sorted(tests, key=lambda t: t.name)]


def suite_from_build(doc: Any) -> list[ContextTest]:
    return [ContextTest.model_validate(t) for t in doc.get("tests", [])]
