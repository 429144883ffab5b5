"""An operator's note resolving an ``unknown`` call is scrubbed of the call's own secrets.

The call's intent keeps keyed marks of its secret argument values (``secret_marks``), as an
approval request does, so an operator who pastes the call's secret into the note resolving it
("abandoned: key sk-… was revoked") does not get it kept in the ledger, the call row or the
audit record. A real SQLite file (main file and WAL) and the audit JSONL are searched.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from pathlib import Path

import pytest

from charter.deploy.ledger_key import ledger_key_for
from charter.errors import InvalidInput, PermissionDenied
from charter.runtime import open_runtime
from tests.privacy._project import PrivacyProject
from tests.privacy.test_canary_project import found, sqlite_files

pytestmark = pytest.mark.anyio

SLOW_TOOL = '''

@charter.tool("svc.slow")
async def slow(config: dict[str, Any]) -> dict[str, Any]:
    """Hang on an upstream (the caller gives up: the outcome is unknown)."""
    import asyncio

    await asyncio.sleep(60)
    return {}
'''


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_resolution_note_holding_the_calls_secret_is_scrubbed(
    tmp_path: Path, project: PrivacyProject
) -> None:
    c = project.canaries
    (project.root / "tools.py").write_text((project.root / "tools.py").read_text() + SLOW_TOOL)
    yaml = (project.root / "charter.yaml").read_text()
    (project.root / "charter.yaml").write_text(yaml.replace("svc.chatty]", "svc.chatty, svc.slow]"))
    db, audit = tmp_path / "charter.db", tmp_path / "audit.jsonl"
    args = {"config": {"api_key": c.arg}}
    async with open_runtime(project.root, store=f"sqlite:///{db}", audit_file=audit) as rt:
        ctx = await rt.resolve_context("app", "all")
        notes = {
            "u1": f"abandoned: key {c.arg} was revoked",
            "u2": "see " + base64.b64encode(f"k:{c.arg}".encode()).decode(),
        }
        for call_id in notes:
            call = asyncio.create_task(
                rt.call(ctx.context_id, "svc.slow", call_id, args, as_="app")
            )
            for _ in range(500):
                await asyncio.sleep(0.01)
                with contextlib.suppress(PermissionDenied):  # not reserved yet
                    if (
                        await rt.get_call(ctx.context_id, call_id, as_="app")
                    ).state == "dispatching":
                        break
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            row = await rt.get_call(ctx.context_id, call_id, as_="app")
            assert row.state == "unknown"
            assert "secret_marks" not in row.to_dict()  # kernel-only
        for call_id, note in notes.items():
            done = await rt.resolve_call(
                ctx.context_id, call_id, outcome="abandoned", reason=note, as_="alice"
            )
            assert done.state == "abandoned"
            kept = json.dumps(done.to_dict())
            assert "[REDACTED]" in kept
            assert not found(c.arg, kept.encode())
        with pytest.raises(InvalidInput) as long:
            await rt.resolve_call(
                ctx.context_id, "u1", outcome="abandoned", reason="x" * 2049, as_="alice"
            )
        assert long.value.reason == "REASON_TOO_LONG"
        assert (await rt.verify(ctx.run_id, ledger_key_for(project.root))).ok
    assert b"abandoned: key [REDACTED] was revoked" in audit.read_bytes()
    for name, blob in {**sqlite_files(db), "audit": audit.read_bytes()}.items():
        assert not found(c.arg, blob), name
