"""A note about a run — a proposal's approve, reject or apply reason, a run's or a task's
ending reason — is scrubbed of the secrets the run's calls carried under sensitive keys.

Such a note is about the whole run, so it is checked against the secret marks of every call
of the run (docs/privacy.md), not only against the deployment's secrets: an operator who
writes "rejected: key ARGSECRET… leaked" does not get the call's secret kept in the ledger, a
row, the audit record or an answer. Over Python, HTTP (client and API), the CLI and the
console (which calls the same services). A real SQLite file (main file and WAL) and the
audit JSONL are searched.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from charter.client import Client
from charter.deploy.ledger_key import ledger_key_for
from charter.proposals import ProposalService, load_proposal_settings
from charter.runtime import Runtime, open_runtime
from charter.server import create_app
from tests.privacy._project import PrivacyProject
from tests.privacy.test_canary_project import found, sqlite_files
from tests.server._harness import ThreadServer, stored_bytes

pytestmark = pytest.mark.anyio

PROPOSAL_TOOLS = '''

@charter.tool("svc.propose", effect="proposal")
def propose(target: str, config: dict[str, Any]) -> dict[str, Any]:
    """Propose a configuration change that needs the caller's key."""
    return {"proposal": {"kind": "cfg", "target": target, "baseline_version": 1,
                         "payload": {"hosts": ["h"]}, "rationale": "more hosts"}}


