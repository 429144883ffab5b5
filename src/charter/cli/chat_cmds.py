"""``charter chat --agent A --as PRINCIPAL [--server URL]``: an interactive terminal chat.

Streamed text is printed as it arrives; tool calls, their results, pending approvals (with
the command an operator runs to decide them) and proposals are shown in between. Locally the
CLI runs the orchestrator over the project's runtime with the deployment's ``chat:``
provider; with ``--server`` it talks to ``POST /v1/chat`` and resumes a dropped stream with
``Last-Event-ID``. ``--message`` sends one message and exits (for scripts). An unknown agent
is refused before anything is read: locally against the Build, with ``--server`` against the
server's ``GET /v1/chat/agents`` (a server without it judges the agent at the first turn).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from charter.cli._output import (
    JSON_OPTION,
    console,
    err_console,
    fail,
    not_utf8,
    redact_errors,
    reported_errors,
)
from charter.cli.kernel_cmds import AS, DEPLOY, PROJECT, SERVER, STORE, remote_key
from charter.client import AsyncClient
from charter.errors import Failure, TransientExternal
from charter.proposals import ProposalService, load_proposal_settings
from charter.providers.config import load_chat_config
from charter.providers.orchestrator import ChatRequest, Orchestrator
from charter.providers.turns import TurnHub
from charter.runtime import Runtime, open_runtime

EXIT_WORDS = frozenset({"/exit", "/quit", "exit", "quit"})


HINTS = {
    "PROVIDER_credential_missing": "the provider's API key variable is unset (chat.api_key_env)",
    "PROVIDER_ConnectError": "the provider could not be reached (chat.base_url)",
    "PROVIDER_APIConnectionError": "the provider could not be reached (chat.base_url)",
    "PROVIDER_http_401": "the provider refused the API key",
}


def _v(value: Any) -> str:
    """A value from the stream (a model's arguments, a tool's message) as text, never markup."""
    return escape(value if isinstance(value, str) else str(value))


def render(event: dict[str, Any], *, local: bool = False) -> None:
    """One stream event on the terminal. In local mode there is no server log: an error is
    shown by its reason, and the details were logged to this terminal's stderr."""
    kind, data = event["type"], event["data"]
    if kind == "conversation.started":
        console.print(
            f"[dim]provider {_v(data.get('provider') or 'none')} · "
            f"run {_v(data.get('runId'))}[/dim]"
        )
    elif kind == "assistant.delta":
        console.print(data.get("text", ""), end="", markup=False, highlight=False)
    elif kind == "assistant.completed":
        console.print()
    elif kind == "tool.started":
        args = json.dumps(data.get("arguments"), ensure_ascii=False)
        console.print(f"[cyan]⚙ {_v(data.get('tool'))}[/cyan] {_v(args)}", highlight=False)
    elif kind == "tool.progress":
        console.print(f"[dim]  … {_v(data.get('stage'))}[/dim]")
    elif kind == "tool.result":
        console.print(f"[cyan]  → {_v(data.get('status'))}[/cyan] ({_v(data.get('bytes'))} bytes)")
    elif kind == "task.started":
        console.print(
            f"[magenta]↪ handed off to {_v(data.get('role'))}[/magenta] "
            f"task {_v(data.get('taskId'))}",
            highlight=False,
        )
    elif kind == "task.ended":
        reason = f" ({data['reason']})" if data.get("reason") else ""
        console.print(
            f"[magenta]  task {_v(data.get('taskId'))} {_v(data.get('status'))}{_v(reason)}"
            "[/magenta]",
            highlight=False,
        )
    elif kind == "approval.required":
        console.print(
            f"[yellow]⏸ approval required[/yellow] {_v(data.get('tool'))} "
            f"{_v(json.dumps(data.get('arguments'), ensure_ascii=False))} "
            f"until {_v(data.get('expiresAt'))}\n  an operator decides with: "
            f"charter approvals approve {_v(data.get('approvalId'))}",
            highlight=False,
        )
    elif kind in ("proposal.created", "proposal.updated"):
        console.print(
            f"[green]✎ proposal {_v(data.get('proposalId'))}[/green] {_v(data.get('status'))} "
            f"diff {_v(json.dumps(data.get('diff'), ensure_ascii=False))}",
            highlight=False,
        )
    elif kind == "conversation.error":
        reason = data.get("reason")
        if reason:  # the hints name local files and commands: only for a local turn
            hint = HINTS.get(reason, "") if local else ""
            err_console.print(
                f"[bold red]error:[/] the turn failed ({_v(reason)}){': ' + hint if hint else ''}",
                highlight=False,
            )
        else:
            console.print(f"[red]{_v(data.get('message'))}[/red]")
    elif kind == "conversation.completed" and data.get("status") != "completed":
        console.print(f"[dim](turn {_v(data.get('status'))})[/dim]")


