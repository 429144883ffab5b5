"""A small catalog project written into a temporary directory for workflow tests."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml

TOOLS = """
tools:
  - id: data.fetch
    description: Fetch a data set over the network.
    annotations: {open_world: true}
  - id: stats.summarise
    description: Summary statistics of a data set.
  - id: report.write
    description: Write a report.
  - id: admin.wipe
    description: Not part of any workflow.
    effect: write
    approval: required
"""

CONFIG = """
name: catalog-demo
version: 0.1.0
tools:
  files: [tools.yaml]
profiles:
  retrieval: {include: [data.fetch]}
  analysis: {include: [stats.summarise]}
  reporting: {include: [report.write]}
  admin: {include: [admin.wipe, data.fetch]}
"""


def workflow(**overrides: Any) -> dict[str, Any]:
    wf: dict[str, Any] = {
        "name": "pipeline",
        "description": "Retrieve, analyse, report.",
        "version": "1.0.0",
        "depends_on": ["csv-basics"],
        "profiles": ["retrieval", "analysis", "reporting"],
        "permissions": ["network:read", "compute:execute", "artifact:read", "artifact:write"],
        "input_artifacts": [],
        "output_artifacts": ["dataset", "summary", "report"],
        "required_tools": ["data.fetch", "stats.summarise", "report.write"],
        "tasks": [
            {
                "id": "retrieve",
                "role": "retriever",
                "profile": "retrieval",
                "required_tools": ["data.fetch"],
                "output_artifacts": ["dataset"],
                "acceptance_criteria": ["a CSV with a header row"],
            },
            {
                "id": "analyse",
                "role": "analyst",
                "profile": "analysis",
                "depends_on": ["retrieve"],
                "required_tools": ["stats.summarise"],
                "input_artifacts": ["dataset"],
                "output_artifacts": ["summary"],
                "acceptance_criteria": ["mean and count per column"],
            },
            {
                "id": "report",
                "role": "writer",
                "profile": "reporting",
                "depends_on": ["analyse"],
                "required_tools": ["report.write"],
                "input_artifacts": ["summary"],
                "output_artifacts": ["report"],
                "acceptance_criteria": ["a Markdown report"],
            },
        ],
    }
    wf.update(overrides)
    return wf


SKILL = {
    "name": "csv-basics",
    "description": "How to read CSV files.",
    "version": "0.1.0",
    "profiles": ["analysis"],
    "permissions": ["artifact:read"],
    "input_artifacts": ["dataset"],
}


def front(data: dict[str, Any], body: str = "# Procedure\n\nDo the work.\n") -> str:
    return "---\n" + yaml.safe_dump(data, sort_keys=False) + "---\n" + body


def write_catalog_project(
    root: Path,
    *,
    wf: dict[str, Any] | None = None,
    skill: dict[str, Any] | None = None,
    tests: str | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "charter.yaml").write_text(textwrap.dedent(CONFIG))
    (root / "tools.yaml").write_text(textwrap.dedent(TOOLS))
    wf = wf if wf is not None else workflow()
    (root / "workflows" / wf["name"]).mkdir(parents=True, exist_ok=True)
    (root / "workflows" / wf["name"] / "WORKFLOW.md").write_text(front(wf))
    sk = skill if skill is not None else SKILL
    (root / "skills" / sk["name"]).mkdir(parents=True, exist_ok=True)
    (root / "skills" / sk["name"] / "SKILL.md").write_text(front(sk))
    if tests is not None:
        (root / "tests").mkdir(exist_ok=True)
        (root / "tests" / "context.yaml").write_text(textwrap.dedent(tests))
    return root
