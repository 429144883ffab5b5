"""The ledger's artifact checks with sources given directly (no artifact store involved)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from charter.errors import LedgerIntegrityError
from charter.ledger.export import export_run
from charter.ledger.verify import ArtifactUnreadable, verify_run
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from charter.testing.ids import fixed_ledger_key
from charter.testing.scenarios import record_sample_run

pytestmark = pytest.mark.anyio
KEY = fixed_ledger_key("sources")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _store() -> MemoryStore:
    store = MemoryStore(key=KEY, clock=FakeClock())
    await record_sample_run(store, "run-s")
    return store


def missing_at_call(path: str) -> Iterator[bytes]:
    raise ArtifactUnreadable(missing=True)


def irregular_while_reading(path: str) -> Iterator[bytes]:
    yield b"part"
    raise ArtifactUnreadable(missing=False)


def wrong_bytes(path: str) -> Iterator[bytes]:
    assert path == "data/actives.csv"
    yield b"x" * 1234


async def test_verify_run_reports_the_artifact() -> None:
    store = await _store()
    assert (await verify_run(store, "run-s", KEY)).ok  # no source: files are not checked
    for source, reason in (
        (missing_at_call, "ARTIFACT_MISSING"),
        (irregular_while_reading, "ARTIFACT_INTEGRITY_MISMATCH"),
        (wrong_bytes, "ARTIFACT_INTEGRITY_MISMATCH"),
    ):
        report = await verify_run(store, "run-s", KEY, artifacts=source)
        assert (report.ok, report.reason, report.seq, report.artifact_id, report.path) == (
            False,
            reason,
            10,
            "actives-1",
            "data/actives.csv",
        )
        assert report.to_dict()["artifact_id"] == "actives-1"


async def test_export_refuses_and_leaves_nothing(tmp_path: Path) -> None:
    store = await _store()
    for source, reason in (
        (missing_at_call, "ARTIFACT_MISSING"),
        (wrong_bytes, "ARTIFACT_INTEGRITY_MISMATCH"),
    ):
        with pytest.raises(LedgerIntegrityError) as caught:
            await export_run(store, "run-s", tmp_path / "out", KEY, artifacts=source)
        assert (caught.value.reason, caught.value.seq) == (reason, 10)
        assert "actives-1" in caught.value.message
        assert list(tmp_path.iterdir()) == []


async def test_other_source_errors_propagate(tmp_path: Path) -> None:
    store = await _store()

    def broken(path: str) -> Iterator[bytes]:
        raise OSError("store unavailable")

    with pytest.raises(OSError, match="unavailable"):
        await verify_run(store, "run-s", KEY, artifacts=broken)
    with pytest.raises(OSError, match="unavailable"):
        await export_run(store, "run-s", tmp_path / "out", KEY, artifacts=broken)
    assert list(tmp_path.iterdir()) == []
