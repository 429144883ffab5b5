"""A careless client of the real ``charter`` executable: bad options, broken files, Ctrl-C.

The promise: a clear error naming the reason and the offending option, file or path, as one
JSON object with ``code`` and ``reason`` under ``--json``; exit 2 for a usage error, non-zero
for a failure; never a Python traceback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_first_hour import CHARTER, charter
from tests.conftest import copy_demo


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path) -> Path:
    return copy_demo(demo_template, tmp_path)  # what `charter init demo` wrote


def json_error(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    body: dict[str, Any] = json.loads(done.stdout)
    assert body["ok"] is False
    assert body["code"] in {
        "invalid_input", "permission_denied", "transient_external", "timeout",
        "resource_limit", "contract_violation", "internal",
    }  # fmt: skip
    assert body["reason"].isupper()
    return body


@pytest.mark.parametrize(
    ("argv", "param"),
    [
        (["call", "--json"], "tool"),
        (["call", "notes.search", "--call-id", "c1", "--bogus", "--json"], None),
        (["runs", "ls", "--limit", "many", "--json"], "limit"),
        (["runs", "export", "--json"], "run_id"),
        (["approvals", "approve", "--json"], "approval_id"),
    ],
)
def test_a_usage_error_exits_2_and_is_json_under_json(
    demo: Path, argv: list[str], param: str | None
) -> None:
    done = charter(*argv, cwd=demo)
    assert done.returncode == 2, done.stdout + done.stderr
    body = json_error(done)
    assert body["code"] == "invalid_input"
    assert body["reason"] == "USAGE"
    assert body["param"] == param
    plain = charter(*[a for a in argv if a != "--json"], cwd=demo)
    assert plain.returncode == 2
    assert plain.stdout == ""
    assert "Traceback" not in plain.stderr
    assert "Usage:" in plain.stderr


def test_json_errors_carry_code_and_reason(demo: Path) -> None:
    unknown = charter("call", "notes.search", "--call-id", "c1", "--profile", "nope", "--as",
                      "app", "--json", cwd=demo)  # fmt: skip
    assert unknown.returncode == 1
    assert json_error(unknown)["reason"] == "INVALID_USAGE"
    assert "unknown profile 'nope'" in json.loads(unknown.stdout)["error"]

    (demo / "charter.deploy.yaml").write_text("principals: [unclosed\n")
    broken = charter("call", "notes.search", "--call-id", "c1", "--profile", "reader", "--as",
                     "app", "--json", cwd=demo)  # fmt: skip
    assert broken.returncode == 1
    body = json_error(broken)
    assert body["reason"] == "CONFIG_INVALID"
    assert "charter.deploy.yaml" in body["error"]


def test_a_store_that_is_not_a_database_is_named(demo: Path) -> None:
    db = demo / ".charter" / "charter.db"
    db.write_bytes(b"this is not a database, just text " * 8)
    done = charter("runs", "ls", "--json", cwd=demo)
    assert done.returncode == 1
    body = json_error(done)
    assert body["code"] == "internal"
    assert body["reason"] == "STORE_NOT_A_DATABASE"
    assert str(db) in body["error"]


def test_an_unwritable_builds_directory_is_an_error_not_a_traceback(demo: Path) -> None:
    builds = demo / ".charter" / "builds"
    builds.parent.mkdir(exist_ok=True)
    builds.write_text("a file where the directory should be")
    done = charter("build", "--json", cwd=demo)
    assert done.returncode == 1, done.stdout + done.stderr
    body = json_error(done)
    assert body["reason"] == "OS_ERROR"
    assert ".charter/builds" in body["error"]
    plain = charter("build", cwd=demo)
    assert plain.returncode == 1
    assert "Traceback" not in plain.stderr
    assert ".charter/builds" in plain.stderr
    inspected = charter("inspect", "--json", cwd=demo)
    assert inspected.returncode == 1
    assert json_error(inspected)["reason"] == "OS_ERROR"


SLOW_TOOL = '''
import time
from pathlib import Path

import charter


@charter.tool("slow.wait", effect="read", permissions=["notes:read"])
def wait(seconds: float) -> dict:
    """Wait a while."""
    Path(__file__).with_name("slow.started").touch()  # the tests wait for this
    time.sleep(seconds)
    return {"waited": seconds}
'''


def with_slow_tool(demo: Path) -> None:
    (demo / "tools" / "slow.py").write_text(SLOW_TOOL)
    config = demo / "charter.yaml"
    config.write_text(
        config.read_text()
        .replace("    - tools/notes.py", "    - tools/notes.py\n    - tools/slow.py")
        .replace(
            "include: [notes.search, notes.get]", "include: [notes.search, notes.get, slow.wait]"
        )
    )
    deploy = demo / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text().replace(
            "  notes.add: {executor: python}",
            "  notes.add: {executor: python}\n  slow.wait: {executor: python}",
        )
    )


@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_during_a_call_exits_130_and_the_outcome_is_recorded(
    demo: Path, as_json: bool
) -> None:
    with_slow_tool(demo)
    argv = [CHARTER, "call", "slow.wait", "--profile", "reader", "--as", "app",
            "--call-id", "w1", "--args", '{"seconds": 4}']  # fmt: skip
    argv += ["--json"] if as_json else []
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.Popen(
        argv,
        cwd=demo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # a background child of a shell may start with SIGINT ignored: a terminal's Ctrl-C is not
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # wait until the tool is running: its dispatch intent is in the ledger before it starts.
    # Ctrl-C follows within milliseconds; the process still waits out the tool's 4 s, so
    # they are only the margin for a loaded machine, not what the test waits for.
    started = demo / "tools" / "slow.started"
    deadline = time.monotonic() + 60
    while not started.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the call never started"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in out + err
    if as_json:
        body = json.loads(out)
        assert body["reason"] == "INTERRUPTED"
    else:
        assert "interrupted" in err
    # the interrupted call is not left dispatching: its outcome is recorded, and the run verifies
    run_id = json.loads(charter("runs", "ls", "--json", cwd=demo).stdout)[0]["run_id"]
    events = charter("runs", "events", run_id, cwd=demo).stdout
    assert "tool_call_recorded  call_id=w1" in events, events
    verified = charter("runs", "verify", run_id, cwd=demo)
    assert verified.returncode == 0, verified.stdout + verified.stderr


SECRET = "sk-live-NEVER-ECHO-0451"
SECRET_PLACES = [
    ("api_key: {file: .charter/secrets/app.key}", f"api_key: {SECRET}"),
    ("{file: .charter/secrets/ledger.key}", f'"{SECRET}"'),
    ("{file: .charter/secrets/ledger.key}", f"{{file: .charter/secrets/ledger.key, x: {SECRET}}}"),
    ("{file: .charter/secrets/ledger.key}", f"{{value: {SECRET}}}"),
    ("mode: enforce", f"mode: {SECRET}"),
    ("environment: local", f"environment: {{token: {SECRET}}}"),
    ("kind: operator", f"kind: {SECRET}"),
    ("tenant: globex", f"tenant: [{SECRET}]"),
    ("lifetime_s: 300", f"lifetime_s: {SECRET}"),
    ("notes.add: {executor: python}", f"notes.add: {{executor: {SECRET}}}"),
    ("approvals:\n", f"approvals:\n  token: {SECRET}\n"),
    ("{file: .charter/secrets/ledger.key}", '{file: "\\0secret"}'),
]


@pytest.mark.parametrize(("old", "new"), SECRET_PLACES)
def test_a_secret_in_an_unexpected_place_of_the_deployment_is_never_echoed(
    demo: Path, old: str, new: str
) -> None:
    deploy = demo / "charter.deploy.yaml"
    text = deploy.read_text()
    assert old in text
    deploy.write_text(text.replace(old, new, 1))
    for extra in (["--json"], []):
        done = charter("call", "notes.search", "--call-id", "c1", "--profile", "reader",
                       "--as", "app", *extra, cwd=demo)  # fmt: skip
        assert done.returncode == 1, done.stdout + done.stderr
        assert SECRET not in done.stdout + done.stderr
        assert "Traceback" not in done.stdout + done.stderr
        assert "charter.deploy.yaml" in done.stdout + done.stderr
        if extra:
            assert json_error(done)["reason"] == "CONFIG_INVALID"


def test_input_that_looks_like_markup_is_printed_as_it_is(demo: Path, tmp_path: Path) -> None:
    profile = charter("call", "notes.search", "--call-id", "c1", "--profile", "[/]", "--as",
                      "app", cwd=demo)  # fmt: skip
    assert profile.returncode == 1, profile.stderr
    assert "Traceback" not in profile.stderr
    assert "unknown profile '[/]'" in profile.stderr
    run = charter("runs", "show", "[/x]", cwd=demo)
    assert run.returncode == 1
    assert "no run [/x]" in run.stderr
    bad_id = charter("call", "notes.search", "--call-id", "c[/]", "--profile", "reader", "--as",
                     "app", cwd=demo)  # fmt: skip
    assert bad_id.returncode == 5, bad_id.stdout + bad_id.stderr
    assert "call c[/]" in bad_id.stdout
    assert "call_id must match [A-Za-z0-9][A-Za-z0-9_.:-]{0,127}" in bad_id.stdout
    made = charter("init", "odd[/]name", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "Next: cd 'odd[/]name' && charter build" in made.stdout


@pytest.mark.parametrize(
    ("argv", "param", "bound"),
    [
        (["runs", "ls", "--limit", "99999999999999999999"], "limit", "1000"),
        (["runs", "events", "run-x", "--after", "99999999999999999999"], "after", str(2**62)),
        (["tasks", "handoff", "run-x", "t1", "--max-tool-calls", "1" + "0" * 20],
         "max_tool_calls", str(2**53 - 1)),
        (["mcp", "reader", "--transport", "http", "--port", "99999999999999999"], "port", "65535"),
    ],
)  # fmt: skip
def test_an_integer_option_past_its_bound_is_a_usage_error_naming_it(
    demo: Path, argv: list[str], param: str, bound: str
) -> None:
    """A number too big for SQL (or a port) was an OverflowError reported as internal."""
    if argv[0] != "mcp":  # mcp speaks MCP on stdout: it has no --json
        done = charter(*argv, "--json", cwd=demo)
        assert done.returncode == 2, done.stdout + done.stderr
        body = json_error(done)
        assert body["reason"] == "USAGE"
        assert body["param"] == param
        assert bound in body["error"]
    plain = charter(*argv, cwd=demo, columns=200)
    assert plain.returncode == 2
    assert "Traceback" not in plain.stderr
    assert "internal error" not in plain.stderr
    assert f"--{param.replace('_', '-')}" in plain.stderr
    assert bound in plain.stderr


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["mcp", "reader"]])
def test_an_unknown_log_level_is_a_usage_error_listing_the_levels(
    demo: Path, command: list[str]
) -> None:
    done = charter(*command, "--log-level", "bogus", cwd=demo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "internal error" not in done.stderr
    assert "Traceback" not in done.stderr
    assert "--log-level" in done.stderr
    for level in ("debug", "info", "warning", "error"):
        assert level in done.stderr


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"\xff\xfe{\x00}\x00", "byte order mark"),  # UTF-16, as a Windows shell may pipe it
        (b'\xef\xbb\xbf{"query": "x"}', "byte order mark"),
        (b'{"query": "caf\xe9"}', "not UTF-8 text (byte 0xe9 at offset 14)"),
    ],
)
def test_arguments_on_stdin_that_are_not_utf8_are_named(demo: Path, data: bytes, said: str) -> None:
    """``--args -`` reads standard input as UTF-8: anything else is refused saying so, before
    a context is made (it was read as text that decodes to lone surrogates, and rejected as
    ``ARGS_LONE_SURROGATE`` "at character 0")."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    argv = [CHARTER, "call", "notes.search", "--args", "-", "--call-id", "c1"]
    argv += ["--profile", "reader", "--as", "app", "--json"]
    done = subprocess.run(argv, cwd=demo, input=data, capture_output=True, env=env, check=False)
    body = json_error(
        subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), "")
    )
    assert done.returncode == 1
    assert (body["code"], body["reason"]) == ("invalid_input", "BODY_MALFORMED")
    assert said in body["error"]
    assert body["error"].startswith("--args -: standard input")
    assert not (demo / ".charter" / "charter.db").exists()  # nothing was made
    plain = subprocess.run(
        argv[:-1], cwd=demo, input=b'{"query": "x"}', capture_output=True, env=env, check=False
    )
    assert plain.returncode == 0, plain.stderr


