"""``charter artifacts ls|get|put`` in local mode: the project's runtime, ``--as`` a principal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from charter.cli.app import app
from tests.artifacts_export.conftest import new_run
from tests.server._harness import Project


def cli(project: Project, *args: str, who: str | None = "app") -> Result:
    extra = ["--as", who] if who else []
    return CliRunner().invoke(
        app, ["artifacts", *args, "--project", str(project.root), *extra, "--json"]
    )


def ok(result: Result) -> object:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def failed(result: Result) -> str:
    assert result.exit_code == 1, result.stdout
    return str(json.loads(result.stdout)["reason"])


def test_put_ls_get_round_trip(project: Project, tmp_path: Path) -> None:
    run_id, written = new_run(project.root, {"r/report.md": "# report"})
    src = tmp_path / "data.csv"
    src.write_bytes(b"a,b\n1,2\n")
    first = ok(cli(project, "put", run_id, str(src), "--media-type", "text/csv"))
    assert isinstance(first, dict)
    assert (first["path"], first["trust"], first["type"], first["media_type"]) == (
        "data.csv",
        "untrusted",
        "upload",
        "text/csv",
    )
    assert first["producer"] == {"call_id": None, "task_id": None, "tool_id": None}
    # a taken name gets the next version; --name picks a run-relative name
    again = ok(cli(project, "put", run_id, str(src)))
    assert isinstance(again, dict)
    assert (again["path"], again["media_type"]) == ("data-v2.csv", "application/octet-stream")
    named = ok(cli(project, "put", run_id, str(src), "--name", "in/x.csv"))
    assert isinstance(named, dict)
    assert named["path"] == "in/x.csv"
    listed = ok(cli(project, "ls", run_id))
    assert isinstance(listed, list)
    assert [a["artifact_id"] for a in listed] == [
        *written,
        first["artifact_id"],
        again["artifact_id"],
        named["artifact_id"],
    ]
    out = tmp_path / "out" / "copy.csv"
    out.parent.mkdir()
    got = ok(cli(project, "get", run_id, first["artifact_id"], "-o", str(out)))
    assert isinstance(got, dict)
    assert got["output"] == str(out)
    assert out.read_bytes() == b"a,b\n1,2\n"
    # never over an existing file without --force, and nothing is left beside it
    out.write_bytes(b"mine")
    assert failed(cli(project, "get", run_id, again["artifact_id"], "-o", str(out))) == (
        "OUTPUT_EXISTS"
    )
    assert out.read_bytes() == b"mine"
    ok(cli(project, "get", run_id, written[0], "-o", str(out), "--force"))
    assert out.read_bytes() == b"# report"
    assert sorted(p.name for p in out.parent.iterdir()) == ["copy.csv"]


def test_get_defaults_to_the_artifacts_file_name(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id, [artifact] = new_run(project.root, {"r/report.md": "# report"})
    monkeypatch.chdir(tmp_path)
    ok(cli(project, "get", run_id, artifact))
    assert (tmp_path / "report.md").read_bytes() == b"# report"
    assert failed(cli(project, "get", run_id, artifact)) == "OUTPUT_EXISTS"


def test_text_output(project: Project, tmp_path: Path) -> None:
    run_id, [artifact] = new_run(project.root, {"a.md": "x"})
    base = ["--project", str(project.root), "--as", "app"]
    listed = CliRunner().invoke(app, ["artifacts", "ls", run_id, *base])
    assert listed.exit_code == 0
    assert artifact in listed.stdout
    out = tmp_path / "a.md"
    got = CliRunner().invoke(app, ["artifacts", "get", run_id, artifact, "-o", str(out), *base])
    assert got.exit_code == 0
    assert "verified" in got.stdout
    put = CliRunner().invoke(app, ["artifacts", "put", run_id, str(out), *base])
    assert put.exit_code == 0
    assert "a-v2.md" in put.stdout


def test_a_changed_file_is_not_delivered(project: Project, tmp_path: Path) -> None:
    run_id, [artifact] = new_run(project.root, {"a.md": "original"})
    stored = project.root / ".charter" / "artifacts" / run_id / "a.md"
    stored.chmod(0o644)
    stored.write_bytes(b"ORIGINAL")  # same size, other bytes
    out = tmp_path / "out" / "a.md"
    out.parent.mkdir()
    assert failed(cli(project, "get", run_id, artifact, "-o", str(out))) == (
        "ARTIFACT_INTEGRITY_MISMATCH"
    )
    assert list(out.parent.iterdir()) == []


def test_another_tenants_run_is_not_found(project: Project, tmp_path: Path) -> None:
    run_id, [artifact] = new_run(project.root, {"a.md": "secret"})
    src = tmp_path / "x.txt"
    src.write_bytes(b"x")
    for args in (("ls", run_id), ("get", run_id, artifact), ("put", run_id, str(src))):
        assert failed(cli(project, *args, who="gapp")) == "RUN_NOT_FOUND"
    assert failed(cli(project, "ls", "run-nope")) == "RUN_NOT_FOUND"
    assert failed(cli(project, "get", run_id, "artifact-000000000000")) == "ARTIFACT_NOT_FOUND"
    assert [a["path"] for a in ok(cli(project, "ls", run_id))] == ["a.md"]  # type: ignore[attr-defined]


def test_refusals(project: Project, tmp_path: Path) -> None:
    run_id, _ = new_run(project.root)
    src = tmp_path / "x.txt"
    src.write_bytes(b"x")
    assert failed(cli(project, "put", run_id, str(src), "--media-type", "Not A Type")) == (
        "ARTIFACT_MEDIA_TYPE_INVALID"
    )
    assert failed(cli(project, "put", run_id, str(src), "--name", "../x")).startswith(
        "ARTIFACT_PATH"
    )
    assert failed(cli(project, "put", run_id, str(src), "--name", "manifest.json")) == (
        "ARTIFACT_PATH_RESERVED"
    )
    no_who = cli(project, "ls", run_id, who=None)
    assert no_who.exit_code == 1
    assert "--as" in json.loads(no_who.stdout)["error"]
    assert ok(cli(project, "ls", run_id)) == []
