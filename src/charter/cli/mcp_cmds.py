"""``charter mcp`` (serve a profile over MCP) and ``charter import-mcp`` (pin a server's tools).

``charter mcp --profile P --as PRINCIPAL`` serves over stdio: stdout carries only MCP
messages, so every diagnostic goes to stderr — log records as JSON lines at ``--log-level``
(default ``warning``), through the same redacting filter as ``charter serve``.
``--transport http`` serves streamable HTTP at ``http://HOST:PORT/mcp/P``; there the bearer
credential of each request decides the principal (``--as`` is not used).
"""

from __future__ import annotations

import asyncio
import shlex
import socket
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import typer

from charter.cli._listen import GRACE_S, base_url, listen
from charter.cli._output import (
    CLOSED_STREAMS,
    err_console,
    fail,
    log_level_option,
    redact_errors,
    reported_errors,
)
from charter.cli.kernel_cmds import DEPLOY, PROJECT, STORE


def mcp(
    profile: str = typer.Option(..., "--profile", help="The profile whose tools to serve."),
    as_: str | None = typer.Option(
        None, "--as", help="Serve as this principal (stdio; over HTTP the credential decides)."
    ),
    transport: str = typer.Option("stdio", "--transport", help="stdio or http."),
    run: str | None = typer.Option(
        None, "--run", help="stdio: bind the session to this catalog run."
    ),
    task: str | None = typer.Option(
        None, "--task", help="stdio, with --run: every call belongs to this task."
    ),
    agent: str | None = typer.Option(
        None, "--agent", help="With --run: the context's agent (default: the task's role)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="HTTP: the address to listen on."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="HTTP: the port to listen on."),
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    log_level: str = log_level_option(
        "warning", "debug | info | warning | error (JSON lines on stderr)."
    ),
) -> None:
    """Serve a profile's tools over MCP, every call governed by the kernel."""
    if transport not in ("stdio", "http"):
        fail("--transport must be stdio or http")
    if transport == "stdio" and as_ is None:
        fail("--as PRINCIPAL is required for --transport stdio")
    if transport != "stdio" and (run or task or agent):
        fail("--run, --task and --agent bind a stdio session (--transport stdio)")
    if task is not None and run is None:
        fail("--task needs --run RUN")
    if transport == "stdio" and "stdout" in CLOSED_STREAMS:
        fail("standard output is closed: the stdio transport answers the client there")
    bound = (run, task, agent)
    from charter.server.logs import configure_logging

    # HTTP binds first: a busy port fails here in one line, before the runtime opens
    sock = listen(host, port, command="mcp") if transport == "http" else None
    # every record (the MCP SDK's, HTTP clients') goes to stderr through the redacting filter
    configure_logging(log_level.lower())
    with sock or nullcontext(), reported_errors():
        asyncio.run(_serve(profile, as_, transport, sock, project, store, deploy, bound))


async def _serve(
    profile: str,
    as_: str | None,
    transport: str,
    sock: socket.socket | None,
    project: Path,
    store: str | None,
    deploy: Path | None,
    bound: tuple[str | None, str | None, str | None] = (None, None, None),
) -> None:
    from charter.mcp import Gateway, mount_mcp, serve_stdio
    from charter.runtime import open_runtime

    async with open_runtime(project, store=store, deploy=deploy) as rt:
        redact_errors(rt.redactor)
        # an unknown profile, or a required tool that is not ready, fails here, before serving
        await Gateway(rt, profile).check_ready()
        if transport == "stdio":
            assert as_ is not None
            run, task, agent = bound
            await serve_stdio(rt, profile, as_, run_id=run, task_id=task, agent=agent)
            return
        import uvicorn
        from starlette.applications import Starlette

        assert sock is not None
        app = Starlette()
        mount_mcp(app, rt)
        host, port = sock.getsockname()[:2]
        err_console.print(
            f"charter mcp: profile {profile} at {base_url(host, port)}/mcp/{profile}", markup=False
        )
        from charter.server.http_protocol import head_limited_protocol

        config = uvicorn.Config(
            app,
            # Charter's JSON-lines logging (configure_logging above) stays in place: uvicorn's
            # default config would put its plain-text handler back on uvicorn's logger.
            log_config=None,
            access_log=False,
            http=head_limited_protocol(rt.deployment.limits.http),  # bounded request heads
            timeout_graceful_shutdown=GRACE_S,  # then a call still running is cut off
        )
        server = uvicorn.Server(config)
        await server.serve(sockets=[sock])


def import_mcp(
    command: str | None = typer.Option(
        None, "--command", help="Start this MCP server over stdio (a shell-quoted command)."
    ),
    url: str | None = typer.Option(None, "--url", help="A streamable-HTTP MCP server URL."),
    credential_env: str | None = typer.Option(
        None, "--credential-env", help="URL servers: env var holding the bearer credential."
    ),
    ca: Path | None = typer.Option(
        None, "--ca", help="https URL servers: trust only these PEM CA certificates (a file)."
    ),
    prefix: str = typer.Option("", "--prefix", help="Prefix for the tool ids (e.g. 'gh')."),
    server_name: str | None = typer.Option(
        None, "--server", help="The server's name in the binding (default: from the server)."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Write the contracts here (default tools/mcp-<server>.yaml)."
    ),
    project: Path = PROJECT,
) -> None:
    """Write pinned YAML contracts for a downstream MCP server's tools into the project."""
    from charter.deploy.http_binding import read_ca_file
    from charter.executors.mcp import McpServerSpec
    from charter.executors.mcp_import import import_contracts

    if (command is None) == (url is None):
        fail("give exactly one of --command or --url")
    if ca is not None and not (url or "").startswith("https://"):
        fail("--ca applies to an https:// --url only")
    with reported_errors():
        spec = McpServerSpec(
            command=tuple(shlex.split(command)) if command is not None else None,
            url=url,
            credential_env=credential_env,
            cwd=Path.cwd(),
            ca=read_ca_file(str(ca), label="--ca").pem if ca is not None else None,
        )
        written: dict[str, Any] = asyncio.run(
            import_contracts(
                spec, project=project, prefix=prefix, server=server_name, out=out, ca_file=ca
            )
        )
    err_console.print(
        f"wrote {len(written['tools'])} contract(s) to {written['file']}; "
        "confirm each tool's effect and approval, add the file to charter.yaml (tools.files) "
        "and the binding to charter.deploy.yaml:",
        markup=False,
    )
    print(written["binding_hint"])


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)
    app.command("import-mcp")(import_mcp)
