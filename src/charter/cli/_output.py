"""Shared rendering helpers for the CLI: JSON output, rich tables, error reporting."""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.errors import MarkupError
from rich.markup import escape
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from charter.cli._typed import guarded, guarded_value
from charter.errors import (
    BuildError,
    CharterError,
    ConfigError,
    ContractError,
    ErrorCode,
    Failure,
    ProjectError,
    UnsupportedRuntimeError,
    UserError,
)
from charter.kernel.envelope import Envelope
from charter.kernel.redaction import LOG_FILTER, Redactor

# soft_wrap: a long line is never broken with an inserted newline (a terminal wraps it for the
# eye), so ids and commands stay whole when copied or piped. Tables go through print_table.
console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON instead of text.")
LOG_LEVELS = ("debug", "info", "warning", "error")


def _log_level(value: str) -> str:
    if value.lower() not in LOG_LEVELS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(LOG_LEVELS)}")
    return value.lower()


def log_level_option(default: str, help: str) -> Any:
    """``--log-level``: one of :data:`LOG_LEVELS` (any case), else a usage error (exit 2)."""
    return typer.Option(default, "--log-level", callback=_log_level, help=help)


def show_envelope(title: str, env: Envelope) -> None:
    """One call's envelope as the demos print it: a titled panel of its JSON essentials."""
    body: dict[str, Any] = {"status": env.status.value}
    if env.data is not None:
        body["data"] = env.data
    if env.error:
        body["error"] = env.error
    if env.approval:
        body["approval"] = env.approval
    body["metrics"] = {
        "duration_ms": round(env.metrics.duration_ms, 1),
        "cached": env.metrics.cached,
    }
    console.print(
        # the body holds a tool's data and error message: Text, so it is never read as markup
        Panel(
            Text(json.dumps(body, indent=2, ensure_ascii=False)), title=title, title_align="left"
        ),
        soft_wrap=False,
    )


def print_step(title: str, text: str) -> None:
    """A demo's step: ``title`` in bold, then ``text`` (ids, names, messages) as it is."""
    console.print(Text.assemble((title, "bold"), text))


def _plain(cell: Any) -> str:
    if isinstance(cell, str):
        try:
            text = Text.from_markup(cell).plain
        except MarkupError:  # a value that only looks like markup
            text = cell
    else:
        text = str(getattr(cell, "plain", cell))
    return " ".join(text.split("\n"))


def print_table(table: Table) -> None:
    """Print a table whole. On a terminal wide enough, as a rich table; piped, or when it would
    not fit, as plain aligned columns: no box, nothing cut or wrapped, so every id can be
    copied as it is and the output reads well in ``grep``/``awk``."""
    natural = Measurement.get(console, console.options.update_width(1 << 16), table).maximum
    if console.is_terminal and natural <= console.width:
        console.print(table)
        return
    headers = [_plain(c.header) for c in table.columns]
    cols = [[_plain(cell) for cell in c.cells] for c in table.columns]
    rows = [headers, *zip(*cols, strict=True)] if cols else [headers]
    widths = [max(len(row[i]) for row in rows) for i in range(len(headers))]
    out = []
    if table.title:
        out.append(_plain(table.title))
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        out.append("  ".join(cells).rstrip())
    sys.stdout.write("\n".join(out) + "\n")
    sys.stdout.flush()


def print_json(value: Any) -> None:
    """Write one JSON document to stdout (sorted keys, UTF-8, trailing newline)."""
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


_REDACTORS: list[Redactor] = []


def redact_errors(redactor: Redactor) -> None:
    """Scrub ``redactor``'s secrets (an open runtime's: its deployment's credentials,
    ``redaction.values`` and patterns) from every error this command prints from now on: a
    message may quote what was typed (``unknown profile '…'``, ``no run …``)."""
    if redactor not in _REDACTORS:
        _REDACTORS.append(redactor)


_CONTROLS = {
    c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)
}


