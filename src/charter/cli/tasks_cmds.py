"""``charter tasks ls|show|handoff|start|complete`` and ``charter runs finish``: drive a
catalog run from the shell, locally (``--as PRINCIPAL``) or against a server (``--server``,
the API key decides the principal). ``charter tasks cancel|fail|skip`` are operators'
endings (:mod:`charter.cli.endings_cmds`).

Who may drive a run (docs/workflows.md): an operator of the run's tenant, or the principal
that created it; any principal of the tenant may list its tasks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from charter.artifacts.user_file import read_user_file
from charter.cli import runs
from charter.cli._output import (
    JSON_OPTION,
    console,
    fail,
    print_json,
    print_table,
    read_stdin_text,
)
from charter.cli.endings_cmds import tasks_app
from charter.cli.kernel_cmds import AS, DEPLOY, PROJECT, SERVER, STORE, _principal, _remote, _run
from charter.client import Client
from charter.errors import InvalidInput
from charter.runtime import Runtime
from charter.workflows.control import handoff_template

RUN = typer.Argument(..., help="The run.")
TASK = typer.Argument(..., help="The task (its id in the workflow).")


def _drive(
    server: str | None,
    as_: str | None,
    project: Path,
    store: str | None,
    deploy: Path | None,
    as_json: bool,
    local: Callable[[Runtime, str], Any],
    remote: Callable[[Client], Any],
) -> Any:
    """Run ``remote`` against the server, or ``local`` in the project as ``--as``."""
    if server:
        return _remote(server, as_json, remote)
    who = _principal(as_, as_json)

    async def go(rt: Runtime) -> Any:
        return await local(rt, who)

    return _run(project, store, deploy, as_json, go)


def _said(row: Mapping[str, Any], as_json: bool, text: str) -> None:
    if as_json:
        print_json(row)
    else:
        console.print(text, soft_wrap=True, markup=False)  # ids and statuses, never markup


@tasks_app.command("ls")
def tasks_ls(
    run_id: str = RUN,
    as_: str | None = AS,
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """A catalog run's tasks: status, attempts, role, profile and allowed tools."""
    rows: list[dict[str, Any]] = _drive(
        server,
        as_,
        project,
        store,
        deploy,
        as_json,
        lambda rt, who: rt.workflows.tasks(run_id, as_=who),
        lambda cl: cl.tasks(run_id),
    )
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"tasks of {escape(run_id)}", title_justify="left")
    for col in ("task", "status", "attempts", "role", "profile", "tools", "depends on"):
        table.add_column(col)
    for r in rows:
        c = r["contract"]
        cells = (
            r["task_id"],
            r["status"],
            r.get("attempts", 0),
            c["role"],
            c["profile"],
            ", ".join(c["required_tools"]),
            ", ".join(c["depends_on"]),
        )
        table.add_row(*(escape(str(cell)) for cell in cells))
    print_table(table)


