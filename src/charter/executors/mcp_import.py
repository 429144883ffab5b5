"""``charter import-mcp``: contracts for a downstream MCP server's tools, each pinned by
:func:`~charter.executors.mcp.upstream_digest`, and the bindings to paste (DESIGN §1.4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import yaml

from charter.contracts.model import MODEL_NAME
from charter.executors.mcp import McpServerSpec, list_upstream, upstream_digest


def _tool_id(prefix: str, server: str, name: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name).strip("_") or "tool"
    if not safe[0].isalpha():
        safe = "t_" + safe
    return f"{prefix or server}.{safe}"


def _model_name(prefix: str, tool_id: str, upstream: str) -> str:
    """The model-facing name: the upstream name, behind ``prefix_`` when a prefix is given
    (so two servers' ``search`` tools do not clash); derived from the id when not valid."""
    safe_prefix = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in prefix)
    name = f"{safe_prefix}_{upstream}" if safe_prefix else upstream
    if MODEL_NAME.fullmatch(name):
        return name
    return tool_id.replace(".", "_")[:64]


class _NoAliases(yaml.SafeDumper):
    """Write every value out in full: no ``&id001`` anchors and ``*id001`` aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def contract_data(
    tool: types.Tool, *, tool_id: str, server: str, prefix: str = ""
) -> dict[str, Any]:
    """The YAML contract for one upstream tool, pinned by :func:`upstream_digest`."""
    ann = tool.annotations
    data: dict[str, Any] = {
        "id": tool_id,
        "name": _model_name(prefix, tool_id, tool.name),
        "version": "1.0.0",
        "description": tool.description or tool.name,
        "args_schema": tool.input_schema,
        "effect": "write",
        "annotations": {"open_world": True},
        "upstream": {"server": server, "name": tool.name, "digest": upstream_digest(tool)},
    }
    if tool.title or (ann is not None and ann.title):
        data["title"] = tool.title or (ann.title if ann is not None else None)
    if tool.output_schema is not None and tool.output_schema.get("type") == "object":
        data["result_schema"] = tool.output_schema
    if ann is not None:
        if ann.destructive_hint is not None:
            data["annotations"]["destructive"] = ann.destructive_hint
        if ann.idempotent_hint is not None:
            data["annotations"]["idempotent"] = ann.idempotent_hint
    return data


HEADER = """\
# Contracts for the tools of the MCP server {server!r}, written by `charter import-mcp`.
# Each tool is pinned by `upstream.digest` (its name, description and input schema): if the
# server changes any of them, the tool is not ready until you re-import and review the diff.
#
# CONFIRM BEFORE USE: every tool is imported as `effect: write` (approval required) and
# open-world. Set `effect: read` only for tools that change nothing{hints}, and add the
# permissions a caller needs.
"""


async def import_contracts(
    spec: McpServerSpec,
    *,
    project: Path,
    prefix: str = "",
    server: str | None = None,
    out: Path | None = None,
    ca_file: Path | None = None,
) -> dict[str, Any]:
    """List ``spec``'s tools and write their contracts as YAML; return what was written
    (the binding hint names ``ca_file``, the file ``spec.ca`` was read from, if any)."""
    tools = await list_upstream(spec, hint="a server behind a private CA needs --ca FILE")
    if server is None:
        server = prefix or "mcp"
    contracts = [
        contract_data(t, tool_id=_tool_id(prefix, server, t.name), server=server, prefix=prefix)
        for t in tools
    ]
    read_only = [t.name for t in tools if t.annotations and t.annotations.read_only_hint]
    hints = f" (the server marks {', '.join(read_only)} read-only)" if read_only else ""
    target = out if out is not None else project / "tools" / f"mcp-{server}.yaml"
    if not target.is_absolute():
        target = project / target
    target.parent.mkdir(parents=True, exist_ok=True)
    body = yaml.dump(
        {"tools": contracts}, Dumper=_NoAliases, sort_keys=False, allow_unicode=True, width=100
    )
    target.write_text(HEADER.format(server=server, hints=hints) + body, encoding="utf-8")
    binding: dict[str, Any] = {"executor": "mcp"}
    if spec.command is not None:
        binding["command"] = list(spec.command)
        if spec.cwd is not None and spec.cwd.resolve() != project.resolve():
            try:
                binding["cwd"] = str(spec.cwd.resolve().relative_to(project.resolve()))
            except ValueError:
                binding["cwd"] = str(spec.cwd.resolve())
    else:
        binding["url"] = spec.url
        binding["credential"] = {"env": spec.credential_env or "MCP_TOKEN"}
        if ca_file is not None:
            binding["ca"] = {"file": _shown(ca_file, project)}
    hint = yaml.dump(
        {"bindings": {c["id"]: binding for c in contracts}},
        Dumper=_NoAliases,
        sort_keys=False,
        width=100,
    )
    shown = _shown(target, project)
    return {"file": shown, "tools": [c["id"] for c in contracts], "binding_hint": hint}


def _shown(path: Path, project: Path) -> str:
    """``path`` relative to the project when inside it (as a deployment file there reads
    it), else absolute."""
    try:
        return str(path.resolve().relative_to(project.resolve()))
    except ValueError:
        return str(path.resolve())
