"""Catalog parsing and validation: every rule is refused with its file and field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from charter.errors import BuildError, Problem
from charter.project.build import build_project
from tests.workflows._project import SKILL, workflow, write_catalog_project

WF = "workflows/pipeline/WORKFLOW.md"


def problems_for(tmp_path: Path, **kw: Any) -> list[Problem]:
    root = write_catalog_project(tmp_path / "p", **kw)
    with pytest.raises(BuildError) as info:
        build_project(root)
    return list(info.value.problems)


def only(problems: list[Problem], needle: str) -> Problem:
    found = [p for p in problems if needle in p.message]
    assert found, [str(p) for p in problems]
    return found[0]


def test_a_valid_catalog_is_compiled_into_the_build(tmp_path: Path) -> None:
    build = build_project(write_catalog_project(tmp_path / "p"))
    catalog = build.document["catalog"]
    wf = catalog["workflows"]["pipeline"]
    assert wf["version"] == "1.0.0"
    assert [t["id"] for t in wf["tasks"]] == ["retrieve", "analyse", "report"]
    assert wf["procedure"].startswith("# Procedure")
    assert wf["contract_sha256"].startswith("sha256:")
    assert catalog["skills"]["csv-basics"]["contract_sha256"].startswith("sha256:")


def test_a_dependency_change_changes_the_dependent_hash(tmp_path: Path) -> None:
    a = build_project(write_catalog_project(tmp_path / "a"))
    skill = {**SKILL, "description": "Changed."}
    b = build_project(write_catalog_project(tmp_path / "b", skill=skill))
    wa, wb = (x.document["catalog"]["workflows"]["pipeline"] for x in (a, b))
    assert wa["contract_sha256"] != wb["contract_sha256"]


def test_a_project_without_catalogs_or_tests_has_no_new_sections(tmp_path: Path) -> None:
    root = write_catalog_project(tmp_path / "p")
    import shutil

    shutil.rmtree(root / "workflows")
    shutil.rmtree(root / "skills")
    doc = build_project(root).document
    assert "catalog" not in doc
    assert "tests" not in doc


def test_task_cycle(tmp_path: Path) -> None:
    wf = workflow()
    wf["tasks"][0]["depends_on"] = ["report"]
    p = only(problems_for(tmp_path, wf=wf), "cycle")
    assert p.file == WF
    assert p.pointer == "/tasks"


def test_missing_producer(tmp_path: Path) -> None:
    wf = workflow()
    wf["tasks"][2]["input_artifacts"] = ["summary", "figures"]
    p = only(problems_for(tmp_path, wf=wf), "no upstream task produces it")
    assert p.pointer == "/tasks/2/input_artifacts/1"


def test_consumer_that_does_not_depend_on_the_producer(tmp_path: Path) -> None:
    wf = workflow()
    wf["tasks"][2]["depends_on"] = []
    p = only(problems_for(tmp_path, wf=wf), "no upstream task produces it")
    assert p.pointer == "/tasks/2/input_artifacts/0"


def test_two_producers(tmp_path: Path) -> None:
    wf = workflow()
    wf["tasks"][1]["output_artifacts"] = ["summary", "dataset"]
    p = only(problems_for(tmp_path, wf=wf), "2 producers")
    assert p.pointer == "/tasks/1/output_artifacts/1"


def test_workflow_output_without_producer(tmp_path: Path) -> None:
    wf = workflow(output_artifacts=["dataset", "summary", "report", "slides"])
    p = only(problems_for(tmp_path, wf=wf), "no producing task")
    assert p.pointer == "/output_artifacts/3"


def test_task_output_outside_workflow_outputs(tmp_path: Path) -> None:
    wf = workflow(output_artifacts=["dataset", "report"])
    p = only(problems_for(tmp_path, wf=wf), "not a workflow output")
    assert p.pointer == "/tasks/1/output_artifacts/0"


def test_tool_outside_the_workflow(tmp_path: Path) -> None:
    wf = workflow()
    wf["tasks"][0]["required_tools"] = ["data.fetch", "admin.wipe"]
    wf["tasks"][0]["profile"] = "retrieval"
    p = only(problems_for(tmp_path, wf=wf), "not one of the workflow's tools")
    assert p.pointer == "/tasks/0/required_tools/1"


def test_tool_outside_the_task_profile(tmp_path: Path) -> None:
    wf = workflow()
    wf["tasks"][0]["required_tools"] = ["data.fetch", "report.write"]
    p = only(problems_for(tmp_path, wf=wf), "does not offer")
    assert p.pointer == "/tasks/0/required_tools/1"


def test_unknown_tool(tmp_path: Path) -> None:
    wf = workflow(optional_tools=["nope.tool"])
    p = only(problems_for(tmp_path, wf=wf), "unknown tool")
    assert p.pointer == "/optional_tools/0"


@pytest.mark.parametrize(
    ("perm", "why"),
    [
        ("network:read", "open-world"),
        ("compute:execute", "runs code"),
        ("artifact:read", "reads artifact"),
        ("artifact:write", "writes artifact"),
    ],
)
def test_missing_permission(tmp_path: Path, perm: str, why: str) -> None:
    perms = [p for p in workflow()["permissions"] if p != perm]
    p = only(problems_for(tmp_path, wf=workflow(permissions=perms)), f"must include {perm!r}")
    assert why in p.message
    assert p.pointer == "/permissions"
    assert p.file == WF


def test_unknown_permission(tmp_path: Path) -> None:
    perms = [*workflow()["permissions"], "root:all"]
    p = only(problems_for(tmp_path, wf=workflow(permissions=perms)), "is not one of")
    assert p.pointer == "/permissions"


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "01.0.0", "1.0.0-", "latest"])
def test_bad_semver(tmp_path: Path, version: str) -> None:
    p = only(problems_for(tmp_path, wf=workflow(version=version)), "SemVer")
    assert p.pointer == "/version"
    assert p.file == WF


def test_unknown_dependency(tmp_path: Path) -> None:
    p = only(problems_for(tmp_path, wf=workflow(depends_on=["csv-basics", "ghost"])), "ghost")
    assert p.pointer == "/depends_on/1"


def test_dependency_cycle(tmp_path: Path) -> None:
    skill = {**SKILL, "depends_on": ["pipeline"]}
    p = only(problems_for(tmp_path, skill=skill), "dependencies form a cycle")
    assert "pipeline" in p.message
    assert "csv-basics" in p.message


def test_name_must_equal_folder(tmp_path: Path) -> None:
    root = write_catalog_project(tmp_path / "p")
    wf_dir = root / "workflows" / "pipeline"
    wf_dir.rename(root / "workflows" / "other")
    with pytest.raises(BuildError) as info:
        build_project(root)
    p = only(list(info.value.problems), "folder name")
    assert p.file == "workflows/other/WORKFLOW.md"
    assert p.pointer == "/name"


@pytest.mark.parametrize("field", ["profiles", "permissions"])
def test_empty_profiles_or_permissions(tmp_path: Path, field: str) -> None:
    problems = problems_for(tmp_path, wf=workflow(**{field: []}))
    assert any(p.pointer == f"/{field}" for p in problems), [str(p) for p in problems]


def test_unknown_field_and_missing_front_matter(tmp_path: Path) -> None:
    problems = problems_for(tmp_path, wf=workflow(colour="blue"))
    assert only(problems, "unknown field").pointer == "/colour"
    root = write_catalog_project(tmp_path / "q")
    (root / "skills" / "csv-basics" / "SKILL.md").write_text("# no front matter\n")
    with pytest.raises(BuildError) as info:
        build_project(root)
    assert only(list(info.value.problems), "front matter").file == "skills/csv-basics/SKILL.md"


def test_unknown_task_dependency_and_profile(tmp_path: Path) -> None:
    wf = copy.deepcopy(workflow())
    wf["tasks"][1]["depends_on"] = ["retrieve", "ghost"]
    wf["tasks"][2]["profile"] = "admin"
    problems = problems_for(tmp_path, wf=wf)
    assert only(problems, "unknown task 'ghost'").pointer == "/tasks/1/depends_on/1"
    assert only(problems, "not in the workflow's profiles").pointer == "/tasks/2/profile"