@tasks_app.command("show")
def tasks_show(
    run_id: str = RUN,
    task_id: str = TASK,
    as_: str | None = AS,
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """One task with its pinned contract and its handoffs (always JSON)."""
    row = _drive(
        server,
        as_,
        project,
        store,
        deploy,
        as_json,
        lambda rt, who: rt.workflows.task(run_id, task_id, as_=who),
        lambda cl: cl.task(run_id, task_id),
    )
    print_json(row)


def _inputs(
    task: Mapping[str, Any], given: list[str], artifacts: Sequence[Mapping[str, Any]], as_json: bool
) -> dict[str, str]:
    """TYPE → artifact id: ``--input TYPE=ID`` first, else the one artifact of that type."""
    chosen: dict[str, str] = {}
    for item in given:
        typ, sep, aid = item.partition("=")
        if not sep or not typ or not aid:
            fail(f"--input {item!r}: expected TYPE=ARTIFACT_ID", as_json=as_json)
        chosen[typ] = aid
    for typ in task["contract"]["input_artifacts"]:
        if typ in chosen:
            continue
        found = [a["artifact_id"] for a in artifacts if a.get("type") == typ]
        if len(found) != 1:
            fail(
                f"task {task['task_id']} takes a {typ!r} artifact and the run has "
                f"{len(found)}: name it with --input {typ}=ARTIFACT_ID",
                as_json=as_json,
            )
        chosen[typ] = found[0]
    return chosen


JSON_INT_MAX = 2**53 - 1  # the largest integer a handoff (JSON, RFC 8785) can hold exactly


@tasks_app.command("handoff")
def tasks_handoff(
    run_id: str = RUN,
    task_id: str = TASK,
    file: str | None = typer.Option(
        None, "--file", "-f", help="The whole handoff as a JSON file ('-' reads stdin)."
    ),
    sender: str = typer.Option("coordinator", "--from", help="The sender's role."),
    inputs: list[str] = typer.Option(
        [], "--input", "-i", help="TYPE=ARTIFACT_ID (default: the run's one artifact of TYPE)."
    ),
    objective: str | None = typer.Option(None, "--objective", help="Default: the task title."),
    constraints: list[str] = typer.Option([], "--constraint", help="A constraint (repeatable)."),
    max_tool_calls: int = typer.Option(
        10, "--max-tool-calls", min=1, max=JSON_INT_MAX, help="Budget."
    ),
    timeout_seconds: int = typer.Option(
        600, "--timeout-seconds", min=1, max=JSON_INT_MAX, help="Budget."
    ),
    max_tokens: int = typer.Option(
        4000, "--max-tokens", min=1, max=JSON_INT_MAX, help="Budget (not enforced)."
    ),
    as_: str | None = AS,
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Record the handoff that binds a task's next attempt.

    Without --file the handoff is built from the task's pinned contract (capabilities,
    expected outputs, acceptance criteria) and its inputs by artifact id.
    """
    given: dict[str, Any] | None = None
    if file is not None:
        try:
            if file == "-":
                text = read_stdin_text("--file", as_json=as_json)
            else:  # a regular file only: never a FIFO or a device read forever
                text = read_user_file(Path(file), what="--file").decode("utf-8")
            loaded = json.loads(text)
        except InvalidInput as exc:
            fail(exc.message, as_json=as_json, reason=exc.reason)
        except (OSError, ValueError) as exc:
            fail(f"--file {file}: {type(exc).__name__}: {exc}", as_json=as_json)
        if not isinstance(loaded, dict):
            fail(f"--file {file}: the handoff is a JSON object", as_json=as_json)
        given = loaded

    def build(task: Mapping[str, Any], artifacts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        if given is not None:
            return given
        return handoff_template(
            task,
            sender_role=sender,
            inputs=_inputs(task, inputs, artifacts, as_json),
            objective=objective,
            constraints=constraints,
            max_tool_calls=max_tool_calls,
            timeout_seconds=timeout_seconds,
            max_tokens=max_tokens,
        )

    async def local(rt: Runtime, who: str) -> Any:
        task = await rt.workflows.task(run_id, task_id, as_=who)
        rows = [
            {"artifact_id": a.artifact_id, "type": a.type} for a in await rt.artifact_rows(run_id)
        ]
        return await rt.workflows.record_handoff(run_id, task_id, build(task, rows), as_=who)

    def remote(cl: Client) -> Any:
        body = build(cl.task(run_id, task_id), cl.list_artifacts(run_id))
        return cl.record_handoff(run_id, task_id, body)

    row = _drive(server, as_, project, store, deploy, as_json, local, remote)
    _said(row, as_json, f"handoff {row['handoff_id']} recorded for task {task_id} of {run_id}")


def _step(name: str, doc: str) -> None:
    def command(
        run_id: str = RUN,
        task_id: str = TASK,
        as_: str | None = AS,
        server: str | None = SERVER,
        project: Path = PROJECT,
        store: str | None = STORE,
        deploy: Path | None = DEPLOY,
        as_json: bool = JSON_OPTION,
    ) -> None:
        async def local(rt: Runtime, who: str) -> Any:
            step = rt.workflows.start_task if name == "start" else rt.workflows.complete_task
            return await step(run_id, task_id, as_=who)

        def remote(cl: Client) -> Any:
            step = cl.start_task if name == "start" else cl.complete_task
            return step(run_id, task_id)

        row = _drive(server, as_, project, store, deploy, as_json, local, remote)
        _said(row, as_json, f"task {task_id} of run {run_id} is now {row['status']}")

    command.__doc__ = doc
    tasks_app.command(name)(command)


_step("start", "Start a task: its dependencies completed, a handoff bound, inputs verified.")
_step("complete", "Complete a running task once every output it declares is registered.")


@runs.app.command("finish")
def runs_finish(
    run_id: str = RUN,
    as_: str | None = AS,
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Finish a catalog run: completed when every task completed and every output is
    registered, otherwise partial with its gaps (exit 1 when partial)."""
    out = _drive(
        server,
        as_,
        project,
        store,
        deploy,
        as_json,
        lambda rt, who: rt.workflows.finish_run(run_id, as_=who),
        lambda cl: cl.finish_run(run_id),
    )
    gaps = f" (gaps: {'; '.join(out['gaps'])})" if out["gaps"] else ""
    _said(out, as_json, f"run {run_id} is {out['status']}{gaps}")
    raise typer.Exit(0 if out["status"] == "completed" else 1)


def register(app: typer.Typer) -> None:
    """The commands register on ``tasks`` and ``runs`` when this module is imported."""
