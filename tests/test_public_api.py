"""The public surface is a promise: ``charter.__all__`` changes only on purpose."""

import charter

EXPECTED = {
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
}


def test_all_is_locked() -> None:
    assert set(charter.__all__) == EXPECTED


def test_all_names_resolve() -> None:
    for name in charter.__all__:
        assert getattr(charter, name) is not None
