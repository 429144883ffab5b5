"""``charter artifacts ls|get|put --server URL``: the same commands over a live API."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner, Result

from charter.cli.app import app
from charter.client import Client
from tests.server._harness import Project, ThreadServer


def cli(server: ThreadServer, key: str, *args: str) -> Result:
    return CliRunner().invoke(
        app,
        ["artifacts", *args, "--json"],
        env={"CHARTER_SERVER": server.url, "CHARTER_API_KEY": key},
    )


def ok(result: Result) -> object:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def failed(result: Result) -> str:
    assert result.exit_code == 1, result.stdout
    return str(json.loads(result.stdout)["reason"])


def _run(served: Project, server: ThreadServer) -> str:
    with Client(server.url, served.keys["app"]) as client:
        return str(client.resolve_context("all")["run_id"])


def test_put_ls_get_over_the_api(served: Project, server: ThreadServer, tmp_path: Path) -> None:
    key = served.keys["app"]
    run_id = _run(served, server)
    src = tmp_path / "notes.md"
    src.write_bytes("# notes 日本\n".encode())
    first = ok(cli(server, key, "put", run_id, str(src), "--media-type", "text/markdown"))
    assert isinstance(first, dict)
    assert (first["path"], first["trust"], first["media_type"]) == (
        "notes.md",
        "untrusted",
        "text/markdown",
    )
    again = ok(cli(server, key, "put", run_id, str(src), "--name", "notes.md"))
    assert isinstance(again, dict)
    assert again["path"] == "notes-v2.md"
    listed = ok(cli(server, key, "ls", run_id))
    assert isinstance(listed, list)
    assert [a["artifact_id"] for a in listed] == [first["artifact_id"], again["artifact_id"]]
    out = tmp_path / "out" / "copy.md"
    out.parent.mkdir()
    got = ok(cli(server, key, "get", run_id, first["artifact_id"], "-o", str(out)))
    assert isinstance(got, dict)
    assert out.read_bytes() == src.read_bytes()
    assert failed(cli(server, key, "get", run_id, again["artifact_id"], "-o", str(out))) == (
        "OUTPUT_EXISTS"
    )
    ok(cli(server, key, "get", run_id, again["artifact_id"], "-o", str(out), "--force"))
    assert out.read_bytes() == src.read_bytes()
    assert sorted(p.name for p in out.parent.iterdir()) == ["copy.md"]
    assert failed(cli(server, key, "get", run_id, "artifact-000000000000")) == (
        "ARTIFACT_NOT_FOUND"
    )


def test_another_tenant_cannot_see_the_run(
    served: Project, server: ThreadServer, tmp_path: Path
) -> None:
    run_id = _run(served, server)
    src = tmp_path / "s.txt"
    src.write_bytes(b"secret")
    record = ok(cli(server, served.keys["app"], "put", run_id, str(src)))
    assert isinstance(record, dict)
    other = served.keys["gapp"]
    for args in (("ls", run_id), ("get", run_id, record["artifact_id"]), ("put", run_id, str(src))):
        assert failed(cli(server, other, *args)) == "RUN_NOT_FOUND"


def test_a_changed_file_is_not_delivered(
    served: Project, server: ThreadServer, tmp_path: Path
) -> None:
    key = served.keys["app"]
    run_id = _run(served, server)
    src = tmp_path / "a.bin"
    src.write_bytes(b"original")
    record = ok(cli(server, key, "put", run_id, str(src)))
    assert isinstance(record, dict)
    stored = served.root / ".charter" / "artifacts" / run_id / "a.bin"
    stored.chmod(0o644)
    stored.write_bytes(b"ORIGINAL")
    out = tmp_path / "out" / "a.bin"
    out.parent.mkdir()
    result = cli(server, key, "get", run_id, record["artifact_id"], "-o", str(out))
    # the server cuts the response short; had it arrived whole, the CLI's own check refuses it
    assert failed(result) in {"SERVER_CONNECTION", "ARTIFACT_INTEGRITY_MISMATCH"}
    assert list(out.parent.iterdir()) == []


def test_no_api_key(server: ThreadServer) -> None:
    result = CliRunner().invoke(
        app, ["artifacts", "ls", "run-x", "--server", server.url], env={"CHARTER_API_KEY": ""}
    )
    assert result.exit_code == 1
    assert "CHARTER_API_KEY" in result.stderr
