"""Compare two Builds: tools added, removed and changed; profiles that gained or lost tools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from charter.project.build import Build

_MISSING = object()


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One changed value inside a contract, located by JSON pointer."""

    pointer: str
    kind: str  # "added" | "removed" | "changed"
    before: Any = None
    after: Any = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pointer": self.pointer, "kind": self.kind}
        if self.kind != "added":
            out["before"] = self.before
        if self.kind != "removed":
            out["after"] = self.after
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolChange:
    tool: str
    before_digest: str
    after_digest: str
    changes: tuple[Change, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileChange:
    profile: str
    gained: tuple[str, ...]
    lost: tuple[str, ...]
    status: str  # "added" | "removed" | "changed"


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildDiff:
    before: str
    after: str
    tools_added: tuple[str, ...]
    tools_removed: tuple[str, ...]
    tools_changed: tuple[ToolChange, ...]
    profiles: tuple[ProfileChange, ...]
    runtime: tuple[str, str] | None

    @property
    def empty(self) -> bool:
        return not (
            self.tools_added
            or self.tools_removed
            or self.tools_changed
            or self.profiles
            or self.runtime
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "identical": self.before == self.after,
            "runtime": list(self.runtime) if self.runtime else None,
            "tools": {
                "added": list(self.tools_added),
                "removed": list(self.tools_removed),
                "changed": [
                    {
                        "tool": tc.tool,
                        "before_digest": tc.before_digest,
                        "after_digest": tc.after_digest,
                        "changes": [c.to_dict() for c in tc.changes],
                    }
                    for tc in self.tools_changed
                ],
            },
            "profiles": [
                {
                    "profile": pc.profile,
                    "status": pc.status,
                    "gained": list(pc.gained),
                    "lost": list(pc.lost),
                }
                for pc in self.profiles
            ],
        }


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def json_changes(before: Any, after: Any, pointer: str = "") -> list[Change]:
    """Structural differences between two JSON values, as JSON-pointer located changes."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[Change] = []
        for key in sorted(set(before) | set(after)):
            sub = f"{pointer}/{_escape(str(key))}"
            if key not in before:
                out.append(Change(pointer=sub, kind="added", after=after[key]))
            elif key not in after:
                out.append(Change(pointer=sub, kind="removed", before=before[key]))
            else:
                out.extend(json_changes(before[key], after[key], sub))
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        out = []
        for index, (b, a) in enumerate(zip(before, after, strict=True)):
            out.extend(json_changes(b, a, f"{pointer}/{index}"))
        return out
    if before == after and type(before) is type(after):
        return []
    return [Change(pointer=pointer or "/", kind="changed", before=before, after=after)]


def diff_builds(a: Build, b: Build) -> BuildDiff:
    added = tuple(sorted(set(b.tools) - set(a.tools)))
    removed = tuple(sorted(set(a.tools) - set(b.tools)))
    changed = []
    for tool_id in sorted(set(a.tools) & set(b.tools)):
        ca, cb = a.tools[tool_id].contract, b.tools[tool_id].contract
        if ca.digest != cb.digest:
            changed.append(
                ToolChange(
                    tool=tool_id,
                    before_digest=ca.digest,
                    after_digest=cb.digest,
                    changes=tuple(json_changes(ca.canonical(), cb.canonical())),
                )
            )
    profiles = []
    for name in sorted(set(a.profiles) | set(b.profiles)):
        before = set(a.profiles[name].tools) if name in a.profiles else set()
        after = set(b.profiles[name].tools) if name in b.profiles else set()
        status = (
            "added"
            if name not in a.profiles
            else "removed"
            if name not in b.profiles
            else "changed"
        )
        if status == "changed" and before == after:
            continue
        profiles.append(
            ProfileChange(
                profile=name,
                gained=tuple(sorted(after - before)),
                lost=tuple(sorted(before - after)),
                status=status,
            )
        )
    runtime = (
        (a.requires_runtime, b.requires_runtime)
        if a.requires_runtime != b.requires_runtime
        else None
    )
    return BuildDiff(
        before=a.digest,
        after=b.digest,
        tools_added=added,
        tools_removed=removed,
        tools_changed=tuple(changed),
        profiles=tuple(profiles),
        runtime=runtime,
    )
