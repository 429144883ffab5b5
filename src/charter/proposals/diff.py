"""Diffs for proposals: a generic JSON diff and an activity-graph diff."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def json_diff(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """``[{op: add|remove|replace, path, before?, after?}]`` (JSON pointers), sorted by path."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        out: list[dict[str, Any]] = []
        for key in sorted(set(before) | set(after)):
            sub = f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"
            if key not in before:
                out.append({"op": "add", "path": sub, "after": after[key]})
            elif key not in after:
                out.append({"op": "remove", "path": sub, "before": before[key]})
            else:
                out.extend(json_diff(before[key], after[key], sub))
        return out
    if before == after:
        return []
    return [{"op": "replace", "path": path or "/", "before": before, "after": after}]


def graph_diff(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], *, key: str = "id"
) -> dict[str, list[Any]]:
    """Activities added, removed and changed between two graphs (by ``key``)."""
    old = {str(a[key]): a for a in before}
    new = {str(a[key]): a for a in after}
    return {
        "added": sorted(k for k in new if k not in old),
        "removed": sorted(k for k in old if k not in new),
        "changed": [
            {"id": k, "changes": json_diff(old[k], new[k])}
            for k in sorted(old.keys() & new.keys())
            if old[k] != new[k]
        ],
    }
