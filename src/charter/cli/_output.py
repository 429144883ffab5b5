"""Shared rendering helpers for the CLI: JSON output, rich tables, error reporting."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from charter.errors import BuildError, CharterError, Failure, UserError
from charter.kernel.envelope import Envelope

# soft_wrap: a long line is never broken with an inserted newline (a terminal wraps it for the
# eye), so ids and commands stay whole when copied or piped. Tables go through print_table.
console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON instead of text.")


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
        Panel(json.dumps(body, indent=2, ensure_ascii=False), title=title, title_align="left"),
        soft_wrap=False,
    )


def _plain(cell: Any) -> str:
    if isinstance(cell, str):
        text = Text.from_markup(cell).plain
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


def fail(message: str, *, code: int = 1, as_json: bool = False, **extra: Any) -> NoReturn:
    if as_json:
        print_json({"ok": False, "error": message, **extra})
    else:
        err_console.print(f"[bold red]error:[/] {message}", markup=True, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def reported_errors(as_json: bool = False) -> Iterator[None]:
    """Turn Charter exceptions into a clear message and a non-zero exit code."""
    try:
        yield
    except BuildError as exc:
        if as_json:
            print_json(
                {
                    "ok": False,
                    "error": "build failed",
                    "problems": [
                        {
                            "message": p.message,
                            "file": p.file,
                            "tool": p.tool,
                            "pointer": p.pointer,
                            "keyword": p.keyword,
                        }
                        for p in exc.problems
                    ],
                }
            )
        else:
            err_console.print(f"[bold red]error:[/] {exc}", markup=True, soft_wrap=True)
        raise typer.Exit(1) from None
    except Failure as exc:
        fail(str(exc), as_json=as_json, code_name=exc.code.value, reason=exc.reason)
    except (UserError, CharterError) as exc:
        fail(str(exc), as_json=as_json)
