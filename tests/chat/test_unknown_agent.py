"""``charter chat --agent nope`` (the real executable) is refused before anything starts: one
line naming the agent and the known ones, exit 1, nothing read from stdin and no provider
contacted.

Local mode. Before: with ``--profile`` it prompted, read a message and failed the turn ('the
turn failed (AGENT_UNKNOWN)', exit 1); without, it said 'unknown profile 'nope' (the profile
defaults to the agent's name)' — about a profile the user never named.

With ``--server`` (a real ``charter serve`` on loopback), the CLI asks ``GET /v1/chat/agents``
first. Before: it prompted, read the first message, sent it, and only the turn's
``conversation.error`` said AGENT_UNKNOWN (and a server with neither ``chat.agent`` nor
``chat.profile`` answered the first message with ``422 PROFILE_REQUIRED``)."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from charter.client import Client
from tests.conftest import copy_demo
from tests.server._harness import spawn_serve

CHARTER = str(Path(sys.executable).parent / "charter")
KNOWN = "error: unknown agent 'nope' (known: assistant)"


@pytest.fixture
def provider() -> Iterator[socket.socket]:
    """A listening socket standing in for the model provider: nothing may connect to it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path, provider: socket.socket) -> Path:
    demo = copy_demo(demo_template, tmp_path)
    port = provider.getsockname()[1]
    deploy = demo / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text() + "\nchat:\n  provider: openai\n  model: m\n"
        f"  base_url: http://127.0.0.1:{port}/v1\n  api_key_env: TEST_PROVIDER_KEY\n"
    )
    return demo


def chat(demo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update(TEST_PROVIDER_KEY="k", NO_COLOR="1", COLUMNS="200")
    return subprocess.run(
        [CHARTER, "chat", "--as", "app", *args],
        cwd=demo, env=env, input="hello\n", capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


def contacted(provider: socket.socket) -> bool:
    return bool(select.select([provider], [], [], 0)[0])


@pytest.mark.parametrize("profile", [(), ("--profile", "reader")])
def test_an_unknown_agent_is_refused_before_anything_starts(
    demo: Path, provider: socket.socket, profile: tuple[str, ...]
) -> None:
    done = chat(demo, "--agent", "nope", *profile)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == ""  # no prompt: stdin was never read
    assert done.stderr.splitlines() == [KNOWN]
    assert not contacted(provider)


def test_an_unknown_agent_under_json(demo: Path, provider: socket.socket) -> None:
    done = chat(demo, "--agent", "nope", "--profile", "reader", "-m", "hi", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert body["ok"] is False
    assert body["reason"] == "AGENT_UNKNOWN"
    assert body["error"] == KNOWN.removeprefix("error: ")
    assert not contacted(provider)


def test_an_unknown_chat_agent_in_the_deployment_names_the_setting(
    demo: Path, provider: socket.socket
) -> None:
    deploy = demo / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text() + "  agent: ghost\n")
    done = chat(demo, "--profile", "reader")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: unknown agent 'ghost' (chat.agent in charter.deploy.yaml) (known: assistant)"
    ]
    assert not contacted(provider)


def test_a_known_agent_still_chats(demo: Path, provider: socket.socket) -> None:
    """The control: with the agent known, the turn does reach the provider."""
    deploy = demo / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text().replace(
            "  base_url: http://127.0.0.1:", "  timeout_s: 1\n  base_url: http://127.0.0.1:"
        )
    )
    done = chat(demo, "--agent", "assistant", "--profile", "reader")
    assert "you> " in done.stdout, done.stdout + done.stderr
    assert contacted(provider)


# -- with --server: a real `charter serve` of the demo, the CLI as a subprocess ------------

CHAT = (
    "\nchat:\n  provider: openai\n  model: m\n  timeout_s: 1\n"
    "  base_url: http://127.0.0.1:{port}/v1\n  api_key_env: TEST_PROVIDER_KEY\n"
)


@dataclass
class Served:
    url: str
    root: Path
    provider: socket.socket

    @property
    def key(self) -> str:
        return (self.root / ".charter" / "secrets" / "app.key").read_text().strip()

    def run_ids(self) -> set[str]:
        with Client(self.url, self.key) as cl:
            return {r["run_id"] for r in cl.runs(limit=1000)}


