"""Bounded build inputs: size before parsing, nesting and alias expansion while parsing.

Each refusal is one problem of one line naming the file and the limit; none reaches Python's
recursion limit. Times are checked loosely (a shared machine): a refusal must not take the
minutes an unbounded parse of these files took.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from charter.errors import BuildError, ProjectError
from charter.project.build import build_project
from charter.project.yamlio import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, load_yaml_text
from tests.project.conftest import WriteProject

SLOW = 10.0  # seconds: generous on a loaded 2-core machine; unbounded parses took minutes


def _deep_json_schema(depth: int) -> str:
    schema = '{"type": "object", "properties": {"a": ' * depth + '{"type": "string"}'
    schema += "}}" * depth
    return '{"id": "deep.tool", "description": "Deep.", "args_schema": ' + schema + "}"


def _refusal(root: Path) -> tuple[str, float]:
    started = time.perf_counter()
    with pytest.raises(BuildError) as info:
        build_project(root)
    elapsed = time.perf_counter() - started
    assert len(info.value.problems) == 1
    return str(info.value.problems[0]), elapsed


def test_a_thousand_deep_json_schema_is_refused(write_project: WriteProject) -> None:
    root = write_project(
        {
            "charter.yaml": 'name: deep\ntools: {files: ["tools/*.json"]}\n',
            "tools/deep.json": _deep_json_schema(1000),
        }
    )
    problem, elapsed = _refusal(root)
    assert problem.startswith("tools/deep.json: ")
    assert f"nested deeper than {MAX_DEPTH} levels" in problem
    assert "\n" not in problem
    assert elapsed < SLOW


def test_a_deep_block_style_yaml_schema_is_refused(write_project: WriteProject) -> None:
    levels = 400  # block style needs indentation: 400 levels is ~0.5 MB, under the size limit
    lines = ["id: deep.tool", "description: Deep.", "args_schema:"]
    for level in range(levels):
        pad = " " * (2 * level + 1)
        lines += [f"{pad}type: object", f"{pad}properties:", f"{pad} a:"]
    root = write_project(
        {
            "charter.yaml": 'name: deep\ntools: {files: ["tools/*.yaml"]}\n',
            "tools/deep.yaml": "\n".join(lines) + "\n" + " " * (2 * levels + 1) + "type: x\n",
        }
    )
    problem, elapsed = _refusal(root)
    assert problem.startswith("tools/deep.yaml: ")
    assert f"the limit is {MAX_DEPTH}" in problem
    assert elapsed < SLOW


def _write_50_mb_tool(root: Path) -> None:
    (root / "tools").mkdir()
    with (root / "tools" / "big.yaml").open("w") as fh:
        fh.write("id: big.tool\ndescription: ")
        chunk = "x" * (1 << 20)
        for _ in range(50):
            fh.write(chunk)
        fh.write("\n")


def test_a_50_mb_tool_file_is_refused_before_parsing(write_project: WriteProject) -> None:
    root = write_project({"charter.yaml": 'name: big\ntools: {files: ["tools/*.yaml"]}\n'})
    _write_50_mb_tool(root)
    problem, elapsed = _refusal(root)
    assert problem == (
        f"tools/big.yaml: file is larger than {MAX_FILE_BYTES} bytes; "
        f"the limit for a project file is {MAX_FILE_BYTES} bytes"
    )
    assert elapsed < SLOW


@pytest.mark.parametrize("case", ["deep", "big"])
def test_charter_build_refuses_them_in_one_line_without_a_traceback(
    write_project: WriteProject, case: str
) -> None:
    """The real ``charter build`` executable: exit 1, the one problem line on stderr, nothing on
    stdout, no traceback (the 1,000-deep schema used to end in a RecursionError traceback)."""
    if case == "deep":
        root = write_project(
            {
                "charter.yaml": 'name: deep\ntools: {files: ["tools/*.json"]}\n',
                "tools/deep.json": _deep_json_schema(1000),
            }
        )
        expected = f"tools/deep.json: refused (line 1, column 1270): nested deeper than {MAX_DEPTH}"
    else:
        root = write_project({"charter.yaml": 'name: big\ntools: {files: ["tools/*.yaml"]}\n'})
        _write_50_mb_tool(root)
        expected = f"tools/big.yaml: file is larger than {MAX_FILE_BYTES} bytes"
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "charter", "build"],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    elapsed = time.perf_counter() - started
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert "RecursionError" not in done.stderr
    problems = [line for line in done.stderr.splitlines() if line.startswith("  - ")]
    assert len(problems) == 1, done.stderr
    assert problems[0].startswith(f"  - {expected}"), done.stderr
    assert elapsed < SLOW  # Python start-up included


def test_an_oversized_charter_yaml_is_refused(write_project: WriteProject) -> None:
    root = write_project({"charter.yaml": "name: big\ndescription: " + "x" * MAX_FILE_BYTES})
    with pytest.raises((BuildError, ProjectError)) as info:
        build_project(root)
    assert "charter.yaml: file is larger than" in str(info.value)


def test_alias_expansion_is_bounded(write_project: WriteProject) -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    root = write_project(
        {
            "charter.yaml": 'name: lol\ntools: {files: ["tools/*.yaml"]}\n',
            "tools/lol.yaml": "id: lol.tool\ndescription: Laughs.\nx-laughs:\n"
            + "".join(f"  {line}\n" for line in lines),
        }
    )
    problem, elapsed = _refusal(root)
    assert problem.startswith("tools/lol.yaml: ")
    assert f"more than {MAX_NODES} nodes" in problem
    assert elapsed < SLOW


def test_an_alias_counts_the_depth_of_what_it_repeats() -> None:
    deep = "[" * 40 + "1" + "]" * 40
    text = f"a: &d {deep}\nb: [[[[[[[[[[[[[[[[[[[[[[[[[[[[*d]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"
    with pytest.raises(ProjectError) as info:
        load_yaml_text(text, file="t.yaml")
    assert f"nested deeper than {MAX_DEPTH} levels" in str(info.value)


def test_ordinary_anchors_and_nesting_up_to_the_limit_still_load() -> None:
    lists = MAX_DEPTH - 2  # the root mapping is level 1, the innermost scalar level MAX_DEPTH
    nested = "[" * lists + "1" + "]" * lists
    data = load_yaml_text(f"a: &x {{k: [1, 2]}}\nb: *x\nc: {nested}\n", file="t.yaml")
    assert data["b"] == {"k": [1, 2]}
    depth, value = 0, data["c"]
    while isinstance(value, list):
        depth, value = depth + 1, value[0]
    assert depth == lists
    one_more = "[" * (lists + 1) + "1" + "]" * (lists + 1)
    with pytest.raises(ProjectError, match="nested deeper than"):
        load_yaml_text(f"c: {one_more}\n", file="t.yaml")


def test_duplicate_keys_are_still_refused() -> None:
    with pytest.raises(ProjectError, match="duplicate key 'a'"):
        load_yaml_text("a: 1\na: 2\n", file="t.yaml")


def test_an_oversized_workflow_file_is_a_problem(write_project: WriteProject) -> None:
    root = write_project(
        {
            "charter.yaml": "name: wf\n",
            "workflows/big/WORKFLOW.md": "---\nname: big\n---\n" + "x" * MAX_FILE_BYTES,
        }
    )
    problem, _ = _refusal(root)
    assert problem.startswith("workflows/big/WORKFLOW.md: file is larger than")
