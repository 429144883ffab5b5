from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from charter.errors import BuildError, ProjectError, UnsupportedRuntimeError, UserError
from charter.project.build import (
    RUNTIME_V1,
    RUNTIME_V2,
    build_project,
    latest_build_path,
    load_build,
    save_build,
)
from charter.project.diff import diff_builds
from tests.project.conftest import WriteProject

YAML_TOOLS = """
tools:
  - id: kb.search
    description: Search the knowledge base.
    args_schema:
      type: object
      properties:
        q: {type: string, maxLength: 100}
      required: [q]
      additionalProperties: false
  - id: kb.delete
    description: Delete an article.
    effect: write
    args_schema:
      type: object
      properties:
        article: {type: string}
"""


def test_example_project_builds_with_the_same_digest_anywhere(demo: Path, tmp_path: Path) -> None:
    first = build_project(demo)
    again = build_project(demo)
    assert first.digest == again.digest
    elsewhere = tmp_path / "somewhere" / "else"
    shutil.copytree(demo, elsewhere)
    assert build_project(elsewhere).digest == first.digest
    assert first.requires_runtime == RUNTIME_V2
    assert set(first.tools) == {"notes.search", "notes.get", "notes.add"}
    assert first.profiles["reader"].tools == ("notes.get", "notes.search")
    assert first.tools["notes.add"].contract.requires_approval
    assert first.tools["notes.add"].entrypoint == "tools/notes.py:add"


def test_changing_one_description_changes_the_digest(demo: Path) -> None:
    before = build_project(demo)
    notes = demo / "tools" / "notes.py"
    notes.write_text(notes.read_text().replace("Read one note by its id.", "Read a note."))
    after = build_project(demo)
    assert after.digest != before.digest
    d = diff_builds(before, after)
    assert [tc.tool for tc in d.tools_changed] == ["notes.get"]
    assert [c.pointer for c in d.tools_changed[0].changes] == ["/description"]


def test_yaml_tool_files(write_project: WriteProject) -> None:
    root = write_project(
        {
            "charter.yaml": """
                name: kb
                tools: {files: ["tools/*.yaml"]}
                profiles:
                  readers: {include: [kb.search, kb.delete], exclude: [kb.delete]}
            """,
            "tools/kb.yaml": YAML_TOOLS,
        }
    )
    b = build_project(root)
    assert b.profiles["readers"].tools == ("kb.search",)
    assert b.tools["kb.delete"].contract.requires_approval
    assert b.tools["kb.search"].source == "tools/kb.yaml"
    assert b.tools["kb.search"].entrypoint is None


def test_single_tool_yaml_file(write_project: WriteProject) -> None:
    root = write_project(
        {
            "charter.yaml": "name: one\ntools: {files: [t.yaml]}\n",
            "t.yaml": "id: one.tool\ndescription: One tool.\n",
        }
    )
    assert list(build_project(root).tools) == ["one.tool"]


def test_tool_free_project_needs_runtime_v1(write_project: WriteProject) -> None:
    root = write_project({"charter.yaml": "name: empty\n"})
    b = build_project(root)
    assert b.requires_runtime == RUNTIME_V1
    path = save_build(b, root)
    assert load_build(path, supported_runtimes=[RUNTIME_V1]).digest == b.digest


def test_runtime_that_supports_only_v1_refuses_a_tool_build(demo: Path) -> None:
    path = save_build(build_project(demo), demo)
    with pytest.raises(UnsupportedRuntimeError) as info:
        load_build(path, supported_runtimes=[RUNTIME_V1])
    assert info.value.required == RUNTIME_V2
    assert "charter.runtime.v2" in str(info.value)


def test_a_modified_build_file_is_refused(demo: Path) -> None:
    path = save_build(build_project(demo), demo)
    doc = json.loads(path.read_text())
    doc["profiles"]["reader"]["tools"].append("notes.add")
    path.write_text(json.dumps(doc))
    with pytest.raises(UserError, match="digest mismatch"):
        load_build(path)


def test_latest_points_at_the_last_build(demo: Path) -> None:
    b = build_project(demo)
    path = save_build(b, demo)
    assert latest_build_path(demo) == path
    assert path.name == b.digest.replace(":", "-") + ".json"


