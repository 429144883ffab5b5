"""``charter runs …``: list, show, follow, verify and export run ledgers.

Every command takes ``--project DIR`` (default: the current directory), ``--store URL`` (env
``CHARTER_STORE``, default ``sqlite:///.charter/charter.db``; a relative SQLite path is taken
in the project, as the runtime does) and ``--json``. Verify and export need the ledger key
(the deployment's, or ``CHARTER_LEDGER_KEY`` / ``CHARTER_LEDGER_KEY_FILE`` /
``.charter/ledger.key``; see :func:`charter.runtime.ledger_key_for`), and read artifact files
through the artifact store of the deployment (``--deploy`` / ``CHARTER_DEPLOY`` /
``charter.deploy.yaml`` in the project) unless ``--no-artifact-files``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from charter.cli._output import JSON_OPTION, console, fail, print_json, print_table, reported_errors
from charter.cli._typed import command_redactor
from charter.cli.artifacts_cmds import deployment_source
from charter.deploy.deployment import deployment_path
from charter.errors import InvalidInput, UserError
from charter.kernel.sessions import listing
from charter.ledger import export_staging
from charter.ledger.chain import LedgerKey
from charter.ledger.checker import headless_problem
from charter.ledger.events import Event
from charter.ledger.export import export_run, verify_directory
from charter.ledger.lifecycle import RUN_TERMINAL
from charter.ledger.ports import Store
from charter.ledger.projections import artifact_index, manifest
from charter.ledger.subscribe import run_has_ended, subscribe
from charter.ledger.trust import RunProblem
from charter.ledger.verify import VerifyReport, verify_run
from charter.runtime import ledger_key_for
from charter.stores.factory import (
    DEFAULT_STORE_URL,
    load_ledger_key,
    open_store,
    sqlite_path,
)

app = typer.Typer(
    help="Runs and their ledgers: list, show, stream events, verify, export.",
    no_args_is_help=True,
)

STORE_OPTION = typer.Option(
    DEFAULT_STORE_URL, "--store", envvar="CHARTER_STORE", help="Store URL (sqlite, postgresql)."
)
PROJECT_OPTION = typer.Option(
    Path("."), "--project", "-p", help="The project directory (its store, deployment and key)."
)
T = TypeVar("T")
# The bounds the HTTP API puts on the same values (GET /v1/runs?limit, …/events?after): past
# them a value cannot reach SQL (SQLite's integers are 64-bit), so it is a usage error here.
LIST_MAX = 1000
SEQ_MAX = 2**62

DEPLOY_OPTION = typer.Option(
    None,
    "--deploy",
    envvar="CHARTER_DEPLOY",
    help="Deployment file: its ledger key and artifact store (default charter.deploy.yaml).",
)
FILES_OPTION = typer.Option(
    True,
    "--artifact-files/--no-artifact-files",
    help="Copy (export) or check (verify) every artifact's file against its sha256 and size.",
)

# Any read-only command works without the key; this placeholder is never used to MAC anything.
_READ_ONLY_KEY = LedgerKey("read-only", b"\x00" * 32)


def in_project(url: str, project: Path) -> str:
    """A relative SQLite URL names a file in the project, as :func:`open_runtime` takes it."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        return "sqlite:///" + str((project / url[len("sqlite:///") :]).resolve())
    return url


def _run(
    store_url: str,
    key: LedgerKey,
    work: Callable[[Store], Awaitable[T]],
    *,
    checked: bool = True,
) -> T:
    """Run ``work`` on the store. ``checked`` keeps run-time trust on (rows served only if
    their MACs verify, a run verified on first touch); verify and export check the whole run
    themselves, and a command without the ledger key cannot check anything."""

    async def main() -> T:
        async with open_store(store_url, key=key, must_exist=True) as store:
            store.trust.enabled = checked and key is not _READ_ONLY_KEY
            return await work(store)

    return anyio.run(main)


