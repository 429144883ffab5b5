"""``ctx.progress``: a tool's messages become ``tool_progress`` events of stage ``message``,
redacted as one stream (a secret split across two messages is caught), recorded before the
call's outcome, and bounded per call. A real SQLite file, searched for the secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from charter.kernel.envelope import CallStatus
from charter.kernel.progress import MAX_MESSAGES
from charter.runtime import open_runtime
from tests.privacy._project import PrivacyProject

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_progress_messages_are_recorded_redacted_in_order_and_bounded(
    tmp_path: Path, project: PrivacyProject
) -> None:
    c = project.canaries
    db = tmp_path / "charter.db"
    async with open_runtime(project.root, store=f"sqlite:///{db}") as rt:
        ctx = await rt.resolve_context("app", "all")
        count = MAX_MESSAGES + 20
        done = await rt.call(
            ctx.context_id,
            "svc.chatty",
            "p1",
            {"count": count, "config": {"api_key": c.arg}},
            as_="app",
        )
        assert done.status is CallStatus.SUCCEEDED, done.error
        events = [
            e
            for e in await rt.events(ctx.run_id, limit=1000)
            if e.type == "tool_progress" and e.payload.get("call_id") == "p1"
        ]
    stages = [e.payload["stage"] for e in events]
    assert stages[0] == "started"
    assert stages[-1] == "completed"
    messages = [e.payload for e in events if e.payload["stage"] == "message"]
    assert stages[1 : 1 + len(messages)] == ["message"] * len(messages)  # before the outcome
    said = "".join(m["text"] for m in messages)
    assert "using key [REDACTED] now" in said  # the key, split over two messages, caught whole
    assert c.arg not in said
    assert c.arg[7:] not in said
    assert "line 0;line 1;" in said  # order kept
    assert len(messages) == MAX_MESSAGES + 1  # bounded: the rest is counted, not recorded
    assert messages[-1]["dropped"] > 0
    assert f"line {count - 1};" not in said
    for path in (db, Path(f"{db}-wal")):
        if path.exists():
            assert c.arg.encode() not in path.read_bytes()
            assert c.arg[7:].encode() not in path.read_bytes()
