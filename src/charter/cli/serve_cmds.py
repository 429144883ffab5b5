"""``charter serve``: the HTTP API over the project's runtime (uvicorn, one process).

Run several on one PostgreSQL store (``--store postgresql://…``) behind a load balancer to
scale out; they behave as one gateway (see docs/server.md, "Replicas").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import typer

from charter.cli._output import fail, reported_errors
from charter.errors import ConfigError
from charter.runtime import Runtime, open_runtime


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
    log_level: str = typer.Option("info", "--log-level", help="debug | info | warning | error"),
) -> None:
    """Serve the HTTP API (/v1, /docs, /healthz, /readyz, /metrics) until interrupted."""
    try:
        import uvicorn

        from charter.server.app import create_app
        from charter.server.logs import configure_logging
    except ImportError:  # pragma: no cover - depends on the installed extras
        fail("charter serve needs the server extra: pip install -e '.[server]'")
    if deploy is None and env is not None:
        deploy = project / f"charter.deploy.{env}.yaml"
        if not deploy.is_file():
            fail(f"--env {env}: there is no {deploy}")

    @asynccontextmanager
    async def opener() -> AsyncIterator[Runtime]:
        async with open_runtime(project, store=store, deploy=deploy) as rt:
            if env is not None and rt.deployment.environment != env:
                raise ConfigError(
                    f"--env {env}: the deployment file is for environment "
                    f"{rt.deployment.environment!r}"
                )
            yield rt

    configure_logging(log_level)
    with reported_errors():
        app = create_app(opener=opener)
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
        )


def register(app: typer.Typer) -> None:
    app.command()(serve)
