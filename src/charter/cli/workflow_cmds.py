"""``charter test``, ``charter promote``, ``charter runs create`` and ``charter runs replay``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from charter.cli import runs
from charter.cli._output import (
    JSON_OPTION,
    console,
    err_console,
    print_json,
    print_table,
    redact_errors,
    reported_errors,
)
from charter.cli.kernel_cmds import SERVER, _principal, _remote
from charter.deploy.deployment import deployment_path, load_deployment
from charter.errors import ConfigError, UserError
from charter.project.build import (
    Build,
    PinnedBuilds,
    build_project,
    load_build,
    resolve_build_path,
)
from charter.project.suite import suite_from_build
from charter.proof.context_tests import SuiteReport, run_tests
from charter.proof.corpus import Waiver
from charter.proof.evaluate import Evaluation, evaluate_run
from charter.proof.promote import Promotion
from charter.proof.promote import promote as do_promote
from charter.proof.replay import ReplayReport, enablement_of
from charter.proof.verified import VerifiedReplay, replay_verified
from charter.runtime import check_readiness, ledger_key_for, open_runtime
from charter.stores.factory import open_store
from charter.workflows.entry import create_catalog_run, inputs_from_options

NO_TESTS_EXIT = 5  # as pytest's "no tests collected": a CI gate on an empty suite fails
PROJECT_OPTION = typer.Option(Path("."), "--project", "-p", help="The project directory.")


def _build(ref: str | None, project: Path) -> Build:
    if ref is None:
        return build_project(project)
    return load_build(resolve_build_path(ref, project))


def _table(report: SuiteReport) -> None:
    table = Table(title="context tests")
    for col in ("test", "origin", "result", "failures"):
        table.add_column(col)
    for r in report.results:
        result = "[green]pass[/]" if r.passed else "[red]FAIL[/]"
        table.add_row(escape(r.name), escape(r.origin), result, escape("\n".join(r.failures)))
    print_table(table)
    console.print(f"{len(report.results) - len(report.failed)} passed, {len(report.failed)} failed")


def run_context_tests(
    build: str | None = typer.Option(None, "--build", help="A Build (file, digest, latest)."),
    project: Path = PROJECT_OPTION,
    live: bool = typer.Option(
        False,
        "--live",
        help="Also check each executor entry against what the deployment's executor serving "
        "that tool describes now (readiness: remote describe, the tool code's own contract).",
    ),
    deploy: Path | None = typer.Option(
        None, "--deploy", envvar="CHARTER_DEPLOY", help="Deployment file (for --live)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Run the Build's context tests (nothing is dispatched); exit 1 if any fails, 5 if the
    Build has none (nothing was checked)."""
    with reported_errors(as_json):
        b = _build(build, project)
        states = None
        if live:
            ready = anyio.run(lambda: check_readiness(project, deploy=deploy, build=build))
            states = {t.tool_id: t for t in ready.tools}
        report = run_tests(b, suite_from_build(b.document), live=states)
    if not report.results:  # like pytest's "no tests ran": nothing was checked, say so
        if as_json:
            print_json({"ok": False, "no_tests": True, "live": live, **report.to_dict()})
        else:
            console.print(
                "no context tests: this Build has none, so nothing was checked. Add "
                "tests/*.yaml to the project (see docs/testing.md) and build again.",
                markup=False,
                soft_wrap=True,
            )
        raise typer.Exit(NO_TESTS_EXIT)
    if as_json:
        print_json({"ok": report.passed, "live": live, **report.to_dict()})
    else:
        _table(report)
    raise typer.Exit(0 if report.passed else 1)


