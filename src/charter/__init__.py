"""Charter: a governed tool-execution runtime for AI agents."""

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

__version__ = "0.1.0"

__all__ = [
    "ApprovalRequired",
    "BuildError",
    "CharterError",
    "Context",
    "ContractError",
    "ErrorCode",
    "Failure",
    "UserError",
    "__version__",
    "tool",
]