def test_verifying_a_directory_that_is_no_export_says_so(demo: Path, tmp_path: Path) -> None:
    """A wrong directory read as a damaged ledger ("?: LEDGER_HEAD_MISMATCH at seq None:
    manifest.json has no head"); it now says there is no manifest there."""
    empty = tmp_path / "not-an-export"
    empty.mkdir()
    done = charter("runs", "verify", str(empty), cwd=demo)
    assert done.returncode == 1
    assert "at seq None" not in done.stderr
    assert "there is no manifest.json in the directory: not a directory written by" in done.stderr
    (empty / "manifest.json").write_text("{")
    broken = charter("runs", "verify", str(empty), cwd=demo)
    assert broken.returncode == 1
    assert "manifest.json cannot be read as JSON" in broken.stderr


def test_evaluating_a_run_that_does_not_exist_is_run_not_found(demo: Path) -> None:
    """It printed "the run is still None" and "nope: None, 1 finding(s)", as if a run
    without a status had been evaluated."""
    assert charter("build", cwd=demo).returncode == 0
    made = charter("call", "notes.search", "--profile", "reader", "--as", "app",
                   "--call-id", "s1", cwd=demo)  # fmt: skip
    assert made.returncode == 0, made.stderr  # a Build and a store, with one run in it
    done = charter("runs", "evaluate", "nope", cwd=demo)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.strip() == "error: invalid_input (RUN_NOT_FOUND): no such run"
    body = json_error(charter("runs", "evaluate", "nope", "--json", cwd=demo))
    assert body["reason"] == "RUN_NOT_FOUND"


