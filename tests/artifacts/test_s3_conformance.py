"""The S3 store passes the artifact conformance suite against a moto server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest

from charter.testing.artifact_conformance import Backend
from tests.artifacts.conftest import S3Backend
from tests.conformance import ArtifactStoreSuite


class TestS3Store(ArtifactStoreSuite):
    @pytest.fixture
    def backend(self, s3_client: Any, s3_bucket: str) -> Backend:
        return S3Backend(s3_client, s3_bucket)