def promote(
    build: str = typer.Argument(..., help="The candidate Build (file, digest, latest)."),
    env: str = typer.Option(..., "--env", help="The environment to promote it for."),
    waive: list[str] = typer.Option(
        [],
        "--waive",
        help="Drop this obligation (test name, or its sha256: digest) from the environment's "
        "regression corpus (repeatable; needs --reason and --as OPERATOR).",
    ),
    reason: str | None = typer.Option(None, "--reason", help="Why the waived tests may go."),
    as_: str | None = typer.Option(
        None, "--as", help="The operator (a deployment principal) promoting and waiving."
    ),
    project: Path = PROJECT_OPTION,
    store: str = runs.STORE_OPTION,
    deploy: Path | None = typer.Option(
        None, "--deploy", envvar="CHARTER_DEPLOY", help="Deployment file (for --as)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Promote a Build if its tests, guards/ and the environment's whole regression corpus
    (every obligation promoted before, kept in the ledger) pass; record the attempt."""
    with reported_errors(as_json):
        candidate = _build(build, project)
        operator = None
        if as_ is not None:
            deployment = load_deployment(deploy, project_dir=project)
            operator = deployment.principals.get(as_)
            if operator is None:
                known = ", ".join(sorted(deployment.principals)) or "(none)"
                raise ConfigError(f"no principal named {as_!r} in the deployment (known: {known})")
        if waive and (reason is None or as_ is None):
            raise UserError("--waive needs --reason TEXT and --as OPERATOR")
        waivers = [Waiver(name=n, reason=reason or "", by=as_ or "") for n in waive]
        key = ledger_key_for(project, deploy)

        async def main() -> Promotion:
            async with open_store(runs.in_project(store, project), key=key) as s:
                return await do_promote(
                    project,
                    candidate,
                    env,
                    store=s,
                    key=key,
                    actor=as_ or "operator",
                    waivers=waivers,
                    operator=operator,
                )

        result = anyio.run(main)
    if as_json:
        print_json({"ok": result.promoted, **result.to_dict()})
    else:
        _table(result.report)
        for w in result.waivers:
            console.print(
                f"waived {w['name']} ({len(w['dropped'])} obligation(s)) by {w['by']}: "
                f"{w['reason']}",
                markup=False,
            )
        verdict = "promoted" if result.promoted else "[red]refused[/]"
        console.print(
            f"{escape(candidate.digest)} {verdict} for {escape(env)} (generation "
            f"{result.generation}, ledger run {escape(str(result.run_id))})"
        )
    raise typer.Exit(0 if result.promoted else 1)


def replay(
    run_id: str = typer.Argument(..., help="The run to replay."),
    build: str | None = typer.Option(
        None,
        "--build",
        help="A candidate Build to replay against (latest, a digest or a file), to see what "
        "it would decide differently; default: the Build each context was resolved under.",
    ),
    project: Path = PROJECT_OPTION,
    store: str = runs.STORE_OPTION,
    deploy: Path | None = typer.Option(
        None,
        "--deploy",
        envvar="CHARTER_DEPLOY",
        help="Replay as this deployment's principals and enablement (default: "
        "charter.deploy.yaml beside charter.yaml; without one, everything is assumed).",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Verify a run's ledger and re-evaluate every recorded decision (one read of the run)
    against the Build each context was pinned to, or a candidate Build, as the deployment's
    principals and enablement; never dispatches. Exits 1 when the ledger fails
    verification."""
    with reported_errors(as_json):
        b: Build | PinnedBuilds = (
            _build(build, project) if build is not None else PinnedBuilds(project)
        )
        path = deployment_path(deploy, project_dir=project)
        deployment = load_deployment(path, project_dir=project) if path is not None else None
        key = ledger_key_for(project, deploy, deployment=deployment)
        principals = deployment.principals if deployment is not None else None
        enablement = (
            enablement_of(deployment.enabled_tools, kill_switch=deployment.kill_switch)
            if deployment is not None
            else None
        )

        async def main() -> VerifiedReplay:
            async with open_store(runs.in_project(store, project), key=key, must_exist=True) as s:
                return await replay_verified(
                    s,
                    run_id,
                    b,
                    key,
                    principals=principals,
                    enablement=enablement,
                    agents=b.agents() if isinstance(b, PinnedBuilds) else frozenset(b.agents),
                )

        got = anyio.run(main)
    if got.replay is None:
        runs.report_verify(got.verify, as_json)  # not ok: it says why and exits 1
        return
    report = got.replay
    if as_json:
        print_json(
            {
                **report.to_dict(),
                "deployment": None if path is None else str(path),
                "verify": got.verify.to_dict(),
                "evaluation": None if got.evaluation is None else got.evaluation.to_dict(),
            }
        )
        return
    against = "its pinned Build" if report.pinned else "candidate"
    digests = ", ".join(d[:19] for d in report.build_digest.split(", ") if d)
    title = f"replay of {run_id} against {against} {digests}"
    table = Table(title=escape(title))
    for col in ("seq", "call", "tool", "recorded", "replayed", "reason", "assumed"):
        table.add_column(col)
    for c in report.calls:
        style = "[red]" if c.changed else ""
        table.add_row(
            str(c.seq),
            escape(c.call_id),
            escape(c.tool),
            escape(c.recorded),
            f"{style}{escape(c.replayed)}",
            escape(c.reason or ""),
            escape(", ".join(c.assumed)),
        )
    print_table(table)
    _warn_assumptions(report, path)
    console.print(
        f"ledger verified ({got.verify.events} events); {len(report.changed)} decision(s) "
        "would change; nothing was dispatched"
    )


def _warn_assumptions(report: ReplayReport, path: Path | None) -> None:
    if not report.assumptions:
        console.print(f"replayed as the deployment in {path}", markup=False)
        return
    said = []
    if report.assumed_enablement:
        said.append("every tool enabled (no deployment file: give --deploy FILE)")
    if report.assumed_permissions:
        who = ", ".join(report.assumed_principals)
        said.append(f"every permission held by {who} (not principals of the deployment)")
    depends = [c.call_id for c in report.depends_on_assumption]
    err_console.print(
        "[bold yellow]warning:[/] this replay ASSUMED "
        + escape("; ".join(said))
        + ". "
        + (
            f"{len(depends)} decision(s) depend on that: {escape(', '.join(depends))}"
            if depends
            else "No decision depends on it."
        ),
        soft_wrap=True,
    )


def create(
    workflow: str = typer.Argument(..., help="The catalog workflow's slug."),
    inputs: list[str] = typer.Option(
        [], "--input", "-i", help="TYPE=FILE for each of the workflow's input_artifacts."
    ),
    as_: str | None = typer.Option(
        None, "--as", help="The deployment principal creating (and owning) the run."
    ),
    server: str | None = SERVER,
    project: Path = PROJECT_OPTION,
    store: str = runs.STORE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Create a run of a catalog workflow: pinned contract, its tasks, the given inputs.

    The principal that creates a run owns it: it (or an operator of its tenant) records the
    handoffs, starts and completes the tasks and finishes the run (docs/workflows.md).
    """
    if server:
        given_remote = inputs_from_options(inputs, base=Path.cwd()) if inputs else []
        manifest = _remote(
            server,
            as_json,
            lambda cl: cl.create_run(
                workflow=workflow, inputs={i.type: (i.path, i.data) for i in given_remote}
            ),
        )
        pinned = manifest.get("workflow") or {}
        out_remote = {
            "run_id": manifest["run_id"],
            "status": manifest["status"],
            "workflow": workflow,
            "version": pinned.get("version"),
            "contract_sha256": pinned.get("contract_sha256"),
            "tasks": {t["task_id"]: t["status"] for t in manifest["tasks"]},
        }
        _print_created(out_remote, as_json)
        return
    who = _principal(as_, as_json)
    with reported_errors(as_json):
        given = inputs_from_options(inputs, base=Path.cwd())

        async def main() -> dict[str, Any]:
            async with open_runtime(project, store=store, serving=False) as rt:
                redact_errors(rt.redactor)
                run_id = await create_catalog_run(rt, rt.principal(who), workflow, given)
                run = await rt.run(run_id)
                assert run is not None
                tasks = await rt.tasks(run_id)
                return {
                    "run_id": run_id,
                    "status": run.status,
                    "workflow": workflow,
                    "version": run.workflow["version"],
                    "contract_sha256": run.workflow["contract_sha256"],
                    "tasks": {t.task_id: t.status for t in tasks},
                }

        out = anyio.run(main)
    _print_created(out, as_json)


def _print_created(out: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(out)
        return
    console.print(
        f"{out['run_id']}: {out['workflow']} {out['version']} ({out['contract_sha256']}), "
        f"{out['status']}; tasks: {', '.join(out['tasks'])}",
        markup=False,
    )


def evaluate(
    run_id: str = typer.Argument(..., help="The run to evaluate."),
    project: Path = PROJECT_OPTION,
    store: str = runs.STORE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Findings about a recorded run (milestones, roles, tools, preflight, duplicates,
    artifact types, terminal status); exit 1 when there are any."""
    with reported_errors(as_json):
        key = ledger_key_for(project)
        agents = frozenset(_build("latest", project).agents)

        async def main() -> Evaluation:
            async with open_store(runs.in_project(store, project), key=key, must_exist=True) as s:
                return await evaluate_run(s, run_id, agents=agents)

        result = anyio.run(main)
    if as_json:
        print_json(result.to_dict())
    else:
        for f in result.findings:
            seq = f.seq if f.seq is not None else "-"
            console.print(f"{f.kind:26} seq {seq:>6}  {f.message}", markup=False)
        console.print(f"{run_id}: {result.status}, {len(result.findings)} finding(s)", markup=False)
    raise typer.Exit(0 if result.ok else 1)


def register(app: typer.Typer) -> None:
    runs.app.command("evaluate")(evaluate)
    runs.app.command("create")(create)
    app.command("test")(run_context_tests)
    app.command("promote")(promote)
    runs.app.command("replay")(replay)
