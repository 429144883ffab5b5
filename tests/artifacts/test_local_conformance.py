"""The local store passes the artifact conformance suite; the memory registry passes its own."""

from __future__ import annotations

import pytest

from charter.artifacts.ports import ArtifactRegistry
from charter.artifacts.registry import MemoryRegistry
from charter.testing.artifact_conformance import Backend
from tests.artifacts.conftest import LocalBackend
from tests.conformance import ArtifactStoreSuite, RegistrySuite


class TestLocalStore(ArtifactStoreSuite):
    @pytest.fixture
    def backend(self, local_backend: LocalBackend) -> Backend:
        return local_backend


class TestMemoryRegistry(RegistrySuite):
    @pytest.fixture
    def registry(self) -> ArtifactRegistry:
        return MemoryRegistry()
