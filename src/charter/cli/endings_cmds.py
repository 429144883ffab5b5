"""``charter runs cancel|fail RUN --reason …`` and ``charter tasks cancel|fail|skip RUN TASK
--reason …``: operators end runs and tasks (see :mod:`charter.kernel.endings`), locally with
``--as OPERATOR`` or against a server with ``--server`` (the API key decides the principal)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from charter.cli import runs
from charter.cli._output import JSON_OPTION, console, print_json
from charter.cli.kernel_cmds import AS, DEPLOY, PROJECT, SERVER, STORE, _principal, _remote, _run
from charter.runtime import Runtime

tasks_app = typer.Typer(
    help="A catalog run's tasks: ls, show, handoff, start, complete; operators cancel, fail "
    "or skip.",
    no_args_is_help=True,
)

REASON = typer.Option(..., "--reason", help="Why (recorded in the ledger, redacted).")


def _end_run(
    run_id: str,
    status: str,
    reason: str,
    as_: str | None,
    server: str | None,
    project: Path,
    store: str | None,
    deploy: Path | None,
    as_json: bool,
) -> None:
    if server:
        action = "cancel" if status == "cancelled" else "fail"
        row = _remote(
            server,
            as_json,
            lambda cl: (
                cl.cancel_run(run_id, reason=reason)
                if action == "cancel"
                else cl.fail_run(run_id, reason=reason)
            ),
        )
    else:
        who = _principal(as_, as_json)

        async def go(rt: Runtime) -> dict[str, Any]:
            return await rt.operations.end_run(run_id, status, reason=reason, as_=who)

        row = _run(project, store, deploy, as_json, go)
    if as_json:
        print_json(row)
    else:
        console.print(f"run {run_id} is now {row['status']}", markup=False)


@runs.app.command("cancel")
def runs_cancel(
    run_id: str = typer.Argument(..., help="The run."),
    reason: str = REASON,
    as_: str | None = AS,
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Cancel an open run (operators only): calls in flight settle or become unknown, open
    tasks are cancelled, pending approvals rejected."""
    _end_run(run_id, "cancelled", reason, as_, server, project, store, deploy, as_json)


@runs.app.command("fail")
def runs_fail(
    run_id: str = typer.Argument(..., help="The run."),
    reason: str = REASON,
    as_: str | None = AS,
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Fail an open run (operators only), as ``runs cancel`` does but ending ``failed``."""
    _end_run(run_id, "failed", reason, as_, server, project, store, deploy, as_json)


def _task_command(action: str, status: str) -> None:
    def command(
        run_id: str = typer.Argument(..., help="The run."),
        task_id: str = typer.Argument(..., help="The task."),
        reason: str = REASON,
        as_: str | None = AS,
        server: str | None = SERVER,
        project: Path = PROJECT,
        store: str | None = STORE,
        deploy: Path | None = DEPLOY,
        as_json: bool = JSON_OPTION,
    ) -> None:
        if server:
            row = _remote(
                server, as_json, lambda cl: cl.end_task(run_id, task_id, action, reason=reason)
            )
        else:
            who = _principal(as_, as_json)

            async def go(rt: Runtime) -> dict[str, Any]:
                return await rt.operations.end_task(run_id, task_id, status, reason=reason, as_=who)

            row = _run(project, store, deploy, as_json, go)
        if as_json:
            print_json(row)
        else:
            console.print(f"task {task_id} of run {run_id} is now {row['status']}", markup=False)

    command.__doc__ = f"{action.capitalize()} a task (operators only); it ends {status}."
    tasks_app.command(action)(command)


for _action, _status in (("cancel", "cancelled"), ("fail", "failed"), ("skip", "skipped")):
    _task_command(_action, _status)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
