"""Artifact records: what a store holds, a staging area, and the registration record.

:class:`ArtifactRecord` maps one-to-one onto the payload of an ``artifact_registered`` ledger
event (:meth:`ArtifactRecord.to_event_payload` / :meth:`ArtifactRecord.from_event_payload`);
the event's ``run_id`` is the record's ``run_id``. It validates itself on construction, so a
record that exists is one the ledger's projection accepts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from charter.artifacts.names import check_path
from charter.errors import InvalidInput
from charter.ledger.ids import check_identifier

SHA256 = re.compile(r"^sha256:[0-9a-f]{64}$")
"""Checksums are written ``sha256:<64 lower-case hex>``, as everywhere in Charter."""

MEDIA_TYPE = re.compile(
    r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}"
    r"(?:; ?[a-z0-9_-]{1,32}=[A-Za-z0-9_.+-]{1,64}){0,4}$"
)
"""``type/subtype`` in lower case, with at most four simple parameters (``; charset=utf-8``)."""

CREATED_AT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z$")
"""RFC 3339 UTC, as the ledger writes times (``2025-01-02T03:04:05.000006Z``)."""


class Trust(StrEnum):
    """How far an artifact's content may be trusted."""

    INTERNAL = "internal"  # produced by a tool Charter ran
    EXTERNAL = "external"  # fetched from an outside system by a tool
    UNTRUSTED = "untrusted"  # uploaded by a user or written by an unvetted worker


def check_sha256(value: object, *, what: str = "sha256") -> str:
    if not isinstance(value, str) or SHA256.fullmatch(value) is None:
        raise InvalidInput(f"{what} must be sha256:<64 hex>", reason="ARTIFACT_RECORD_INVALID")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredObject:
    """A file as a store holds it: run-relative path, checksum and size in bytes."""

    path: str
    sha256: str
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectInfo:
    """What ``stat`` and ``list`` report without reading the content."""

    path: str
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StagingArea:
    """A per-call area a subprocess executor writes into, accepted or discarded by the parent.

    ``location`` is where the worker writes: a directory path for the local store, an
    ``s3://bucket/prefix/`` for S3. Paths inside it are run-relative artifact paths.
    """

    run_id: str
    call_id: str
    attempt: int
    name: str
    location: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StagingLimits:
    """What the parent accepts from a staging area."""

    max_files: int = 1000
    max_file_bytes: int | None = None
    max_total_bytes: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Producer:
    """Who produced an artifact: the task, tool and call (any may be absent, e.g. uploads)."""

    task_id: str | None = None
    tool_id: str | None = None
    call_id: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"task_id": self.task_id, "tool_id": self.tool_id, "call_id": self.call_id}


def _any(payload: Mapping[str, Any], name: str) -> Any:
    return payload.get(name)  # the record checks every field's type itself


def _opt_text(value: object, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 256 or not value.isprintable():
        raise InvalidInput(f"{what} must be a printable string", reason="ARTIFACT_RECORD_INVALID")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactRecord:
    """The registration of one artifact: immutable once the ledger holds it."""

    artifact_id: str
    run_id: str
    type: str
    media_type: str
    path: str
    sha256: str
    size: int
    producer: Producer
    trust: Trust
    created_at: str

    def __post_init__(self) -> None:
        check_identifier(self.artifact_id, what="artifact_id")
        check_identifier(self.run_id, what="run_id")
        check_identifier(self.type, what="artifact type")
        if not isinstance(self.media_type, str) or MEDIA_TYPE.fullmatch(self.media_type) is None:
            raise InvalidInput(
                "media_type must be type/subtype in lower case", reason="ARTIFACT_RECORD_INVALID"
            )
        check_path(self.path, portable=False)  # registrations recorded before the rules
        check_sha256(self.sha256)
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 0:
            raise InvalidInput(
                "size must be a non-negative integer", reason="ARTIFACT_RECORD_INVALID"
            )
        if not isinstance(self.producer, Producer):
            raise InvalidInput("producer must be a Producer", reason="ARTIFACT_RECORD_INVALID")
        _opt_text(self.producer.task_id, "producer.task_id")
        _opt_text(self.producer.tool_id, "producer.tool_id")
        _opt_text(self.producer.call_id, "producer.call_id")
        object.__setattr__(self, "trust", Trust(self.trust))
        if not isinstance(self.created_at, str) or CREATED_AT.fullmatch(self.created_at) is None:
            raise InvalidInput("created_at must be RFC 3339 UTC", reason="ARTIFACT_RECORD_INVALID")

    def same_content(self, other: ArtifactRecord) -> bool:
        """Equal in every field but ``artifact_id`` and ``created_at`` (a retried registration)."""
        return (
            self.run_id,
            self.type,
            self.media_type,
            self.path,
            self.sha256,
            self.size,
            self.producer,
            self.trust,
        ) == (
            other.run_id,
            other.type,
            other.media_type,
            other.path,
            other.sha256,
            other.size,
            other.producer,
            other.trust,
        )

    def stored(self) -> StoredObject:
        return StoredObject(path=self.path, sha256=self.sha256, size=self.size)

    def to_event_payload(self) -> dict[str, Any]:
        """The ``artifact_registered`` payload (the event carries ``run_id`` itself)."""
        return {
            "artifact_id": self.artifact_id,
            "type": self.type,
            "media_type": self.media_type,
            "path": self.path,
            "sha256": self.sha256,
            "size": self.size,
            "producer": self.producer.to_dict(),
            "trust": self.trust.value,
            "created_at": self.created_at,
        }

    @classmethod
    def from_event_payload(cls, run_id: str, payload: Mapping[str, Any]) -> ArtifactRecord:
        producer = payload.get("producer") or {}
        if not isinstance(producer, Mapping):
            raise InvalidInput("producer must be an object", reason="ARTIFACT_RECORD_INVALID")
        try:
            trust = Trust(_any(payload, "trust"))
        except ValueError:
            raise InvalidInput(
                "trust must be internal, external or untrusted", reason="ARTIFACT_RECORD_INVALID"
            ) from None
        return cls(
            artifact_id=_any(payload, "artifact_id"),
            run_id=run_id,
            type=_any(payload, "type"),
            media_type=_any(payload, "media_type"),
            path=_any(payload, "path"),
            sha256=_any(payload, "sha256"),
            size=_any(payload, "size"),
            producer=Producer(
                task_id=producer.get("task_id"),
                tool_id=producer.get("tool_id"),
                call_id=producer.get("call_id"),
            ),
            trust=trust,
            created_at=_any(payload, "created_at"),
        )
