"""Project commands: ``init``, ``build``, ``inspect``, ``diff``."""

from __future__ import annotations

import shlex
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from charter.cli._output import JSON_OPTION, console, print_json, print_table, reported_errors
from charter.deploy.deployment import deployment_path, load_deployment
from charter.deploy.readiness import served_bindings
from charter.errors import CharterError
from charter.project.build import (
    Build,
    build_project,
    load_build,
    resolve_build_path,
    save_build,
)
from charter.project.diff import BuildDiff, diff_builds
from charter.project.init import TEMPLATES, init_project

PROJECT_OPTION = typer.Option(
    Path("."),
    "--project",
    "-p",
    help="The project directory (holding charter.yaml).",
    show_default=True,
)


def init(
    directory: Path = typer.Argument(Path("."), help="Where to create the project."),
    example: str = typer.Option(
        "basic", "--example", help=f"Which example to start from: {', '.join(TEMPLATES)}."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite files that already exist."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Create a small working project: tools, profiles, an agent and a deployment file."""
    with reported_errors(as_json):
        written = init_project(directory, template=example, force=force)
    if as_json:
        print_json({"ok": True, "directory": str(directory), "files": written})
        return
    console.print(f"Created a Charter project in [bold]{escape(str(directory))}[/]:")
    for rel in written:
        console.print(f"  {escape(rel)}")
    console.print(f"\nNext: [bold]cd {escape(shlex.quote(str(directory)))} && charter build[/]")


def build(
    project: Path = PROJECT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Compile the project into an immutable Build and print its digest.

    The Build is written to .charter/builds/<digest>.json and recorded as the latest. The same
    source always gives the same digest. When the project is invalid, every problem is listed
    (file, tool, JSON pointer) and the exit code is 1.
    """
    with reported_errors(as_json):
        result = build_project(project)
        path = save_build(result, project)
    if as_json:
        print_json(
            {
                "ok": True,
                "digest": result.digest,
                "path": str(path),
                "requires_runtime": result.requires_runtime,
                "tools": sorted(result.tools),
                "profiles": sorted(result.profiles),
            }
        )
        return
    console.print(result.digest, markup=False)


def _load(ref: str, project: Path) -> Build:
    return load_build(resolve_build_path(ref, project))


def _unbound(b: Build, project: Path) -> frozenset[str] | None:
    """The Build's tools that the project's deployment does not bind (not offered anywhere);
    ``None`` when the deployment cannot be read here. Never creates keys: with no deployment
    file the local default binds exactly the tools that have a Python function."""
    chosen = deployment_path(None, project_dir=project)
    if chosen is None:
        return frozenset(t for t, tool in b.tools.items() if tool.entrypoint is None)
    try:
        deployment = load_deployment(chosen, project_dir=project)
    except CharterError:  # e.g. a secret this shell does not have: say nothing
        return None
    return frozenset(b.tools) - served_bindings(b, deployment).keys()


def _summary(b: Build, unbound: frozenset[str] | None) -> dict[str, object]:
    return {
        "digest": b.digest,
        "project": {"name": b.project_name, "version": b.project_version},
        "requires_runtime": b.requires_runtime,
        "tools": [
            {
                "id": t.contract.id,
                "name": t.contract.name,
                "version": t.contract.version,
                "effect": t.contract.effect.value,
                "danger": t.contract.danger.value if t.contract.danger else None,
                "approval": t.contract.approval.value if t.contract.approval else None,
                "digest": t.contract.digest,
                "source": t.source,
                "entrypoint": t.entrypoint,
                "bound": None if unbound is None else t.contract.id not in unbound,
                "description": t.contract.description,
                "args_schema": t.contract.args_schema,
                "result_schema": t.contract.result_schema,
            }
            for t in (b.tools[k] for k in sorted(b.tools))
        ],
        "profiles": {name: list(p.tools) for name, p in sorted(b.profiles.items())},
        "agents": {name: list(a.tools) for name, a in sorted(b.agents.items())},
    }


def inspect(
    build_ref: str = typer.Argument(
        "latest", metavar="BUILD", help="A Build file, a digest (or unique prefix), or 'latest'."
    ),
    project: Path = PROJECT_OPTION,
    latest: bool = typer.Option(False, "--latest", help="Same as BUILD=latest."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show a Build's tools, profiles, agents and digests."""
    with reported_errors(as_json):
        b = _load("latest" if latest else build_ref, project)
    unbound = _unbound(b, project)
    if as_json:
        print_json(_summary(b, unbound))
        return
    console.print(
        f"[bold]{escape(b.project_name)}[/] {escape(b.project_version)}  {escape(b.digest)}"
    )
    console.print(f"requires runtime: {b.requires_runtime}\n", markup=False)
    table = Table(title="Tools", title_justify="left")
    for col in ("id", "name", "version", "effect", "danger", "approval"):
        table.add_column(col, no_wrap=True)
    table.add_column("digest", no_wrap=True)
    for tool_id in sorted(b.tools):
        c = b.tools[tool_id].contract
        cells = (
            c.id,
            c.name,
            c.version,
            c.effect.value,
            c.danger.value if c.danger else "",
            c.approval.value if c.approval else "",
            c.digest[:19],
        )
        table.add_row(*(escape(str(cell)) for cell in cells))
    print_table(table)
    profiles = Table(title="Profiles", title_justify="left")
    profiles.add_column("profile")
    profiles.add_column("tools", overflow="fold")
    for name, prof in sorted(b.profiles.items()):
        listed = [f"{t} (not bound)" if unbound and t in unbound else t for t in prof.tools]
        profiles.add_row(escape(name), escape(", ".join(listed) or "(none)"))
    print_table(profiles)
    if unbound:
        console.print(
            f"not bound in this deployment (offered nowhere): {', '.join(sorted(unbound))}",
            markup=False,
            soft_wrap=True,
        )
    if b.agents:
        agents = Table(title="Agents", title_justify="left")
        agents.add_column("agent")
        agents.add_column("tools", overflow="fold")
        for name, agent in sorted(b.agents.items()):
            agents.add_row(escape(name), escape(", ".join(agent.tools) or "(none)"))
        print_table(agents)


def _print_diff(d: BuildDiff) -> None:
    if d.empty:
        console.print("The Builds are identical." if d.before == d.after else "No tool changes.")
        return
    if d.runtime:
        console.print(f"runtime: {d.runtime[0]} → {d.runtime[1]}", markup=False)
    for tool_id in d.tools_added:
        console.print(f"[green]+ tool {escape(tool_id)}[/]")
    for tool_id in d.tools_removed:
        console.print(f"[red]- tool {escape(tool_id)}[/]")
    for tc in d.tools_changed:
        console.print(f"[yellow]~ tool {escape(tc.tool)}[/]")
        for ch in tc.changes:  # contract values (descriptions, defaults) are never markup
            if ch.kind == "added":
                console.print(f"    + {ch.pointer}: {ch.after!r}", markup=False)
            elif ch.kind == "removed":
                console.print(f"    - {ch.pointer}: {ch.before!r}", markup=False)
            else:
                console.print(f"    ~ {ch.pointer}: {ch.before!r} → {ch.after!r}", markup=False)
    for pc in d.profiles:
        label = {"added": "new profile", "removed": "removed profile"}.get(pc.status, "profile")
        parts = [f"+{t}" for t in pc.gained] + [f"-{t}" for t in pc.lost]
        console.print(f"  {label} {pc.profile}: {' '.join(parts) or '(no tools)'}", markup=False)


def diff(
    before: str = typer.Argument(..., metavar="A", help="The older Build (file, digest, latest)."),
    after: str = typer.Argument(..., metavar="B", help="The newer Build (file, digest, latest)."),
    project: Path = PROJECT_OPTION,
    exit_code: bool = typer.Option(
        False, "--exit-code", help="Exit with 1 when the Builds differ (like git diff)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show tools added, removed and changed (with the schema change), and profile changes."""
    with reported_errors(as_json):
        d = diff_builds(_load(before, project), _load(after, project))
    if as_json:
        print_json(d.to_dict())
    else:
        _print_diff(d)
    if exit_code and not d.empty:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Attach the project commands to the root application."""
    app.command()(init)
    app.command()(build)
    app.command()(inspect)
    app.command()(diff)
