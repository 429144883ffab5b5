"""The S3 artifact store: the run's prefix in the configured bucket, nothing else.

Layout (``prefix`` defaults to ``charter/artifacts/``)::

    s3://<bucket>/<prefix><run_id>/<artifact path>
    s3://<bucket>/<prefix><run_id>/.staging/a-<call>.<n>/<artifact path>   staging areas

Paths follow the same rules as the local store (:func:`~charter.artifacts.names.check_path`);
``s3://`` references are accepted only into the configured bucket (``ARTIFACT_BUCKET_FOREIGN``
otherwise) and the run's prefix (``ARTIFACT_PATH_OUTSIDE_RUN``). Writes are spooled (memory,
then a temporary file) while hashed and uploaded on close with a conditional create
(``If-None-Match: *``): an existing key fails with ``ARTIFACT_EXISTS`` and is never replaced.
The upload carries ``x-amz-checksum-sha256`` (the server checks the body) and the checksum as
``x-amz-meta-sha256``, which reads verify against when no checksum is given. Single-request
uploads limit one artifact to 5 GiB.

With ``expected_bucket_owner`` (the 12-digit AWS account id that must own the bucket) every
request carries ``ExpectedBucketOwner`` (the ``x-amz-expected-bucket-owner`` header): S3 refuses
a request whose bucket another account owns (403), so a deleted-and-recreated bucket name, or a
misconfigured one, never receives an artifact. :meth:`S3ArtifactStore.check_bucket` makes one
such request (``HeadBucket``) when the runtime starts, and refuses to start when the bucket is
missing or owned by someone else (a ``ConfigError`` naming the setting).

boto3 is optional (``pip install -e '.[s3]'``); it is imported when a client is built, and
every botocore error is translated here into a Charter failure (:func:`translate`).
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import IO, Any, Protocol

from charter.artifacts import failures
from charter.artifacts.names import (
    MAX_PATH_BYTES,
    check_path,
    normal_path,
    split_reference,
    versions,
)
from charter.artifacts.reading import CHUNK, VerifyingReader
from charter.artifacts.records import (
    ObjectInfo,
    StagingArea,
    StagingLimits,
    StoredObject,
    check_sha256,
)
from charter.artifacts.staging import Tally, check_declared
from charter.artifacts.usage import DEFAULT_QUOTA_FILES, RunUsage, Totals
from charter.errors import ConfigError, Failure, InvalidInput
from charter.ledger.ids import check_identifier

DEFAULT_PREFIX = "charter/artifacts/"
DEFAULT_QUOTA_BYTES = 1 << 30
MAX_OBJECT_BYTES = 5 << 30
STAGING = ".staging"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_ACCOUNT = re.compile(r"^[0-9]{12}$")
_AREA = re.compile(r"^a-[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\.[0-9]{1,9}$")


class S3Client(Protocol):
    """The part of a boto3 S3 client this store uses (boto3 ships no type information)."""

    def put_object(self, **kwargs: Any) -> Any: ...
    def get_object(self, **kwargs: Any) -> Any: ...
    def head_object(self, **kwargs: Any) -> Any: ...
    def delete_object(self, **kwargs: Any) -> Any: ...
    def delete_objects(self, **kwargs: Any) -> Any: ...
    def list_objects_v2(self, **kwargs: Any) -> Any: ...
    def head_bucket(self, **kwargs: Any) -> Any: ...


def _botocore_exceptions() -> Any:
    try:
        return importlib.import_module("botocore.exceptions")
    except ImportError as exc:
        raise ConfigError(
            "the S3 artifact store needs boto3; install it with: pip install -e '.[s3]'"
        ) from exc


def client(
    *,
    endpoint_url: str | None = None,
    region_name: str | None = None,
    max_attempts: int = 3,
    **kwargs: Any,
) -> S3Client:
    """A boto3 S3 client (``kwargs`` go to ``boto3.client``), path-style addressing."""
    try:
        boto3 = importlib.import_module("boto3")
        config_mod = importlib.import_module("botocore.config")
    except ImportError as exc:
        raise ConfigError(
            "the S3 artifact store needs boto3; install it with: pip install -e '.[s3]'"
        ) from exc
    config = config_mod.Config(
        retries={"max_attempts": max_attempts, "mode": "standard"},
        s3={"addressing_style": "path"},
    )
    made: S3Client = boto3.client(
        "s3", endpoint_url=endpoint_url, region_name=region_name, config=config, **kwargs
    )
    return made


def translate(exc: BaseException, *, run_id: str | None, path: str | None) -> Failure | None:
    """The Charter failure for a botocore exception (``None`` if ``exc`` is not one)."""
    errors = _botocore_exceptions()
    if isinstance(exc, errors.ClientError):
        response = getattr(exc, "response", None) or {}
        code = str(response.get("Error", {}).get("Code", ""))
        status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if code == "PreconditionFailed" or status == 412:
            return failures.exists(path or "", run_id=run_id)
        if code in {"NoSuchKey", "NotFound", "404"}:
            return failures.not_found(path, run_id=run_id)
        if code == "NoSuchBucket":
            return failures.store_error(
                "the artifact bucket does not exist",
                reason="ARTIFACT_BUCKET_MISSING",
                run_id=run_id,
            )
        if code in {"BadDigest", "XAmzContentSHA256Mismatch", "InvalidDigest"}:
            return failures.integrity(path or "", run_id=run_id)
        if code in {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"} or status == 403:
            return failures.store_error(
                "the artifact bucket refused the credentials",
                reason="ARTIFACT_STORE_DENIED",
                run_id=run_id,
            )
        if code == "ConditionalRequestConflict" or status == 409:
            return failures.store_error(
                "a concurrent conditional write to the same key is in progress",
                reason="ARTIFACT_STORE_CONFLICT",
                retryable=True,
                run_id=run_id,
            )
        if status >= 500 or code in {"SlowDown", "Throttling", "RequestTimeout"}:
            return failures.store_error(
                f"the artifact bucket is unavailable ({code or status})",
                reason="ARTIFACT_STORE_UNAVAILABLE",
                retryable=True,
                run_id=run_id,
            )
        return failures.store_error(
            f"the artifact bucket failed ({code or status})",
            reason="ARTIFACT_STORE_ERROR",
            run_id=run_id,
        )
    if isinstance(exc, errors.BotoCoreError):
        return failures.store_error(
            f"the artifact bucket cannot be reached ({type(exc).__name__})",
            reason="ARTIFACT_STORE_UNAVAILABLE",
            retryable=True,
            run_id=run_id,
        )
    return None


class S3ArtifactStore:
    """Artifacts in one bucket under one prefix, one key prefix per run."""

    def __init__(
        self,
        s3: S3Client,
        bucket: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        quota_bytes: int | None = DEFAULT_QUOTA_BYTES,
        quota_files: int | None = DEFAULT_QUOTA_FILES,
        max_file_bytes: int | None = None,
        spool_bytes: int = 8 << 20,
        expected_bucket_owner: str | None = None,
    ) -> None:
        if _BUCKET.fullmatch(bucket) is None:
            raise ConfigError(f"{bucket!r} is not a valid S3 bucket name")
        if expected_bucket_owner is not None and (
            not isinstance(expected_bucket_owner, str)
            or _ACCOUNT.fullmatch(expected_bucket_owner) is None
        ):
            raise ConfigError("expected_bucket_owner must be a 12-digit AWS account id")
        self.expected_bucket_owner = expected_bucket_owner
        self._owner: dict[str, str] = (
            {"ExpectedBucketOwner": expected_bucket_owner} if expected_bucket_owner else {}
        )
        if prefix and (not prefix.endswith("/") or _bad_prefix(prefix[:-1])):
            raise ConfigError("the S3 artifact prefix must be empty or a valid path ending in /")
        self.s3 = s3
        self.bucket = bucket
        self.prefix = prefix
        self.quota_bytes = quota_bytes
        self.quota_files = quota_files
        self.max_file_bytes = min(max_file_bytes or MAX_OBJECT_BYTES, MAX_OBJECT_BYTES)
        self.spool_bytes = spool_bytes
        self._errors = _botocore_exceptions()
        self.usage_totals = RunUsage(
            quota_bytes=quota_bytes, quota_files=quota_files, measure=self._measure
        )

    # -- plumbing -------------------------------------------------------------------------

    def run_prefix(self, run_id: str) -> str:
        return f"{self.prefix}{check_identifier(run_id, what='run_id')}/"

    def _resolve(self, run_id: str, ref: str) -> tuple[str, str]:
        """(run-relative path, key) of a path or an ``s3://`` reference into this run."""
        run_prefix = self.run_prefix(run_id)
        bucket, path = split_reference(ref)
        if bucket is not None:
            if bucket != self.bucket:
                raise failures.foreign_bucket(run_id=run_id)
            if not path.startswith(run_prefix):
                raise failures.outside_run(run_id=run_id)
            path = path[len(run_prefix) :]
        path = normal_path(path)
        key = run_prefix + path
        if len(key.encode("utf-8")) > MAX_PATH_BYTES:
            raise InvalidInput(
                "the artifact's key would exceed S3's 1024-byte limit",
                reason="ARTIFACT_PATH_TOO_LONG",
                run_id=run_id,
            )
        return path, key

    def check_bucket(self) -> None:
        """Refuse to start unless the bucket exists and, if set, has the expected owner.

        One ``HeadBucket`` request (with ``ExpectedBucketOwner`` when configured): S3 answers
        403 when another account owns the bucket: ``ConfigError`` naming
        ``artifacts.expected_bucket_owner`` (or the credentials may not read it: the message
        says both); a missing bucket is a ``ConfigError`` too.
        """
        try:
            self.s3.head_bucket(Bucket=self.bucket, **self._owner)
        except (self._errors.ClientError, self._errors.BotoCoreError) as exc:
            response = getattr(exc, "response", None) or {}
            status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            code = str(response.get("Error", {}).get("Code", ""))
            if self._owner and (status == 403 or code == "AccessDenied"):
                raise ConfigError(
                    f"the artifact bucket {self.bucket!r} is not owned by the configured "
                    "artifacts.expected_bucket_owner account (or these credentials may not read "
                    "it); refusing to start"
                ) from None
            if status == 404 or code in {"NoSuchBucket", "404", "NotFound"}:
                raise ConfigError(
                    f"the artifact bucket {self.bucket!r} does not exist; refusing to start"
                ) from None
            failure = translate(exc, run_id=None, path=None)
            assert failure is not None
            raise failure from None

    def _call(self, method: str, *, run_id: str, path: str | None, **kwargs: Any) -> Any:
        try:
            return getattr(self.s3, method)(Bucket=self.bucket, **self._owner, **kwargs)
        except (self._errors.ClientError, self._errors.BotoCoreError) as exc:
            failure = translate(exc, run_id=run_id, path=path)
            assert failure is not None
            raise failure from None

    def _keys(self, run_id: str, prefix: str) -> Iterator[tuple[str, int]]:
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._call("list_objects_v2", run_id=run_id, path=None, **kwargs)
            for item in page.get("Contents", ()):
                yield str(item["Key"]), int(item["Size"])
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def usage(self, run_id: str) -> int:
        """Bytes held under the run's prefix (staging included), listed now."""
        return sum(size for _, size in self._keys(run_id, self.run_prefix(run_id)))

    def _measure(self, run_id: str) -> Totals:
        """The run's published objects and bytes (one listing; staging not counted)."""
        run_prefix = self.run_prefix(run_id)
        staging = run_prefix + STAGING + "/"
        files = size = 0
        for key, n in self._keys(run_id, run_prefix):
            if not key.startswith(staging):
                files += 1
                size += n
        return Totals(files=files, bytes=size)

    def _head(self, run_id: str, path: str, key: str) -> Any | None:
        try:
            return self._call("head_object", run_id=run_id, path=path, Key=key)
        except Failure as exc:
            if exc.reason == "ARTIFACT_NOT_FOUND":
                return None
            raise

    # -- writes ---------------------------------------------------------------------------

    def open_write(self, run_id: str, path: str, *, versioned: bool = False) -> _S3Writer:
        rel, _ = self._resolve(run_id, path)
        return _S3Writer(self, run_id, rel, self.run_prefix(run_id), versioned=versioned)

    def put(self, run_id: str, path: str, data: bytes, *, versioned: bool = False) -> StoredObject:
        with self.open_write(run_id, path, versioned=versioned) as writer:
            writer.write(data)
        return writer.result

    def _create(self, run_id: str, path: str, key: str, body: IO[bytes], digest: bytes) -> None:
        body.seek(0)
        self._call(
            "put_object",
            run_id=run_id,
            path=path,
            Key=key,
            Body=body,
            IfNoneMatch="*",
            ChecksumSHA256=base64.b64encode(digest).decode("ascii"),
            Metadata={"sha256": digest.hex()},
        )

    # -- reads ----------------------------------------------------------------------------

    def open_read(
        self,
        run_id: str,
        path: str,
        *,
        expected_sha256: str | None = None,
        expected_size: int | None = None,
    ) -> VerifyingReader:
        rel, key = self._resolve(run_id, path)
        if expected_sha256 is not None:
            check_sha256(expected_sha256, what="expected_sha256")
        response = self._call("get_object", run_id=run_id, path=rel, Key=key)
        body = response["Body"]
        if expected_sha256 is None:
            stored = (response.get("Metadata") or {}).get("sha256")
            if isinstance(stored, str) and re.fullmatch(r"[0-9a-f]{64}", stored):
                expected_sha256 = "sha256:" + stored

        def raw_read(n: int) -> bytes:
            try:
                data: bytes = body.read(n)
            except (self._errors.ClientError, self._errors.BotoCoreError) as exc:
                failure = translate(exc, run_id=run_id, path=rel)
                assert failure is not None
                raise failure from None
            return data

        return VerifyingReader(
            raw_read,
            body.close,
            size=int(response.get("ContentLength", 0)),
            path=rel,
            run_id=run_id,
            expected_sha256=expected_sha256,
            expected_size=expected_size,
        )

    def read_bytes(self, run_id: str, path: str, *, expected_sha256: str | None = None) -> bytes:
        with self.open_read(run_id, path, expected_sha256=expected_sha256) as reader:
            return reader.read()

    def checksum(self, run_id: str, path: str) -> StoredObject:
        rel, key = self._resolve(run_id, path)
        response = self._call("get_object", run_id=run_id, path=rel, Key=key)
        body = response["Body"]
        with VerifyingReader(
            body.read,
            body.close,
            size=int(response.get("ContentLength", 0)),
            path=rel,
            run_id=run_id,
            expected_sha256=None,
            expected_size=None,
        ) as reader:
            for _ in reader:
                pass
            return reader.stored()

    def stat(self, run_id: str, path: str) -> ObjectInfo | None:
        rel, key = self._resolve(run_id, path)
        head = self._head(run_id, rel, key)
        return None if head is None else ObjectInfo(path=rel, size=int(head["ContentLength"]))

    def list(self, run_id: str, prefix: str = "") -> list[ObjectInfo]:
        run_prefix = self.run_prefix(run_id)
        found: list[ObjectInfo] = []
        for key, size in self._keys(run_id, run_prefix + prefix):
            rel = key[len(run_prefix) :]
            try:
                if normal_path(rel) != rel:
                    continue  # not in NFC: a key not written through Charter
            except InvalidInput:
                continue  # staging, the run's own files, or a key not written through Charter
            found.append(ObjectInfo(path=rel, size=size))
        return sorted(found, key=lambda info: info.path)

    def first_free_path(self, run_id: str, path: str) -> str:
        rel, _ = self._resolve(run_id, path)
        run_prefix = self.run_prefix(run_id)
        for candidate in versions(rel):
            if self._head(run_id, candidate, run_prefix + candidate) is None:
                return candidate
        raise failures.versions_exhausted(rel, run_id=run_id)

    # -- rollback -------------------------------------------------------------------------

    def discard(self, run_id: str, objects: Sequence[StoredObject]) -> tuple[str, ...]:
        removed: list[str] = []
        for obj in objects:
            rel, key = self._resolve(run_id, obj.path)
            try:
                found = self.checksum(run_id, rel)
            except Failure as exc:
                if exc.reason == "ARTIFACT_NOT_FOUND":
                    continue
                raise
            if (found.sha256, found.size) != (obj.sha256, obj.size):
                continue
            self._call("delete_object", run_id=run_id, path=rel, Key=key)
            self.usage_totals.add(run_id, -1, -found.size)
            removed.append(rel)
        return tuple(removed)

    # -- staging --------------------------------------------------------------------------

    def _area_prefix(self, area: StagingArea) -> str:
        if _AREA.fullmatch(area.name) is None or area.name != f"a-{area.call_id}.{area.attempt}":
            raise InvalidInput(
                "not a staging area of this store", reason="ARTIFACT_STAGING_INVALID"
            )
        return f"{self.run_prefix(area.run_id)}{STAGING}/{area.name}/"

    def open_staging(self, run_id: str, call_id: str, attempt: int) -> StagingArea:
        check_identifier(call_id, what="call_id")
        if not isinstance(attempt, int) or isinstance(attempt, bool) or not 0 <= attempt < 10**9:
            raise InvalidInput("attempt must be a small non-negative integer")
        area = StagingArea(
            run_id=run_id,
            call_id=call_id,
            attempt=attempt,
            name=f"a-{call_id}.{attempt}",
            location="",
        )
        prefix = self._area_prefix(area)
        if next(self._keys(run_id, prefix), None) is not None:
            raise InvalidInput(
                "a staging area for this call attempt already exists",
                reason="ARTIFACT_STAGING_EXISTS",
                run_id=run_id,
                call_id=call_id,
            )
        return StagingArea(
            run_id=run_id,
            call_id=call_id,
            attempt=attempt,
            name=area.name,
            location=f"s3://{self.bucket}/{prefix}",
        )

    def stage(self, area: StagingArea, path: str) -> _S3Writer:
        prefix = self._area_prefix(area)
        rel, _ = self._resolve(area.run_id, path)
        return _S3Writer(self, area.run_id, rel, prefix, versioned=False)

    def discard_staging(self, area: StagingArea) -> None:
        prefix = self._area_prefix(area)
        keys = [key for key, _ in self._keys(area.run_id, prefix)]
        for start in range(0, len(keys), 1000):
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            self._call(
                "delete_objects",
                run_id=area.run_id,
                path=None,
                Delete={"Objects": batch, "Quiet": True},
            )

    def accept_staging(
        self,
        area: StagingArea,
        *,
        attempt: int,
        expected: Mapping[str, str] | None = None,
        limits: StagingLimits | None = None,
    ) -> tuple[StoredObject, ...]:
        prefix = self._area_prefix(area)
        run_id = area.run_id
        if attempt != area.attempt:
            self.discard_staging(area)
            raise failures.attempt_stale(run_id=run_id, call_id=area.call_id)
        spools: list[tuple[StoredObject, IO[bytes], bytes]] = []
        try:
            tally = Tally(limits or StagingLimits(), run_id)
            listed = list(self._keys(run_id, prefix))
            for key, size in listed:
                rel = key[len(prefix) :]
                self._resolve(run_id, rel)
                tally.add(rel, size)
            for key, size in listed:
                spools.append(self._download(run_id, normal_path(key[len(prefix) :]), key, size))
            staged = [obj for obj, _, _ in spools]
            check_declared(staged, expected, run_id)
            self.usage_totals.check_add(run_id, len(staged), sum(obj.size for obj in staged))
            published: list[StoredObject] = []
            try:
                for obj, body, digest in spools:
                    _, key = self._resolve(run_id, obj.path)
                    self._create(run_id, obj.path, key, body, digest)
                    published.append(obj)
                    self.usage_totals.add(run_id, 1, obj.size)
            except BaseException:
                self.discard(run_id, published)
                raise
            return tuple(staged)
        finally:
            for _, body, _ in spools:
                body.close()
            self.discard_staging(area)

    def _download(
        self, run_id: str, rel: str, key: str, size: int
    ) -> tuple[StoredObject, IO[bytes], bytes]:
        response = self._call("get_object", run_id=run_id, path=rel, Key=key)
        body = response["Body"]
        spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=self.spool_bytes)  # noqa: SIM115
        h = hashlib.sha256()
        seen = 0
        try:
            while chunk := body.read(CHUNK):
                seen += len(chunk)
                if seen > size:  # the object grew after it was listed: refuse it
                    raise failures.integrity(rel, run_id=run_id)
                h.update(chunk)
                spool.write(chunk)
            if seen != size:
                raise failures.integrity(rel, run_id=run_id)
        except BaseException:
            spool.close()
            raise
        finally:
            body.close()
        stored = StoredObject(path=rel, sha256="sha256:" + h.hexdigest(), size=seen)
        return stored, spool, h.digest()


