"""Catalog rules across entries, and the catalog section of a Build.

Pure: the inputs are parsed entries plus the Build's tool contracts and profiles. Every rule
reports a :class:`~charter.errors.Problem` naming the catalog file and the field:

- ``depends_on`` names a known workflow or skill, and dependencies have no cycle;
- profiles exist; workflow tools exist;
- tasks: unique ids, known ``depends_on``, acyclic; every output artifact type has exactly one
  producing task; every consumed artifact has an upstream producer (a task it depends on,
  transitively, or a workflow input); task tools ⊆ the workflow's tools and ⊆ the task's
  profile; task outputs ⊆ the workflow's outputs; task profile ∈ the workflow's profiles;
- permissions cover what tools and artifacts imply: an open-world (network) tool needs
  ``network:read``, any other tool ``compute:execute``, inputs ``artifact:read``, outputs
  ``artifact:write``.

Each entry's ``contract_sha256`` covers its own content and its dependencies' hashes, so it
changes when anything it transitively depends on changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from charter.contracts.canonical import sha256_digest
from charter.contracts.model import ToolContract
from charter.errors import Problem
from charter.project.catalog import CatalogEntry


def _cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One cycle of ``graph`` (as a path that returns to its start), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if state.get(nxt) is None:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if state.get(node) is None:
            found = visit(node)
            if found:
                return found
    return None


def _ancestors(graph: Mapping[str, Iterable[str]], node: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(node, ()))
    while todo:
        n = todo.pop()
        if n in seen or n not in graph:
            continue
        seen.add(n)
        todo.extend(graph[n])
    return seen


def implied_permissions(entry: CatalogEntry, tools: Mapping[str, ToolContract]) -> dict[str, str]:
    """Permission → why it is needed."""
    need: dict[str, str] = {}
    tool_ids = list(entry.tools) + [t for task in entry.tasks for t in task.required_tools]
    for tid in tool_ids:
        c = tools.get(tid)
        if c is None:
            continue
        if c.annotations.open_world:
            need.setdefault("network:read", f"tool {tid} is open-world (network)")
        else:
            need.setdefault("compute:execute", f"tool {tid} runs code")
    inputs = list(entry.input_artifacts) + [a for t in entry.tasks for a in t.input_artifacts]
    outputs = list(entry.output_artifacts) + [a for t in entry.tasks for a in t.output_artifacts]
    if inputs:
        need["artifact:read"] = f"it reads artifact {inputs[0]}"
    if outputs:
        need["artifact:write"] = f"it writes artifact {outputs[0]}"
    return need


def _check_tasks(
    e: CatalogEntry,
    tools: Mapping[str, ToolContract],
    profiles: Mapping[str, tuple[str, ...]],
    problems: list[Problem],
) -> None:
    def bad(message: str, pointer: str) -> None:
        problems.append(Problem(message=message, file=e.source, pointer=pointer))

    ids = [t.id for t in e.tasks]
    graph: dict[str, tuple[str, ...]] = {}
    for i, t in enumerate(e.tasks):
        if ids.count(t.id) > 1 and ids.index(t.id) != i:
            bad(f"task id {t.id!r} is declared twice", f"/tasks/{i}/id")
            continue
        graph[t.id] = t.depends_on
        for j, dep in enumerate(t.depends_on):
            if dep not in ids:
                bad(f"task {t.id!r} depends on unknown task {dep!r}", f"/tasks/{i}/depends_on/{j}")
    cycle = _cycle(graph)
    if cycle:
        bad(f"task dependencies form a cycle: {' → '.join(cycle)}", "/tasks")
        return
    workflow_tools = set(e.tools)
    producers: dict[str, list[str]] = {}
    for t in e.tasks:
        for art in t.output_artifacts:
            producers.setdefault(art, []).append(t.id)
    for art, who in sorted(producers.items()):
        if len(who) > 1:
            i = ids.index(who[1])
            bad(
                f"output artifact {art!r} has {len(who)} producers ({', '.join(who)}); "
                "exactly one task may produce it",
                f"/tasks/{i}/output_artifacts/{e.tasks[i].output_artifacts.index(art)}",
            )
    for j, art in enumerate(e.output_artifacts):
        if art not in producers:
            bad(f"workflow output {art!r} has no producing task", f"/output_artifacts/{j}")
    for i, t in enumerate(e.tasks):
        upstream = _ancestors(graph, t.id)
        for j, art in enumerate(t.input_artifacts):
            if art in e.input_artifacts:
                continue
            if not any(p in upstream for p in producers.get(art, [])):
                bad(
                    f"task {t.id!r} consumes {art!r} but no upstream task produces it "
                    "(and it is not a workflow input)",
                    f"/tasks/{i}/input_artifacts/{j}",
                )
        for j, tid in enumerate(t.required_tools):
            if tid not in workflow_tools:
                bad(
                    f"task {t.id!r} uses tool {tid!r}, which is not one of the workflow's tools",
                    f"/tasks/{i}/required_tools/{j}",
                )
            elif t.profile in profiles and tid not in profiles[t.profile]:
                bad(
                    f"task {t.id!r} uses tool {tid!r}, which its profile {t.profile!r} "
                    "does not offer",
                    f"/tasks/{i}/required_tools/{j}",
                )
        for j, art in enumerate(t.output_artifacts):
            if art not in e.output_artifacts:
                bad(
                    f"task {t.id!r} outputs {art!r}, which is not a workflow output",
                    f"/tasks/{i}/output_artifacts/{j}",
                )
        if t.profile not in e.profiles:
            bad(
                f"task {t.id!r} uses profile {t.profile!r}, "
                "which is not in the workflow's profiles",
                f"/tasks/{i}/profile",
            )


def validate_catalog(
    entries: list[CatalogEntry],
    tools: Mapping[str, ToolContract],
    profiles: Mapping[str, tuple[str, ...]],
) -> list[Problem]:
    problems: list[Problem] = []
    by_name: dict[str, CatalogEntry] = {}
    for e in entries:
        if e.name in by_name:
            problems.append(
                Problem(
                    message=(
                        f"{e.name!r} is both a workflow and a skill (also {by_name[e.name].source})"
                    ),
                    file=e.source,
                    pointer="/name",
                )
            )
            continue
        by_name[e.name] = e
    for e in entries:
        for j, dep in enumerate(e.depends_on):
            if dep not in by_name:
                problems.append(
                    Problem(
                        message=f"depends on unknown workflow or skill {dep!r}",
                        file=e.source,
                        pointer=f"/depends_on/{j}",
                    )
                )
        for j, prof in enumerate(e.profiles):
            if prof not in profiles:
                problems.append(
                    Problem(
                        message=f"unknown profile {prof!r}", file=e.source, pointer=f"/profiles/{j}"
                    )
                )
        for field in ("preflight_tools", "required_tools", "optional_tools"):
            for j, tid in enumerate(getattr(e, field)):
                if tid not in tools:
                    problems.append(
                        Problem(
                            message=f"unknown tool {tid!r}", file=e.source, pointer=f"/{field}/{j}"
                        )
                    )
        if e.kind == "workflow":
            _check_tasks(e, tools, profiles, problems)
        for perm, why in sorted(implied_permissions(e, tools).items()):
            if perm not in e.permissions:
                problems.append(
                    Problem(
                        message=f"permissions must include {perm!r}: {why}",
                        file=e.source,
                        pointer="/permissions",
                    )
                )
    cycle = _cycle({n: e.depends_on for n, e in by_name.items()})
    if cycle:
        first = by_name[cycle[0]]
        problems.append(
            Problem(
                message=f"dependencies form a cycle: {' → '.join(cycle)}",
                file=first.source,
                pointer="/depends_on",
            )
        )
    return problems


def contract_hashes(entries: Iterable[CatalogEntry]) -> dict[str, str]:
    """``contract_sha256`` of every entry: its content plus its dependencies' hashes.

    Call only on a validated catalog (known dependencies, no cycles).
    """
    by_name = {e.name: e for e in entries}
    out: dict[str, str] = {}

    def digest(name: str) -> str:
        if name not in out:
            e = by_name[name]
            deps = {d: digest(d) for d in sorted(e.depends_on)}
            out[name] = sha256_digest({"entry": e.to_dict(), "dependencies": deps})
        return out[name]

    for name in sorted(by_name):
        digest(name)
    return out


def catalog_section(entries: Iterable[CatalogEntry]) -> dict[str, Any]:
    """The Build's ``catalog`` section: workflows and skills by name, each with its hash."""
    items = list(entries)
    hashes = contract_hashes(items)
    section: dict[str, Any] = {"workflows": {}, "skills": {}}
    for e in sorted(items, key=lambda e: e.name):
        group = "workflows" if e.kind == "workflow" else "skills"
        section[group][e.name] = {**e.to_dict(), "contract_sha256": hashes[e.name]}
    return section
