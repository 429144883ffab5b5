"""A newcomer's first hour (issue 23 items 6, 11, 12, 13), through the real ``charter`` command.

Tools that are not bound, ``charter serve``'s banner and busy port, ``import-mcp --prefix``,
file modes, and the smaller text glitches.
"""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from mcp import Client as McpClient
from mcp import StdioServerParameters

from tests.cli.test_first_hour import CHARTER, charter
from tests.conftest import copy_demo

YAML_TOOL = """tools:
  - id: kb.search
    description: Search the knowledge base.
"""


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path) -> Path:
    return copy_demo(demo_template, tmp_path)  # what `charter init demo` wrote


def with_yaml_tool(demo: Path) -> None:
    """Declare kb.search in YAML (no function, no binding) and put it in the reader profile."""
    (demo / "tools" / "kb.yaml").write_text(YAML_TOOL)
    config = demo / "charter.yaml"
    config.write_text(
        config.read_text()
        .replace("  # files:\n  #   - tools/*.yaml", "  files:\n    - tools/*.yaml")
        .replace(
            "include: [notes.search, notes.get]", "include: [notes.search, notes.get, kb.search]"
        )
    )


def test_a_tool_without_a_binding_is_listed_as_not_bound_and_offered_nowhere(demo: Path) -> None:
    with_yaml_tool(demo)
    checked = charter("check", cwd=demo, columns=200)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rows = {line.split()[0]: line for line in checked.stdout.splitlines() if line[:1].isalpha()}
    assert " not bound " in rows["kb.search"]
    assert "TOOL_NOT_BOUND" in rows["kb.search"]
    assert " ready " in rows["notes.search"]
    assert "not bound (not offered anywhere): kb.search" in checked.stdout
    states = json.loads(charter("check", "--json", cwd=demo).stdout)
    by_tool = {t["tool"]: t for t in states["tools"]}
    assert set(by_tool) == {"kb.search", "notes.add", "notes.get", "notes.search"}
    assert by_tool["kb.search"]["status"] == "not_bound"
    assert by_tool["kb.search"]["executor"] is None
    assert by_tool["kb.search"]["required"] is False
    assert by_tool["notes.search"]["status"] == "ready"

    resolved = charter("contexts", "resolve", "--profile", "reader", "--as", "app", "--json",
                       cwd=demo)  # fmt: skip
    assert resolved.returncode == 0, resolved.stderr
    ctx = json.loads(resolved.stdout)
    assert sorted(t["id"] for t in ctx["tools"]) == ["notes.get", "notes.search"]

    called = charter("call", "kb.search", "--profile", "reader", "--as", "app",
                     "--call-id", "k1", cwd=demo)  # fmt: skip
    assert called.returncode == 4, called.stdout + called.stderr
    assert "TOOL_NOT_DISCLOSED" in called.stdout
    assert "tool kb.search is not bound" in called.stdout
    assert "internal" not in called.stdout
    assert "TOOL_NOT_FOUND" not in called.stdout

    assert charter("build", cwd=demo).returncode == 0
    inspected = charter("inspect", cwd=demo, columns=200)
    assert "kb.search (not bound)" in inspected.stdout
    tools = {t["id"]: t for t in json.loads(charter("inspect", "--json", cwd=demo).stdout)["tools"]}
    assert tools["kb.search"]["bound"] is False
    assert tools["notes.search"]["bound"] is True


def test_with_no_deployment_file_a_yaml_only_tool_blocks_nothing(demo: Path) -> None:
    with_yaml_tool(demo)
    (demo / "charter.deploy.yaml").unlink()
    out = charter("call", "notes.search", "--profile", "reader", "--as", "local",
                  "--call-id", "s1", "--args", '{"query": ""}', "--json", cwd=demo)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["status"] == "succeeded"
    states = json.loads(charter("check", "--json", cwd=demo).stdout)
    assert states["ready"] is True
    assert {t["tool"]: t["status"] for t in states["tools"]}["kb.search"] == "not_bound"


def test_an_explicit_binding_without_code_is_not_ready_and_says_why(demo: Path) -> None:
    with_yaml_tool(demo)
    deploy = demo / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text().replace(
            "  notes.add: {executor: python}",
            "  notes.add: {executor: python}\n  kb.search: {executor: python, required: false}",
        )
    )
    states = json.loads(charter("check", "--json", cwd=demo).stdout)
    kb = {t["tool"]: t for t in states["tools"]}["kb.search"]
    assert (kb["status"], kb["reason"]) == ("not_ready", "ENTRYPOINT_MISSING")
    assert states["ready"] is True  # optional: omitted, not blocking


