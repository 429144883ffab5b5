"""Run-scoped MCP resources: a run's manifest and its registered artifacts.

    charter://runs/{run_id}/manifest.json          the run's manifest (JSON), rebuilt from
                                                   the ledger's projections
    charter://runs/{run_id}/artifacts/{artifact}   a registered artifact's bytes, by id (or
                                                   by its run-relative path, percent-encoded)

A profile's server lists and reads the resources of the runs **of the caller's tenant that
belong to the profile**: a context was resolved in the run for this profile, or one of its
tasks runs in it (the session's own run always belongs). Anything else — another tenant's run,
a run of another profile, an unknown artifact — answers exactly like a missing resource, so
the answer says nothing about what exists elsewhere. Reads are checksum-verified (the bytes
must match the sha256 and size that were registered); text media types come back as text,
anything else as base64; an artifact larger than :data:`MAX_READ_BYTES` is refused.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote, unquote

import mcp_types as types
from mcp.shared.exceptions import MCPError

from charter.errors import Failure
from charter.kernel.principals import Principal
from charter.ledger.projections import manifest
from charter.ledger.trust import LEDGER_DAMAGE, damage_reason
from charter.ledger.views import ArtifactRow, ContextRow, RunRow
from charter.runtime import Runtime

SCHEME = "charter://runs/"
MANIFEST = "manifest.json"
MAX_READ_BYTES = 8 * 1024 * 1024
PAGE_RUNS = 50  # runs of the tenant looked at per resources/list page
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/yaml")

TEMPLATES = [
    types.ResourceTemplate(
        name="run-manifest",
        title="Run manifest",
        uri_template=SCHEME + "{run_id}/" + MANIFEST,
        description="A run's manifest: status, tasks, handoffs and artifacts, from the ledger.",
        mime_type="application/json",
    ),
    types.ResourceTemplate(
        name="run-artifact",
        title="Run artifact",
        uri_template=SCHEME + "{run_id}/artifacts/{artifact_id}",
        description="A registered artifact of a run, checksum-verified when read.",
    ),
]


def manifest_uri(run_id: str) -> str:
    return f"{SCHEME}{run_id}/{MANIFEST}"


def artifact_uri(run_id: str, artifact_id: str) -> str:
    return f"{SCHEME}{run_id}/artifacts/{quote(artifact_id, safe='')}"


_BAD_CURSOR = {"reason": "CURSOR_INVALID"}


def _missing() -> MCPError:
    return MCPError(INVALID_PARAMS, "no such resource", data={"reason": "RESOURCE_NOT_FOUND"})


def parse_uri(uri: str) -> tuple[str, str | None]:
    """``(run_id, None)`` for a manifest, ``(run_id, artifact)`` for an artifact."""
    if not uri.startswith(SCHEME):
        raise _missing()
    run_id, _, rest = uri[len(SCHEME) :].partition("/")
    if not run_id or "%" in run_id:
        raise _missing()
    if rest == MANIFEST:
        return run_id, None
    head, _, name = rest.partition("/")
    if head != "artifacts" or not name or "/" in name:
        raise _missing()
    return run_id, unquote(name)


class Resources:
    """The resources one profile's server shows a principal."""

    def __init__(self, runtime: Runtime, profile: str) -> None:
        self.runtime = runtime
        self.profile = profile

    async def belongs(self, run: RunRow | None, principal: Principal, own: str | None) -> bool:
        """The run is the caller's tenant's and belongs to this profile."""
        if run is None or run.tenant != principal.tenant:
            return False
        if run.run_id == own:
            return True
        contexts = await self.runtime.store.list_views(ContextRow, run.run_id)
        if any(c.profile == self.profile for c in contexts):
            return True
        return any(t.profile == self.profile for t in await self.runtime.tasks(run.run_id))

    async def list(
        self, principal: Principal, own: str | None, cursor: str | None
    ) -> types.ListResourcesResult:
        try:
            offset = int(cursor) if cursor else 0
        except ValueError:
            raise MCPError(INVALID_PARAMS, "invalid cursor", data=_BAD_CURSOR) from None
        if offset < 0:
            raise MCPError(INVALID_PARAMS, "invalid cursor", data=_BAD_CURSOR)
        summaries = await self.runtime.run_summaries(
            tenant=principal.tenant, limit=offset + PAGE_RUNS + 1
        )
        page = list(summaries)[offset : offset + PAGE_RUNS]
        out: list[types.Resource] = []
        for summary in page:
            if summary.problem is not None:
                continue  # refused for its ledger: its rows are not served
            try:
                run = await self.runtime.run(summary.run["run_id"])
                if run is None or not await self.belongs(run, principal, own):
                    continue
                artifacts = await self.runtime.artifact_rows(run.run_id)
            except LEDGER_DAMAGE:  # found damaged now: left out, the others still listed
                continue
            out.append(
                types.Resource(
                    name=f"{run.run_id}/{MANIFEST}",
                    title=f"Manifest of {run.workflow_slug or 'run'} {run.run_id}",
                    uri=manifest_uri(run.run_id),
                    mime_type="application/json",
                )
            )
            for art in artifacts:
                out.append(
                    types.Resource(
                        name=f"{run.run_id}/{art.path}",
                        title=art.path,
                        uri=artifact_uri(run.run_id, art.artifact_id),
                        mime_type=art.media_type or None,
                        size=art.size,
                        description=f"{art.type or 'artifact'} ({art.trust}), {art.artifact_id}",
                    )
                )
        more = len(summaries) > offset + PAGE_RUNS
        return types.ListResourcesResult(
            resources=out, next_cursor=str(offset + PAGE_RUNS) if more else None
        )

    async def read(
        self, principal: Principal, own: str | None, uri: str
    ) -> types.ReadResourceResult:
        run_id, name = parse_uri(uri)
        try:
            run = await self.runtime.run(run_id)
            if not await self.belongs(run, principal, own):
                raise _missing()
            if name is None:
                return types.ReadResourceResult(contents=[await self._manifest(run_id, uri)])
            rows = await self.runtime.artifact_rows(run_id)
        except LEDGER_DAMAGE as exc:
            raise await self._refused(run_id, principal, exc) from None
        found = [a for a in rows if a.artifact_id == name] or [a for a in rows if a.path == name]
        if not found:
            raise _missing()
        return types.ReadResourceResult(contents=[await self._artifact(found[0], uri)])

    async def _refused(self, run_id: str, principal: Principal, exc: Failure) -> MCPError:
        """What a read of a run refused for its ledger answers: the damage, to the tenant its
        first event names (as the HTTP API's verify route has it); like a missing resource
        to anyone else."""
        if await self.runtime.stored_tenant(run_id) != principal.tenant:
            return _missing()
        return MCPError(
            INTERNAL_ERROR,
            str(exc),
            data={"code": exc.code.value, "reason": exc.reason, "problem": damage_reason(exc)},
        )

    async def _manifest(self, run_id: str, uri: str) -> types.TextResourceContents:

        snap = await self.runtime.snapshot(run_id)
        if snap is None or snap.run is None:
            raise _missing()
        doc = manifest(
            snap.run, snap.tables["tasks"], snap.tables["artifacts"], head_seq=snap.head.seq
        )
        text = json.dumps(doc, sort_keys=True, ensure_ascii=False)
        return types.TextResourceContents(uri=uri, mime_type="application/json", text=text)

    async def _artifact(self, art: ArtifactRow, uri: str) -> Any:
        if art.size > MAX_READ_BYTES:
            raise MCPError(
                INVALID_PARAMS,
                f"resource_limit ARTIFACT_TOO_LARGE: {art.size} bytes; at most {MAX_READ_BYTES} "
                "over MCP (download it with `charter artifacts get` or the HTTP API)",
                data={"code": "resource_limit", "reason": "ARTIFACT_TOO_LARGE"},
            )
        try:
            data = await self.runtime.artifacts.read_bytes(art.run_id, art.artifact_id)
        except Failure as exc:  # a checksum or size mismatch, a missing file: never the bytes
            refused = {"code": exc.code.value, "reason": exc.reason}
            raise MCPError(INVALID_PARAMS, str(exc), data=refused) from None
        media = art.media_type or "application/octet-stream"
        if media.startswith(TEXT_TYPES):
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                return types.TextResourceContents(uri=uri, mime_type=media, text=text)
        blob = base64.b64encode(data).decode("ascii")
        return types.BlobResourceContents(uri=uri, mime_type=media, blob=blob)
