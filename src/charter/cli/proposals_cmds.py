"""``charter proposals ls|show|approve|reject|apply``: proposals of your tenant.

Local mode opens the project's runtime and acts as ``--as PRINCIPAL``; ``--server URL`` uses
the HTTP API with the key in ``CHARTER_API_KEY``. Both go through the same
:class:`~charter.proposals.ProposalService` rules: apply needs ``approved``, the apply
permission, a fresh validation and an unchanged baseline.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from charter.cli._output import JSON_OPTION, console, print_json, print_table
from charter.cli.kernel_cmds import AS, DEPLOY, PROJECT, SERVER, STORE, _principal, _remote, _run
from charter.client import Client
from charter.proposals import ProposalService, load_proposal_settings
from charter.runtime import Runtime

app = typer.Typer(help="List, inspect, approve, reject and apply proposals.", no_args_is_help=True)
REASON = typer.Option(None, "--reason", help="Why (recorded in the ledger with your name).")


def _call(
    server: str | None,
    project: Path,
    store: str | None,
    deploy: Path | None,
    as_: str | None,
    as_json: bool,
    local: Callable[[ProposalService, Runtime, str], Awaitable[Any]],
    remote: Callable[[Client], Any],
) -> Any:
    if server:
        return _remote(server, as_json, remote)
    who = _principal(as_, as_json)

    async def go(rt: Runtime) -> Any:
        service = ProposalService(rt, load_proposal_settings(rt.deployment.source))
        return await local(service, rt, who)

    return _run(project, store, deploy, as_json, go)


def _show(row: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(row)
        return
    # every value here was written by a caller or an operator: printed as it is, never markup
    console.print(
        f"[bold]{escape(str(row['proposal_id']))}[/bold]  "
        f"{escape(str(row['status']))}  {escape(str(row['kind']))}"
    )
    console.print(
        f"target: {row.get('target') or '(none)'}  "
        f"baseline: {row.get('baseline_version') or '(none)'}",
        markup=False,
    )
    if row.get("rationale"):
        console.print(f"rationale: {row['rationale']}", markup=False)
    for d in row.get("diagnostics") or []:
        text = f"  {d.get('severity')}: {d.get('code')} {d.get('message')}"
        console.print(text, markup=False)
    console.print(f"diff: {json.dumps(row.get('diff'), ensure_ascii=False)}", markup=False)


@app.command("ls")
def proposals_ls(
    as_: str | None = AS,
    status: str | None = typer.Option(
        None, "--status", help="validated | blocked | approved | rejected | applied | expired"
    ),
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """List your tenant's proposals."""

    async def local(service: ProposalService, rt: Runtime, who: str) -> Any:
        return await service.list(tenant=rt.principal(who).tenant, status=status, limit=100)

    rows = _call(
        server, project, store, deploy, as_, as_json, local,
        lambda cl: cl.proposals(status=status),
    )  # fmt: skip
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print("No proposals.")
        return
    table = Table()
    for col in ("id", "status", "kind", "target", "baseline", "requested by"):
        table.add_column(col, overflow="fold")
    for r in rows:
        cells = (
            r["proposal_id"],
            r["status"],
            r["kind"],
            r.get("target") or "-",
            r.get("baseline_version") or "-",
            r.get("requested_by") or "-",
        )
        table.add_row(*(escape(str(cell)) for cell in cells))
    print_table(table)


@app.command("show")
def proposals_show(
    proposal_id: str,
    as_: str | None = AS,
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Show one proposal: status, diagnostics, diff."""

    async def local(service: ProposalService, rt: Runtime, who: str) -> Any:
        return await service.get(proposal_id, rt.principal(who).tenant)

    row = _call(
        server, project, store, deploy, as_, as_json, local,
        lambda cl: cl.get_proposal(proposal_id),
    )  # fmt: skip
    _show(row, as_json)


def _decide(verb: str) -> Callable[..., None]:
    def command(
        proposal_id: str,
        as_: str | None = AS,
        reason: str | None = REASON,
        server: str | None = SERVER,
        project: Path = PROJECT,
        store: str | None = STORE,
        deploy: Path | None = DEPLOY,
        as_json: bool = JSON_OPTION,
    ) -> None:
        async def local(service: ProposalService, rt: Runtime, who: str) -> Any:
            principal = rt.principal(who)
            if verb == "apply":
                return await service.apply(proposal_id, principal=principal, reason=reason)
            return await service.decide(
                proposal_id, approve=verb == "approve", principal=principal, reason=reason
            )

        def remote(cl: Client) -> Any:
            if verb == "apply":
                return cl.apply_proposal(proposal_id, reason=reason)
            if verb == "approve":
                return cl.approve_proposal(proposal_id, reason=reason)
            return cl.reject_proposal(proposal_id, reason=reason)

        row = _call(server, project, store, deploy, as_, as_json, local, remote)
        _show(row, as_json)

    command.__doc__ = {
        "approve": "Approve a validated proposal (operators with proposals:approve).",
        "reject": "Reject a validated proposal.",
        "apply": "Apply an approved proposal (re-validated; a stale baseline is refused).",
    }[verb]
    return command


for _verb in ("approve", "reject", "apply"):
    app.command(_verb)(_decide(_verb))


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="proposals")
