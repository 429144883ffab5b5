"""A canary secret must leave no trace: not in the database, its WAL, the audit file or the CLI.

The canary travels every way a secret reaches the kernel: in a nested argument under a
sensitive key (``{"config": {"api_key": CANARY}}``), in a tool's exception message
(``could not connect with CANARY``), in a result under a sensitive key (``{"token": CANARY}``)
and — the hard one — echoed by a tool under an innocent key (``{"note": "issued for
CANARY"}``), and through the approval flow of a write tool (the approval's argument summary).
Then the raw bytes of the SQLite file and its ``-wal`` (while open and after closing), the
audit JSONL and the output of ``charter call --json``, ``charter calls show``,
``charter approvals ls --json`` and ``charter runs events --json`` are searched for it.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from charter.kernel.envelope import CallStatus, Envelope
from charter.runtime import Runtime, open_runtime
from tests.kernel._project import runs_of, write_runtime_project

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CHARTER = Path(sys.executable).with_name("charter")


def leaks(canary: str, blob: bytes) -> bool:
    """The canary, or its distinctive random half, in any common encoding."""
    tail = canary.split("-", 1)[1]
    needles = {canary, tail, canary.encode().hex(), tail.encode().hex()}
    text = blob.decode("utf-8", "replace")
    return any(n in text for n in needles) or canary.encode("utf-16-le") in blob


def database_bytes(db: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists()}


async def make_calls(rt: Runtime, ctx: str, canary: str) -> dict[str, Envelope]:
    secret_args = {"config": {"api_key": canary, "host": "db.internal"}}
    out = {
        "connect": await rt.call(ctx, "svc.connect", "connect", secret_args, as_="app"),
        "issue": await rt.call(ctx, "svc.issue", "issue", secret_args, as_="app"),
    }
    pending = await rt.call(ctx, "svc.configure", "configure", secret_args, as_="app")
    assert pending.status is CallStatus.PENDING_APPROVAL
    assert pending.approval is not None
    await rt.approve(pending.approval["id"], as_="alice")
    out["configure"] = await rt.call(ctx, "svc.configure", "configure", secret_args, as_="app")
    # repeats answer from the recorded receipts; refusals echo nothing either
    out["issue-again"] = await rt.call(ctx, "svc.issue", "issue", secret_args, as_="app")
    other = {"config": {"api_key": canary, "host": "elsewhere"}}
    out["conflict"] = await rt.call(ctx, "svc.issue", "issue", other, as_="app")
    bad = {**secret_args, "extra": canary}
    out["rejected"] = await rt.call(ctx, "svc.issue", "bad", bad, as_="app")
    return out


def cli(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    proc = subprocess.run(
        [str(CHARTER), *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    return proc.stdout + proc.stderr


async def test_canary_secret_is_found_nowhere(tmp_path: Path) -> None:
    canary = f"CANARY-7f3a{secrets.token_hex(12)}"
    project = write_runtime_project(tmp_path / "kv")
    db = tmp_path / "charter.db"
    store = f"sqlite:///{db}"
    audit = tmp_path / "audit.jsonl"
    async with open_runtime(project, store=store, audit_file=audit) as rt:
        ctx = await rt.resolve_context("app", "all")
        answers = await make_calls(rt, ctx.context_id, canary)
        open_files = database_bytes(db)
        rows = [
            (await rt.get_call(ctx.context_id, cid, as_="app")).to_dict()
            for cid in ("connect", "issue", "configure")
        ]
        approvals = [a.to_dict() for a in await rt.approvals(as_="alice")]

    # the calls did what they should, and the tools really saw the secret
    assert answers["connect"].status is CallStatus.FAILED
    assert answers["connect"].error is not None
    assert answers["connect"].error["reason"] == "TOOL_RAISED"
    assert "could not connect with [REDACTED]" in answers["connect"].error["message"]
    issued: Any = answers["issue"].data
    assert issued["token"] == "[REDACTED]"
    assert answers["configure"].status is CallStatus.SUCCEEDED
    assert answers["issue-again"].metrics.cached is True
    assert answers["conflict"].status is CallStatus.CONFLICT
    assert answers["rejected"].status is CallStatus.REJECTED
    assert runs_of(project, "svc.issue") == runs_of(project, "svc.configure") == 1

    for name, answer in answers.items():
        assert not leaks(canary, json.dumps(answer.to_dict()).encode()), name
    assert not leaks(canary, json.dumps(rows).encode())
    assert not leaks(canary, json.dumps(approvals).encode())
    assert "-wal" in " ".join(open_files), "the database should be in WAL mode while open"
    for name, blob in open_files.items():
        assert not leaks(canary, blob), f"{name} (open)"
    for name, blob in database_bytes(db).items():
        assert not leaks(canary, blob), f"{name} (closed)"
    assert audit.stat().st_size > 0
    assert not leaks(canary, audit.read_bytes()), "audit JSONL"

    # the CLI: a call with the secret, showing calls, listing approvals, the run's events
    raw_args = json.dumps({"config": {"api_key": canary}})
    where = ["--project", str(project), "--store", store]
    outputs = {
        "call connect": cli(
            "call", "svc.connect", "--context", ctx.context_id, "--call-id", "cli-1",
            "--args", raw_args, "--json", *where,
        ),
        "call issue": cli(
            "call", "svc.issue", "--context", ctx.context_id, "--call-id", "cli-2",
            "--args", raw_args, *where,
        ),
        "calls show": cli("calls", "show", "issue", "--context", ctx.context_id, *where),
        "calls show --json": cli(
            "calls", "show", "connect", "--context", ctx.context_id, "--json", *where
        ),
        "approvals ls": cli("approvals", "ls", "--as", "alice", "--json", *where),
        "runs events": cli("runs", "events", ctx.run_id, "--json", "--store", store),
    }  # fmt: skip
    assert "TOOL_RAISED" in outputs["call connect"]
    assert "[REDACTED]" in outputs["call issue"]
    assert "svc.configure" in outputs["approvals ls"]
    assert "tool_progress" in outputs["runs events"]
    for name, text in outputs.items():
        assert not leaks(canary, text.encode()), name
    assert runs_of(project, "svc.connect") == 2
    for name, blob in database_bytes(db).items():
        assert not leaks(canary, blob), f"{name} (after the CLI)"
    assert not leaks(canary, audit.read_bytes())
