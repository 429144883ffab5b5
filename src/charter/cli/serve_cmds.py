"""``charter serve``: the HTTP API over the project's runtime (uvicorn, one process).

Run several on one PostgreSQL store (``--store postgresql://…``) behind a load balancer to
scale out; they behave as one gateway (see docs/server.md, "Replicas").
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, cast

import typer

from charter._version import __version__
from charter.cli._listen import GRACE_S, base_url, listen
from charter.cli._output import fail, log_level_option, reported_errors
from charter.deploy.audit_settings import audit_sinks
from charter.deploy.deployment import load_deployment
from charter.deploy.http_limits import HeadLimits
from charter.errors import ConfigError
from charter.kernel.audit import JsonlAuditSink
from charter.runtime import Runtime, open_runtime

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from charter.server.http_protocol import HttpImplementation


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8750, "--port", min=0, max=65535, help="TCP port."),
    env: str | None = typer.Option(
        None,
        "--env",
        help="Environment: use charter.deploy.ENV.yaml beside charter.yaml (unless --deploy) "
        "and refuse a deployment file written for another environment.",
    ),
    project: Path = typer.Option(Path("."), "--project", "-p", help="The project directory."),
    store: str | None = typer.Option(
        None, "--store", envvar="CHARTER_STORE", help="Store URL (sqlite:///…, postgresql://…)."
    ),
    deploy: Path | None = typer.Option(
        None, "--deploy", envvar="CHARTER_DEPLOY", help="Deployment file."
    ),
    log_level: str = log_level_option("info", "debug | info | warning | error"),
    http: str = typer.Option(
        "auto",
        "--http",
        help="HTTP/1.1 implementation: auto (httptools when installed, else h11), httptools, h11.",
    ),
) -> None:
    """Serve the HTTP API (/v1, /docs, /console, /mcp/PROFILE, /healthz, /readyz, /metrics)
    until interrupted. At a terminal, print where each is and where the operator key comes
    from (never the key).

    Request heads are bounded by the deployment file's limits.http (defaults: URL 8 KiB →
    414 URL_TOO_LONG; a header field 8 KiB, the head 32 KiB, 100 fields → 431
    HEADERS_TOO_LARGE; a head not whole after 30 s → 408 HEADERS_TIMEOUT); see
    docs/server.md."""
    try:
        import uvicorn

        from charter.server.app import create_app
        from charter.server.http_protocol import counted_in, head_limited_protocol
        from charter.server.logs import configure_logging
    except ImportError:  # pragma: no cover - depends on the installed extras
        fail("charter serve needs the server extra: pip install -e '.[server]'")
    if deploy is None and env is not None:
        deploy = project / f"charter.deploy.{env}.yaml"
        if not deploy.is_file():
            fail(f"--env {env}: there is no {deploy}")

    if http not in ("auto", "httptools", "h11"):
        fail(f"--http {http}: choose auto, httptools or h11")
    if http == "httptools" and importlib.util.find_spec("httptools") is None:
        fail("--http httptools: httptools is not installed")
    if not project.exists():
        fail(f"--project {project}: there is no such directory or Build file")
    with reported_errors():  # a bad deployment file: one line, before anything listens
        head_limits = _preflight(project, deploy)
    # Bind first: a busy port fails here, before the runtime opens or anything logs "ready".
    sock = listen(host, port, command="serve")
    base = base_url(host, sock.getsockname()[1])
    banner = sys.stdout.isatty()

    failed: list[Exception] = []  # why the runtime could not open, reported after uvicorn

    @asynccontextmanager
    async def opener() -> AsyncIterator[Runtime]:
        async with _started(failed, open_runtime(project, store=store, deploy=deploy)) as rt:
            if env is not None and rt.deployment.environment != env:
                failed.append(
                    ConfigError(
                        f"--env {env}: the deployment file is for environment "
                        f"{rt.deployment.environment!r}"
                    )
                )
                raise _StartupFailed
            if banner:
                print(serve_banner(rt, base), flush=True)
            yield rt

    configure_logging(log_level)
    with sock, reported_errors():
        app = create_app(opener=opener)
        config = uvicorn.Config(
            _quiet_startup_failure(app, failed),
            http=head_limited_protocol(
                head_limits, cast("HttpImplementation", http), on_refused=counted_in(app)
            ),
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=GRACE_S,
        )
        try:
            uvicorn.Server(config).run(sockets=[sock])
        except SystemExit:
            if not failed:
                raise
        if failed:  # one line and exit 1, as every other command (no traceback, not exit 3)
            raise failed[0]


class _StartupFailed(Exception):
    """The runtime did not open; the reason is reported once uvicorn has stopped."""


@asynccontextmanager
async def _started(
    failed: list[Exception], opening: AbstractAsyncContextManager[Runtime]
) -> AsyncIterator[Runtime]:
    """Enter ``opening``; an error on the way in is kept in ``failed`` for the command to
    report, and the lifespan fails without it (uvicorn would log its traceback)."""
    try:
        rt = await opening.__aenter__()
    except Exception as exc:
        failed.append(exc)
        raise _StartupFailed from None
    try:
        yield rt
    except BaseException as exc:
        if not await opening.__aexit__(type(exc), exc, exc.__traceback__):
            raise
    else:
        await opening.__aexit__(None, None, None)


def _quiet_startup_failure(app: ASGIApp, failed: list[Exception]) -> ASGIApp:
    """``app`` whose lifespan start-up failure carries no message when the command reports
    it itself (Starlette sends the traceback there and uvicorn logs it)."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return

        async def quiet(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed" and failed:
                message = {**message, "message": ""}
            await send(message)

        await app(scope, receive, quiet)

    return wrapped


def _preflight(project: Path, deploy: Path | None) -> HeadLimits:
    """Load the deployment file and open its audit file once, so a bad setting is refused
    with one line (the runtime reads both again when the server starts); the bounds of a
    request head, which the HTTP layer applies before any request reaches the app."""
    base = project if project.is_dir() else Path.cwd()
    deployment = load_deployment(deploy, project_dir=base)
    for sink in audit_sinks(deployment.audit, source=deployment.source):
        if isinstance(sink, JsonlAuditSink):
            sink.close()
    return deployment.limits.http


def serve_banner(rt: Runtime, base: str) -> str:
    """Where everything is, for a person at a terminal — never a key, only where keys are."""
    deployment = rt.deployment
    where = str(deployment.source) if deployment.source is not None else "no deployment file"
    lines = [
        f"Charter {__version__} serving {rt.build.project_name} {rt.build.project_version} "
        f"(environment {deployment.environment}, {where})",
        f"  console   {base}/console/",
        f"  API docs  {base}/docs   (OpenAPI: {base}/openapi.json, API: {base}/v1)",
    ]
    for name in sorted(rt.build.profiles):
        lines.append(f"  MCP       {base}/mcp/{name}   (profile {name})")
    lines.append(f"  health    {base}/healthz  {base}/readyz  {base}/metrics")
    operators = [
        (name, deployment.credential_refs.get(name))
        for name, p in sorted(deployment.principals.items())
        if p.kind.value == "operator"
    ]
    for name, ref in operators:
        lines.append(f"  operator {name}: API key {_key_source(ref)}")
    if not operators:
        lines.append("  no operator principal: the console needs one (see docs/deploy.md)")
    lines.append("Press Ctrl+C to stop.")
    return "\n".join(lines)


def _key_source(ref: str | None) -> str:
    if ref is None:
        return "not set"
    kind, _, where = ref.partition(":")
    if kind == "file":
        return f"in the file {where}"
    if kind == "env":
        return f"in the environment variable {where}"
    return "given by its owner (the deployment file holds only its sha256)"


def register(app: typer.Typer) -> None:
    app.command()(serve)