def test_all_problems_are_listed_not_just_the_first(write_project: WriteProject) -> None:
    root = write_project(
        {
            "charter.yaml": """
                name: broken
                tools: {files: [t.yaml]}
                profiles:
                  p: {include: [no.such.tool]}
                agents:
                  a: {tools: [also.missing]}
            """,
            "t.yaml": """
                tools:
                  - id: ok.one
                    description: Fine.
                  - id: bad.version
                    description: Bad.
                    version: "1"
                  - id: ok.one
                    description: Duplicate id.
            """,
        }
    )
    with pytest.raises(BuildError) as info:
        build_project(root)
    messages = [str(p) for p in info.value.problems]
    assert any("SemVer" in m and "/tools/1/version" in m for m in messages), messages
    assert any("declared twice" in m for m in messages), messages
    assert any("unknown tool 'no.such.tool'" in m for m in messages), messages
    assert any("unknown tool 'also.missing'" in m for m in messages), messages
    assert len(messages) == 4


def test_model_name_clash_is_a_build_error(write_project: WriteProject) -> None:
    root = write_project(
        {
            "charter.yaml": "name: clash\ntools: {files: [t.yaml]}\n",
            "t.yaml": """
                tools:
                  - {id: a.b, description: One.}
                  - {id: a_b, description: Two.}
            """,
        }
    )
    with pytest.raises(BuildError, match=r"clashes with tool 'a\.b'"):
        build_project(root)


def test_unknown_field_and_duplicate_yaml_keys(write_project: WriteProject) -> None:
    root = write_project({"charter.yaml": "name: x\nprofiles:\n  p: {include: [], exlude: []}\n"})
    with pytest.raises(BuildError) as info:
        build_project(root)
    assert info.value.problems[0].pointer == "/profiles/p/exlude"
    root = write_project({"charter.yaml": "name: x\nname: y\n"}, name="dup")
    with pytest.raises(BuildError, match="duplicate key 'name'"):
        build_project(root)


def test_missing_project_file(tmp_path: Path) -> None:
    with pytest.raises(ProjectError, match=r"no charter\.yaml"):
        build_project(tmp_path)


def test_python_module_import_error_is_reported(write_project: WriteProject) -> None:
    root = write_project(
        {
            "charter.yaml": "name: x\ntools: {python: [tools.py]}\n",
            "tools.py": "import charter\nraise RuntimeError('boom')\n",
        }
    )
    with pytest.raises(BuildError, match=r"importing the module failed.*RuntimeError: boom"):
        build_project(root)


def test_paths_outside_the_project_are_refused(write_project: WriteProject) -> None:
    root = write_project({"charter.yaml": "name: x\ntools: {files: ['../*.yaml']}\n"})
    with pytest.raises(BuildError, match=r"must be a path inside the project"):
        build_project(root)


def test_diff_reports_profile_gains_and_losses(write_project: WriteProject) -> None:
    a = write_project(
        {
            "charter.yaml": """
                name: kb
                tools: {files: [t.yaml]}
                profiles:
                  p: {include: [kb.search]}
            """,
            "t.yaml": YAML_TOOLS,
        },
        name="a",
    )
    b = write_project(
        {
            "charter.yaml": """
                name: kb
                tools: {files: [t.yaml]}
                profiles:
                  p: {include: [kb.delete]}
                  q: {include: [kb.search]}
            """,
            "t.yaml": YAML_TOOLS.replace("maxLength: 100", "maxLength: 50").replace(
                "  - id: kb.delete", "  - id: kb.purge"
            ),
        },
        name="b",
    )
    (b / "charter.yaml").write_text(
        (b / "charter.yaml").read_text().replace("kb.delete", "kb.purge")
    )
    d = diff_builds(build_project(a), build_project(b))
    assert d.tools_added == ("kb.purge",)
    assert d.tools_removed == ("kb.delete",)
    (change,) = d.tools_changed
    assert change.tool == "kb.search"
    assert [(c.pointer, c.before, c.after) for c in change.changes] == [
        ("/args_schema/properties/q/maxLength", 100, 50)
    ]
    profiles = {pc.profile: pc for pc in d.profiles}
    assert profiles["p"].gained == ("kb.purge",)
    assert profiles["p"].lost == ("kb.search",)
    assert profiles["q"].status == "added"


def test_yaml_errors_name_the_place_not_the_text(write_project: WriteProject) -> None:
    root = write_project({"charter.yaml": "name: x\ndescription: 'hunter2-secret\n"})
    with pytest.raises(BuildError) as info:
        build_project(root)
    message = str(info.value)
    assert "invalid YAML (line" in message
    assert "hunter2" not in message
