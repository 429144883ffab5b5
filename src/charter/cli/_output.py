"""Shared rendering helpers for the CLI: JSON output, rich tables, error reporting."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.panel import Panel

from charter.errors import BuildError, CharterError, Failure, UserError
from charter.kernel.envelope import Envelope

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

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
        Panel(json.dumps(body, indent=2, ensure_ascii=False), title=title, title_align="left")
    )


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
