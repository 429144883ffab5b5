"""Kernel commands: ``contexts resolve``, ``call``, ``calls show|resolve``, ``approvals …``.

In local mode the CLI opens the project's runtime itself and acts as the principal named by
``--as`` in the deployment file — and the same rules hold as over the API: an application
principal cannot approve, a context serves only the principal it was resolved for.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from charter.cli._output import (
    JSON_OPTION,
    console,
    fail,
    print_json,
    print_table,
    read_stdin_text,
    redact_errors,
    reported_errors,
)
from charter.client import Client
from charter.client._common import check_api_key, check_base_url
from charter.errors import InvalidInput, PermissionDenied
from charter.kernel.contexts import tool_schemas
from charter.kernel.delegation import family
from charter.kernel.envelope import CallStatus, Envelope
from charter.kernel.operators import context_of_call
from charter.runtime import Runtime, open_runtime

T = TypeVar("T")

PROJECT = typer.Option(Path("."), "--project", "-p", help="The project directory.")
STORE = typer.Option(
    None,
    "--store",
    envvar="CHARTER_STORE",
    help="Store URL (default sqlite:///.charter/charter.db in the project).",
)
DEPLOY = typer.Option(
    None,
    "--deploy",
    envvar="CHARTER_DEPLOY",
    help="Deployment file (default: charter.deploy.yaml beside charter.yaml).",
)
AS = typer.Option(None, "--as", help="Act as this principal of the deployment file (local mode).")
SERVER = typer.Option(
    None,
    "--server",
    envvar="CHARTER_SERVER",
    help="Talk to this Charter server instead of opening the project locally; the API key "
    "in CHARTER_API_KEY decides the principal.",
)

EXIT_CODES = {
    CallStatus.SUCCEEDED: 0,
    CallStatus.PENDING_APPROVAL: 3,
    CallStatus.DENIED: 4,
    CallStatus.REJECTED: 5,
    CallStatus.CONFLICT: 6,
    CallStatus.FAILED: 7,
    CallStatus.UNKNOWN: 8,
    CallStatus.DISPATCHING: 9,
    CallStatus.CANCELLED: 10,
    CallStatus.ABANDONED: 11,
}

contexts_app = typer.Typer(
    help="Resolve contexts: the tools a principal may see and call.", no_args_is_help=True
)
calls_app = typer.Typer(
    help="Inspect calls and record an operator's finding for unknown ones.", no_args_is_help=True
)
approvals_app = typer.Typer(
    help="List, approve and reject pending approvals (operators only).", no_args_is_help=True
)


def _run(
    project: Path,
    store: str | None,
    deploy: Path | None,
    as_json: bool,
    fn: Callable[[Runtime], Awaitable[T]],
) -> T:
    async def go() -> T:
        # a one-shot command: the store's current Build stays the serving replicas'
        async with open_runtime(project, store=store, deploy=deploy, serving=False) as rt:
            redact_errors(rt.redactor)
            return await fn(rt)

    with reported_errors(as_json):
        return asyncio.run(go())
    raise AssertionError("unreachable")  # pragma: no cover - reported_errors exits


def remote_key(server: str, as_json: bool) -> str:
    """The API key for ``--server``, from ``CHARTER_API_KEY``, once the server URL and the key
    are known to be usable: a bad one is invalid input naming the option or variable (never
    the key), not a failed connection that a script would retry."""
    key = os.environ.get("CHARTER_API_KEY")
    if not key:
        fail("--server needs the API key in CHARTER_API_KEY", as_json=as_json)
    try:
        check_base_url(server, name="--server")
        check_api_key(key, name="CHARTER_API_KEY")
    except InvalidInput as exc:
        fail(str(exc.message), as_json=as_json, reason=exc.reason)
    return key


def _client(server: str, as_json: bool) -> Client:
    return Client(server, api_key=remote_key(server, as_json))


def _remote(server: str, as_json: bool, fn: Callable[[Client], T]) -> T:
    with reported_errors(as_json), _client(server, as_json) as client:
        return fn(client)
    raise AssertionError("unreachable")  # pragma: no cover - reported_errors exits


def _known_profile(rt: Runtime, profile: str, as_json: bool) -> None:
    """Refuse an unknown profile by listing the ones the Build has (as ``charter mcp`` does)."""
    if profile not in rt.build.profiles:
        known = ", ".join(sorted(rt.build.profiles)) or "(none)"
        fail(f"unknown profile {profile!r} (known: {known})", as_json=as_json)


APPROVAL_STATUSES = ("pending", "approved", "rejected", "expired", "consumed")


def _principal(as_: str | None, as_json: bool) -> str:
    if as_ is None:
        fail("give --as PRINCIPAL (local mode) or --server URL", as_json=as_json)
    return as_


@contexts_app.command("resolve")
def contexts_resolve(
    profile: str = typer.Option(..., "--profile", help="The profile whose tools to offer."),
    as_: str | None = AS,
    agent: str | None = typer.Option(None, "--agent", help="Limit to this agent's scope."),
    run: str | None = typer.Option(None, "--run", help="Record in this run (default: new)."),
    objective: str | None = typer.Option(None, "--objective", help="What the context is for."),
    attach: list[str] = typer.Option(
        [], "--attach", help="Attachment KIND:REF (repeatable), e.g. docs:intro."
    ),
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Resolve a context for a principal and profile, and print its tools and expiry."""
    attachments = []
    for item in attach:
        kind, sep, ref = item.partition(":")
        if not sep:
            fail(f"--attach takes KIND:REF, got {item!r}", as_json=as_json)
        attachments.append((kind, ref))

    async def go(rt: Runtime) -> dict[str, Any]:
        who = _principal(as_, as_json)
        _known_profile(rt, profile, as_json)
        ctx = await rt.resolve_context(
            who, profile, agent=agent, objective=objective, attachments=attachments, run_id=run
        )
        contracts = [rt.build.tools[t.id].contract for t in ctx.tools]
        return {  # the same document as the HTTP API's POST /v1/contexts
            **ctx.payload(),
            "run_id": ctx.run_id,
            "created_at": ctx.created_at,
            "format": "charter",
            "tool_schemas": tool_schemas(contracts, "charter"),
        }

    if server:
        out = _remote(
            server,
            as_json,
            lambda cl: cl.resolve_context(
                profile, agent=agent, objective=objective, attachments=attachments, run_id=run
            ),
        )
    else:
        out = _run(project, store, deploy, as_json, go)
    if as_json:
        print_json(out)
        return
    console.print(f"context [bold]{escape(out['context_id'])}[/] in run {escape(out['run_id'])}")
    console.print(
        f"principal {out['principal']} (tenant {out['tenant']}), profile "
        f"{out['profile']}, expires {out['expires_at']}",
        markup=False,
    )
    table = Table(title="Tools offered", title_justify="left")
    for col in ("name", "id", "version", "effect"):
        table.add_column(col, no_wrap=True)
    for t in out["tools"]:
        table.add_row(*(escape(str(t[k])) for k in ("name", "id", "version", "effect")))
    print_table(table)
    if out["unresolved"]:
        console.print(f"unresolved attachments: {', '.join(out['unresolved'])}", markup=False)