Turn = Callable[[str], AsyncIterator[dict[str, Any]]]


def _not_utf8(what: str, why: str | None, as_json: bool) -> None:
    """Refuse a message that is not UTF-8 text, saying where, rather than "a lone surrogate"
    (what Python makes of a byte that is not UTF-8) from deep inside the turn."""
    if why is not None:
        fail(f"{what} is not valid UTF-8 ({why})", as_json=as_json, reason="BODY_MALFORMED")


async def _loop(turn: Turn, message: str | None, as_json: bool, *, local: bool = False) -> bool:
    """Run turns until EOF or an exit word (or the one ``message``); True if every turn
    completed."""
    ok = True
    line = 0
    while True:
        if message is not None:
            text = message
        else:
            try:
                text = await asyncio.to_thread(input, "you> ")
            except EOFError:
                return ok
            except UnicodeDecodeError:  # a stdin decoding strictly (PYTHONIOENCODING)
                _not_utf8("standard input", f"line {line + 1}", as_json)
            line += 1
            why = not_utf8(text)
            _not_utf8("standard input", None if why is None else f"line {line}: {why}", as_json)
            if text.strip() in EXIT_WORDS:
                return ok
            if not text.strip():
                continue
        async for event in turn(text):
            if event["type"] == "conversation.completed" and event["data"].get("status") in (
                "failed",
                "cancelled",
            ):
                ok = False
            if as_json:  # one event per line (JSON lines)
                typer.echo(json.dumps(event, ensure_ascii=False, separators=(",", ":")))
            else:
                render(event, local=local)
        if message is not None:
            return ok


def _local_turns(
    hub: TurnHub, principal: Any, profile: str, agent: str | None
) -> tuple[Turn, dict[str, str]]:
    state: dict[str, str] = {}

    async def turn(text: str) -> AsyncIterator[dict[str, Any]]:
        request = ChatRequest(
            conversation_id=state.get("conversation", ""),
            principal=principal,
            message=text,
            profile=profile,
            agent=agent,
        )
        conv = await hub.start(request)
        state["conversation"] = conv.conversation_id
        async for event in hub.subscribe(conv, after=conv.turn_start):
            yield event.to_dict()

    return turn, state


def _remote_turns(client: AsyncClient, profile: str | None, agent: str | None) -> Turn:
    state: dict[str, Any] = {"conversation": None, "last": 0}

    async def turn(text: str) -> AsyncIterator[dict[str, Any]]:
        stream = client.chat(
            text, conversation_id=state["conversation"], profile=profile, agent=agent
        )
        for attempt in range(5):
            try:
                async for event in stream:
                    state["conversation"] = event["conversationId"]
                    state["last"] = event["sequence"]
                    yield event
                return
            except TransientExternal:
                if state["conversation"] is None or attempt == 4:
                    raise
                await asyncio.sleep(0.5)  # the turn goes on server-side: resume after `last`
                stream = client.chat_events(state["conversation"], after=state["last"])

    return turn