def error_line(message: str) -> str:
    """``error: <message>`` as console markup: the message's markup escaped and its terminal
    control characters (ESC, CR, BEL … — a typed id may carry them) shown as ``\\x1b``, so
    nothing a message quotes can move the cursor, recolour or retitle the operator's terminal."""
    return f"[bold red]error:[/] {escape(message.translate(_CONTROLS))}"


def fail(
    message: str,
    *,
    code: int = 1,
    as_json: bool = False,
    code_name: str = ErrorCode.INVALID_INPUT.value,
    reason: str = "INVALID_USAGE",
    **extra: Any,
) -> NoReturn:
    """Report one error and exit ``code``. With ``--json`` it is one JSON object on stdout with
    ``ok: false``, the message (``error``), one of the seven error ``code`` values and the
    upper-case ``reason`` (``code_name`` repeats ``code`` for older scripts)."""
    # the deployment's secrets (the command line's, cli/_typed.py) and any runtime's scrubbed,
    # and a long typed value cut to its first 64 characters
    message = guarded(message, _REDACTORS)
    extra = guarded_value(extra, _REDACTORS)
    for redactor in _REDACTORS:
        extra = redactor.redact(extra)
    if as_json:
        print_json(
            {
                "ok": False,
                "error": message,
                "code": code_name,
                "code_name": code_name,
                "reason": reason,
                **extra,
            }
        )
    else:
        # the message may quote input ("unknown profile '[/]'"): never read as markup
        err_console.print(error_line(message), markup=True, soft_wrap=True)
    raise typer.Exit(code)


CLOSED_STREAMS: set[str] = set()
"""The standard streams (``stdin``, ``stdout``, ``stderr``) that were closed when the command
started (``<&-``, ``>&-``): :func:`reopen_closed_streams` put the null device in their place."""


def reopen_closed_streams() -> None:
    """Give each standard stream that the caller closed (Python sets it to ``None``) the null
    device, on its own descriptor, so no write, flush or read meets ``None`` (a traceback);
    remember which were closed, so a command that needs one can say so."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        if getattr(sys, name) is not None:
            continue
        null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        setattr(sys, name, open(fd, mode, encoding="utf-8", closefd=False))  # noqa: SIM115
        CLOSED_STREAMS.add(name)


class _LibraryLogFormatter(logging.Formatter):
    """A library's log record as one line: its logger, level and message, and the kind of an
    exception it carries — never the traceback (``logger.exception`` in an SDK)."""

    def format(self, record: logging.LogRecord) -> str:
        kind = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else None
        tail = f" ({kind})" if kind else ""
        return f"{record.name}: {record.levelname.lower()}: {record.getMessage()}{tail}"


def library_logs_to_stderr() -> None:
    """Unless logging is configured already, warnings of the libraries a command uses (the
    MCP SDK, HTTP clients) go to stderr as one redacted line each; without a handler Python
    printed them with their tracebacks and unredacted. ``serve`` and ``mcp`` replace this with
    their JSON logs."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LibraryLogFormatter())
    handler.addFilter(LOG_FILTER)
    handler.setLevel(logging.WARNING)
    root.addHandler(handler)


