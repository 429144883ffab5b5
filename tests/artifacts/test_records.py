"""Registration records, their ledger mapping, and the artifact service over a local store."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from charter.artifacts.local import LocalArtifactStore
from charter.artifacts.records import ArtifactRecord, Producer, StoredObject, Trust
from charter.artifacts.registry import MemoryRegistry
from charter.artifacts.service import ArtifactService
from charter.errors import Failure, InvalidInput
from charter.ledger.projections import artifact_key
from charter.stores.memory import MemoryStore
from charter.testing.clock import FakeClock
from charter.testing.ids import fixed_ledger_key
from charter.testing.scenarios import ev, run_created

GOOD: dict[str, Any] = {
    "artifact_id": "artifact-0123456789ab",
    "run_id": "run-r",
    "type": "gtm.map",
    "media_type": "application/octet-stream",
    "path": "maps/gtm.pkl.gz",
    "sha256": "sha256:" + "ab" * 32,
    "size": 42,
    "producer": Producer(task_id="analyse", tool_id="gtm.build", call_id="call-1"),
    "trust": Trust.INTERNAL,
    "created_at": "2025-01-02T03:04:05.000006Z",
}


def test_record_round_trips_through_the_event_payload() -> None:
    record = ArtifactRecord(**GOOD)
    payload = record.to_event_payload()
    assert payload == {
        "artifact_id": "artifact-0123456789ab",
        "type": "gtm.map",
        "media_type": "application/octet-stream",
        "path": "maps/gtm.pkl.gz",
        "sha256": "sha256:" + "ab" * 32,
        "size": 42,
        "producer": {"task_id": "analyse", "tool_id": "gtm.build", "call_id": "call-1"},
        "trust": "internal",
        "created_at": "2025-01-02T03:04:05.000006Z",
    }
    assert ArtifactRecord.from_event_payload("run-r", payload) == record


@pytest.mark.anyio
async def test_the_payload_is_what_the_ledger_projection_accepts() -> None:
    record = ArtifactRecord(**GOOD)
    store = MemoryStore(key=fixed_ledger_key())
    await store.append(
        "run-r", [run_created(), ev("artifact_registered", **record.to_event_payload())]
    )
    row = await store.get_row(artifact_key("run-r", record.artifact_id))
    assert row is not None
    for name in ("artifact_id", "path", "sha256", "media_type", "size", "trust", "created_at"):
        assert row[name] == record.to_event_payload()[name]
    assert row["producer"] == record.producer.to_dict()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("artifact_id", "../x"),
        ("run_id", ""),
        ("type", "has space"),
        ("media_type", "Text/CSV"),
        ("media_type", "text/csv\r\nX-Injected: 1"),
        ("media_type", "nonsense"),
        ("path", "../escape"),
        ("path", "manifest.json"),
        ("sha256", "ab" * 32),
        ("sha256", "sha256:" + "AB" * 32),
        ("size", -1),
        ("size", True),
        ("trust", "trusted"),
        ("created_at", "2025-01-02 03:04:05"),
        ("created_at", "2025-01-02T03:04:05+01:00"),
        ("producer", {"task_id": "x"}),
        ("producer", Producer(tool_id="bad\nid")),
    ],
)
def test_invalid_records_are_refused(field: str, value: object) -> None:
    with pytest.raises((InvalidInput, ValueError)):
        ArtifactRecord(**{**GOOD, field: value})


def test_media_type_parameters_are_allowed() -> None:
    record = ArtifactRecord(**{**GOOD, "media_type": "text/csv; charset=utf-8"})
    assert record.media_type == "text/csv; charset=utf-8"


def test_same_content_ignores_id_and_time_only() -> None:
    record = ArtifactRecord(**GOOD)
    retried = dataclasses.replace(
        record, artifact_id="artifact-2", created_at="2026-01-01T00:00:00Z"
    )
    assert record.same_content(retried)
    assert not record.same_content(dataclasses.replace(record, trust=Trust.UNTRUSTED))
    assert not record.same_content(dataclasses.replace(record, producer=Producer(task_id="x")))


@pytest.fixture
def service(tmp_path: Path) -> ArtifactService:
    ids = iter(f"artifact-{n}" for n in range(100))
    return ArtifactService(
        store=LocalArtifactStore(tmp_path / "store"),
        registry=MemoryRegistry(),
        clock=FakeClock(),
        new_artifact_id=lambda: next(ids),
    )


@pytest.mark.anyio
async def test_register_read_and_verify(service: ArtifactService, tmp_path: Path) -> None:
    stored = await service.write_bytes("run-r", "out/r.csv", b"a\n")
    record = await service.register(
        "run-r",
        stored,
        type="table",
        media_type="text/csv",
        producer=Producer(task_id="t", tool_id="tool", call_id="c"),
        trust=Trust.EXTERNAL,
    )
    assert (record.artifact_id, record.created_at) == ("artifact-0", "2025-01-01T00:00:00.000000Z")
    assert await service.read_bytes("run-r", "artifact-0") == b"a\n"
    assert await service.verify("run-r", "artifact-0") == record
    (tmp_path / "store" / "run-r" / "out" / "r.csv").write_bytes(b"b\n")
    with pytest.raises(Failure) as info:
        await service.read_bytes("run-r", "artifact-0")
    assert info.value.reason == "ARTIFACT_INTEGRITY_MISMATCH"
    with pytest.raises(Failure) as info:
        await service.verify("run-r", "artifact-0")
    assert info.value.reason == "ARTIFACT_INTEGRITY_MISMATCH"
    with pytest.raises(Failure) as info:
        await service.read_bytes("run-r", "artifact-404")
    assert info.value.reason == "ARTIFACT_NOT_FOUND"


@pytest.mark.anyio
async def test_register_checks_the_file_is_there(service: ArtifactService) -> None:
    stored = await service.write_bytes("run-r", "x.txt", b"xyz")
    kwargs: dict[str, Any] = {
        "type": "t",
        "media_type": "text/plain",
        "producer": Producer(),
        "trust": Trust.UNTRUSTED,
    }
    with pytest.raises(Failure) as info:
        await service.register("run-r", dataclasses.replace(stored, size=2), **kwargs)
    assert info.value.reason == "ARTIFACT_INTEGRITY_MISMATCH"
    missing = StoredObject(path="nope.txt", sha256=stored.sha256, size=3)
    with pytest.raises(Failure) as info:
        await service.register("run-r", missing, **kwargs)
    assert info.value.reason == "ARTIFACT_NOT_FOUND"
    first = await service.register("run-r", stored, **kwargs)
    assert await service.register("run-r", stored, **kwargs) == first


@pytest.mark.anyio
async def test_a_failing_call_is_rolled_back(service: ArtifactService, tmp_path: Path) -> None:
    outputs = service.outputs("run-r")
    kept = outputs.put("kept.txt", b"registered")
    await service.register(
        "run-r", kept, type="t", media_type="text/plain", producer=Producer(), trust="internal"
    )
    outputs.put("one.txt", b"1")
    with outputs.open_write("two/two.txt") as writer:
        writer.write(b"2")
    failed = outputs.open_write("three.txt")
    failed.write(b"never published")
    failed.abort()
    assert [o.path for o in outputs.written] == ["kept.txt", "one.txt", "two/two.txt"]
    removed = await service.rollback("run-r", outputs.written)
    assert removed == ("one.txt", "two/two.txt")
    assert [i.path for i in service.store.list("run-r")] == ["kept.txt"]
    assert not list((tmp_path / "store" / "run-r" / ".staging").iterdir())
