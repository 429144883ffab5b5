"""Charter's one exception tree.

Every exception Charter raises on purpose derives from :class:`CharterError`. The tree
separates three families that callers treat differently::

    CharterError
    ├── Signal                      control flow, not a failure
    │   └── ApprovalRequired            a human must approve before the call can run
    ├── UserError                   a developer mistake, found before anything runs
    │   ├── ContractError               one tool contract or schema is wrong (tool, file, pointer)
    │   ├── ProjectError                charter.yaml, profiles, agents or a tool file is wrong
    │   ├── BuildError                  a project failed to build; carries *all* its problems
    │   ├── UnsupportedRuntimeError     a Build needs a runtime this code does not provide
    │   └── ConfigError                 deployment or store configuration is wrong
    └── Failure                     a runtime failure: carries code, reason, retryable
        ├── InvalidInput                code invalid_input
        ├── PermissionDenied            code permission_denied
        ├── TransientExternal           code transient_external
        ├── TimeoutFailure              code timeout
        ├── ResourceLimit               code resource_limit
        ├── ContractViolation           code contract_violation
        └── InternalFailure             code internal
            └── StoreError                  a storage backend failed (driver errors translated)
                ├── StoreConflict               a uniqueness rule was violated
                ├── MigrationError              the schema is missing, newer, or broken
                └── LedgerIntegrityError        the ledger failed verification (reason, seq)

Runtime failures carry one of the seven :class:`ErrorCode` values, a fine-grained upper-case
``reason`` (``ARGS_DUPLICATE_KEY``, ``LEDGER_GAP``, ...), ``retryable``, optional structured
``details`` and the ``run_id`` / ``call_id`` they concern. Messages never contain the value of
an argument: they name JSON pointers, never what was found there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar


class ErrorCode(StrEnum):
    """The seven codes every runtime failure carries (DESIGN §3)."""

    INVALID_INPUT = "invalid_input"
    PERMISSION_DENIED = "permission_denied"
    TRANSIENT_EXTERNAL = "transient_external"
    TIMEOUT = "timeout"
    RESOURCE_LIMIT = "resource_limit"
    CONTRACT_VIOLATION = "contract_violation"
    INTERNAL = "internal"


class CharterError(Exception):
    """Root of every exception Charter raises on purpose."""


# ---------------------------------------------------------------------------------------
# Signals


class Signal(CharterError):
    """Control flow that callers are expected to handle; not a failure."""


class ApprovalRequired(Signal):
    """The call needs a human approval before it may run."""

    def __init__(self, approval_id: str, expires_at: str, *, call_id: str | None = None) -> None:
        super().__init__(f"approval {approval_id} is required before this call can run")
        self.approval_id = approval_id
        self.expires_at = expires_at
        self.call_id = call_id


# ---------------------------------------------------------------------------------------
# Developer mistakes


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One thing wrong with a project, located as precisely as we can."""

    message: str
    file: str | None = None
    tool: str | None = None
    pointer: str | None = None
    keyword: str | None = None

    def __str__(self) -> str:
        where = []
        if self.file:
            where.append(self.file)
        if self.tool:
            where.append(f"tool {self.tool}")
        if self.pointer is not None:
            where.append(f"at {self.pointer or '/'}")
        prefix = ", ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message


class UserError(CharterError):
    """A developer mistake found before anything runs."""


class ContractError(UserError):
    """A tool contract or one of its schemas is invalid."""

    def __init__(
        self,
        message: str,
        *,
        tool: str | None = None,
        file: str | None = None,
        pointer: str | None = None,
        keyword: str | None = None,
    ) -> None:
        self.problem = Problem(
            message=message, tool=tool, file=file, pointer=pointer, keyword=keyword
        )
        super().__init__(str(self.problem))
        self.tool = tool
        self.file = file
        self.pointer = pointer
        self.keyword = keyword


class ProjectError(UserError):
    """The project source (charter.yaml, tool files, profiles, agents) is invalid."""

    def __init__(self, message: str, *, file: str | None = None, pointer: str | None = None):
        self.problem = Problem(message=message, file=file, pointer=pointer)
        super().__init__(str(self.problem))
        self.file = file
        self.pointer = pointer


