"""Artifact tests: a moto S3 server on 127.0.0.1 for the session, and store backends."""

from __future__ import annotations

import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from charter.artifacts.local import LocalArtifactStore
from charter.artifacts.ports import ArtifactStore


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class LocalBackend:
    """Makes local stores under one temporary directory and looks at their files directly."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def make(
        self,
        *,
        quota_bytes: int | None = None,
        max_file_bytes: int | None = None,
        quota_files: int | None = None,
    ) -> LocalArtifactStore:
        return LocalArtifactStore(
            self.base / uuid.uuid4().hex,
            quota_bytes=quota_bytes,
            quota_files=quota_files,
            max_file_bytes=max_file_bytes,
        )

    def names(self, store: ArtifactStore, run_id: str) -> set[str]:
        assert isinstance(store, LocalArtifactStore)
        run = store.root / run_id
        found: set[str] = set()
        for dirpath, _, filenames in os.walk(run):
            for name in filenames:
                full = Path(dirpath) / name
                if not stat.S_ISDIR(full.lstat().st_mode):
                    found.add(full.relative_to(run).as_posix())
        return found

    def tamper(self, store: ArtifactStore, run_id: str, path: str, data: bytes) -> None:
        assert isinstance(store, LocalArtifactStore)
        (store.root / run_id / path).write_bytes(data)


class S3Backend:
    """Makes S3 stores, each under a fresh prefix of one bucket on the moto server."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self.s3 = s3
        self.bucket = bucket

    def make(
        self,
        *,
        quota_bytes: int | None = None,
        max_file_bytes: int | None = None,
        quota_files: int | None = None,
    ) -> Any:
        from charter.artifacts.s3 import S3ArtifactStore

        return S3ArtifactStore(
            self.s3,
            self.bucket,
            prefix=f"t-{uuid.uuid4().hex}/",
            quota_bytes=quota_bytes,
            quota_files=quota_files,
            max_file_bytes=max_file_bytes,
        )

    def names(self, store: ArtifactStore, run_id: str) -> set[str]:
        prefix = store.run_prefix(run_id)  # type: ignore[attr-defined]
        found: set[str] = set()
        paginator = self.s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            found.update(item["Key"][len(prefix) :] for item in page.get("Contents", ()))
        return found

    def tamper(self, store: ArtifactStore, run_id: str, path: str, data: bytes) -> None:
        key = store.run_prefix(run_id) + path  # type: ignore[attr-defined]
        head = self.s3.head_object(Bucket=self.bucket, Key=key)
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=data, Metadata=head["Metadata"])


@pytest.fixture
def local_backend(tmp_path: Path) -> Iterator[LocalBackend]:
    yield LocalBackend(tmp_path)
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_client(s3_endpoint: str) -> Any:
    from charter.artifacts.s3 import client

    return client(
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        max_attempts=1,
    )


@pytest.fixture(scope="session")
def s3_bucket(s3_client: Any) -> str:
    bucket = "charter-artifacts-test"
    s3_client.create_bucket(Bucket=bucket)
    return bucket