def _reading_key(project: Path) -> LedgerKey:
    """The ledger key when the project has one (rows are then checked), else the
    read-only placeholder (nothing can be checked; nothing is created)."""
    cwd = project
    if (
        os.environ.get("CHARTER_LEDGER_KEY")
        or os.environ.get("CHARTER_LEDGER_KEY_FILE")
        or (cwd / ".charter" / "ledger.key").exists()
        or deployment_path(None, project_dir=cwd) is not None
    ):
        try:
            return ledger_key_for(cwd)
        except UserError:
            return _READ_ONLY_KEY
    return _READ_ONLY_KEY


def _ledger_state(problem: RunProblem | None) -> str:
    if problem is None:
        return "ok"
    state = "quarantined" if problem.quarantined else "refused"
    return f"{state}: {problem.reason}"


@app.command("ls")
def list_runs(
    limit: int = typer.Option(
        50, "--limit", min=1, max=LIST_MAX, help=f"At most this many runs (1 to {LIST_MAX})."
    ),
    everything: bool = typer.Option(
        False, "--all", help="Also list session runs that ended (idle-closed or renewed)."
    ),
    project: Path = PROJECT_OPTION,
    store: str = STORE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """List runs: open ones first, then ended ones, newest first within each. Ended session
    runs (CLI calls, chats, MCP sessions closed when idle) only with ``--all``."""
    url = in_project(store, project)
    fresh = url.startswith("sqlite:///") and (project / "charter.yaml").is_file()
    found = []  # a project that has made no call yet has no store yet: no runs
    with reported_errors(as_json):
        if not fresh or sqlite_path(url).exists():
            found = list(_run(url, _reading_key(project), lambda s: s.list_runs(limit=limit)))
    problems = {r.run["run_id"]: r.problem for r in found}
    rows = listing(
        [
            {
                **r.run,
                "event_count": r.event_count,
                "ledger": None if r.problem is None else r.problem.to_dict(),
            }
            for r in found
        ],
        everything=everything,
    )
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print("No runs yet.")
        return
    table = Table("run", "workflow", "status", "events", "created", "updated", "ledger")
    for row in rows:
        cells = (
            row["run_id"],
            row.get("workflow_slug", "?"),
            row.get("status", "?"),
            row["event_count"],
            row.get("created_at", "?"),
            row.get("updated_at", "?"),
            _ledger_state(problems[row["run_id"]]),
        )
        table.add_row(*(escape(str(cell)) for cell in cells))
    print_table(table)


@app.command("quarantine")
def quarantine(
    run_id: str,
    reason: str = typer.Option(..., "--reason", help="What was found (kept with the mark)."),
    by: str = typer.Option(..., "--by", help="Who quarantines it (an operator's name)."),
    project: Path = PROJECT_OPTION,
    store: str = STORE_OPTION,
    deploy: Path | None = DEPLOY_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Mark a run quarantined, outside its ledger: every runtime refuses it
    (RUN_LEDGER_INVALID), one already running from its next call in it; it can still be
    exported and verified."""
    with reported_errors(as_json):
        redactor = command_redactor()
        redactor.refuse_in_id(run_id, "run_id")  # an id cannot be kept redacted: refused
        redactor.refuse_in_id(by, "by")
        note = redactor.redact_text(reason)
        key = ledger_key_for(project, deploy)
        problem = _run(
            in_project(store, project),
            key,
            lambda s: s.quarantine(run_id, by=by, reason=note),
            checked=False,
        )
    if as_json:
        print_json(problem.to_dict())
    else:
        console.print(
            f"quarantined {run_id} ({problem.reason}): {problem.message}",
            markup=False,
            highlight=False,
        )


@app.command("show")
def show(
    run_id: str,
    project: Path = PROJECT_OPTION,
    store: str = STORE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Show a run's manifest: status, tasks, artifacts, handoffs."""

    async def work(s: Store) -> dict[str, Any]:
        snap = await s.snapshot(run_id)
        if snap is None or snap.run is None:
            raise InvalidInput(f"no run {run_id}", reason="RUN_NOT_FOUND", run_id=run_id)
        doc = manifest(
            snap.run, snap.tables["tasks"], snap.tables["artifacts"], head_seq=snap.head.seq
        )
        doc["artifact_index"] = artifact_index(run_id, snap.tables["artifacts"])["artifacts"]
        return doc

    with reported_errors(as_json):
        doc = _run(in_project(store, project), _reading_key(project), work)
    if as_json:
        print_json(doc)
        return
    console.print(
        f"[bold]{escape(str(doc['run_id']))}[/]  {escape(str(doc['workflow_slug']))}  status "
        f"[bold]{escape(str(doc['status']))}[/]  events {doc['event_count']}"
    )
    console.print(
        f"session {doc['session_id']}  created {doc['created_at']}  updated {doc['updated_at']}",
        markup=False,
    )
    if doc["error"]:
        error = doc["error"]  # an operator's reason or a tool's message: never markup
        console.print(f"error: {error['code']}: {error['message']}", markup=False, highlight=False)
    if doc["tasks"]:
        tasks = Table("task", "status", "attempts", "role", "profile")
        for t in doc["tasks"]:
            cells = (t["task_id"], t["status"], t["attempts"], t["role"] or "", t["profile"] or "")
            tasks.add_row(*(escape(str(cell)) for cell in cells))
        print_table(tasks)
    if doc["artifact_index"]:
        arts = Table("artifact", "path", "media type", "size", "trust")
        for a in doc["artifact_index"]:
            cells = (a["artifact_id"], a["path"], a["media_type"], a["size"], a["trust"])
            arts.add_row(*(escape(str(cell)) for cell in cells))
        print_table(arts)


_EVENT_KEYS = (
    "status",
    "task_id",
    "stage",
    "call_id",
    "tool_id",
    "outcome",
    "code",
    "reason",
    "artifact_id",
    "context_id",
)


def _event_text(event: Event) -> str:
    """One line per event: the fields a reader follows a run by, never ``key=None``."""
    p = event.payload
    detail = " ".join(
        f"{k.removesuffix('_id') if k == 'tool_id' else k}={p[k]}"
        for k in _EVENT_KEYS
        if p.get(k) is not None and (k != "context_id" or event.type == "context_resolved")
    )
    return f"{event.event_id}  {event.at}  {event.type}  {detail}".rstrip()


@app.command("events")
def events(
    run_id: str,
    after: int = typer.Option(
        0, "--after", min=0, max=SEQ_MAX, help="Only events after this sequence."
    ),
    follow: bool = typer.Option(
        False, "--follow", "-f", help="Keep waiting for new events until the run ends."
    ),
    project: Path = PROJECT_OPTION,
    store: str = STORE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Print a run's events (JSON Lines with --json), checking the chain as they are read."""

    async def work(s: Store) -> None:
        if await s.head(run_id) is None:
            headless = headless_problem(await s.read_stored(run_id, after=0, limit=1))
            if headless is not None:
                raise headless.error(run_id)
            raise InvalidInput(f"no run {run_id}", reason="RUN_NOT_FOUND", run_id=run_id)

        def ended() -> Awaitable[bool]:
            return run_has_ended(s, run_id)

        async for event in subscribe(
            s, run_id, after=after, follow=follow, poll_s=0.5, ended=ended
        ):
            if as_json:
                sys.stdout.write(json.dumps(event.to_dict(), sort_keys=True) + "\n")
            else:
                console.print(_event_text(event), markup=False, highlight=False)
            sys.stdout.flush()
            status = event.payload.get("status")
            if event.type == "run_status_changed" and status in {s.value for s in RUN_TERMINAL}:
                return

    with reported_errors(as_json):
        _run(in_project(store, project), _READ_ONLY_KEY, work)


def _export_key(project: Path, deploy: Path | None) -> LedgerKey | None:
    """The key an export's head MAC is checked with; none is ever created. An explicit
    ``CHARTER_LEDGER_KEY`` / ``CHARTER_LEDGER_KEY_FILE`` first (read as every reader reads a
    key: :func:`charter.ledger.chain.key_material`), else the project's key if it has a
    deployment or a local key; else no key at all."""
    if os.environ.get("CHARTER_LEDGER_KEY") or os.environ.get("CHARTER_LEDGER_KEY_FILE"):
        return load_ledger_key()
    local = project / ".charter" / "ledger.key"
    if deployment_path(deploy, project_dir=project) is not None or local.exists():
        return ledger_key_for(project, deploy)
    return None


def report_verify(report: VerifyReport, as_json: bool, *, mac_checked: bool = True) -> None:
    """Print a verification report; exit 1 when it found a problem."""
    if as_json:
        print_json({**report.to_dict(), "mac_checked": mac_checked})
    elif not mac_checked:
        console.print("no key given: chain checked, MAC not checked", style="yellow")
    if report.ok and not mac_checked and not as_json:
        console.print(
            f"[green]ok[/] {escape(report.run_id)}: {report.events} events, chain, head, "
            "lifecycles and projections verified (not the head MAC)"
        )
    elif as_json:
        pass
    elif report.ok:
        console.print(
            f"[green]ok[/] {escape(report.run_id)}: {report.events} events, chain, head, "
            "MAC, lifecycles and projections verified"
        )
    if report.ok:
        if not as_json:
            for note in report.notes:
                console.print(f"note: {note}", style="yellow", markup=False)
        return
    if as_json:
        raise typer.Exit(1)
    where = f" (artifact {report.artifact_id})" if report.artifact_id else ""
    if report.path is not None:
        where += f" path {report.path!r}"
    at = f" at seq {report.seq}" if report.seq is not None else ""
    fail(f"{report.run_id}: {report.reason}{at}: {report.message}{where}")


@app.command("verify")
def verify(
    target: str = typer.Argument(..., help="A run id, or a directory written by export."),
    project: Path = PROJECT_OPTION,
    store: str = STORE_OPTION,
    deploy: Path | None = DEPLOY_OPTION,
    files: bool = FILES_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Replay the chain and the state machines, rebuild projections, compare with stored;
    then check every artifact file's sha256 and size (an export must hold no other file)."""
    with reported_errors(as_json):
        path = Path(target)
        if path.is_dir():
            export_key = _export_key(project, deploy)
            report = verify_directory(path, export_key, artifact_files=files)
            report_verify(report, as_json, mac_checked=export_key is not None)
            return
        key = ledger_key_for(project, deploy)
        source = deployment_source(target, deploy, project) if files else None
        report = _run(
            in_project(store, project),
            key,
            lambda s: verify_run(s, target, key, artifacts=source),
            checked=False,
        )
    report_verify(report, as_json)


@app.command("export")
def export(
    run_id: str,
    directory: Path = typer.Argument(..., help="Where to write (must not exist)."),
    project: Path = PROJECT_OPTION,
    store: str = STORE_OPTION,
    deploy: Path | None = DEPLOY_OPTION,
    files: bool = FILES_OPTION,
    as_found: bool = typer.Option(
        False,
        "--as-found",
        help="If the run fails verification, export it anyway as evidence, exactly as stored "
        "and unchecked: every stored event, every projection row (projections.json), what can "
        "be read of its artifact files, and a manifest that says it is NOT verified and names "
        "the first problem. `runs verify` on such an export reports that problem. A run that "
        "verifies is exported as usual.",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Write manifest.json, events/00000001.jsonl …, artifacts/index.json and each artifact's
    file (artifacts/files/<path>, checked against its sha256 and size) for a run. A run that
    fails verification is refused unless ``--as-found``."""
    with reported_errors(as_json, writing=directory):
        key = ledger_key_for(project, deploy)
        source = deployment_source(run_id, deploy, project) if files else None
        records = export_staging.records_dir(project)
        report = _run(
            in_project(store, project),
            key,
            lambda s: export_run(
                s,
                run_id,
                directory,
                key,
                artifacts=source,
                as_found=as_found,
                staging_records=records,
            ),
            checked=False,
        )
    if as_json:
        print_json({**report.to_dict(), "directory": str(directory), "verified": report.ok})
    elif report.ok:
        console.print(
            f"exported {run_id} ({report.events} events) to {directory}",
            markup=False,
            highlight=False,
        )
    else:
        console.print(
            f"exported {run_id} AS FOUND ({report.events} events) to {directory}: NOT verified, "
            f"{report.reason} at seq {report.seq}: {report.message}",
            style="yellow",
            markup=False,
            highlight=False,
        )
