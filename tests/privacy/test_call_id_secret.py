"""A call id that holds a secret is refused before anything keeps it.

A call id is kept as it is — in the ledger's events, the call row, the audit record, the
answer — so one holding a deployment secret or the call's own secret argument value cannot be
kept redacted: it is refused (``invalid_input`` / ``IDENTIFIER_SECRET``), not echoed, as a
session id is. A real SQLite file (main file and WAL) and the audit JSONL are searched.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from charter.errors import InvalidInput
from charter.kernel.envelope import CallStatus
from charter.runtime import open_runtime
from tests.privacy._project import PrivacyProject
from tests.privacy.test_canary_project import found, sqlite_files

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_call_id_holding_a_secret_is_refused_and_kept_nowhere(
    tmp_path: Path, project: PrivacyProject
) -> None:
    c = project.canaries
    db, audit = tmp_path / "charter.db", tmp_path / "audit.jsonl"
    args = {"url": "https://u.example/", "config": {"api_key": c.arg}}
    b64 = base64.urlsafe_b64encode(c.dep.encode()).decode().rstrip("=")
    ids = {
        "deployment secret": f"c-{c.dep}",
        "deployment secret, base64": f"c.{b64}",
        "the call's own secret argument": f"{c.arg}:1",
    }
    async with open_runtime(project.root, store=f"sqlite:///{db}", audit_file=audit) as rt:
        ctx = await rt.resolve_context("app", "all")
        for what, call_id in ids.items():
            out = await rt.call(ctx.context_id, "svc.fetch", call_id, args, as_="app")
            assert out.status is CallStatus.REJECTED, what
            assert out.error is not None
            assert out.error["reason"] == "IDENTIFIER_SECRET", (what, out.error)
            answer = json.dumps(out.to_dict()).encode()
            assert not found(c.arg, answer)
            assert not found(c.dep, answer)
        ok = await rt.call(ctx.context_id, "svc.fetch", "f-1", args, as_="app")
        assert ok.status is CallStatus.SUCCEEDED, ok.error  # the same call, another id
        assert (await rt.get_call(ctx.context_id, "f-1", as_="app")).call_id == "f-1"
    blobs = {**sqlite_files(db), "audit": audit.read_bytes()}
    assert b"IDENTIFIER_SECRET" in blobs["audit"]  # the refusals are audited
    for name, blob in blobs.items():
        assert not found(c.arg, blob), name
        assert not found(c.dep, blob), name


async def test_an_attachment_ref_holding_a_secret_is_refused_and_kept_nowhere(
    tmp_path: Path, project: PrivacyProject
) -> None:
    """A context's attachments are kept as ids (``kind:ref``, resolved or not) in the
    ``context_resolved`` event and the context row: one holding a known secret is refused
    (``IDENTIFIER_SECRET``, naming the attachment, not echoing it) and nothing is resolved."""
    c = project.canaries
    db = tmp_path / "charter.db"
    async with open_runtime(project.root, store=f"sqlite:///{db}") as rt:
        for attachments in (
            [("note", "n-1"), ("note", f"https://h/?t={c.dep}")],
            [("note", f"r-{base64.b64encode(c.dep.encode()).decode()}")],
        ):
            with pytest.raises(InvalidInput) as refused:
                await rt.resolve_context("app", "all", attachments=attachments)
            assert refused.value.reason == "IDENTIFIER_SECRET"
            assert refused.value.details == {"field": f"attachments[{len(attachments) - 1}]"}
            assert not found(c.dep, str(refused.value).encode())
        ctx = await rt.resolve_context("app", "all", attachments=[("note", "n-1")])
        assert ctx.unresolved == ("note:n-1",)  # a plain ref is kept as it was
    for name, blob in sqlite_files(db).items():
        assert not found(c.dep, blob), name
