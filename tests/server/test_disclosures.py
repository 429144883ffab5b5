"""Model-disclosure reports over a live server: the Python client and raw HTTP report what a
model request carried, a report naming a tool the context never offered is flagged (and so
is an offered tool never disclosed), bad input is a clear 4xx that records nothing, another
tenant sees nothing; ``charter runs disclosure`` shows the same comparison."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

import charter
from charter.client import Client
from charter.errors import InvalidInput, PermissionDenied
from tests.server._harness import Project, ThreadServer

DIGEST = "sha256:" + "ab" * 32


def raw(server: ThreadServer, key: str) -> httpx2.Client:
    return httpx2.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


def cli(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    src = str(Path(charter.__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env["PYTHONPATH"] = src
    return subprocess.run(
        [sys.executable, "-m", "charter", *args, "--project", str(project.root)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=project.root,
        check=False,
    )


def offered(ctx: dict[str, Any]) -> list[dict[str, str]]:
    return [{"id": t["id"], "version": t["version"]} for t in ctx["tools"]]


def test_a_report_naming_a_tool_never_offered_is_flagged(
    server: ThreadServer, clients: dict[str, Client], project: Project
) -> None:
    app = clients["app"]
    ctx = app.resolve_context("reader")  # offers kv.get and kv.echo, not kv.put
    assert {t["id"] for t in ctx["tools"]} == {"kv.get", "kv.echo"}
    honest = app.report_disclosure(
        ctx["context_id"],
        tools=offered(ctx),
        schema_digest=ctx["schema_digest"],
        tokens=120,
        request_id="req-1",
        model="scripted",
    )
    assert honest["flagged"] is False
    assert honest["run_id"] == ctx["run_id"]
    assert honest["reported_by"] == "app"
    assert honest["source"] == "application"

    sneaky = app.report_disclosure(
        ctx["context_id"],
        tools=[{"id": "kv.get", "version": "1.0.0"}, {"id": "kv.put", "version": "1.0.0"}],
        schema_digest=DIGEST,
        tokens=80,
        attachment_ids=["docs:never.md"],
    )
    assert sneaky["flagged"] is True
    assert sneaky["flags"]["reported_not_offered"] == ["kv.put"]
    assert sneaky["flags"]["schema_digest_mismatch"] == [DIGEST]
    assert sneaky["flags"]["unknown_attachments"] == ["docs:never.md"]

    doc = app.run_disclosures(ctx["run_id"])
    assert doc["flagged"] is True
    (one,) = [c for c in doc["contexts"] if c["context_id"] == ctx["context_id"]]
    assert len(one["reports"]) == 2
    assert one["flags"]["reported_not_offered"] == ["kv.put"]
    assert one["flags"]["offered_not_disclosed"] == []  # kv.echo was in the first report

    # a second context whose report leaves out an offered tool: offered but never disclosed
    other = app.resolve_context("reader", run_id=ctx["run_id"])
    app.report_disclosure(
        other["context_id"],
        tools=[{"id": "kv.get", "version": "1.0.0"}],
        schema_digest=other["schema_digest"],
        tokens=10,
    )
    doc = app.run_disclosures(ctx["run_id"])
    (two,) = [c for c in doc["contexts"] if c["context_id"] == other["context_id"]]
    assert two["flags"]["offered_not_disclosed"] == ["kv.echo"]
    assert two["flags"]["reported_not_offered"] == []

    # the CLI reads the same comparison from the store
    done = cli(project, "runs", "disclosure", ctx["run_id"], "--json")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["flagged"] is True
    by_id = {c["context_id"]: c for c in printed["contexts"]}
    assert by_id[ctx["context_id"]]["flags"]["reported_not_offered"] == ["kv.put"]
    assert by_id[other["context_id"]]["flags"]["offered_not_disclosed"] == ["kv.echo"]
    text = cli(project, "runs", "disclosure", ctx["run_id"])
    assert text.returncode == 0, text.stderr
    assert "reported but never offered: kv.put" in text.stdout
    assert "offered but never disclosed: kv.echo" in text.stdout
    strict = cli(project, "runs", "disclosure", ctx["run_id"], "--strict")
    assert strict.returncode == 1
    missing = cli(project, "runs", "disclosure", "adhoc-nope", "--json")
    assert missing.returncode != 0
    assert "RUN_NOT_FOUND" in missing.stdout + missing.stderr


def test_bad_reports_are_clear_4xx_and_record_nothing(
    server: ThreadServer, clients: dict[str, Client], project: Project
) -> None:
    app = clients["app"]
    ctx = app.resolve_context("reader")
    before = len(app.events(ctx["run_id"])["events"])
    good = {"tools": offered(ctx), "schema_digest": ctx["schema_digest"], "tokens": 5}
    bad_bodies: list[tuple[dict[str, Any], str]] = [
        ({**good, "tokens": -1}, "tokens"),
        ({**good, "tokens": "5"}, "tokens"),
        ({**good, "schema_digest": "md5:xyz"}, "schema_digest"),
        ({**good, "tools": [{"id": "kv.get"}]}, "version"),
        ({**good, "tools": [{"id": "../etc", "version": "1.0.0"}]}, "id"),
        ({**good, "tools": offered(ctx) + offered(ctx)[:1]}, "tools"),
        ({**good, "surprise": 1}, "surprise"),
        ({k: v for k, v in good.items() if k != "tokens"}, "tokens"),
    ]
    with raw(server, project.keys["app"]) as http:
        for body, where in bad_bodies:
            answer = http.post(f"/v1/contexts/{ctx['context_id']}/disclosures", json=body)
            assert answer.status_code == 422, (body, answer.text)
            problem = answer.json()
            assert problem["code"] == "invalid_input"
            assert any(where in [str(p) for p in e["loc"]] for e in problem["errors"]), problem
        unknown = http.post("/v1/contexts/ctx-nope/disclosures", json=good)
        assert unknown.status_code == 404
        assert unknown.json()["reason"] == "CONTEXT_NOT_FOUND"
    assert len(app.events(ctx["run_id"])["events"]) == before

    # another tenant: the context and the run answer like missing ones
    gapp = clients["gapp"]
    with pytest.raises(PermissionDenied) as caught:
        gapp.report_disclosure(
            ctx["context_id"], tools=offered(ctx), schema_digest=DIGEST, tokens=1
        )
    assert caught.value.reason == "CONTEXT_NOT_FOUND"
    with pytest.raises(PermissionDenied):
        gapp.run_disclosures(ctx["run_id"])
    assert len(app.events(ctx["run_id"])["events"]) == before


@pytest.mark.anyio
async def test_the_runtime_reports_and_validates_like_the_api(tmp_path: Path) -> None:
    from tests.kernel._project import write_runtime_project

    root = write_runtime_project(tmp_path / "kv")
    async with charter.open(root, store="memory:") as rt:
        ctx = await rt.resolve_context("app", "all")
        report = {
            "tools": [{"id": "kv.get", "version": "1.0.0"}, {"id": "nope.tool", "version": "1"}],
            "schema_digest": ctx.schema_digest,
            "tokens": 42,
        }
        answer = await rt.report_disclosure(ctx.context_id, report, as_="app")
        assert answer["flags"]["reported_not_offered"] == ["nope.tool"]
        with pytest.raises(InvalidInput) as caught:
            await rt.report_disclosure(ctx.context_id, {**report, "tokens": True}, as_="app")
        assert caught.value.reason == "DISCLOSURE_INVALID"
        assert "tokens" in str(caught.value)
        with pytest.raises(PermissionDenied):
            await rt.report_disclosure("ctx-missing", report, as_="app")
        events = [e.type for e in await rt.events(ctx.run_id)]
        assert events.count("disclosure_reported") == 1
