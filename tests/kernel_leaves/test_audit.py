"""Audit sinks: JSONL append, fan-out, and a failing sink that never fails the call."""

from __future__ import annotations

import json
import logging
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from charter.errors import ConfigError
from charter.kernel.audit import (
    AuditOutcome,
    AuditRecord,
    FanoutAuditSink,
    FsyncPolicy,
    JsonlAuditSink,
)
from charter.kernel.redaction import REDACTED

from .conftest import CANARY

pytestmark = pytest.mark.anyio


def record(call_id: str = "c-1", **extra: Any) -> AuditRecord:
    fields: dict[str, Any] = {
        "at": datetime(2025, 1, 1, 12, 0, tzinfo=UTC),
        "actor": "app",
        "tenant": "acme",
        "tool": "notes.add",
        "tool_version": "1.0.0",
        "call_id": call_id,
        "context_id": "ctx-1",
        "run_id": "run-1",
        "outcome": AuditOutcome.DENIED,
        "code": "permission_denied",
        "reason": "NOT_DISCLOSED",
        "fingerprint": "hmac-sha256:k1:abc",
        "duration_ms": 1.5,
    }
    fields.update(extra)
    return AuditRecord(**fields)


class ListSink:
    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    async def record(self, record: AuditRecord) -> None:
        self.records.append(record)


class BrokenSink:
    async def record(self, record: AuditRecord) -> None:
        raise OSError(f"disk full while writing token={CANARY}")


@pytest.mark.parametrize("policy", ["always", "never"])
async def test_jsonl_sink_appends_one_line_per_record(tmp_path: Path, policy: str) -> None:
    path = tmp_path / "audit" / "audit.jsonl"
    sink = JsonlAuditSink(path, fsync=policy)
    await sink.record(record("c-1"))
    await sink.record(record("c-2", outcome=AuditOutcome.SUCCEEDED, code=None, reason=None))
    sink.close()
    again = JsonlAuditSink(path)  # a new writer appends, never truncates
    await again.record(record("c-3", details={"note": "ok"}))
    again.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["call_id"] for line in lines] == ["c-1", "c-2", "c-3"]
    assert lines[0]["outcome"] == "denied"
    assert lines[0]["reason"] == "NOT_DISCLOSED"
    assert lines[0]["at"] == "2025-01-01T12:00:00+00:00"
    assert lines[2]["details"] == {"note": "ok"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_jsonl_sink_redacts_details_again(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlAuditSink(path)
    await sink.record(record(details={"args": {"api_key": CANARY}}))
    sink.close()
    text = path.read_text()
    assert CANARY not in text
    assert json.loads(text)["details"] == {"args": {"api_key": REDACTED}}


async def test_concurrent_records_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlAuditSink(path, fsync=FsyncPolicy.NEVER)
    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(sink.record, record(f"c-{i}", details={"pad": "x" * 5000}))
    sink.close()
    lines = path.read_text().splitlines()
    assert sorted(json.loads(line)["call_id"] for line in lines) == sorted(
        f"c-{i}" for i in range(50)
    )


def test_unknown_fsync_policy_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="fsync"):
        JsonlAuditSink(tmp_path / "a.jsonl", fsync="sometimes")


async def test_failing_sink_never_fails_the_call_and_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = ListSink()
    reported: list[tuple[int, str]] = []
    fanout = FanoutAuditSink(
        [BrokenSink(), good], on_failure=lambda i, exc: reported.append((i, type(exc).__name__))
    )
    with caplog.at_level(logging.ERROR, logger="charter.audit"):
        await fanout.record(record("c-1"))
        await fanout.record(record("c-2"))
    assert [r.call_id for r in good.records] == ["c-1", "c-2"]
    assert fanout.failures == 2
    assert reported == [(0, "OSError"), (0, "OSError")]
    assert "disk full" in fanout.last_errors[0]
    assert CANARY not in fanout.last_errors[0]
    assert "audit sink #0" in caplog.text
    assert CANARY not in caplog.text


async def test_a_failing_failure_callback_is_contained() -> None:
    def explode(index: int, exc: BaseException) -> None:
        raise RuntimeError("callback broke")

    fanout = FanoutAuditSink([BrokenSink()], on_failure=explode)
    await fanout.record(record())
    assert fanout.failures == 1


_WRITER = """
import anyio, sys
from datetime import UTC, datetime
from pathlib import Path
from charter.kernel.audit import AuditRecord, JsonlAuditSink

async def main(path: str, who: str, count: int) -> None:
    sink = JsonlAuditSink(Path(path), fsync="never")
    for i in range(count):
        await sink.record(AuditRecord(
            at=datetime.now(UTC), actor=who, tenant="t", tool="x", tool_version="1",
            call_id=f"{who}-{i}", context_id=None, run_id=None, outcome="succeeded",
            details={"pad": who * 70000},
        ))
    sink.close()

anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


def test_two_processes_appending_to_one_file_never_split_a_line(tmp_path: Path) -> None:
    """Records of 70 KB (far above PIPE_BUF) from two processes at once: every line whole."""
    import os
    import subprocess
    import sys

    path = tmp_path / "shared.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), who, "150"], env=env)
        for who in ("a", "b")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert len(lines) == 300
    for line in lines:
        assert line["details"]["pad"] == line["actor"] * 70000
    assert {line["call_id"] for line in lines} == {
        f"{who}-{i}" for who in ("a", "b") for i in range(150)
    }


async def test_a_renamed_file_is_followed_by_a_new_one(tmp_path: Path) -> None:
    """Rotation by rename (logrotate without copytruncate): the next record opens a new file."""
    path = tmp_path / "audit.jsonl"
    sink = JsonlAuditSink(path)
    sink.open()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    await sink.record(record("c-1"))
    path.rename(tmp_path / "audit.jsonl.1")
    await sink.record(record("c-2"))
    path.unlink()  # removed outright: recreated too
    await sink.record(record("c-3"))
    sink.close()
    old = (tmp_path / "audit.jsonl.1").read_text().splitlines()
    assert [json.loads(line)["call_id"] for line in old] == ["c-1"]
    assert [json.loads(line)["call_id"] for line in path.read_text().splitlines()] == ["c-3"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