def _bad_prefix(prefix: str) -> bool:
    try:
        check_path(prefix)
    except InvalidInput:
        return True
    return False


class _S3Writer:
    """Spools and hashes a write; ``close`` uploads it with ``If-None-Match: *``."""

    def __init__(
        self, store: S3ArtifactStore, run_id: str, path: str, key_prefix: str, *, versioned: bool
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._path = path
        self._key_prefix = key_prefix
        self._versioned = versioned
        self._hash = hashlib.sha256()
        self._size = 0
        self._result: StoredObject | None = None
        self._done = False
        self._staged = key_prefix != store.run_prefix(run_id)  # counted when accepted
        usage = store.usage_totals
        self._used = usage.totals(run_id).bytes if usage.enabled and not self._staged else 0
        self._spool: IO[bytes] = tempfile.SpooledTemporaryFile(  # noqa: SIM115
            max_size=store.spool_bytes
        )

    def __enter__(self) -> _S3Writer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._done:
            self.close()

    @property
    def result(self) -> StoredObject:
        if self._result is None:
            raise InvalidInput("the artifact was not published", reason="ARTIFACT_NOT_PUBLISHED")
        return self._result

    def write(self, data: bytes | bytearray | memoryview, /) -> int:
        if self._done:
            raise InvalidInput("the artifact writer is closed", reason="ARTIFACT_WRITER_CLOSED")
        n = memoryview(data).nbytes
        store = self._store
        try:
            if self._size + n > store.max_file_bytes:
                raise failures.too_large(
                    "file size", store.max_file_bytes, path=self._path, run_id=self._run_id
                )
            store.usage_totals.check_bytes(self._run_id, self._used, self._size + n)
            self._hash.update(data)
            self._spool.write(data)
            self._size += n
        except BaseException:
            self.abort()
            raise
        return n

    def close(self) -> StoredObject:
        if self._result is not None:
            return self._result
        if self._done:
            raise InvalidInput("the artifact writer was aborted", reason="ARTIFACT_WRITER_CLOSED")
        try:
            result = self._publish()
        finally:
            self._done = True
            self._spool.close()
        self._result = result
        return result

    def _publish(self) -> StoredObject:
        digest = self._hash.digest()
        usage = self._store.usage_totals
        if not self._staged:
            usage.check_add(self._run_id, 1, self._size)
        candidates = versions(self._path) if self._versioned else iter((self._path,))
        for candidate in candidates:
            key = self._key_prefix + candidate
            if self._versioned and self._store._head(self._run_id, candidate, key) is not None:
                continue
            try:
                self._store._create(self._run_id, candidate, key, self._spool, digest)
            except Failure as exc:
                if exc.reason == "ARTIFACT_EXISTS" and self._versioned:
                    continue
                raise
            if not self._staged:
                usage.add(self._run_id, 1, self._size)
            return StoredObject(path=candidate, sha256="sha256:" + digest.hex(), size=self._size)
        raise failures.versions_exhausted(self._path, run_id=self._run_id)

    def abort(self) -> None:
        if not self._done:
            self._done = True
            self._spool.close()