def read_stdin_text(option: str, *, as_json: bool = False) -> str:
    """Standard input as UTF-8 text, for an option given ``-``: bytes that are not UTF-8 (a
    UTF-16 file, say) or a byte order mark are refused saying so and where, as the HTTP API
    refuses such a body (``BODY_MALFORMED``), never read as text that happens to decode."""
    if "stdin" in CLOSED_STREAMS or sys.stdin is None:
        fail(
            f"{option} -: standard input is closed; pipe the text in, or give it inline",
            as_json=as_json,
            reason="STDIN_CLOSED",
        )
    data = sys.stdin.buffer.read()
    if data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        fail(
            f"{option} -: standard input starts with a byte order mark; give UTF-8 text "
            "without one",
            as_json=as_json,
            reason="BODY_MALFORMED",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(
            f"{option} -: standard input is not UTF-8 text "
            f"(byte 0x{data[exc.start]:02x} at offset {exc.start})",
            as_json=as_json,
            reason="BODY_MALFORMED",
        )


def not_utf8(text: str) -> str | None:
    """Where ``text`` read from standard input or the command line (which Python decodes
    with ``surrogateescape``: a byte that is not UTF-8 becomes a lone surrogate) stops being
    UTF-8 — ``byte 0xff at offset 3`` —, or None when it is UTF-8."""
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError as exc:
        first = exc.start
    try:
        raw = text.encode("utf-8", "surrogateescape")
        raw.decode("utf-8")
    except UnicodeEncodeError:  # a surrogate not made of a byte (an escape in the text)
        return f"a lone surrogate at character {first}"
    except UnicodeDecodeError as bad:
        return f"byte 0x{raw[bad.start]:02x} at offset {bad.start}"
    return f"a lone surrogate at character {first}"  # pragma: no cover - encoded above


def user_error_reason(exc: UserError) -> str:
    """The upper-case reason a developer mistake is reported with."""
    if isinstance(exc, BuildError):
        return "BUILD_FAILED"
    if isinstance(exc, ContractError):
        return "CONTRACT_INVALID"
    if isinstance(exc, ProjectError):
        return "PROJECT_INVALID"
    if isinstance(exc, UnsupportedRuntimeError):
        return "RUNTIME_UNSUPPORTED"
    if isinstance(exc, ConfigError):
        return "CONFIG_INVALID"
    return "INVALID_USAGE"


def os_error_message(exc: OSError, *, writing: str | os.PathLike[str] | None = None) -> str:
    """An operating-system error as one line naming the path (never a traceback).

    ``writing``: the file or directory the command was writing, named when the error has no
    path of its own (a ``write`` or ``fsync`` that fails carries none). A full disk says so
    and what to do."""
    what = exc.strerror or type(exc).__name__
    paths = [p for p in (exc.filename, exc.filename2) if p is not None]
    if not paths and writing is not None:
        paths = [writing]
    where = " -> ".join(os.fsdecode(p) for p in paths)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        what += " (the disk is full: free some space and try again)"
    return f"{where}: {what}" if where else what


@contextmanager
def reported_errors(
    as_json: bool = False, *, writing: str | os.PathLike[str] | None = None
) -> Iterator[None]:
    """Turn Charter exceptions into a clear message and a non-zero exit code (``writing``:
    what the command writes, named by an operating-system error that names no path)."""
    try:
        yield
    except BuildError as exc:
        # a problem quotes the project's text (a pattern, a keyword, a value): scrubbed of the
        # deployment's secrets as every other error is (fail), its fields kept apart
        if as_json:
            problems = [
                {
                    "message": p.message,
                    "file": p.file,
                    "tool": p.tool,
                    "pointer": p.pointer,
                    "keyword": p.keyword,
                }
                for p in exc.problems
            ]
            print_json(
                {
                    "ok": False,
                    "error": "build failed",
                    "code": ErrorCode.INVALID_INPUT.value,
                    "code_name": ErrorCode.INVALID_INPUT.value,
                    "reason": "BUILD_FAILED",
                    "problems": guarded_value(problems, _REDACTORS),
                }
            )
        else:
            message = guarded(str(exc), _REDACTORS)
            err_console.print(error_line(message), markup=True, soft_wrap=True)
        raise typer.Exit(1) from None
    except Failure as exc:
        fail(str(exc), as_json=as_json, code_name=exc.code.value, reason=exc.reason)
    except UserError as exc:
        fail(str(exc), as_json=as_json, reason=user_error_reason(exc))
    except CharterError as exc:
        fail(str(exc), as_json=as_json, code_name=ErrorCode.INTERNAL.value, reason="INTERNAL")
    except OSError as exc:
        # A read-only or full disk, a missing directory, a file that vanished: the path and
        # the system's reason, no traceback.
        fail(
            os_error_message(exc, writing=writing),
            as_json=as_json,
            code_name=ErrorCode.INTERNAL.value,
            reason="OS_ERROR",
            errno=exc.errno,
        )
