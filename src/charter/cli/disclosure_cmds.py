"""``charter runs disclosure RUN``: offered tools against reported model disclosure.

Reads the run's events from the store (the chain checked as they are read) and compares, per
context, what the context offered with what applications (or the chat orchestrator) reported
sending the model: tools reported but never offered, offered but never disclosed, versions
and schema digests that differ, attachments the context never resolved, token counts over
the budget (docs/kernel.md, "Model disclosure").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from charter.cli._output import JSON_OPTION, console, print_json, print_table, reported_errors
from charter.cli.runs import PROJECT_OPTION, STORE_OPTION, _reading_key, _run, in_project
from charter.errors import InvalidInput
from charter.ledger.events import Event
from charter.ledger.ports import Store
from charter.ledger.subscribe import subscribe
from charter.proof.disclosure import RunDisclosure, compare

_FLAG_TEXT = {
    "reported_not_offered": "reported but never offered",
    "offered_not_disclosed": "offered but never disclosed",
    "version_mismatch": "reported at another version",
    "schema_digest_mismatch": "schema digest differs from the offer",
    "unknown_attachments": "attachments the context never resolved",
    "over_token_budget": "token counts over the context's budget",
}


def register(runs_app: typer.Typer) -> None:
    runs_app.command("disclosure")(disclosure)


def disclosure(
    run_id: str,
    strict: bool = typer.Option(
        False, "--strict", help="Exit 1 when anything is flagged (for CI and scripts)."
    ),
    project: Path = PROJECT_OPTION,
    store: str = STORE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Compare, per context of a run, the tools it offered with what was reported as sent to
    the model; flag tools reported but never offered, and offered but never disclosed."""

    async def work(s: Store) -> RunDisclosure:
        if await s.head(run_id) is None:
            raise InvalidInput(f"no run {run_id}", reason="RUN_NOT_FOUND", run_id=run_id)
        events: list[Event] = [e async for e in subscribe(s, run_id, follow=False)]
        return compare(run_id, events)

    with reported_errors(as_json):
        found = _run(in_project(store, project), _reading_key(project), work)
    doc = found.to_dict()
    if as_json:
        print_json(doc)
    else:
        _print(doc)
    if strict and found.flagged:
        raise typer.Exit(1)


def _print(doc: dict[str, Any]) -> None:
    contexts = doc["contexts"]
    reported = [c for c in contexts if c["reports"]]
    console.print(
        f"[bold]{escape(str(doc['run_id']))}[/]  {len(contexts)} contexts, "
        f"{len(reported)} with reports  "
        + ("[red]flagged[/]" if doc["flagged"] else "[green]nothing flagged[/]")
    )
    for ctx in contexts:
        head = f"\n[bold]{escape(str(ctx['context_id']))}[/]  profile {escape(str(ctx['profile']))}"
        if ctx["agent"]:
            head += f"  agent {escape(str(ctx['agent']))}"
        console.print(head + f"  offered {len(ctx['offered'])} tools")
        if not ctx["reports"]:
            console.print("  no disclosure reported")
            continue
        table = Table("seq", "by", "source", "tools", "tokens", "attachments", "request")
        for r in ctx["reports"]:
            cells = (
                r["seq"],
                r["reported_by"],
                r["source"],
                ", ".join(f"{t['id']}@{t['version']}" for t in r["tools"]) or "-",
                r["tokens"],
                ", ".join(r["attachment_ids"]) or "-",
                r["request_id"] or "-",
            )
            table.add_row(*(escape(str(cell)) for cell in cells))
        print_table(table)
        for name, value in ctx["flags"].items():
            if not value:
                continue
            shown = (
                ", ".join(f"{k} {'/'.join(v)}" for k, v in value.items())
                if isinstance(value, dict)
                else ", ".join(str(v) for v in value)
            )
            console.print(f"  [red]flag[/] {_FLAG_TEXT[name]}: {escape(shown)}", highlight=False)
    for orphan in doc["reports_without_context"]:
        console.print(
            f"[red]flag[/] report at seq {orphan['seq']} names context "
            f"{escape(str(orphan['context_id']))}, which this run never resolved"
        )