def test_inspect_and_contexts_resolve_json_carry_argument_schemas(demo: Path) -> None:
    assert charter("build", cwd=demo).returncode == 0
    tools = {t["id"]: t for t in json.loads(charter("inspect", "--json", cwd=demo).stdout)["tools"]}
    schema = tools["notes.search"]["args_schema"]
    assert schema["type"] == "object"
    assert "query" in schema["properties"]
    assert tools["notes.search"]["description"]
    ctx = json.loads(
        charter(
            "contexts", "resolve", "--profile", "reader", "--as", "app", "--json", cwd=demo
        ).stdout
    )
    schemas = {s["name"]: s for s in ctx["tool_schemas"]}
    assert "query" in schemas["notes_search"]["input_schema"]["properties"]
    assert ctx["format"] == "charter"


def test_the_default_executor_serves_tools_with_code_unless_it_is_null(demo: Path) -> None:
    deploy = demo / "charter.deploy.yaml"
    unbound_get = deploy.read_text().replace("  notes.get: {executor: python}\n", "")
    deploy.write_text(unbound_get)
    states = json.loads(charter("check", "--json", cwd=demo).stdout)
    assert {t["tool"]: t["status"] for t in states["tools"]}["notes.get"] == "ready"
    deploy.write_text(unbound_get + "default_executor: null\n")
    states = json.loads(charter("check", "--json", cwd=demo).stdout)
    assert {t["tool"]: t["status"] for t in states["tools"]}["notes.get"] == "not_bound"
    ctx = json.loads(
        charter(
            "contexts", "resolve", "--profile", "reader", "--as", "app", "--json", cwd=demo
        ).stdout
    )
    assert [t["id"] for t in ctx["tools"]] == ["notes.search"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_at_a_terminal_prints_where_everything_is_and_root_leads_somewhere(
    demo: Path,
) -> None:
    port = free_port()
    leader, follower = pty.openpty()
    env = {**os.environ, "NO_COLOR": "1"}
    served = subprocess.Popen(
        [CHARTER, "serve", "--port", str(port)],
        cwd=demo,
        stdout=follower,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    os.close(follower)
    try:
        seen = b""
        while b"Ctrl+C" not in seen:
            ready, _, _ = select.select([leader], [], [], 60)
            assert ready, seen.decode()
            seen += os.read(leader, 4096)
        banner = seen.decode()
        base = f"http://127.0.0.1:{port}"
        for where in ("/console/", "/docs", "/mcp/reader", "/mcp/editor", "/healthz"):
            assert base + where in banner, banner
        assert "operator alice: API key in the file .charter/secrets/alice.key" in banner
        key = (demo / ".charter" / "secrets" / "alice.key").read_text().strip()
        assert key not in banner

        with httpx.Client(base_url=base) as http:
            index = http.get("/")
            assert index.status_code == 200
            doc = index.json()
            assert doc["console"] == "/console/"
            assert doc["docs"] == "/docs"
            assert doc["mcp"] == ["/mcp/editor", "/mcp/reader"]
            browser = http.get("/", headers={"Accept": "text/html"})
            assert browser.status_code == 303
            assert browser.headers["location"] == "/console/"
            assert http.get(doc["docs"]).status_code == 200
    finally:
        served.terminate()
        served.wait(timeout=30)
        os.close(leader)


def test_serve_on_a_busy_port_fails_clearly_before_logging_ready(demo: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = charter("serve", "--port", str(port), cwd=demo)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"port {port} on 127.0.0.1 is already in use" in out.stderr
    assert "--port" in out.stderr
    assert "ready" not in out.stdout + out.stderr.replace("already", "")
    assert "Traceback" not in out.stderr
    # Piped (not a terminal), a server prints no banner: stdout stays for logs and scripts.
    assert "Ctrl+C" not in out.stdout


TWO_TOOL_SERVER = """
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": False}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(name="search", description="Search.", input_schema=SCHEMA),
            types.Tool(name="get", description="Get one.", input_schema=SCHEMA),
        ]
    )


async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text="ok")])


async def main() -> None:
    server: Server[Any] = Server("two", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
"""


def test_import_mcp_prefix_reaches_the_model_names_and_prints_plain_bindings(demo: Path) -> None:
    (demo / "two_server.py").write_text(TWO_TOOL_SERVER)
    command = f"{sys.executable} two_server.py"
    printed = {}
    for prefix in ("alpha", "beta"):  # the same server twice: same upstream names
        out = charter("import-mcp", "--command", command, "--prefix", prefix, cwd=demo)
        assert out.returncode == 0, out.stdout + out.stderr
        printed[prefix] = out.stdout
        assert "&id" not in out.stdout
        assert "*id" not in out.stdout
        bindings = yaml.safe_load(out.stdout)["bindings"]
        assert set(bindings) == {f"{prefix}.search", f"{prefix}.get"}
        assert all(b["executor"] == "mcp" for b in bindings.values())
        written = (demo / "tools" / f"mcp-{prefix}.yaml").read_text()
        assert "&id" not in written
        assert "*id" not in written
        names = [t["name"] for t in yaml.safe_load(written)["tools"]]
        assert names == [f"{prefix}_search", f"{prefix}_get"]
    config = demo / "charter.yaml"
    config.write_text(
        config.read_text().replace(
            "  # files:\n  #   - tools/*.yaml", "  files:\n    - tools/*.yaml"
        )
    )
    built = charter("build", cwd=demo)
    assert built.returncode == 0, built.stdout + built.stderr
    tools = {t["id"]: t for t in json.loads(charter("inspect", "--json", cwd=demo).stdout)["tools"]}
    assert tools["alpha.search"]["name"] == "alpha_search"
    assert tools["beta.search"]["name"] == "beta_search"


def test_private_files_and_runs_events_text_name_the_tool_and_outcome(demo: Path) -> None:
    assert stat.S_IMODE((demo / ".charter").stat().st_mode) == 0o700
    assert stat.S_IMODE((demo / ".charter" / "secrets").stat().st_mode) == 0o700
    made = charter("call", "notes.search", "--profile", "reader", "--as", "app",
                   "--call-id", "s1", "--args", '{"query": "x"}', "--json", cwd=demo)  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert stat.S_IMODE((demo / ".charter" / "charter.db").stat().st_mode) == 0o600
    for key in (demo / ".charter" / "secrets").iterdir():
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key

    run_id = json.loads(made.stdout)["run_id"]
    text = charter("runs", "events", run_id, cwd=demo, columns=200).stdout
    recorded = next(x for x in text.splitlines() if "tool_call_recorded" in x)
    assert "call_id=s1 tool=notes.search outcome=succeeded" in recorded
    assert "=None" not in text


def test_charter_test_says_when_there_are_none_and_the_pipeline_ships_some(
    demo: Path, tmp_path: Path
) -> None:
    empty = charter("test", cwd=demo)
    assert empty.returncode == 5, empty.stdout + empty.stderr
    assert "no context tests" in empty.stdout
    assert "0 passed" not in empty.stdout
    as_json = json.loads(charter("test", "--json", cwd=demo).stdout)
    assert as_json["ok"] is False
    assert as_json["no_tests"] is True

    made = charter("init", "rp", "--example", "report-pipeline", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    shipped = charter("test", "--json", cwd=tmp_path / "rp")
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    report = json.loads(shipped.stdout)
    assert report["ok"] is True
    assert len(report["results"]) >= 3


def test_demo_says_where_it_created_its_project(tmp_path: Path) -> None:
    out = charter("demo", "tutoring-panel", "tp", cwd=tmp_path, columns=200)
    assert out.returncode == 0, out.stdout + out.stderr
    where = str((tmp_path / "tp").resolve())
    assert out.stdout.splitlines()[0] == f"created tutoring-panel example project in {where}"
    assert f"The project stays in {where}" in out.stdout


def test_make_shows_the_first_setup_instead_of_a_silent_pip() -> None:
    root = Path(__file__).resolve().parents[2]
    dry = subprocess.run(
        ["make", "-n", "-C", str(root), "VENV=/nonexistent/venv", "setup"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    installs = [x for x in dry.stdout.splitlines() if "pip install" in x]
    assert installs
    assert not any("--quiet" in x or " -q" in x for x in installs)
    assert "installing Charter and its dependencies" in dry.stdout


@pytest.mark.anyio
async def test_mcp_does_not_list_a_tool_that_is_not_bound(demo: Path) -> None:
    with_yaml_tool(demo)
    params = StdioServerParameters(
        command=CHARTER,
        args=["mcp", "--profile", "reader", "--as", "app"],
        cwd=demo,
        env={k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")},
    )
    async with McpClient(params, cache=None) as client:
        names = sorted(t.name for t in (await client.list_tools()).tools)
        assert names == ["notes_get", "notes_search"]
        refused = await client.call_tool("kb_search", {})
        assert refused.is_error