@contextmanager
def serving(template: Path, parent: Path, chat_extra: str = "") -> Iterator[Served]:
    """``charter serve`` of a copy of the demo whose ``chat:`` provider is a listening socket
    that nothing answers (``chat_extra``: more of the ``chat:`` section)."""
    with socket.socket() as provider, pytest.MonkeyPatch.context() as env:
        provider.bind(("127.0.0.1", 0))
        provider.listen(8)
        env.setenv("TEST_PROVIDER_KEY", "k")
        demo = copy_demo(template, parent)
        deploy = demo / "charter.deploy.yaml"
        port = provider.getsockname()[1]
        deploy.write_text(deploy.read_text() + CHAT.format(port=port) + chat_extra)
        with spawn_serve(demo, "sqlite:///.charter/charter.db") as url:
            yield Served(url=url, root=demo, provider=provider)


@pytest.fixture(scope="module")
def served(demo_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The demo served with no ``chat.agent`` and no ``chat.profile``."""
    with serving(demo_template, tmp_path_factory.mktemp("served")) as live:
        yield live


def drained(provider: socket.socket) -> bool:
    """True if anything connected to the provider since the last look (each connection is
    accepted and closed, so the next look starts clean)."""
    found = False
    while select.select([provider], [], [], 0)[0]:
        conn, _ = provider.accept()
        conn.close()
        found = True
    return found


def remote_chat(served: Served, cwd: Path, *args: str) -> tuple[int | None, str, str]:
    """``charter chat --server`` with a message on a standard input that stays open: a CLI that
    reads it sends the message, then waits for the next line and never exits by itself (the
    code is then None, after 30 s)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update(CHARTER_API_KEY=served.key, NO_COLOR="1", COLUMNS="200")
    out, err = cwd / "chat.out", cwd / "chat.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            [CHARTER, "chat", "--server", served.url, *args],
            cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=stdout, stderr=stderr, text=True,
        )  # fmt: skip
        assert proc.stdin is not None
        code: int | None
        try:
            proc.stdin.write("hello\n")
            proc.stdin.flush()
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
        finally:
            with suppress(BrokenPipeError):
                proc.stdin.close()
    return code, out.read_text(), err.read_text()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--agent", "nope"), KNOWN),
        (("--agent", "nope", "--profile", "reader"), KNOWN),
        ((), "error: give --profile or --agent (the server has no chat.agent or chat.profile; "
             "known agents: assistant)"),
    ],
)  # fmt: skip
def test_through_a_server_an_unknown_agent_is_refused_before_stdin_is_read(
    served: Served, tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    runs = served.run_ids()
    drained(served.provider)
    code, out, err = remote_chat(served, tmp_path, *args)
    assert code == 1, out + err
    assert out == ""  # no prompt: stdin was never read
    assert err.splitlines() == [says]
    assert served.run_ids() == runs  # no conversation, no turn
    assert not drained(served.provider)


def test_through_a_server_an_unknown_agent_under_json(served: Served, tmp_path: Path) -> None:
    runs = served.run_ids()
    code, out, err = remote_chat(served, tmp_path, "--agent", "nope", "--json")
    assert code == 1, out + err
    body = json.loads(out)
    assert (body["ok"], body["reason"]) == (False, "AGENT_UNKNOWN")
    assert body["error"] == KNOWN.removeprefix("error: ")
    assert served.run_ids() == runs


def test_through_a_server_its_unknown_default_agent_is_refused(
    demo_template: Path, tmp_path: Path
) -> None:
    """The server's ``chat.agent`` names no agent of its Build: the CLI says so (the server's
    deployment file is not the user's to name), before reading anything."""
    with serving(demo_template, tmp_path, "  agent: ghost\n") as ghostly:
        runs = ghostly.run_ids()
        code, out, err = remote_chat(ghostly, tmp_path, "--profile", "reader")
        assert code == 1, out + err
        assert out == ""
        assert err.splitlines() == [
            "error: unknown agent 'ghost' (the server's chat.agent) (known: assistant)"
        ]
        assert ghostly.run_ids() == runs
        assert not drained(ghostly.provider)


@pytest.mark.parametrize("args", [("--agent", "assistant", "--profile", "reader"),
                                  ("--profile", "reader")])  # fmt: skip
def test_through_a_server_a_known_agent_or_none_still_chats(
    served: Served, tmp_path: Path, args: tuple[str, ...]
) -> None:
    """The control: a known agent — or none, with a profile, as locally — reads the message and
    the turn reaches the provider (it then fails: nothing answers there)."""
    drained(served.provider)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update(CHARTER_API_KEY=served.key, NO_COLOR="1", COLUMNS="200")
    done = subprocess.run(
        [CHARTER, "chat", "--server", served.url, *args],
        cwd=tmp_path, env=env, input="hello\n", capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert "you> " in done.stdout, done.stdout + done.stderr
    assert drained(served.provider), done.stdout + done.stderr
