"""The CLI's errors never print a known secret that was typed into a command.

An error may quote what was given (``unknown profile '…'``, ``no principal named '…'``): a
deployment secret given there (pasted into the wrong option) is scrubbed from the message on
stderr and from ``--json`` output, as the HTTP API's problems are. Real CLI subprocesses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.privacy._project import Canaries, write_privacy_project
from tests.privacy.test_canary_project import found

CHARTER = Path(sys.executable).with_name("charter")


def test_an_error_quoting_a_typed_secret_prints_it_redacted(tmp_path: Path) -> None:
    project = write_privacy_project(tmp_path / "privacy", Canaries.fresh())
    c = project.canaries
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update(project.env)
    store = f"sqlite:///{tmp_path / 'c.db'}"
    commands = {
        "unknown profile": ["contexts", "resolve", "--profile", f"p-{c.dep}", "--as", "app"],
        "unknown profile (json)": [
            *("contexts", "resolve", "--profile", f"p-{c.dep}", "--as", "app", "--json"),
        ],
        "unknown principal": [
            *("call", "notes_search", "--profile", "all", "--as", c.dep, "--call-id", "c1"),
        ],
    }
    for what, argv in commands.items():
        done = subprocess.run(
            [str(CHARTER), *argv, "--project", str(project.root), "--store", store],
            capture_output=True,
            env=env,
            timeout=120,
            check=False,
        )
        out = done.stdout + done.stderr
        assert done.returncode != 0, (what, out)
        assert b"[REDACTED]" in out, (what, out)
        assert not found(c.dep, out), (what, out)
