"""Artifacts: files confined to their run, create-only and immutable, on local disk and S3."""

from charter.artifacts.local import LocalArtifactStore
from charter.artifacts.names import check_path, split_extension, versions
from charter.artifacts.ports import ArtifactReader, ArtifactRegistry, ArtifactStore, ArtifactWriter
from charter.artifacts.records import (
    ArtifactRecord,
    ObjectInfo,
    Producer,
    StagingArea,
    StagingLimits,
    StoredObject,
    Trust,
)
from charter.artifacts.registry import MemoryRegistry
from charter.artifacts.service import ArtifactService, CallOutputs

__all__ = [
    "ArtifactReader",
    "ArtifactRecord",
    "ArtifactRegistry",
    "ArtifactService",
    "ArtifactStore",
    "ArtifactWriter",
    "CallOutputs",
    "LocalArtifactStore",
    "MemoryRegistry",
    "ObjectInfo",
    "Producer",
    "StagingArea",
    "StagingLimits",
    "StoredObject",
    "Trust",
    "check_path",
    "split_extension",
    "versions",
]
