"""``charter chat`` (the real executable) with a broken ``chat:`` provider configuration: a
clear ``CONFIG_INVALID`` naming the file, as JSON under ``--json``; never a traceback. And
``POST /v1/chat`` (a real server on loopback) with an ambiguous body, and ``charter chat
--server`` against a server from before ``GET /v1/chat/agents``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
import typer
from typer.testing import CliRunner

from charter.cli.app import app
from charter.cli.chat_cmds import _offered_agent
from charter.client import AsyncClient, Client
from charter.errors import Failure, InvalidInput
from tests.chat.conftest import Live, serve, write_kv_project
from tests.cli.test_first_hour import CHARTER, charter
from tests.conftest import copy_demo

runner = CliRunner()
SCRIPT_SECTION = "\nchat:\n  provider: scripted\n  script: {script}\n"


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path) -> Path:
    return copy_demo(demo_template, tmp_path)  # what `charter init demo` wrote


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{{{ not: yaml", "is not valid YAML (line"),
        (None, "cannot read the script"),
        (b"\xff\xfe rules: []", "is not valid UTF-8"),
        ("- just a list", "a script is a mapping with a list of rules"),
    ],
)
def test_a_broken_chat_script_is_a_config_error(
    demo: Path, content: str | bytes | None, says: str
) -> None:
    script = demo / "chat-script.yaml"
    if isinstance(content, bytes):
        script.write_bytes(content)
    elif content is not None:
        script.write_text(content)
    deploy = demo / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text() + SCRIPT_SECTION.format(script=script.name))
    argv = ["chat", "--profile", "reader", "--agent", "assistant", "--as", "app", "-m", "hi"]
    done = charter(*argv, "--json", cwd=demo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert body["code"] == "invalid_input"
    assert body["reason"] == "CONFIG_INVALID"
    assert says in body["error"]
    assert "chat-script.yaml" in body["error"]
    plain = charter(*argv, cwd=demo)
    assert plain.returncode == 1
    assert "Traceback" not in plain.stderr
    assert says in plain.stderr


def test_a_chat_body_repeating_a_member_is_refused_not_last_one_wins(copilot: Live) -> None:
    headers = {"Authorization": f"Bearer {copilot.keys['app']}", "Content-Type": "application/json"}
    bodies = [
        ('{"message": "hi", "message": "delete everything", "agent": "copilot"}', "message"),
        ('{"message": "hi", "agent": "copilot", "attachments": '
         '[{"kind": "workflow", "kind": "x", "ref": "r"}]}', "kind"),
    ]  # fmt: skip
    with httpx.Client(trust_env=False, timeout=30) as http:
        for body, member in bodies:
            answer = http.post(f"{copilot.url}/v1/chat", content=body, headers=headers)
            assert answer.status_code == 400, answer.text
            problem = answer.json()
            assert problem["reason"] == "BODY_MALFORMED"
            assert f"the member {member!r} appears twice" in problem["detail"]
        ok = http.post(f"{copilot.url}/v1/chat", content='{"message": "hi", "agent": "copilot"}',
                       headers=headers)  # fmt: skip
        assert ok.status_code == 200, ok.text


@pytest.mark.parametrize(("message", "has"), [("", "(it has 0)"), ("x" * 70_000, "(it has 70000)")])
def test_local_chat_refuses_the_message_post_v1_chat_refuses(
    demo: Path, message: str, has: str
) -> None:
    """Before: ``charter chat --as app -m ''`` (and a 70,000-character message) ran a turn
    locally — a run, a context, a model request — while the server answers 422."""
    argv = ["chat", "--profile", "reader", "--agent", "assistant", "--as", "app", "-m", message]
    done = charter(*argv, "--json", cwd=demo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert body["reason"] == "REQUEST_INVALID"
    assert "the message must be 1 to 65536 characters long" in body["error"]
    assert has in body["error"]
    listed = charter("runs", "ls", "--json", cwd=demo)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []  # nothing recorded


def test_chat_through_a_server_names_the_field_the_server_refused(
    kv: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: 'the request does not match the API's schema' and nothing more — the problem's
    ``errors`` (which member, which rule) were dropped by the client."""
    monkeypatch.setenv("CHARTER_API_KEY", kv.keys["app"])
    for as_json in (False, True):
        out = runner.invoke(
            app, ["chat", "-m", "", "--server", kv.url, *(["--json"] if as_json else [])]
        )
        assert out.exit_code == 1, out.output
        assert "Traceback" not in out.output
        said = json.loads(out.output)["error"] if as_json else out.output
        assert "body.message: String should have at least 1 character" in said, said


@pytest.fixture(scope="module")
def older_kv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The key-value chat server as a Charter from before ``GET /v1/chat/agents`` (404)."""
    project = write_kv_project(tmp_path_factory.mktemp("olderkv"))
    yield from serve(project.root, project.keys, without=("/v1/chat/agents",))


def test_chat_through_a_server_names_why_the_turn_failed(
    older_kv: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn that fails over ``--server``: the stream's ``conversation.error`` carries the
    reason, and the remote CLI says it, as the local one does (it printed only the fixed
    message that hides the details). The failure here is an unknown agent on a server from
    before ``GET /v1/chat/agents``, where the turn is still what judges the agent: a current
    server lets the CLI refuse it before the first message (tests/chat/test_unknown_agent.py)."""
    monkeypatch.setenv("CHARTER_API_KEY", older_kv.keys["app"])
    with Client(older_kv.url, older_kv.keys["app"]) as cl, pytest.raises(InvalidInput) as old:
        cl.chat_agents()
    assert old.value.reason == "ROUTE_NOT_FOUND"
    out = runner.invoke(app, ["chat", "-m", "hi", "--agent", "nope", "--server", older_kv.url])
    assert out.exit_code == 1, out.output
    assert "Traceback" not in out.output
    assert "the turn failed (AGENT_UNKNOWN)" in out.output, out.output