@charter.tool("svc.checkcfg")
def checkcfg(target: str, baseline_version: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Validate a configuration proposal."""
    return {"diagnostics": []}


@charter.tool("svc.applycfg")
def applycfg(
    proposal_id: str, target: str, baseline_version: int, payload: dict[str, Any]
) -> dict[str, Any]:
    """Apply a configuration proposal."""
    return {"applied": proposal_id}
'''


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def proposing(project: PrivacyProject) -> PrivacyProject:
    """The privacy project with a proposal kind whose tool takes a secret (``config``)."""
    root = project.root
    (root / "tools.py").write_text((root / "tools.py").read_text() + PROPOSAL_TOOLS)
    yaml = (root / "charter.yaml").read_text()
    (root / "charter.yaml").write_text(
        yaml.replace("svc.chatty]", "svc.chatty, svc.propose, svc.checkcfg, svc.applycfg]")
    )
    deploy = json.loads((root / "charter.deploy.yaml").read_text())
    deploy["principals"]["alice"]["permissions"] += ["proposals:approve", "proposals:apply"]
    deploy["enable"] += ["svc.propose"]
    deploy["proposals"] = {
        "kinds": {"cfg": {"profile": "all", "validate": "svc.checkcfg", "apply": "svc.applycfg"}}
    }
    (root / "charter.deploy.yaml").write_text(json.dumps(deploy, indent=2))
    return project


def notes(secret: str) -> list[str]:
    return [
        f"key {secret} was leaked",
        "see " + base64.b64encode(f"k:{secret}".encode()).decode(),
    ]


async def _propose(rt: Runtime, context_id: str, call_id: str, secret: str) -> str:
    args = {"target": "t1", "config": {"api_key": secret}}
    made = await rt.call(context_id, "svc.propose", call_id, args, as_="app")
    assert made.data is not None, made.error
    return str(made.data["proposal"]["proposal_id"])


def _clean(secret: str, value: Any) -> None:
    text = json.dumps(value)
    assert "[REDACTED]" in text, text
    assert not found(secret, text.encode()), text


async def test_python_notes_about_a_run_hold_none_of_its_calls_secrets(
    tmp_path: Path, proposing: PrivacyProject
) -> None:
    c = proposing.canaries
    db, audit = tmp_path / "charter.db", tmp_path / "audit.jsonl"
    async with open_runtime(proposing.root, store=f"sqlite:///{db}", audit_file=audit) as rt:
        service = ProposalService(rt, load_proposal_settings(rt.deployment.source))
        alice = rt.principal("alice")
        ctx = await rt.resolve_context("app", "all")
        for index, note in enumerate(notes(c.arg)):
            rejected = await _propose(rt, ctx.context_id, f"r{index}", c.arg)
            row = await service.decide(rejected, approve=False, principal=alice, reason=note)
            assert row["status"] == "rejected"
            _clean(c.arg, row["history"])
            approved = await _propose(rt, ctx.context_id, f"a{index}", c.arg)
            row = await service.decide(approved, approve=True, principal=alice, reason=note)
            _clean(c.arg, row["history"])
            row = await service.apply(approved, principal=alice, reason=note)
            assert row["status"] == "applied"
            assert [h["status"] for h in row["history"]][-2:] == ["approved", "applied"]
            _clean(c.arg, row["history"][-1])
        # a note without the secret is kept as typed
        plain = await _propose(rt, ctx.context_id, "p", c.arg)
        row = await service.decide(plain, approve=False, principal=alice, reason="not now")
        assert row["history"][-1]["reason"] == "not now"
        # the run ends with a note quoting the secret of one of its calls
        ended = await rt.operations.end_run(
            ctx.run_id, "failed", reason=f"failed: {c.arg} leaked", as_="alice"
        )
        _clean(c.arg, ended)
        events = await rt.events(ctx.run_id, after=0, limit=1000)
        assert not found(c.arg, json.dumps([e.payload for e in events]).encode())
        assert (await rt.verify(ctx.run_id, ledger_key_for(proposing.root))).ok
    for name, blob in {**sqlite_files(db), "audit": audit.read_bytes()}.items():
        assert not found(c.arg, blob), name


def test_http_and_cli_notes_about_a_run_hold_none_of_its_calls_secrets(
    tmp_path: Path, proposing: PrivacyProject
) -> None:
    c, root = proposing.canaries, proposing.root
    store = "sqlite:///.charter/charter.db"
    ids: dict[str, str] = {}

    async def prepare() -> None:
        async with open_runtime(root, store=store) as rt:
            ctx = await rt.resolve_context("app", "all")
            for name in ("http", "cli"):
                ids[name] = await _propose(rt, ctx.context_id, name, c.arg)
            for name in ("run-http", "run-cli"):
                other = await rt.resolve_context("app", "all")
                await rt.call(
                    other.context_id, "svc.fetch", "f1",
                    {"url": "https://u.example", "config": {"api_key": c.arg}}, as_="app",
                )  # fmt: skip
                ids[name] = other.run_id

    anyio.run(prepare)

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root, store=store)

    with ThreadServer(create_app(opener=opener, sse_keepalive_s=0.5)) as live:
        with Client(live.url, proposing.alice_key) as alice:
            row = alice.reject_proposal(ids["http"], reason=f"key {c.arg} was leaked")
            _clean(c.arg, row["history"])
            ended = alice.cancel_run(ids["run-http"], reason=f"cancelled: {c.arg} leaked")
            assert ended["status"] == "cancelled"
        auth = {"Authorization": f"Bearer {proposing.alice_key}"}
        with httpx.Client(base_url=live.url, headers=auth, trust_env=False) as http:
            got = http.get(f"/v1/proposals/{ids['http']}")
            assert got.status_code == 200, got.text
            assert not found(c.arg, got.content), got.text
            assert _ending(http, ids["run-http"]) == "cancelled: [REDACTED] leaked"
        assert not found(c.arg, stored_bytes(root))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update(proposing.env)
    cli = [sys.executable, "-m", "charter"]
    where = ["--project", str(root), "--store", store, "--as", "alice", "--json"]
    for argv in (
        ["proposals", "reject", ids["cli"], "--reason", f"key {c.arg} was leaked"],
        ["runs", "cancel", ids["run-cli"], "--reason", f"cancelled: {c.arg} leaked"],
    ):
        done = subprocess.run(
            [*cli, *argv, *where], cwd=root, capture_output=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert not found(c.arg, done.stdout + done.stderr)
    shown = json.loads(done.stdout)
    assert shown["status"] == "cancelled"
    with ThreadServer(create_app(opener=opener, sse_keepalive_s=0.5)) as live:
        auth = {"Authorization": f"Bearer {proposing.alice_key}"}
        with httpx.Client(base_url=live.url, headers=auth, trust_env=False) as http:
            assert _ending(http, ids["run-cli"]) == "cancelled: [REDACTED] leaked"
            rejected = http.get(f"/v1/proposals/{ids['cli']}").json()
            assert rejected["history"][-1]["reason"] == "key [REDACTED] was leaked"
    assert not found(c.arg, stored_bytes(root))


def _ending(http: httpx.Client, run_id: str) -> str:
    """The reason the run's last status change (its ending) recorded."""
    got = http.get(f"/v1/runs/{run_id}/events", headers={"Accept": "application/json"})
    assert got.status_code == 200, got.text
    changes = [e for e in got.json()["events"] if e["type"] == "run_status_changed"]
    return str(changes[-1]["payload"]["reason"])
