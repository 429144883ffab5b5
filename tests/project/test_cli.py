"""The project commands through the real ``charter`` executable and through Typer's runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from charter.cli import app

runner = CliRunner()
CHARTER = [sys.executable, "-m", "charter"]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [*CHARTER, *args], cwd=cwd, capture_output=True, text=True, env=env, check=False
    )


def test_init_build_twice_same_digest_then_change(tmp_path: Path) -> None:
    made = run("init", "demo", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    demo = tmp_path / "demo"
    first = run("build", cwd=demo)
    assert first.returncode == 0, first.stderr
    digest = first.stdout.strip()
    assert digest.startswith("sha256:")
    assert len(digest) == 71
    assert run("build", cwd=demo).stdout.strip() == digest
    notes = demo / "tools" / "notes.py"
    notes.write_text(notes.read_text().replace("Search notes whose", "Find notes whose"))
    changed = run("build", cwd=demo)
    assert changed.returncode == 0
    assert changed.stdout.strip() not in ("", digest)


def test_inspect_and_diff_json(tmp_path: Path) -> None:
    assert run("init", "demo", cwd=tmp_path).returncode == 0
    demo = tmp_path / "demo"
    old = json.loads(run("build", "--json", cwd=demo).stdout)
    notes = demo / "tools" / "notes.py"
    notes.write_text(notes.read_text().replace('"notes.get"', '"notes.fetch"'))
    (demo / "charter.yaml").write_text(
        (demo / "charter.yaml").read_text().replace("notes.get", "notes.fetch")
    )
    new = json.loads(run("build", "--json", cwd=demo).stdout)
    shown = json.loads(run("inspect", "--json", cwd=demo).stdout)
    assert shown["digest"] == new["digest"]
    assert {t["id"] for t in shown["tools"]} == {"notes.search", "notes.fetch", "notes.add"}
    out = run("diff", old["digest"], "latest", "--json", cwd=demo)
    d = json.loads(out.stdout)
    assert d["tools"]["added"] == ["notes.fetch"]
    assert d["tools"]["removed"] == ["notes.get"]
    reader = next(p for p in d["profiles"] if p["profile"] == "reader")
    assert reader["gained"] == ["notes.fetch"]
    assert reader["lost"] == ["notes.get"]
    assert run("diff", old["digest"], "latest", "--exit-code", cwd=demo).returncode == 1
    assert run("diff", "latest", "latest", "--exit-code", cwd=demo).returncode == 0


def test_build_errors_exit_non_zero_and_list_everything(tmp_path: Path) -> None:
    (tmp_path / "charter.yaml").write_text(
        "name: bad\nprofiles:\n  p: {include: [ghost.one, ghost.two]}\n"
    )
    out = run("build", cwd=tmp_path)
    assert out.returncode == 1
    assert "ghost.one" in out.stderr
    assert "ghost.two" in out.stderr
    as_json = json.loads(run("build", "--json", cwd=tmp_path).stdout)
    assert as_json["ok"] is False
    assert [p["pointer"] for p in as_json["problems"]] == [
        "/profiles/p/include/0",
        "/profiles/p/include/1",
    ]


def test_init_refuses_to_overwrite(tmp_path: Path) -> None:
    assert run("init", "demo", cwd=tmp_path).returncode == 0
    again = run("init", "demo", cwd=tmp_path)
    assert again.returncode == 1
    assert "already contains" in again.stderr


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in group.commands.items():
        path = (*prefix, name)
        out.append(path)
        if hasattr(cmd, "commands"):
            out.extend(_commands(cmd, path))
    return out


ROOT: Any = typer.main.get_command(app)


@pytest.mark.parametrize("path", [(), *_commands(ROOT)], ids=lambda p: " ".join(p) or "charter")
def test_every_command_explains_itself(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    cmd = ROOT
    for name in path:
        cmd = cmd.commands[name]
    assert (cmd.help or "").strip(), f"charter {' '.join(path)} has no help text"


@pytest.mark.parametrize(
    ("fragment", "keyword", "pointer"),
    [
        ("{type: string, if: {minLength: 1}}", "if", "/tools/0/args_schema/properties/q/if"),
        (
            "{type: object, patternProperties: {'^a': {type: string}}}",
            "patternProperties",
            "/tools/0/args_schema/properties/q/patternProperties",
        ),
        (
            "{$ref: 'https://example.com/schema.json'}",
            "$ref",
            "/tools/0/args_schema/properties/q/$ref",
        ),
        ("{type: string, requried: [x]}", "requried", "/tools/0/args_schema/properties/q/requried"),
    ],
)
def test_build_refuses_schemas_outside_the_subset(
    tmp_path: Path, fragment: str, keyword: str, pointer: str
) -> None:
    (tmp_path / "charter.yaml").write_text("name: s\ntools: {files: [t.yaml]}\n")
    (tmp_path / "t.yaml").write_text(
        "tools:\n"
        "  - id: kb.search\n"
        "    description: Search.\n"
        "    args_schema:\n"
        "      type: object\n"
        f"      properties:\n        q: {fragment}\n"
    )
    out = run("build", cwd=tmp_path)
    assert out.returncode == 1, out.stdout
    assert "kb.search" in out.stderr
    data = json.loads(run("build", "--json", cwd=tmp_path).stdout)
    assert any(
        p["tool"] == "kb.search" and p["keyword"] == keyword and p["pointer"] == pointer
        for p in data["problems"]
    ), data["problems"]


def test_demo_runs_the_whole_flow(tmp_path: Path) -> None:
    out = run("demo", str(tmp_path / "demo"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "pending_approval" in out.stdout
    assert "APPROVER_NOT_HUMAN" in out.stdout
    assert "IDEMPOTENCY_CONFLICT" in out.stdout
    assert "verified" in out.stdout
