"""An approver's note is scrubbed of the call's own secret argument values.

The call's secret (``config.api_key``) is redacted in the approval request; an operator who
pastes it into the note of an approval or a rejection — as typed, percent-encoded, base64-
encoded, JSON-escaped, inside a URL — must not get it stored or shown back. A real SQLite
file (main file and WAL) is searched for it; the ledger still verifies.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from pathlib import Path

import pytest

from charter.deploy.ledger_key import ledger_key_for
from charter.errors import InvalidInput
from charter.runtime import open_runtime
from tests.privacy._project import PrivacyProject
from tests.privacy.test_canary_project import found, sqlite_files

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def notes(secret: str) -> list[str]:
    return [
        f"rejected: never use {secret} here",
        f"see https://vault.example/k?v={urllib.parse.quote(secret, safe='')}&x=1",
        f"header was Basic {base64.b64encode(('svc:' + secret).encode()).decode()}",
        "escaped " + json.dumps({"k": secret}).replace(secret[0], f"\\u{ord(secret[0]):04x}"),
        f"url-safe {base64.urlsafe_b64encode(secret.encode()).decode()} ok",
    ]


async def test_a_note_holding_the_calls_secret_is_scrubbed_before_it_is_kept(
    tmp_path: Path, project: PrivacyProject
) -> None:
    c = project.canaries
    db = tmp_path / "charter.db"
    args = {"config": {"api_key": c.arg, "host": "h"}}
    async with open_runtime(project.root, store=f"sqlite:///{db}") as rt:
        ctx = await rt.resolve_context("app", "all")
        decided = []
        for index, note in enumerate(notes(c.arg)):
            call_id = f"w{index}"
            pending = await rt.call(ctx.context_id, "svc.configure", call_id, args, as_="app")
            assert pending.approval is not None
            approval_id = pending.approval["id"]
            shown = await rt.get_approval(approval_id, as_="alice", full=True)
            assert "secret_marks" not in shown  # kernel-only
            decide = rt.approve if index % 2 else rt.reject
            row = await decide(approval_id, as_="alice", reason=note)
            assert row.reason is not None
            assert not found(c.arg, row.reason.encode()), (note, row.reason)
            assert "[REDACTED]" in row.reason
            assert "secret_marks" not in row.row  # dropped once decided
            decided.append(row.reason)
        # the words around it stay; a note without the secret is kept as typed
        assert decided[0] == "rejected: never use [REDACTED] here"
        plain = await rt.call(ctx.context_id, "svc.configure", "w-plain", args, as_="app")
        assert plain.approval is not None
        kept = await rt.approve(plain.approval["id"], as_="alice", reason="host h is right")
        assert kept.reason == "host h is right"
        listed = [a.listed() for a in await rt.approvals(as_="alice")]
        assert len(listed) == 6
        assert all("secret_marks" not in a for a in listed)
        assert not found(c.arg, json.dumps(listed).encode())
        report = await rt.verify(ctx.run_id, ledger_key_for(project.root))
        assert report.ok, report
    for name, blob in sqlite_files(db).items():
        assert not found(c.arg, blob), name


async def test_an_overlong_note_is_refused_and_nothing_is_decided(
    tmp_path: Path, project: PrivacyProject
) -> None:
    args = {"config": {"api_key": project.canaries.arg}}
    async with open_runtime(project.root, store=f"sqlite:///{tmp_path / 'c.db'}") as rt:
        ctx = await rt.resolve_context("app", "all")
        pending = await rt.call(ctx.context_id, "svc.configure", "w1", args, as_="app")
        assert pending.approval is not None
        with pytest.raises(InvalidInput) as refused:
            await rt.reject(pending.approval["id"], as_="alice", reason="x" * 2049)
        assert refused.value.reason == "REASON_TOO_LONG"
        still = await rt.get_approval(pending.approval["id"], as_="alice")
        assert still["status"] == "pending"