class BuildError(UserError):
    """A project failed to build. ``problems`` lists every problem found, not just the first."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        count = len(self.problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"the project has {count} problem{'s' if count != 1 else ''}:\n{lines}")


class UnsupportedRuntimeError(UserError):
    """A Build requires a runtime version this code does not support."""

    def __init__(self, required: str, supported: Sequence[str]) -> None:
        self.required = required
        self.supported = tuple(supported)
        super().__init__(
            f"this Build requires runtime {required!r}, but this Charter supports only "
            f"{', '.join(repr(s) for s in self.supported)}; upgrade Charter to load it"
        )


class ConfigError(UserError):
    """Deployment, store or runtime configuration is invalid."""


# ---------------------------------------------------------------------------------------
# Runtime failures


class Failure(CharterError):
    """A runtime failure with one of the seven codes, a reason and a retryable flag."""

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL
    default_reason: ClassVar[str] = "INTERNAL"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        retryable: bool = False,
        details: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        call_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.retryable = retryable
        self.details: dict[str, Any] = dict(details or {})
        self.run_id = run_id
        self.call_id = call_id

    def to_dict(self) -> dict[str, Any]:
        """The ``error`` object of a result envelope."""
        out: dict[str, Any] = {
            "code": self.code.value,
            "reason": self.reason,
            "message": self.message,
            "retryable": self.retryable,
        }
        if self.details:
            out["details"] = self.details
        return out

    def __str__(self) -> str:
        return f"{self.code.value} ({self.reason}): {self.message}"


class InvalidInput(Failure):
    code = ErrorCode.INVALID_INPUT
    default_reason = "INVALID_INPUT"


class PermissionDenied(Failure):
    code = ErrorCode.PERMISSION_DENIED
    default_reason = "PERMISSION_DENIED"


class TransientExternal(Failure):
    code = ErrorCode.TRANSIENT_EXTERNAL
    default_reason = "TRANSIENT_EXTERNAL"


class TimeoutFailure(Failure):
    code = ErrorCode.TIMEOUT
    default_reason = "TIMEOUT"


class ResourceLimit(Failure):
    code = ErrorCode.RESOURCE_LIMIT
    default_reason = "RESOURCE_LIMIT"


class ContractViolation(Failure):
    code = ErrorCode.CONTRACT_VIOLATION
    default_reason = "CONTRACT_VIOLATION"


class InternalFailure(Failure):
    code = ErrorCode.INTERNAL
    default_reason = "INTERNAL"


class StoreError(InternalFailure):
    """A storage backend failed. Driver exceptions are translated into this family."""

    default_reason = "STORE_ERROR"


class StoreConflict(StoreError):
    """A uniqueness rule was violated (for example a duplicate ``(run_id, seq)``)."""

    default_reason = "STORE_CONFLICT"


class MigrationError(StoreError):
    """The database schema is missing, broken, or was written by newer code."""

    default_reason = "STORE_MIGRATION"


class LedgerIntegrityError(StoreError):
    """A run's ledger failed verification; ``seq`` is the first bad sequence number."""

    default_reason = "LEDGER_INTEGRITY"

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        seq: int | None = None,
        run_id: str | None = None,
    ) -> None:
        super().__init__(message, reason=reason, run_id=run_id, details={"seq": seq})
        self.seq = seq


FAILURE_BY_CODE: Mapping[ErrorCode, type[Failure]] = {
    ErrorCode.INVALID_INPUT: InvalidInput,
    ErrorCode.PERMISSION_DENIED: PermissionDenied,
    ErrorCode.TRANSIENT_EXTERNAL: TransientExternal,
    ErrorCode.TIMEOUT: TimeoutFailure,
    ErrorCode.RESOURCE_LIMIT: ResourceLimit,
    ErrorCode.CONTRACT_VIOLATION: ContractViolation,
    ErrorCode.INTERNAL: InternalFailure,
}
