"""The ``charter`` command line: the sync edge over the async core."""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn

import typer
from typer import rich_utils

from charter import telemetry
from charter.cli._output import (
    err_console,
    error_line,
    library_logs_to_stderr,
    os_error_message,
    print_json,
    reopen_closed_streams,
)
from charter.cli.app import app
from charter.errors import ErrorCode
from charter.kernel.redaction import LOG_FILTER


def _click_exception() -> type[Exception]:
    """The usage-error base class of the click that Typer runs on (vendored or not)."""
    for klass in typer.BadParameter.__mro__:
        if klass.__name__ == "ClickException":
            return klass
    return typer.BadParameter  # pragma: no cover - every click has ClickException


_USAGE_ERROR = _click_exception()
INTERRUPTED = 130
"""The exit code after Ctrl-C (128 + SIGINT)."""


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv


def _report(message: str, *, code: str, reason: str, status: int, as_json: bool) -> NoReturn:
    if as_json:
        print_json(
            {"ok": False, "error": message, "code": code, "code_name": code, "reason": reason}
        )
    else:
        err_console.print(error_line(message), markup=True, soft_wrap=True, highlight=False)
    sys.stdout.flush()
    raise SystemExit(status)


def main() -> None:
    """Run the command line. Every way out is an exit code and a message, never a traceback:
    a usage error exits 2 (as JSON on stdout with ``--json``), Ctrl-C exits 130, and an error
    no command expected exits 1 naming only its kind (``CHARTER_DEBUG=1`` re-raises it)."""
    reopen_closed_streams()  # a closed stdin/stdout/stderr (<&-, >&-) is the null device
    library_logs_to_stderr()
    argv = sys.argv[1:]
    as_json = _wants_json(argv)
    # A record no handler takes (every command but serve and mcp, which configure logging)
    # is printed by logging's last resort: scrubbed as their handlers' are, with the
    # redactor of every runtime the command opens (a provider's error quoting its API key).
    if logging.lastResort is not None and LOG_FILTER not in logging.lastResort.filters:
        logging.lastResort.addFilter(LOG_FILTER)
    # Traces export when the standard OTEL_* variables ask for it (docs/operations.md).
    telemetry.configure_from_environment()
    try:
        status = app(args=argv, standalone_mode=False)
    except _USAGE_ERROR as exc:  # a usage error: a bad option, argument or value
        exit_code = int(getattr(exc, "exit_code", 2))
        if not as_json or type(exc).__name__ == "NoArgsIsHelpError":  # help was printed
            rich_utils.rich_format_error(exc)  # type: ignore[arg-type]
            raise SystemExit(exit_code) from None
        message = str(getattr(exc, "format_message", exc.__str__)())
        param = getattr(exc, "param", None)
        name = getattr(param, "name", None) if param is not None else None
        print_json(
            {
                "ok": False,
                "error": message,
                "code": ErrorCode.INVALID_INPUT.value,
                "code_name": ErrorCode.INVALID_INPUT.value,
                "reason": "USAGE",
                "param": name,
            }
        )
        raise SystemExit(exit_code) from None
    except (typer.Abort, KeyboardInterrupt):
        status = INTERRUPTED
    except OSError as exc:
        if os.environ.get("CHARTER_DEBUG"):
            raise
        _report(
            os_error_message(exc),
            code=ErrorCode.INTERNAL.value,
            reason="OS_ERROR",
            status=1,
            as_json=as_json,
        )
    except Exception as exc:
        if os.environ.get("CHARTER_DEBUG"):
            raise
        # The message of an unexpected error may quote input: only its kind is shown.
        _report(
            f"internal error ({type(exc).__name__}); CHARTER_DEBUG=1 shows the traceback",
            code=ErrorCode.INTERNAL.value,
            reason="INTERNAL",
            status=1,
            as_json=as_json,
        )
    if status == INTERRUPTED:  # Ctrl-C (Typer turns KeyboardInterrupt into exit 130)
        _report(
            "interrupted",
            code=ErrorCode.INTERNAL.value,
            reason="INTERRUPTED",
            status=INTERRUPTED,
            as_json=as_json,
        )
    raise SystemExit(status if isinstance(status, int) else 0)


__all__ = ["app", "main"]
