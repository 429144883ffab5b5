"""The artifact failures: one constructor per reason, so every store raises the same thing.

Each reason belongs to one of the seven codes (``charter.errors``):

============================== ===================== ======================================
reason                         class                 meaning
============================== ===================== ======================================
ARTIFACT_PATH_* / NAME_TOO_LONG InvalidInput         the path is refused (see ``names``)
ARTIFACT_EXISTS                InvalidInput          create-only: something is already there
ARTIFACT_NOT_FOUND             InvalidInput          nothing is there
ARTIFACT_NOT_DIRECTORY         InvalidInput          a parent of the path is a file
ARTIFACT_STAGING_UNDECLARED    InvalidInput          a staged file was not declared
ARTIFACT_SYMLINK               PermissionDenied      a symlink on the path (never followed)
ARTIFACT_HARDLINK              PermissionDenied      a file with more than one link
ARTIFACT_NOT_REGULAR           PermissionDenied      a FIFO, socket, device or directory
ARTIFACT_IMMUTABLE             PermissionDenied      the path is registered
ARTIFACT_BUCKET_FOREIGN        PermissionDenied      an s3:// reference to another bucket
ARTIFACT_PATH_OUTSIDE_RUN      PermissionDenied      an s3:// reference outside the run
ARTIFACT_ATTEMPT_STALE         PermissionDenied      staged by another attempt of the task
ARTIFACT_QUOTA_EXCEEDED        ResourceLimit         the run's byte quota would be exceeded
ARTIFACT_QUOTA_FILES_EXCEEDED  ResourceLimit         the run's file-count quota would be exceeded
ARTIFACT_TOO_LARGE             ResourceLimit         a per-file or staging limit
ARTIFACT_VERSIONS_EXHAUSTED    ResourceLimit         no free ``-vN`` name left
ARTIFACT_INTEGRITY_MISMATCH    ContractViolation     content differs from its checksum
ARTIFACT_STORE_*               StoreError            the backend failed (driver errors)
============================== ===================== ======================================

Messages name no file content and no path; the path goes into ``details`` when it is valid.
"""

from __future__ import annotations

from typing import Any

from charter.errors import (
    ContractViolation,
    Failure,
    InvalidInput,
    PermissionDenied,
    ResourceLimit,
    StoreError,
)


def _details(path: str | None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {} if path is None else {"path": path}
    out.update(extra or {})
    return out


def exists(path: str, *, run_id: str | None = None) -> Failure:
    return InvalidInput(
        "an artifact already exists at this path; writes are create-only",
        reason="ARTIFACT_EXISTS",
        details=_details(path),
        run_id=run_id,
    )


def not_found(path: str | None, *, run_id: str | None = None) -> Failure:
    return InvalidInput(
        "no artifact at this path",
        reason="ARTIFACT_NOT_FOUND",
        details=_details(path),
        run_id=run_id,
    )


def not_directory(path: str, *, run_id: str | None = None) -> Failure:
    return InvalidInput(
        "a parent of the artifact path is not a directory",
        reason="ARTIFACT_NOT_DIRECTORY",
        details=_details(path),
        run_id=run_id,
    )


def symlink(path: str, *, run_id: str | None = None) -> Failure:
    return PermissionDenied(
        "a symbolic link is on the artifact path; links are never followed",
        reason="ARTIFACT_SYMLINK",
        details=_details(path),
        run_id=run_id,
    )


def hardlink(path: str, *, run_id: str | None = None) -> Failure:
    return PermissionDenied(
        "the artifact file has more than one link",
        reason="ARTIFACT_HARDLINK",
        details=_details(path),
        run_id=run_id,
    )


def not_regular(path: str, *, run_id: str | None = None) -> Failure:
    return PermissionDenied(
        "the artifact path names something other than a regular file",
        reason="ARTIFACT_NOT_REGULAR",
        details=_details(path),
        run_id=run_id,
    )


def immutable(path: str, *, run_id: str | None = None) -> Failure:
    return PermissionDenied(
        "the artifact at this path is registered and cannot be changed",
        reason="ARTIFACT_IMMUTABLE",
        details=_details(path),
        run_id=run_id,
    )


def foreign_bucket(*, run_id: str | None = None) -> Failure:
    return PermissionDenied(
        "the reference names a bucket other than the artifact store's",
        reason="ARTIFACT_BUCKET_FOREIGN",
        run_id=run_id,
    )


def outside_run(*, run_id: str | None = None) -> Failure:
    return PermissionDenied(
        "the reference names an object outside this run",
        reason="ARTIFACT_PATH_OUTSIDE_RUN",
        run_id=run_id,
    )


def attempt_stale(*, run_id: str | None = None, call_id: str | None = None) -> Failure:
    return PermissionDenied(
        "the staging area belongs to another attempt of the task",
        reason="ARTIFACT_ATTEMPT_STALE",
        run_id=run_id,
        call_id=call_id,
    )


def undeclared(path: str, *, run_id: str | None = None) -> Failure:
    return InvalidInput(
        "the staging area holds a file the worker did not declare",
        reason="ARTIFACT_STAGING_UNDECLARED",
        details=_details(path),
        run_id=run_id,
    )


def quota(limit: int, *, run_id: str | None = None) -> Failure:
    return ResourceLimit(
        "the write would exceed the run's artifact quota",
        reason="ARTIFACT_QUOTA_EXCEEDED",
        details={"quota_bytes": limit},
        run_id=run_id,
    )


def quota_files(limit: int, *, run_id: str | None = None) -> Failure:
    return ResourceLimit(
        "the write would exceed the run's artifact count quota",
        reason="ARTIFACT_QUOTA_FILES_EXCEEDED",
        details={"quota_files": limit},
        run_id=run_id,
    )


def too_large(
    what: str, limit: int, *, path: str | None = None, run_id: str | None = None
) -> Failure:
    return ResourceLimit(
        f"the {what} limit is exceeded",
        reason="ARTIFACT_TOO_LARGE",
        details=_details(path, {"limit": limit}),
        run_id=run_id,
    )


def versions_exhausted(path: str, *, run_id: str | None = None) -> Failure:
    return ResourceLimit(
        "no free versioned name is left for this path",
        reason="ARTIFACT_VERSIONS_EXHAUSTED",
        details=_details(path),
        run_id=run_id,
    )


def integrity(path: str, *, run_id: str | None = None) -> Failure:
    return ContractViolation(
        "the artifact's content does not match its recorded checksum",
        reason="ARTIFACT_INTEGRITY_MISMATCH",
        details=_details(path),
        run_id=run_id,
    )


def store_error(
    message: str,
    *,
    reason: str,
    retryable: bool = False,
    run_id: str | None = None,
    path: str | None = None,
) -> Failure:
    return StoreError(
        message, reason=reason, retryable=retryable, run_id=run_id, details=_details(path) or None
    )
