"""A readiness message never shows a secret of the binding it describes.

A stdio MCP server is named by its command line, and a readiness message quotes it: ``the MCP
server npx server-postgres postgresql://app:PASSWORD@db/prod could not be reached``. The
PostgreSQL MCP server takes its DSN as an argument, others take ``--api-key KEY``. Every
readiness message passes the deployment's redactor, so ``charter check`` (text and
``--json``), the console's readiness page, a ``TOOL_NOT_READY`` answer and the audit file say
which server and why, without the password or the key.
"""

from __future__ import annotations

import json
import secrets
import textwrap
from pathlib import Path

import pytest

from charter.errors import Failure
from charter.kernel.redaction import REDACTED
from charter.runtime import check_readiness, open_runtime

pytestmark = pytest.mark.anyio

PASSWORD = "s3cr3t-PASSWORD-xyz"
KEY = "sk-live-0123456789abcdef"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _project(root: Path) -> Path:
    (root / "tools").mkdir(parents=True)
    (root / "tools" / "mcp-pg.yaml").write_text(
        textwrap.dedent(
            """
            tools:
              - id: pg.query
                description: Run a read-only query.
                args_schema: {type: object, properties: {sql: {type: string}}}
                effect: read
                upstream: {server: pg, name: query, digest: "sha256:%s"}
            """
            % ("0" * 64)
        )
    )
    (root / "charter.yaml").write_text(
        "name: pg\ntools: {files: [tools/mcp-pg.yaml]}\nprofiles: {all: {include: [pg.query]}}\n"
    )
    command = ["/usr/bin/false", f"postgresql://app:{PASSWORD}@db:5432/prod", "--api-key", KEY]
    keys = root / "keys"
    keys.mkdir()
    for name in ("fingerprint", "ledger", "app"):
        (keys / name).write_text(secrets.token_hex(32))
    deploy = {
        "secrets": {
            "fingerprint_key": {"file": "keys/fingerprint"},
            "ledger_key": {"file": "keys/ledger"},
        },
        "principals": {
            "app": {"kind": "application", "tenant": "t", "api_key": {"file": "keys/app"}}
        },
        "bindings": {"pg.query": {"executor": "mcp", "command": command}},
    }
    (root / "charter.deploy.yaml").write_text(json.dumps(deploy))
    return root


async def test_a_readiness_message_quotes_the_command_line_without_its_secrets(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "pg")
    report = await check_readiness(root)
    (tool,) = report.tools
    assert not tool.ready
    assert tool.reason == "EXECUTOR_UNREACHABLE"
    assert tool.message is not None
    assert f"/usr/bin/false postgresql://app:{REDACTED}@db:5432/prod" in tool.message
    assert f"--api-key {REDACTED}" in tool.message
    shown = json.dumps(report.to_dict())
    assert PASSWORD not in shown
    assert KEY not in shown

    async with open_runtime(root, store=f"sqlite:///{tmp_path / 'c.db'}") as rt:
        with pytest.raises(Failure) as refused:
            await rt.resolve_context("app", "all")
    assert refused.value.reason == "TOOL_NOT_READY"
    assert "postgresql://app:" in str(refused.value)
    assert PASSWORD not in str(refused.value)
    assert KEY not in str(refused.value)
