"""A project's Python tool that calls ``sys.exit()`` — at import or while it runs.

``SystemExit`` is not an ``Exception``: left alone it ended ``charter build`` with the module's
exit code and no word, ended ``charter call`` the same way with the call left ``dispatching``
(later reconciled as ``unknown``), and made ``charter serve`` answer a bare
``500 Internal Server Error``. A tool exiting is the tool failing: a build problem naming the
file and line, a ``failed`` call (``TOOL_RAISED``) recorded as such, a result envelope over
HTTP.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import httpx
import pytest

from tests.cli.test_first_hour import charter
from tests.conftest import copy_demo
from tests.server._harness import spawn_serve

EXITING_TOOLS = textwrap.dedent(
    '''
    """Tools that exit."""
    import os
    import sys

    import charter

    if os.environ.get("EXIT_AT_IMPORT"):
        sys.exit(4)


    @charter.tool("quit.sync", permissions=["notes:read"])
    def quit_sync() -> dict:
        """Exit from a worker thread."""
        sys.exit(7)


    @charter.tool("quit.aio", permissions=["notes:read"])
    async def quit_aio() -> dict:
        """Exit from the event loop."""
        raise SystemExit("bye")
    '''
)


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path) -> Path:
    root = copy_demo(demo_template, tmp_path)
    (root / "tools" / "quit.py").write_text(EXITING_TOOLS)
    config = root / "charter.yaml"
    text = config.read_text().replace(
        "    - tools/notes.py", "    - tools/notes.py\n    - tools/quit.py"
    )
    text = text.replace(
        "include: [notes.search, notes.get]",
        "include: [notes.search, notes.get, quit.sync, quit.aio]",
    )
    config.write_text(text)
    deploy = root / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text().replace(
            "  notes.add: {executor: python}",
            "  notes.add: {executor: python}\n"
            "  quit.sync: {executor: python}\n"
            "  quit.aio: {executor: python}",
        )
    )
    built = charter("build", cwd=root)
    assert built.returncode == 0, built.stdout + built.stderr
    return root


def test_a_module_that_exits_at_import_is_a_build_problem(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXIT_AT_IMPORT", "1")
    done = charter("build", cwd=demo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "tools/quit.py: importing the module failed (line 9)" in done.stderr
    assert "SystemExit(4)" in done.stderr


@pytest.mark.parametrize(("tool", "code"), [("quit.sync", "7"), ("quit.aio", "'bye'")])
def test_a_tool_that_exits_fails_the_call_and_the_cli_reports_it(
    demo: Path, tool: str, code: str
) -> None:
    done = charter("call", tool, "--profile", "reader", "--as", "app", "--call-id", "q1",
                   "--args", "{}", "--json", cwd=demo)  # fmt: skip
    assert "Traceback" not in done.stderr
    assert done.stdout, f"exit {done.returncode} and nothing said: {done.stderr}"
    envelope = json.loads(done.stdout)
    assert envelope["status"] == "failed"
    assert envelope["error"]["reason"] == "TOOL_RAISED"
    assert envelope["error"]["message"] == f"tool {tool} raised SystemExit: {code}"
    shown = charter("calls", "show", "q1", "--json", cwd=demo)
    assert json.loads(shown.stdout)["state"] == "failed"
    verified = charter("runs", "verify", envelope["run_id"], cwd=demo)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_tool_that_exits_is_a_failed_envelope_over_http(demo: Path) -> None:
    key = (demo / ".charter" / "secrets" / "app.key").read_text().strip()
    auth = {"Authorization": f"Bearer {key}"}
    store = f"sqlite:///{demo / '.charter' / 'served.db'}"
    with spawn_serve(demo, store) as url, httpx.Client(base_url=url, headers=auth) as http:
        ctx = http.post("/v1/contexts", json={"profile": "reader"}).json()["context_id"]
        for n, tool in enumerate(("quit.sync", "quit.aio")):
            r = http.post(f"/v1/contexts/{ctx}/calls",
                          json={"tool": tool, "call_id": f"h{n}", "arguments": {}})  # fmt: skip
            assert r.headers["content-type"].startswith("application/json"), r.text
            assert r.json()["status"] == "failed", r.text
            assert r.json()["error"]["reason"] == "TOOL_RAISED"
            assert http.get(f"/v1/calls/{ctx}/h{n}").json()["state"] == "failed"
        assert http.get("/healthz").status_code == 200