def _print_envelope(env: Envelope, *, where: list[str], retry: list[str]) -> None:
    """Print one envelope as text. ``where`` are the options naming the project (or server)
    and ``retry`` the command that re-submits this call in its context: a pending call prints
    both next steps whole, ids included, so they can be pasted as they are."""
    colour = {"succeeded": "green", "pending_approval": "yellow"}.get(env.status.value, "red")
    console.print(
        f"[{colour}]{env.status.value}[/]  call {escape(env.call_id)}  "
        f"({env.metrics.duration_ms:.1f} ms{', cached' if env.metrics.cached else ''})"
    )
    if env.approval:
        approve = shlex.join(
            ["charter", "approvals", "approve", env.approval["id"], *where, "--as", "OPERATOR"]
        )
        console.print(
            f"approval {env.approval['id']} expires {env.approval['expires_at']}",
            soft_wrap=True,
            markup=False,
        )
        console.print(f"an operator approves with:  {approve}", soft_wrap=True, markup=False)
        if retry:
            console.print(
                f"then complete the call with: {shlex.join(retry)}", soft_wrap=True, markup=False
            )
    if env.error:
        error = env.error  # the message may quote a key or a name the caller sent: no markup
        text = f"{error['code']} ({error['reason']}): {error['message']}"
        console.print(text, markup=False, highlight=False)
    for warning in env.warnings:
        console.print(f"warning: {warning}", markup=False, highlight=False)
    if env.data is not None:
        sys.stdout.write(json.dumps(env.data, indent=2, ensure_ascii=False) + "\n")


