"""The executors a deployment's bindings need, one per kind, and the readiness check over
them: what the runtime wires into the kernel (``charter.runtime.open_runtime``) and what
``charter check`` asks without opening a store."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from charter.deploy.deployment import Binding, Deployment
from charter.deploy.readiness import Readiness
from charter.deploy.secret_ref import SecretRef
from charter.executors.http import DEFAULT_MAX_RESPONSE_BYTES, HttpEndpoint, HttpExecutor
from charter.executors.python import PythonExecutor
from charter.executors.subprocess import SubprocessExecutor
from charter.kernel.executor_port import Executor
from charter.kernel.redaction import Redactor
from charter.project.build import Build


def http_endpoint(binding: Binding) -> HttpEndpoint:
    options = binding.options
    credential, signing_key = options["credential"], options["signing_key"]
    assert isinstance(credential, SecretRef)
    assert isinstance(signing_key, SecretRef)
    return HttpEndpoint(
        url=str(options["url"]),
        credential=credential.resolve(),
        signing_key=signing_key.resolve(),
        timeout_s=options.get("timeout_s"),
        max_response_bytes=int(options.get("max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES)),
    )


def executors_for(
    build: Build,
    deployment: Deployment,
    project_dir: Path | None,
    redactor: Redactor,
    functions: Mapping[str, Callable[..., Any]] | None,
) -> tuple[dict[str, Executor], Readiness]:
    """One executor per kind (``http`` serves every http binding) and the readiness check."""
    entrypoints = {tool_id: t.entrypoint for tool_id, t in build.tools.items() if t.entrypoint}
    bindings: dict[str, Binding] = {}
    for tool_id in build.tools:
        binding = deployment.binding_for(tool_id)
        if binding is not None:
            bindings[tool_id] = binding
    endpoints = {
        tool_id: http_endpoint(b) for tool_id, b in bindings.items() if b.executor == "http"
    }
    executors: dict[str, Executor] = {
        "python": PythonExecutor(
            redact_message=redactor.message_redactor(),
            root=project_dir,
            entrypoints=entrypoints,
            functions=functions,
        ),
        "subprocess": SubprocessExecutor(
            redact_message=redactor.message_redactor(), entrypoints=entrypoints, root=project_dir
        ),
    }
    http: HttpExecutor | None = None
    if endpoints:
        http = HttpExecutor(
            endpoints=endpoints,
            redact_message=redactor.message_redactor(),
            egress=deployment.egress,
        )
        executors["http"] = http
    mcp = None
    if any(b.executor == "mcp" for b in bindings.values()):
        from charter.executors.mcp import mcp_executor  # needs the mcp extra: only when bound

        mcp = mcp_executor(
            bindings,
            root=project_dir,
            redact_message=redactor.message_redactor(),
            egress=deployment.egress,
        )
        if mcp is not None:
            executors["mcp"] = mcp
    readiness = Readiness(
        build=build,
        bindings=bindings,
        http=http,
        mcp=mcp,
        root=project_dir,
        functions=frozenset(functions or ()),
        ttl_s=deployment.readiness_ttl_s,
    )
    for remote in (http, mcp):
        if remote is not None:
            remote.on_mismatch = readiness.invalidate
    return executors, readiness
