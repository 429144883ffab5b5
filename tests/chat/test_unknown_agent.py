"""``charter chat --agent nope`` (the real executable, local mode) is refused before anything
starts: one line naming the agent and the known ones, exit 1, nothing read from stdin and no
provider contacted. Before: with ``--profile`` it prompted, read a message and failed the turn
('the turn failed (AGENT_UNKNOWN)', exit 1); without, it said 'unknown profile 'nope' (the
profile defaults to the agent's name)' — about a profile the user never named."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import copy_demo

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
