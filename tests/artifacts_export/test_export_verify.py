"""``charter runs export`` copies artifact files; ``runs verify`` checks them (store, offline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from charter.cli.app import app
from charter.ledger.export import verify_directory
from charter.runtime import ledger_key_for
from tests.artifacts_export.conftest import new_run
from tests.server._harness import Project

FILES = {
    "r/report.md": "# report",
    "index.json": "{}",  # cannot collide with artifacts/index.json: files live under files/
    "日本/[...slug].ts": "export {}",
}


@pytest.fixture
def run(project: Project, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[str]]:
    made = new_run(project.root, FILES)
    monkeypatch.chdir(project.root)  # charter runs: store, deployment and key from here
    return made


def runs(*args: str) -> Result:
    return CliRunner().invoke(app, ["runs", *args, "--json"])


def report(result: Result) -> dict[str, object]:
    doc: dict[str, object] = json.loads(result.stdout)
    assert result.exit_code == (0 if doc.get("ok") else 1), (result.stdout, result.stderr)
    return doc


def stored(project: Project, run_id: str, path: str) -> Path:
    return project.root / ".charter" / "artifacts" / run_id / path


def exported(project: Project, run_id: str, target: Path) -> Path:
    result = runs("export", run_id, str(target))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return target


def test_export_copies_every_file_and_verifies_offline(
    project: Project,
    run: tuple[str, list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_id, ids = run
    out = exported(project, run_id, tmp_path / "export")
    index = json.loads((out / "artifacts" / "index.json").read_text())
    assert [a["artifact_id"] for a in index["artifacts"]] == ids
    for path, text in FILES.items():
        assert (out / "artifacts" / "files" / path).read_text() == text
    files = sorted(
        str(p.relative_to(out / "artifacts" / "files"))
        for p in (out / "artifacts" / "files").rglob("*")
        if p.is_file()
    )
    assert files == sorted(FILES)
    doc = report(runs("verify", str(out)))
    assert doc["ok"] is True
    assert report(runs("verify", run_id))["ok"] is True
    shown = CliRunner().invoke(app, ["runs", "verify", str(out)])
    assert shown.exit_code == 0
    # the offline check needs nothing but the directory and the key
    monkeypatch.chdir(tmp_path)
    assert verify_directory(out, ledger_key_for(project.root)).ok


def _offline(out: Path) -> tuple[object, ...]:
    doc = report(runs("verify", str(out)))
    return doc["ok"], doc["reason"], doc["artifact_id"], doc["path"]


def test_a_tampered_exported_file_fails(
    project: Project, run: tuple[str, list[str]], tmp_path: Path
) -> None:
    run_id, ids = run
    out = exported(project, run_id, tmp_path / "export")
    target = out / "artifacts" / "files" / "r" / "report.md"
    target.write_text("# REPORT")  # same size, other bytes
    assert _offline(out) == (False, "ARTIFACT_INTEGRITY_MISMATCH", ids[0], "r/report.md")
    target.write_text("# report, longer")
    assert _offline(out) == (False, "ARTIFACT_INTEGRITY_MISMATCH", ids[0], "r/report.md")
    text = CliRunner().invoke(app, ["runs", "verify", str(out)])
    assert text.exit_code == 1
    assert ids[0] in text.stderr


def test_a_missing_exported_file_fails(
    project: Project, run: tuple[str, list[str]], tmp_path: Path
) -> None:
    run_id, ids = run
    out = exported(project, run_id, tmp_path / "export")
    (out / "artifacts" / "files" / "index.json").unlink()
    assert _offline(out) == (False, "ARTIFACT_MISSING", ids[1], "index.json")


def test_an_extra_exported_file_fails(
    project: Project, run: tuple[str, list[str]], tmp_path: Path
) -> None:
    run_id, _ = run
    out = exported(project, run_id, tmp_path / "export")
    (out / "artifacts" / "files" / "r" / "extra.sh").write_text("echo hi")
    assert _offline(out) == (False, "ARTIFACT_UNREGISTERED", None, "r/extra.sh")
    (out / "artifacts" / "files" / "r" / "extra.sh").unlink()
    (out / "artifacts" / "files" / "empty").mkdir()  # an empty directory holds no file
    assert _offline(out)[0] is True


def test_symlinks_in_an_export_are_not_followed(
    project: Project, run: tuple[str, list[str]], tmp_path: Path
) -> None:
    run_id, ids = run
    out = exported(project, run_id, tmp_path / "export")
    files = out / "artifacts" / "files"
    # a symlink to an identical copy outside: still refused (never followed)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "report.md").write_text("# report")
    (files / "r" / "report.md").unlink()
    (files / "r" / "report.md").symlink_to(outside / "report.md")
    assert _offline(out) == (False, "ARTIFACT_INTEGRITY_MISMATCH", ids[0], "r/report.md")
    # a symlinked directory: the file below it is not there
    (files / "r" / "report.md").unlink()
    (files / "r").rmdir()
    (files / "r").symlink_to(outside, target_is_directory=True)
    assert _offline(out) == (False, "ARTIFACT_MISSING", ids[0], "r/report.md")


def test_verify_in_the_store_checks_files(project: Project, run: tuple[str, list[str]]) -> None:
    run_id, ids = run
    path = stored(project, run_id, "r/report.md")
    path.chmod(0o644)
    path.write_text("# REPORT")
    doc = report(runs("verify", run_id))
    assert (doc["ok"], doc["reason"], doc["artifact_id"]) == (
        False,
        "ARTIFACT_INTEGRITY_MISMATCH",
        ids[0],
    )
    assert report(runs("verify", run_id, "--no-artifact-files"))["ok"] is True
    stored(project, run_id, "index.json").unlink()
    path.write_text("# report")
    doc = report(runs("verify", run_id))
    assert (doc["reason"], doc["artifact_id"]) == ("ARTIFACT_MISSING", ids[1])


def test_export_refuses_a_changed_or_missing_file(
    project: Project, run: tuple[str, list[str]], tmp_path: Path
) -> None:
    run_id, ids = run
    path = stored(project, run_id, "r/report.md")
    path.chmod(0o644)
    path.write_text("# REPORT")
    parent = tmp_path / "exports"
    parent.mkdir()
    result = runs("export", run_id, str(parent / "export"))
    assert result.exit_code == 1
    assert json.loads(result.stdout)["reason"] == "ARTIFACT_INTEGRITY_MISMATCH"
    assert ids[0] in json.loads(result.stdout)["error"]
    path.unlink()
    result = runs("export", run_id, str(parent / "export"))
    assert json.loads(result.stdout)["reason"] == "ARTIFACT_MISSING"
    assert list(parent.iterdir()) == []  # nothing half-written is left


def test_a_ledger_only_export_is_incomplete(
    project: Project, run: tuple[str, list[str]], tmp_path: Path
) -> None:
    run_id, ids = run
    out = tmp_path / "export"
    assert runs("export", run_id, str(out), "--no-artifact-files").exit_code == 0
    assert not (out / "artifacts" / "files").exists()
    assert _offline(out)[:3] == (False, "ARTIFACT_MISSING", ids[0])
    assert report(runs("verify", str(out), "--no-artifact-files"))["ok"] is True


def test_a_run_without_artifacts_exports_no_files(
    project: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run_id, _ = new_run(project.root)
    monkeypatch.chdir(project.root)
    out = exported(project, run_id, tmp_path / "export")
    assert not (out / "artifacts" / "files").exists()
    assert report(runs("verify", str(out)))["ok"] is True
    (out / "artifacts" / "files").mkdir()
    (out / "artifacts" / "files" / "x").write_text("x")
    assert _offline(out) == (False, "ARTIFACT_UNREGISTERED", None, "x")
