"""Run manifests and artifacts as MCP resources, through the official MCP SDK client against
``charter mcp`` over stdio (a real subprocess): listed per profile and tenant, read back
byte for byte, and another tenant's or another profile's run answers like a missing one."""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

import charter
from charter.artifacts.records import Producer, Trust
from charter.runtime import Runtime, open_runtime
from tests.mcp._project import DEPLOY_YAML, make_project

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

OTHER_TENANT = """
  other:
    kind: application
    tenant: globex
    permissions: ["svc:read"]
"""


def server(project: Path, principal: str, profile: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env["PYTHONPATH"] = str(Path(charter.__file__).resolve().parents[1])
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "charter", "mcp", "--profile", profile, "--as", principal],
        cwd=project,
        env=env,
    )


async def _artifact(rt: Runtime, run_id: str, path: str, data: bytes, media: str) -> str:
    stored = await rt.artifacts.write_bytes(run_id, path, data)
    record = await rt.artifacts.register(
        run_id, stored, type="note", media_type=media, producer=Producer(), trust=Trust.INTERNAL
    )
    return record.artifact_id


async def test_run_resources_are_listed_per_profile_and_tenant(tmp_path: Path) -> None:
    make_project(tmp_path)
    deploy = tmp_path / "charter.deploy.yaml"
    viewer_key = "    api_key: {file: .charter/secrets/viewer.key}\n"
    assert viewer_key in DEPLOY_YAML
    deploy.write_text(DEPLOY_YAML.replace(viewer_key, viewer_key + OTHER_TENANT.lstrip("\n")))
    async with open_runtime(tmp_path) as rt:
        mine = await rt.resolve_context("app", "main")
        text_id = await _artifact(
            rt, mine.run_id, "notes/hello.txt", b"hello, world\n", "text/plain"
        )
        blob = bytes(range(256))
        blob_id = await _artifact(rt, mine.run_id, "data/raw.bin", blob, "application/octet-stream")
        reader = await rt.resolve_context("app", "reader")  # same tenant, another profile
        hidden_id = await _artifact(rt, reader.run_id, "r.txt", b"reader only", "text/plain")
        foreign = await rt.resolve_context("other", "main")  # same profile, another tenant
        foreign_id = await _artifact(rt, foreign.run_id, "f.txt", b"globex", "text/plain")

    async with Client(server(tmp_path, "app", "main"), cache=None) as client:
        listed = (await client.list_resources()).resources
        uris = {str(r.uri) for r in listed}
        base = f"charter://runs/{mine.run_id}"
        assert f"{base}/manifest.json" in uris
        assert f"{base}/artifacts/{text_id}" in uris
        assert f"{base}/artifacts/{blob_id}" in uris
        assert not any(reader.run_id in u or foreign.run_id in u for u in uris)
        by_uri = {str(r.uri): r for r in listed}
        assert by_uri[f"{base}/artifacts/{text_id}"].size == len(b"hello, world\n")
        assert by_uri[f"{base}/artifacts/{text_id}"].mime_type == "text/plain"

        templates = (await client.list_resource_templates()).resource_templates
        assert {t.uri_template for t in templates} == {
            "charter://runs/{run_id}/manifest.json",
            "charter://runs/{run_id}/artifacts/{artifact_id}",
        }

        text = (await client.read_resource(f"{base}/artifacts/{text_id}")).contents[0]
        assert getattr(text, "text", None) == "hello, world\n"
        raw = (await client.read_resource(f"{base}/artifacts/{blob_id}")).contents[0]
        assert base64.b64decode(getattr(raw, "blob", "")) == blob
        by_path = (await client.read_resource(f"{base}/artifacts/notes%2Fhello.txt")).contents[0]
        assert getattr(by_path, "text", None) == "hello, world\n"
        doc = json.loads(
            getattr((await client.read_resource(f"{base}/manifest.json")).contents[0], "text", "")
        )
        assert doc["run_id"] == mine.run_id
        assert {a["artifact_id"] for a in doc["artifacts"]} == {text_id, blob_id}

        for uri in (
            f"charter://runs/{foreign.run_id}/artifacts/{foreign_id}",  # another tenant
            f"charter://runs/{foreign.run_id}/manifest.json",
            f"charter://runs/{reader.run_id}/artifacts/{hidden_id}",  # another profile
            f"{base}/artifacts/art-nope",
            "charter://runs/nope/manifest.json",
            "file:///etc/passwd",
        ):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            assert caught.value.message == "no such resource", uri
            # one reason for all of them: nothing is learnt about what exists elsewhere
            assert caught.value.error.data == {"reason": "RESOURCE_NOT_FOUND"}, uri

    # the reader profile's server sees the reader run, not the main one
    async with Client(server(tmp_path, "app", "reader"), cache=None) as client:
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert f"charter://runs/{reader.run_id}/artifacts/{hidden_id}" in uris
        assert not any(mine.run_id in u for u in uris)

    # the other tenant, same profile: only its own run
    async with Client(server(tmp_path, "other", "main"), cache=None) as client:
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert f"charter://runs/{foreign.run_id}/artifacts/{foreign_id}" in uris
        assert not any(mine.run_id in u for u in uris)
        with pytest.raises(MCPError):
            await client.read_resource(f"{base}/artifacts/{text_id}")
