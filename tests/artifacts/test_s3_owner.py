"""S3 bucket ownership: the expected owner goes with every request; a wrong one stops start.

moto 5 accepts ``ExpectedBucketOwner`` but does not enforce it, so these tests watch the
requests the store sends through botocore's ``before-send`` event on a client of their own, and
a hook on that client answers like S3 does for a bucket another account owns (403
``AccessDenied`` whenever the header names another account) — everything else reaches the moto
server on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from charter.artifacts.s3 import S3ArtifactStore, client
from charter.errors import ConfigError, Failure

OWNER = "123456789012"  # moto's default account: the bucket's owner here
STRANGER = "210987654321"
RUN = "run-owner"
_DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
)


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


class Watched:
    """A client whose requests are recorded; S3's owner check is applied to them."""

    def __init__(self, endpoint: str) -> None:
        self.s3 = client(
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            max_attempts=1,
        )
        self.seen: list[tuple[str, str | None]] = []
        self.s3.meta.events.register("before-send.s3", self._before_send)  # type: ignore[attr-defined]

    def _before_send(self, request: Any, event_name: str, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        header = request.headers.get("x-amz-expected-bucket-owner")
        owner = header.decode() if isinstance(header, bytes) else header
        self.seen.append((event_name.rsplit(".", 1)[-1], owner))
        if owner is not None and owner != OWNER:
            return AWSResponse(request.url, 403, {}, _Raw(_DENIED))
        return None


@pytest.fixture
def watched(s3_endpoint: str) -> Watched:
    return Watched(s3_endpoint)


def _store(watched: Watched, bucket: str, owner: str | None, name: str) -> S3ArtifactStore:
    return S3ArtifactStore(watched.s3, bucket, prefix=f"owner/{name}/", expected_bucket_owner=owner)


def test_every_request_carries_the_expected_owner(watched: Watched, s3_bucket: str) -> None:
    store = _store(watched, s3_bucket, OWNER, "every")
    store.check_bucket()
    stored = store.put(RUN, "a.txt", b"a")
    store.put(RUN, "a.txt", b"again", versioned=True)
    assert store.read_bytes(RUN, "a.txt") == b"a"
    assert store.stat(RUN, "a.txt") is not None
    assert store.checksum(RUN, "a.txt").sha256 == stored.sha256
    assert [i.path for i in store.list(RUN)] == ["a-v2.txt", "a.txt"]
    assert store.first_free_path(RUN, "a.txt") == "a-v3.txt"
    area = store.open_staging(RUN, "call-o", 1)
    with store.stage(area, "s.txt") as writer:
        writer.write(b"s")
    store.accept_staging(area, attempt=1)
    area = store.open_staging(RUN, "call-o", 2)
    with store.stage(area, "t.txt") as writer:
        writer.write(b"t")
    store.discard_staging(area)
    assert store.discard(RUN, [stored]) == ("a.txt",)
    operations = {op for op, _ in watched.seen}
    assert {
        "HeadBucket",
        "PutObject",
        "GetObject",
        "HeadObject",
        "ListObjectsV2",
        "DeleteObject",
        "DeleteObjects",
    } <= operations
    assert all(owner == OWNER for _, owner in watched.seen), watched.seen


def test_without_the_setting_no_owner_is_sent(watched: Watched, s3_bucket: str) -> None:
    store = _store(watched, s3_bucket, None, "none")
    store.put(RUN, "a.txt", b"a")
    assert watched.seen
    assert all(owner is None for _, owner in watched.seen)


def test_a_bucket_another_account_owns_refuses_start_and_every_write(
    watched: Watched, s3_bucket: str, s3_client: Any
) -> None:
    store = _store(watched, s3_bucket, STRANGER, "stranger")
    with pytest.raises(ConfigError) as info:
        store.check_bucket()
    assert "expected_bucket_owner" in str(info.value)
    assert "\n" not in str(info.value)
    with pytest.raises(Failure) as failure:
        store.put(RUN, "a.txt", b"a")
    assert failure.value.reason == "ARTIFACT_STORE_DENIED"
    listed = s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="owner/stranger/")
    assert listed.get("KeyCount", 0) == 0


@pytest.mark.parametrize("owner", ["12345", "12345678901a", "１２３４５６７８９０１２", ""])
def test_the_owner_must_be_an_account_id(watched: Watched, s3_bucket: str, owner: str) -> None:
    with pytest.raises(ConfigError):
        _store(watched, s3_bucket, owner, "bad")


def test_the_runtime_refuses_to_start_on_a_missing_bucket(
    tmp_path: Path, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charter.deploy.deployment import load_deployment
    from charter.runtime import artifact_store

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    deploy = tmp_path / "charter.deploy.yaml"
    deploy.write_text(
        "artifacts:\n"
        "  store: s3\n"
        "  bucket: no-such-bucket-here\n"
        f"  endpoint_url: {s3_endpoint}\n"
        "  region: us-east-1\n"
        f"  expected_bucket_owner: '{OWNER}'\n"
    )
    deployment = load_deployment(deploy, project_dir=tmp_path)
    assert deployment.artifacts.expected_bucket_owner == OWNER
    with pytest.raises(ConfigError) as info:
        artifact_store(deployment, tmp_path)
    assert "does not exist" in str(info.value)


def test_the_deployment_s_owner_and_quotas_reach_the_runtime_s_store(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``artifacts.expected_bucket_owner`` / ``quota_files`` / ``quota_bytes`` from the
    deployment file: the store the runtime opens checks the bucket's owner (moto's account
    owns it: start passes) and refuses the run's file past the deployment's count quota."""
    from charter.deploy.deployment import load_deployment
    from charter.runtime import artifact_store

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    deploy = tmp_path / "charter.deploy.yaml"
    deploy.write_text(
        "artifacts:\n"
        "  store: s3\n"
        f"  bucket: {s3_bucket}\n"
        "  prefix: owner/deployed/\n"
        f"  endpoint_url: {s3_endpoint}\n"
        "  region: us-east-1\n"
        f"  expected_bucket_owner: '{OWNER}'\n"
        "  quota_files: 2\n"
        "  quota_bytes: 100\n"
    )
    store = artifact_store(load_deployment(deploy, project_dir=tmp_path), tmp_path)
    assert isinstance(store, S3ArtifactStore)
    assert store.expected_bucket_owner == OWNER
    store.put(RUN, "a.txt", b"a")
    store.put(RUN, "b.txt", b"b")
    with pytest.raises(Failure) as info:
        store.put(RUN, "c.txt", b"c")
    assert info.value.reason == "ARTIFACT_QUOTA_FILES_EXCEEDED"
    with pytest.raises(Failure) as info:
        store.put("run-owner-2", "big.bin", b"x" * 101)
    assert info.value.reason == "ARTIFACT_QUOTA_EXCEEDED"