@pytest.mark.parametrize(
    ("status", "body", "refused"),
    [
        (404, b"Not Found", None),  # a proxy's page: reason HTTP_404
        (404, b'{"code": "invalid_input", "reason": "ROUTE_NOT_FOUND", "detail": "Not Found"}',
         None),  # an older Charter
        (401, b'{"code": "permission_denied", "reason": "AUTH_INVALID", "detail": "no"}',
         "AUTH_INVALID"),
        (200, b'{"agents": [], "defaultAgent": null, "defaultProfile": "all"}',
         "AGENT_UNKNOWN"),
    ],
)  # fmt: skip
def test_only_a_server_without_the_agents_endpoint_leaves_the_agent_to_the_turn(
    status: int, body: bytes, refused: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI's check before a remote chat: a 404 there (an older server, a proxy) skips it;
    anything else is said before the first message — a refused key too."""
    transport = httpx2.MockTransport(lambda request: httpx2.Response(status, content=body))

    async def check() -> None:
        async with AsyncClient("http://server.test", "k", transport=transport) as client:
            await _offered_agent(client, "nope", None, as_json=True)

    if refused is None:
        asyncio.run(check())
        assert capsys.readouterr().out == ""
    elif refused == "AGENT_UNKNOWN":
        with pytest.raises(typer.Exit):
            asyncio.run(check())
        said = json.loads(capsys.readouterr().out)
        assert (said["reason"], said["error"]) == (
            refused,
            "unknown agent 'nope' (known: none: the server's Build has no agents)",
        )
    else:
        with pytest.raises(Failure) as info:
            asyncio.run(check())
        assert info.value.reason == refused


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ('{"message": "hi", "agent": "copilot", "timeRange": {"from": "\\ud800"}}',
         "timeRange.from", "lone surrogate"),
        ('{"message": "hi", "agent": "copilot", "timeRange": {"\\udfff": "x"}}',
         "timeRange", "lone surrogate"),
        ('{"message": "hi", "agent": "copilot", "timeRange": {"from": "' + "x" * 100_000 + '"}}',
         "timeRange.from", "is 100000 characters long (at most 256)"),
        ('{"message": "hi", "agent": "copilot", "timeRange": {'
         + ", ".join(f'"k{i}": "v"' for i in range(9)) + "}}",
         "timeRange", "has 9 entries (at most 8)"),
    ],
)  # fmt: skip
def test_a_chat_time_range_no_store_can_hold_is_refused_before_anything_runs(
    copilot: Live, body: str, field: str, says: str
) -> None:
    """Before: ``timeRange`` was any mapping — a lone surrogate or 100,000 characters went
    into the turn's model request and its stored events."""
    headers = {"Authorization": f"Bearer {copilot.keys['app']}", "Content-Type": "application/json"}
    with httpx.Client(trust_env=False, timeout=30) as http:
        runs = http.get(f"{copilot.url}/v1/runs", headers=headers).json()
        answer = http.post(f"{copilot.url}/v1/chat", content=body, headers=headers)
        assert answer.status_code == 422, answer.text[:500]
        problem = answer.json()
        assert problem["reason"] == "REQUEST_INVALID"
        assert problem["detail"].startswith(f"{field} ")
        assert says in problem["detail"]
        assert len(answer.content) < 2000  # the value is not echoed
        assert http.get(f"{copilot.url}/v1/runs", headers=headers).json() == runs


@pytest.mark.parametrize(
    ("stdin", "says"),
    [
        (b"\xff", "standard input is not valid UTF-8 (line 1: byte 0xff at offset 0)"),
        (b"\xff\n", "standard input is not valid UTF-8 (line 1: byte 0xff at offset 0)"),
        (b"/x\n\nab\xc3(\n", "standard input is not valid UTF-8 (line 3: byte 0xc3 at offset 2)"),
    ],
)
def test_stdin_that_is_not_utf8_is_refused_saying_so(demo: Path, stdin: bytes, says: str) -> None:
    """Before: ``printf '\\xff' | charter chat`` answered "message contains a lone surrogate
    (not valid Unicode)" — what Python makes of a byte that is not UTF-8 — with no word of
    where. Now it says the input is not UTF-8, the line and the byte, and exits 1."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    argv = [CHARTER, "chat", "--profile", "reader", "--agent", "assistant", "--as", "app"]
    for as_json in (False, True):
        done = subprocess.run(
            [*argv, *(["--json"] if as_json else [])],
            cwd=demo,
            input=stdin,
            capture_output=True,
            env={**env, "NO_COLOR": "1"},
            timeout=60,
            check=False,
        )
        out, err = done.stdout.decode(), done.stderr.decode()
        assert done.returncode == 1, out + err
        assert "Traceback" not in out + err
        assert "surrogate" not in out + err
        if as_json:
            body = json.loads(out.split("you> ")[-1])
            assert (body["error"], body["reason"]) == (says, "BODY_MALFORMED")
        else:
            assert says in err, err


def test_a_message_argument_that_is_not_utf8_is_refused_saying_so(demo: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    argv = ["chat", "--profile", "reader", "--agent", "assistant", "--as", "app", "-m"]
    done = subprocess.run(
        [CHARTER.encode(), *(a.encode() for a in argv), b"ok\xff"],
        cwd=demo,
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert b"Traceback" not in done.stderr
    assert b"--message is not valid UTF-8 (byte 0xff at offset 2)" in done.stderr