def chat(
    agent: str | None = typer.Option(None, "--agent", help="The agent to talk to."),
    as_: str | None = AS,
    profile: str | None = typer.Option(
        None, "--profile", help="The profile (default: chat.profile, else the agent's name)."
    ),
    message: str | None = typer.Option(
        None, "--message", "-m", help="Send this one message and exit."
    ),
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Chat with an agent: streamed text, tool activity and pending approvals as they come."""

    async def remote(url: str) -> bool:
        async with AsyncClient(url, remote_key(url, as_json)) as client:
            await _offered_agent(client, agent, profile, as_json)  # before stdin or a turn
            return await _loop(_remote_turns(client, profile, agent), message, as_json)

    async def local() -> bool:
        if as_ is None:
            fail("give --as PRINCIPAL (local mode) or --server URL", as_json=as_json)
        async with open_runtime(project, store=store, deploy=deploy, serving=False) as rt:
            redact_errors(rt.redactor)
            config = load_chat_config(rt.deployment.source)
            _known_agent(rt, agent, config.agent, as_json)  # before stdin or the provider
            chosen = profile or config.profile or agent or config.agent
            if chosen is None:
                fail("give --profile or --agent", as_json=as_json)
            if chosen not in rt.build.profiles:
                known = ", ".join(sorted(rt.build.profiles)) or "(none)"
                why = "" if chosen == profile else " (the profile defaults to the agent's name)"
                fail(
                    f"unknown profile {chosen!r}{why}; give --profile (known: {known})",
                    as_json=as_json,
                )
            orchestrator = Orchestrator(
                rt,
                provider=config.provider,
                proposals=ProposalService(rt, load_proposal_settings(rt.deployment.source)),
                settings=config.settings,
            )
            hub = TurnHub(orchestrator, clock=rt.clock)
            turn, _ = _local_turns(hub, rt.principal(as_), chosen, agent or config.agent)
            ok = await _loop(turn, message, as_json, local=True)
            await hub.close()
            return ok

    if message is not None:
        _not_utf8("--message", not_utf8(message), as_json)
    with reported_errors(as_json):
        ok = asyncio.run(remote(server) if server else local())
    if not ok:
        raise typer.Exit(1)


def _known_agent(rt: Runtime, agent: str | None, configured: str | None, as_json: bool) -> None:
    """Refuse an unknown agent (``--agent``, else the deployment's ``chat.agent``) by listing
    the Build's agents, as an unknown profile is refused."""
    name = agent or configured
    if name is None or name in rt.build.agents:
        return
    known = ", ".join(sorted(rt.build.agents)) or "none: the Build has no agents"
    where = "" if agent else f" (chat.agent in {rt.deployment.source})"
    fail(f"unknown agent {name!r}{where} (known: {known})", as_json=as_json, reason="AGENT_UNKNOWN")


# What a server from before GET /v1/chat/agents answers there: its problem, or a proxy's 404
OLDER_SERVER = frozenset({"ROUTE_NOT_FOUND", "HTTP_404"})


async def _offered_agent(
    client: AsyncClient, agent: str | None, profile: str | None, as_json: bool
) -> None:
    """With ``--server``, refuse what the server would refuse at the first turn — an agent it
    does not have (``--agent``, else its ``chat.agent``), or no agent and no profile where it
    has no default — as the local path does, before anything is read or sent. A server older
    than ``GET /v1/chat/agents`` leaves it to the turn, as before."""
    try:
        offered = await client.chat_agents()
    except Failure as exc:
        if exc.reason in OLDER_SERVER:
            return
        raise
    names = sorted(str(a.get("name")) for a in offered.get("agents") or ())
    known = ", ".join(names) or "none: the server's Build has no agents"
    name = agent or offered.get("defaultAgent")
    if name is None:
        if profile is None and offered.get("defaultProfile") is None:
            fail(
                "give --profile or --agent (the server has no chat.agent or chat.profile; "
                f"known agents: {known})",
                as_json=as_json,
            )
        return
    if name not in names:
        where = "" if agent else " (the server's chat.agent)"
        fail(
            f"unknown agent {name!r}{where} (known: {known})",
            as_json=as_json,
            reason="AGENT_UNKNOWN",
        )


def register(root: typer.Typer) -> None:
    root.command("chat")(chat)
