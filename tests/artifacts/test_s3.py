"""S3-only behaviour: references into the bucket, hostile staged keys, error translation."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from charter.artifacts.s3 import S3ArtifactStore, client, translate
from charter.errors import ConfigError, Failure, StoreError

RUN = "run-s3"


@pytest.fixture
def store(s3_client: Any, s3_bucket: str, request: pytest.FixtureRequest) -> S3ArtifactStore:
    return S3ArtifactStore(s3_client, s3_bucket, prefix=f"s3only/{request.node.name[:40]}/")


def _reason(info: pytest.ExceptionInfo[Failure]) -> str:
    return info.value.reason


def test_references_into_the_bucket(store: S3ArtifactStore, s3_bucket: str) -> None:
    store.put(RUN, "a/b.txt", b"b")
    own = f"s3://{s3_bucket}/{store.run_prefix(RUN)}a/b.txt"
    assert store.read_bytes(RUN, own) == b"b"
    for ref, reason in [
        ("s3://other-bucket/x.txt", "ARTIFACT_BUCKET_FOREIGN"),
        (f"s3://{s3_bucket}-evil/{store.run_prefix(RUN)}a/b.txt", "ARTIFACT_BUCKET_FOREIGN"),
        (f"s3://{s3_bucket}/{store.run_prefix('run-other')}a/b.txt", "ARTIFACT_PATH_OUTSIDE_RUN"),
        (f"s3://{s3_bucket}/elsewhere/a/b.txt", "ARTIFACT_PATH_OUTSIDE_RUN"),
        (f"s3://{s3_bucket}/{store.run_prefix(RUN)}../x.txt", "ARTIFACT_PATH_TRAVERSAL"),
        (f"s3://{s3_bucket}/{store.run_prefix(RUN)}manifest.json", "ARTIFACT_PATH_RESERVED"),
    ]:
        with pytest.raises(Failure) as info:
            store.put(RUN, ref, b"x")
        assert _reason(info) == reason, ref


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("../escape.txt", "ARTIFACT_PATH_TRAVERSAL"),
        ("manifest.json", "ARTIFACT_PATH_RESERVED"),
        ("a//b.txt", "ARTIFACT_PATH_EMPTY_COMPONENT"),
        ("%2e%2e/x", "ARTIFACT_PATH_ENCODED"),
        ("a\\b", "ARTIFACT_PATH_BACKSLASH"),
    ],
)
def test_hostile_keys_written_by_a_worker_are_refused(
    store: S3ArtifactStore, s3_client: Any, s3_bucket: str, key: str, reason: str
) -> None:
    area = store.open_staging(RUN, "call-w", 1)
    prefix = area.location.removeprefix(f"s3://{s3_bucket}/")
    s3_client.put_object(Bucket=s3_bucket, Key=prefix + "good.txt", Body=b"good")
    s3_client.put_object(Bucket=s3_bucket, Key=prefix + key, Body=b"bad")
    with pytest.raises(Failure) as info:
        store.accept_staging(area, attempt=1)
    assert _reason(info) == reason
    assert store.list(RUN) == []
    assert s3_client.list_objects_v2(Bucket=s3_bucket, Prefix=prefix).get("KeyCount") == 0


def test_reads_verify_the_uploaded_checksum_without_being_told(
    store: S3ArtifactStore, s3_client: Any, s3_bucket: str
) -> None:
    store.put(RUN, "m.txt", b"original")
    key = store.run_prefix(RUN) + "m.txt"
    meta = s3_client.head_object(Bucket=s3_bucket, Key=key)["Metadata"]
    s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"replaced", Metadata=meta)
    with pytest.raises(Failure) as info:
        store.read_bytes(RUN, "m.txt")
    assert _reason(info) == "ARTIFACT_INTEGRITY_MISMATCH"


def test_missing_bucket_is_a_store_error(s3_client: Any) -> None:
    store = S3ArtifactStore(s3_client, "no-such-bucket-here")
    with pytest.raises(StoreError) as info:
        store.put(RUN, "x.txt", b"x")
    assert info.value.reason == "ARTIFACT_BUCKET_MISSING"


def test_unreachable_endpoint_is_a_retryable_store_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s3 = client(
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        max_attempts=1,
    )
    store = S3ArtifactStore(s3, "charter-artifacts-test", quota_bytes=None)
    for attempt in (
        lambda: store.put(RUN, "x.txt", b"x"),
        lambda: store.read_bytes(RUN, "x.txt"),
        lambda: store.stat(RUN, "x.txt"),
        lambda: store.list(RUN),
    ):
        with pytest.raises(StoreError) as info:
            attempt()
        assert info.value.reason == "ARTIFACT_STORE_UNAVAILABLE"
        assert info.value.retryable


def test_translate_leaves_other_exceptions_alone() -> None:
    assert translate(ValueError("x"), run_id=None, path=None) is None


@pytest.mark.parametrize(
    ("bucket", "prefix"),
    [("B", "p/"), ("ok-bucket", "no-slash"), ("ok-bucket", "../p/"), ("ok-bucket", "/p/")],
)
def test_configuration_is_checked(s3_client: Any, bucket: str, prefix: str) -> None:
    with pytest.raises(ConfigError):
        S3ArtifactStore(s3_client, bucket, prefix=prefix)
