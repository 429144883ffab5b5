"""Pinned workflow contracts: what ``run_created`` snapshots, and reading it back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from charter.contracts.text import shown
from charter.errors import InvalidInput
from charter.project.catalog import CatalogEntry


def catalog_of(build_doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    section = build_doc.get("catalog") or {}
    return {**section.get("skills", {}), **section.get("workflows", {})}


def pin(build_doc: Mapping[str, Any], slug: str) -> dict[str, Any]:
    """The workflow and its transitive dependencies: versions, procedures, contract hashes."""
    entries = catalog_of(build_doc)
    wf = entries.get(slug)
    if wf is None or wf["kind"] != "workflow":
        raise InvalidInput(
            f"no catalog workflow {shown(slug)} in the Build", reason="WORKFLOW_UNKNOWN"
        )
    closure: dict[str, dict[str, Any]] = {}
    todo = [slug]
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure[name] = dict(entries[name])
        todo.extend(entries[name]["depends_on"])
    return {
        "slug": slug,
        "version": wf["version"],
        "contract_sha256": wf["contract_sha256"],
        "build_digest": build_doc.get("digest"),
        "entries": {n: closure[n] for n in sorted(closure)},
    }


def pinned_entry(pinned: Mapping[str, Any]) -> CatalogEntry:
    """The pinned workflow itself, as a :class:`CatalogEntry`."""
    data = dict(pinned["entries"][pinned["slug"]])
    data.pop("contract_sha256", None)
    return CatalogEntry.from_dict(data)