def test_import_mcp_of_a_server_that_is_not_one_names_the_failure(demo: Path) -> None:
    """A command that prints something other than JSON-RPC made the MCP SDK log a traceback
    (no logging was configured), and every failed connection was "…: ExceptionGroup"."""
    garbage = charter("import-mcp", "--command", "python3 -c print(1)", cwd=demo)
    assert garbage.returncode == 1
    assert "Traceback" not in garbage.stderr
    assert "mcp.client.stdio: error: Failed to parse JSONRPC message from server" in (
        garbage.stderr
    )
    refused = charter("import-mcp", "--url", "http://127.0.0.1:1/mcp", cwd=demo)
    assert refused.returncode == 1
    assert refused.stderr.strip().endswith("could not be reached: ConnectError"), refused.stderr


def test_control_characters_typed_into_an_id_reach_the_terminal_escaped(demo: Path) -> None:
    """An error that quotes what was typed (``no run …``) shows its ESC, BEL and CR as
    ``\\x1b`` …: a pasted id cannot recolour, retitle or overwrite the operator's terminal."""
    made = charter(
        "call", "notes.search", "--args", '{"query": "x"}', "--call-id", "c1",
        "--profile", "reader", "--as", "app", cwd=demo,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr  # the store exists
    done = charter("runs", "show", "ab\x1b[31mred\x07\r", cwd=demo)
    assert done.returncode != 0
    assert not any(c in done.stderr for c in "\x1b\x07\r"), repr(done.stderr)
    assert "no run ab\\x1b[31mred\\x07\\x0d" in done.stderr
    as_json = charter("runs", "show", "ab\x1b[31m", "--json", cwd=demo)
    assert json.loads(as_json.stdout)["error"].endswith("no run ab\x1b[31m")  # JSON escapes it
