"""``charter demo``: the whole governed flow on the example project, narrated."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import typer

from charter.cli._output import console, print_step, reported_errors, show_envelope
from charter.cli.pipeline_demo import report_pipeline_demo
from charter.cli.tutoring_demo import tutoring_demo
from charter.ledger.verify import verify_run
from charter.project.build import build_project, save_build
from charter.project.init import init_project
from charter.runtime import ledger_key_for, open_runtime


async def _demo(directory: Path) -> bool:
    b = build_project(directory)
    save_build(b, directory)
    print_step(
        "1. Build", f" {b.digest}  ({len(b.tools)} tools, profiles: {', '.join(b.profiles)})"
    )
    async with open_runtime(directory) as rt:
        ctx = await rt.resolve_context("app", "editor")
        print_step(
            "2. Context",
            f" {ctx.context_id} for principal app (tenant acme), "
            f"run {ctx.run_id}; tools: {', '.join(t.id for t in ctx.tools)}",
        )
        note = {"title": "Charter demo", "body": "Every write waits for a human."}
        show_envelope(
            "3. app calls notes.add (a write tool)",
            first := await rt.call(ctx.context_id, "notes.add", "demo-add-1", note, as_="app"),
        )
        assert first.approval is not None
        approval_id = first.approval["id"]
        try:
            await rt.approve(approval_id, as_="app")
        except Exception as exc:
            print_step("4. app tries to approve its own call", f": refused — {exc}")
        await rt.approve(approval_id, as_="alice", reason="demo")
        print_step("5. alice (operator) approves", f" {approval_id}")
        show_envelope(
            "6. app re-submits the identical call",
            await rt.call(ctx.context_id, "notes.add", "demo-add-1", note, as_="app"),
        )
        show_envelope(
            "7. the same call id again: the recorded receipt, nothing runs twice",
            await rt.call(ctx.context_id, "notes.add", "demo-add-1", note, as_="app"),
        )
        show_envelope(
            "8. same call id, other arguments",
            await rt.call(
                ctx.context_id, "notes.add", "demo-add-1", {**note, "body": "changed"}, as_="app"
            ),
        )
        show_envelope(
            "9. app searches the notebook",
            await rt.call(
                ctx.context_id, "notes.search", "demo-search-1", {"query": "demo"}, as_="app"
            ),
        )
        show_envelope(
            "10. intruder (tenant globex) uses acme's context: refused",
            await rt.call(ctx.context_id, "notes.search", "x", {"query": ""}, as_="intruder"),
        )
        theirs = await rt.resolve_context("intruder", "reader")
        show_envelope(
            "11. intruder searches in its own context: nothing of acme",
            await rt.call(
                theirs.context_id, "notes.search", "x-1", {"query": "demo"}, as_="intruder"
            ),
        )
        added = await rt.call(ctx.context_id, "notes.add", "demo-add-1", note, as_="app")
        note_id = (added.data or {}).get("note", {}).get("id", 1)
        show_envelope(
            f"12. intruder reads acme's note {note_id} by id: answered like a missing note",
            await rt.call(
                theirs.context_id, "notes.get", "x-2", {"note_id": note_id}, as_="intruder"
            ),
        )
        report = await verify_run(rt.store, ctx.run_id, ledger_key_for(directory))
        print_step(
            "13. Ledger",
            f" {report.run_id}: "
            f"{'verified' if report.ok else 'FAILED ' + str(report.reason)} "
            f"({report.events} events)",
        )
        console.print(
            f"\nSee the events: charter runs events {ctx.run_id} (in {directory})", markup=False
        )
        return report.ok


EXAMPLES = ("tutoring-panel", "report-pipeline")


def demo(
    target: str = typer.Argument(
        ".charter-demo",
        metavar="[EXAMPLE] [DIRECTORY]",
        help="Where to create the example project (replaced if it holds an earlier demo); "
        "or an example name (tutoring-panel, report-pipeline) followed by the directory.",
    ),
    directory: Path | None = typer.Argument(None, hidden=True),
) -> None:
    """Run the governed flow on the example project: context, a write that waits for an
    operator's approval, an application that may not approve, at-most-once re-submission,
    an idempotency conflict, cross-tenant reads refused, and a verified ledger.

    `charter demo tutoring-panel [DIR]` runs it against a separate HTTP executor process;
    `charter demo report-pipeline [DIR]` runs a catalog workflow's task DAG end to end."""
    with reported_errors():
        example = target if target in EXAMPLES else "notes"
        where = (directory or Path(f".charter-{target}")) if target in EXAMPLES else Path(target)
        made = not (where / "charter.yaml").exists()
        if made:
            init_project(where, template=target if target in EXAMPLES else "basic")
        _where(example, where, made=made)
        if target == "report-pipeline":
            ok = asyncio.run(report_pipeline_demo(where))
        elif target == "tutoring-panel":
            ok = asyncio.run(tutoring_demo(where))
        else:
            ok = asyncio.run(_demo(where))
    console.print(
        f"The project stays in {where.resolve()}: cd {shlex.quote(str(where))} and try "
        "`charter runs ls`, `charter check` or `charter serve`.",
        markup=False,
        soft_wrap=True,
    )
    raise typer.Exit(0 if ok else 1)


def _where(example: str, where: Path, *, made: bool) -> None:
    """Say where the demo's project is before anything runs in it."""
    verb = "created" if made else "using the existing"
    console.print(
        f"{verb} {example} example project in {where.resolve()}", markup=False, soft_wrap=True
    )


def register(app: typer.Typer) -> None:
    app.command()(demo)