def call(
    tool: str = typer.Argument(..., help="The tool's model-facing name or id."),
    args: str = typer.Option("{}", "--args", help="Arguments as JSON text ('-' reads stdin)."),
    call_id: str = typer.Option(..., "--call-id", help="Your id for this call (idempotency)."),
    context: str | None = typer.Option(None, "--context", help="A context id to call in."),
    profile: str | None = typer.Option(None, "--profile", help="Resolve a fresh context."),
    as_: str | None = typer.Option(
        None,
        "--as",
        help="The principal (required with --profile; defaults to the context's principal).",
    ),
    approval: str | None = typer.Option(None, "--approval", help="Present this approval id."),
    task: str | None = typer.Option(
        None,
        "--task",
        help="The running task of a catalog run this call belongs to; without --context it "
        "resolves a context in --run for the task's profile and role.",
    ),
    run: str | None = typer.Option(None, "--run", help="The run to resolve a context in."),
    agent: str | None = typer.Option(
        None, "--agent", help="The agent of a fresh context (default with --task: its role)."
    ),
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Make one governed call and print its result envelope.

    Exit codes: 0 succeeded, 3 pending_approval, 4 denied, 5 rejected (invalid input),
    6 conflict (call id reused with other arguments), 7 failed, 8 unknown, 9 still
    dispatching, 10 cancelled, 11 abandoned, 1 any other error.
    """
    fresh = profile is not None or (task is not None and run is not None)
    if context is not None and (fresh or run is not None):
        fail("--context names the context: leave out --profile and --run", as_json=as_json)
    if context is None and not fresh:
        fail(
            "give --context CTX, --profile P --as PRINCIPAL, or --run RUN --task TASK",
            as_json=as_json,
        )
    if fresh and as_ is None and not server:
        fail("a fresh context needs --as PRINCIPAL", as_json=as_json)
    raw = read_stdin_text("--args", as_json=as_json) if args == "-" else args

    def remote(cl: Client) -> Envelope:
        ctx_id = context
        if ctx_id is None:
            prof, role = profile, agent
            if task is not None and run is not None:
                pinned = cl.task(run, task)["contract"]
                prof, role = prof or pinned["profile"], role or pinned["role"]
            assert prof is not None
            ctx_id = cl.resolve_context(prof, agent=role, run_id=run)["context_id"]
        return cl.call(ctx_id, tool, call_id, raw, approval_id=approval, task_id=task)

    hint: list[str] = []
    unbound: list[str] = []

    async def go(rt: Runtime) -> Envelope:
        ctx_id = context
        who = as_
        if ctx_id is None:
            assert who is not None
            prof, role = profile, agent
            if task is not None and run is not None:
                pinned = (await rt.workflows.task(run, task, as_=who))["contract"]
                prof = prof or pinned["profile"]
                if role is None and pinned["role"] in rt.build.agents:
                    role = pinned["role"]
            assert prof is not None
            _known_profile(rt, prof, as_json)
            ctx_id = (await rt.resolve_context(who, prof, agent=role, run_id=run)).context_id
        elif who is None:
            found = await rt.get_context(ctx_id)
            if found is None:
                fail("no such context", as_json=as_json)
            who = found.principal
        env = await rt.call(ctx_id, tool, call_id, raw, as_=who, approval_id=approval, task_id=task)
        if env.error and env.error.get("reason") == "TOOL_NOT_DISCLOSED":
            offered = await rt.get_context(ctx_id)
            if offered is not None:
                # Only among the tools this context offers: a suggestion discloses nothing.
                ids = {n: t.id for t in offered.tools for n in (t.name, t.id)}
                close = difflib.get_close_matches(tool, list(ids), n=3, cutoff=0.75)
                hint.extend(dict.fromkeys(ids[n] for n in close))
            unbound.extend(await _unbound(rt, tool))
        return env

    env = _remote(server, as_json, remote) if server else _run(project, store, deploy, as_json, go)
    if as_json:
        print_json(env.to_dict())
    else:
        where = _where(server, project, store, deploy)
        retry = []
        if env.context_id:
            retry = ["charter", "call", tool, "--context", env.context_id, "--call-id", call_id]
            retry += ["--args", raw, *where, *(["--task", task] if task else [])]
            if as_ is not None and not server:
                retry += ["--as", as_]
        _print_envelope(env, where=where, retry=retry)
        for tool_id in unbound:
            console.print(
                f"tool {tool_id} is not bound: no binding in the deployment serves it, so no "
                f"context offers it. Bind it in charter.deploy.yaml (bindings: {tool_id}: "
                "{executor: ...}); `charter check` lists every tool's state.",
                markup=False,
                soft_wrap=True,
            )
        if hint:
            console.print(f"did you mean: {', '.join(hint)}?", markup=False)
        if env.status is CallStatus.UNKNOWN:
            show = ["charter", "calls", "show", call_id, "--context", str(env.context_id), *where]
            settle = shlex.join(["charter", "calls", "resolve", call_id])
            settle += f" --context {env.context_id} --outcome succeeded|failed|abandoned"
            settle += f' --reason "…" {shlex.join([*where, "--as", "OPERATOR"])}'
            console.print(
                "the tool may or may not have acted; it is never run again for this call id. "
                "Check the system it acts on, then record what you found:",
                soft_wrap=True,
            )
            console.print(f"  {shlex.join(show)}", soft_wrap=True, markup=False)
            console.print(f"  {settle}", soft_wrap=True, markup=False)
    raise typer.Exit(EXIT_CODES.get(env.status, 1))


async def _unbound(rt: Runtime, tool: str) -> list[str]:
    """``[tool id]`` when ``tool`` (an id or model-facing name) is a tool of the Build that
    nothing serves; the CLI has the project's source, so naming it discloses nothing."""
    report = await rt.readiness()
    for tool_id, built in rt.build.tools.items():
        if tool in (tool_id, built.contract.name):
            state = report.get(tool_id)
            return [tool_id] if state is not None and not state.bound else []
    return []


def _where(server: str | None, project: Path, store: str | None, deploy: Path | None) -> list[str]:
    """The options that point a follow-up command at the same project, store or server."""
    if server:
        return ["--server", server]
    where = [] if project == Path(".") else ["--project", str(project)]
    if store and "@" not in store and not os.environ.get("CHARTER_STORE"):  # no credentials
        where += ["--store", store]
    if deploy and not os.environ.get("CHARTER_DEPLOY"):
        where += ["--deploy", str(deploy)]
    return where


@calls_app.command("show")
def calls_show(
    call_id: str = typer.Argument(..., help="The call id."),
    context: str | None = typer.Option(
        None,
        "--context",
        help="The context the call was made in (needed only when several have this call id).",
    ),
    as_: str | None = typer.Option(
        None,
        "--as",
        help="Read as this principal (tenant scope); defaults to the context's principal.",
    ),
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Show a call's state and recorded receipt (readable even after the context expired)."""

    async def go(rt: Runtime) -> dict[str, Any]:
        tenant = rt.principal(as_).tenant if as_ is not None else None
        where = context or await context_of_call(rt.store, call_id, tenant)
        if where is None:
            raise PermissionDenied("no such call", reason="CALL_NOT_FOUND")
        who = as_
        if who is None:
            found = await rt.get_context(where)
            if found is None:
                fail("no such call", as_json=as_json)
            who = found.principal
        call = await rt.get_call(where, call_id, as_=who)
        out = call.to_dict()
        tree = await family(rt.store, call)
        if tree is not None:  # as GET /v1/calls/… answers
            out["delegation"] = tree
        return out

    if server:
        row = _remote(server, as_json, lambda cl: cl.get_call(context, call_id))
    else:
        row = _run(project, store, deploy, as_json, go)
    if as_json:
        print_json(row)
        return
    console.print(
        f"call [bold]{escape(row['call_id'])}[/]  {escape(str(row['state']))}  tool "
        f"{escape(str(row['tool_id']))} {escape(str(row.get('tool_version') or ''))}"
    )
    console.print(
        f"context {row['context_id']}  run {row['run_id']}  actor {row.get('actor')}",
        markup=False,
    )
    console.print(f"fingerprint {row['fingerprint']}", markup=False)
    receipt = row.get("receipt")
    if receipt:
        sys.stdout.write(json.dumps(receipt, indent=2, ensure_ascii=False) + "\n")
    late = row.get("late_result")
    if late:
        got = (late.get("receipt") or {}).get("status")
        console.print(
            f"[yellow]late result[/] at {escape(str(late.get('at')))}: the executor answered "
            f"{escape(str(got))} after the call was made {escape(str(row['state']))} "
            "(evidence for `charter calls resolve`)"
        )
        sys.stdout.write(json.dumps(late.get("receipt"), indent=2, ensure_ascii=False) + "\n")
    tree = row.get("delegation")
    if isinstance(tree, dict):
        _print_delegation(tree)


def _print_delegation(tree: dict[str, Any]) -> None:
    """The call's delegating parent and, for a delegating call, the tree of its calls."""
    parent = tree.get("parent")
    if isinstance(parent, dict):
        named = parent.get("call_id")
        where = f"call {named} ({parent.get('tool_id')}, {parent.get('state')})" if named else ""
        console.print(
            f"made inside delegating span {parent.get('span_id')} {where}".rstrip(), markup=False
        )
    if not tree.get("delegates_execution"):
        return
    children = tree.get("children") or []
    console.print(
        f"delegates execution (span {tree.get('span_id')}): {len(children)} call(s) made inside",
        markup=False,
    )

    def show(nodes: list[dict[str, Any]], depth: int) -> None:
        for node in nodes:
            mark = "  (delegates)" if node.get("delegates_execution") else ""
            console.print(
                f"{'  ' * depth}└─ {node.get('call_id')}  {node.get('state')}  "
                f"{node.get('tool_id')}{mark}",
                markup=False,
            )
            show(node.get("children") or [], depth + 1)

    show(children, 1)


@calls_app.command("resolve")
def calls_resolve(
    call_id: str = typer.Argument(..., help="The call id."),
    context: str = typer.Option(..., "--context", help="The context the call was made in."),
    outcome: str = typer.Option(..., "--outcome", help="succeeded | failed | abandoned"),
    reason: str = typer.Option(..., "--reason", help="What the operator found."),
    as_: str | None = AS,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Record an operator's finding for an unknown call (local mode). A repeated call id never
    dispatches again, whatever the finding."""
    who = _principal(as_, as_json)

    async def go(rt: Runtime) -> dict[str, Any]:
        row = await rt.resolve_call(context, call_id, outcome=outcome, reason=reason, as_=who)
        return row.to_dict()

    row = _run(project, store, deploy, as_json, go)
    if as_json:
        print_json(row)
    else:
        console.print(f"call {row['call_id']} is now {row['state']}", markup=False)


@approvals_app.command("ls")
def approvals_ls(
    as_: str | None = AS,
    status: str | None = typer.Option(
        None, "--status", help="pending | approved | rejected | expired | consumed"
    ),
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """List approvals of your tenant (oldest first)."""
    if status is not None and status not in APPROVAL_STATUSES:
        fail(
            f"--status {status!r} is not a status; use one of {', '.join(APPROVAL_STATUSES)}",
            as_json=as_json,
        )

    async def go(rt: Runtime) -> list[dict[str, Any]]:
        rows = await rt.approvals(as_=_principal(as_, as_json), status=status)
        return [row.listed() for row in rows]

    if server:
        rows = _remote(server, as_json, lambda cl: cl.approvals(status=status))
    else:
        rows = _run(project, store, deploy, as_json, go)
    if as_json:
        print_json(rows)
        return
    if not rows:
        none = "No approvals." if status is None else f"No {status} approvals."
        console.print(none, markup=False)
        return
    table = Table()
    for col in ("id", "status", "tool", "call", "requested by", "expires", "arguments"):
        table.add_column(col, overflow="fold")
    for r in rows:
        cells = (
            r["approval_id"],
            r["status"],
            r["tool_id"],
            r["call_id"],
            r.get("requested_by"),
            r["expires_at"],
            json.dumps(r.get("summary"), ensure_ascii=False),
        )
        table.add_row(*(escape(str(cell)) for cell in cells))
    print_table(table)


@approvals_app.command("show")
def approvals_show(
    approval_id: str = typer.Argument(..., help="The approval id."),
    full: bool = typer.Option(
        False, "--full", help="Include the full redacted arguments (operators only)."
    ),
    as_: str | None = AS,
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Show one approval: what it is bound to, its argument preview, its status."""

    async def go(rt: Runtime) -> dict[str, Any]:
        return await rt.get_approval(approval_id, as_=_principal(as_, as_json), full=full)

    if server:
        row = _remote(server, as_json, lambda cl: cl.get_approval(approval_id, full=full))
    else:
        row = _run(project, store, deploy, as_json, go)
    if as_json:
        print_json(row)
        return
    table = Table(show_header=False)
    table.add_column("field")
    table.add_column("value", overflow="fold")
    for key in ("approval_id", "status", "tool_id", "tool_version", "call_id", "requested_by"):
        table.add_row(key, escape(str(row.get(key))))
    table.add_row("expires_at", escape(str(row.get("expires_at"))))
    table.add_row("preview", escape(json.dumps(row.get("summary"), ensure_ascii=False, indent=2)))
    if full:
        arguments = row.get("full_arguments")
        table.add_row("arguments", escape(json.dumps(arguments, ensure_ascii=False, indent=2)))
    console.print(table)


def _decide(
    approve: bool,
    approval_id: str,
    as_: str | None,
    reason: str | None,
    server: str | None,
    project: Path,
    store: str | None,
    deploy: Path | None,
    as_json: bool,
) -> None:
    async def go(rt: Runtime) -> dict[str, Any]:
        who = _principal(as_, as_json)
        decide = rt.approve if approve else rt.reject
        return (await decide(approval_id, as_=who, reason=reason)).listed()

    def remote(cl: Client) -> dict[str, Any]:
        if approve:
            return cl.approve(approval_id, reason=reason)
        return cl.reject(approval_id, reason=reason)

    row = _remote(server, as_json, remote) if server else _run(project, store, deploy, as_json, go)
    if as_json:
        print_json(row)
    else:
        console.print(f"approval {row['approval_id']} is now {row['status']}", markup=False)


@approvals_app.command("approve")
def approvals_approve(
    approval_id: str = typer.Argument(..., help="The approval id."),
    as_: str | None = AS,
    reason: str | None = typer.Option(None, "--reason", help="Why (kept in the ledger)."),
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Approve a pending call. Operators only; the caller then re-submits the identical call."""
    _decide(True, approval_id, as_, reason, server, project, store, deploy, as_json)


@approvals_app.command("reject")
def approvals_reject(
    approval_id: str = typer.Argument(..., help="The approval id."),
    as_: str | None = AS,
    reason: str | None = typer.Option(None, "--reason", help="Why (kept in the ledger)."),
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Reject a pending call. Final for that call id: it answers denied from now on."""
    _decide(False, approval_id, as_, reason, server, project, store, deploy, as_json)


def register(app: typer.Typer) -> None:
    app.add_typer(contexts_app, name="contexts")
    app.command()(call)
    app.add_typer(calls_app, name="calls")
    app.add_typer(approvals_app, name="approvals")
