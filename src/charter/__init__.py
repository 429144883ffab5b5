"""Charter: a governed tool-execution runtime for AI agents."""

from charter._version import __version__
from charter.contracts.decorator import tool
from charter.contracts.tool_context import Context
from charter.errors import (
    ApprovalRequired,
    BuildError,
    CharterError,
    ContractError,
    ErrorCode,
    Failure,
    UserError,
)
from charter.kernel.envelope import CallStatus, Envelope
from charter.kernel.principals import Principal
from charter.runtime import Runtime, SyncRuntime
from charter.runtime import SyncRuntime as open_sync
from charter.runtime import open_runtime as open

__all__ = [
    "ApprovalRequired",
    "BuildError",
    "CallStatus",
    "CharterError",
    "Context",
    "ContractError",
    "Envelope",
    "ErrorCode",
    "Failure",
    "Principal",
    "Runtime",
    "SyncRuntime",
    "UserError",
    "__version__",
    "open",
    "open_sync",
    "tool",
]
