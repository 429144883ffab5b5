"""``charter audit observe``: what ``enforce`` would have denied, counted by tool and reason.

Calls that ran in ``observe`` mode (the deployment's ``mode``, or a scoped mode under
``policy.modes``) record what enforce would have decided against them; this command counts
those records over the operator's tenant and a time range (``--since`` / ``--until``, RFC 3339
in UTC). Operators only, as in the console's *Audit → Observe* view.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from charter.cli._output import JSON_OPTION, console, print_json, print_table
from charter.cli.kernel_cmds import AS, DEPLOY, PROJECT, STORE, _principal, _run
from charter.errors import PermissionDenied
from charter.kernel.principals import PrincipalKind
from charter.ledger.observe import observe_report, time_bound
from charter.runtime import Runtime

app = typer.Typer(help="Audit reports over the ledger.", no_args_is_help=True)
RUN_SCAN = 1000


@app.command("observe")
def audit_observe(
    since: str | None = typer.Option(None, "--since", help="From (RFC 3339, UTC)."),
    until: str | None = typer.Option(None, "--until", help="Up to (RFC 3339 prefix, UTC)."),
    as_: str | None = AS,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Count what enforce would have denied in observe mode, by tool and reason."""
    who = _principal(as_, as_json)

    async def go(rt: Runtime) -> dict[str, Any]:
        principal = rt.principal(who)
        if principal.kind is not PrincipalKind.OPERATOR:
            raise PermissionDenied(
                "only an operator may read the audit", reason="OPERATOR_REQUIRED"
            )
        time_bound(since, "since")
        time_bound(until, "until")
        summaries = await rt.run_summaries(tenant=principal.tenant, limit=RUN_SCAN)
        runs = [str(s.run["run_id"]) for s in summaries if s.problem is None]
        refused = [
            {"run_id": str(s.run["run_id"]), "reason": s.problem.reason}
            for s in summaries
            if s.problem is not None
        ]

        async def events(run_id: str, after: int, limit: int) -> Any:
            return await rt.events(run_id, after=after, limit=limit)

        report = await observe_report(runs, events, since=since, until=until, refused=refused)
        return report.to_dict()

    report = _run(project, store, deploy, as_json, go)
    if as_json:
        print_json(report)
        return
    rows = report["would_deny"]
    console.print(
        f"{report['observed_calls']} observed call(s) in {report['runs_scanned']} run(s)",
        markup=False,
    )
    for refused in report["runs_refused"]:
        console.print(
            f"run {refused['run_id']} not read: its ledger is refused ({refused['reason']}); "
            "see charter runs verify",
            markup=False,
        )
    if not rows:
        console.print("Nothing enforce would have refused.")
        return
    table = Table("tool", "phase", "reason", "count", "first", "last")
    for r in rows:
        cells = (r["tool"], r["phase"], r["reason"], r["count"], r["first_at"], r["last_at"])
        table.add_row(*(escape(str(cell)) for cell in cells))
    print_table(table)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="audit")
