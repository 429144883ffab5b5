"""The CLI's errors never print a known secret that was typed into a command.

An error may quote what was given (``unknown profile '…'``, ``no principal named '…'``): a
deployment secret given there (pasted into the wrong option) is scrubbed from the message on
stderr and from ``--json`` output, as the HTTP API's problems are. Real CLI subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.privacy._project import Canaries, PrivacyProject, write_privacy_project
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


def test_hostile_arguments_to_runs_calls_proposals_and_approvals_never_echo_a_secret(
    tmp_path: Path,
) -> None:
    """Every ``charter runs`` subcommand (and ``calls``, ``proposals``, ``approvals``) given a
    run id, workflow, input, build, status or reason holding a deployment secret — long, and
    with the secret where a 64-character cut would split it — answers an error that holds
    no part of it, quotes no typed value longer than 64 characters, and has no traceback."""
    project = write_privacy_project(tmp_path / "privacy", Canaries.fresh())
    c = project.canaries
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update(project.env)
    store = f"sqlite:///{tmp_path / 'c.db'}"
    made = subprocess.run(
        [str(CHARTER), "call", "notes_search", "--profile", "all", "--as", "app",
         "--call-id", "c1", "--args", '{"query": "x"}', "--project", str(project.root),
         "--store", store],
        capture_output=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    hostile = "r-" + c.dep + "Y" * 150
    split = "s" * 50 + c.dep  # the 64-character cut falls inside the secret
    commands = [
        ["runs", "show", hostile],
        ["runs", "events", split],
        ["runs", "verify", hostile],
        ["runs", "export", hostile, str(tmp_path / "out")],
        ["runs", "quarantine", hostile, "--reason", f"saw {c.dep}", "--by", "alice"],
        ["runs", "cancel", split, "--reason", "x", "--as", "alice"],
        ["runs", "fail", hostile, "--reason", "x", "--as", "alice"],
        ["runs", "cancel", "r1", "--reason", "x", "--as", hostile],
        ["runs", "finish", hostile, "--as", "alice"],
        ["runs", "evaluate", hostile],
        ["runs", "create", split, "--as", "app"],
        ["runs", "create", "wf", "--as", "app", "--input", split],
        ["runs", "create", "wf", "--as", "app", "--input", "t=" + hostile],
        ["runs", "replay", hostile],
        ["runs", "replay", "r1", "--build", split],
        ["runs", "disclosure", hostile],
        ["calls", "show", hostile],
        ["calls", "resolve", "c1", "--context", split, "--outcome", hostile, "--reason", "x",
         "--as", "alice"],
        ["proposals", "show", hostile, "--as", "alice"],
        ["proposals", "reject", split, "--as", "alice", "--reason", c.dep],
        ["proposals", "apply", hostile, "--as", "alice"],
        ["proposals", "ls", "--as", "alice", "--status", split],
        ["approvals", "show", hostile, "--as", "alice"],
        ["approvals", "approve", split, "--as", "alice", "--reason", c.dep],
        ["approvals", "ls", "--as", "alice", "--status", hostile],
    ]  # fmt: skip
    for index, argv in enumerate(commands):
        extra = ["--json"] if index % 2 else []
        done = subprocess.run(
            [str(CHARTER), *argv, *extra, "--project", str(project.root), "--store", store],
            capture_output=True,
            env=env,
            timeout=120,
            check=False,
        )
        out = done.stdout + done.stderr
        what = " ".join(argv)[:80]
        assert b"Traceback" not in out, (what, out)
        assert not found(c.dep, out), (what, out)
        assert c.dep[:8].encode() not in out, (what, out)  # not even the part a cut kept
        assert b"Y" * 64 not in out, (what, out)
        assert b"s" * 64 not in out, (what, out)
        if argv[:2] != ["proposals", "ls"]:  # an unknown status lists nothing
            assert done.returncode != 0, (what, out)


def test_a_build_error_quoting_a_deployment_secret_prints_it_redacted(tmp_path: Path) -> None:
    """A broken project file that holds a deployment secret (a pattern, a keyword): ``charter
    build`` (text and ``--json``) and ``charter serve``'s start-up name each problem, its file
    and its pointer, with the secret scrubbed; they printed the problems as written."""
    project = _broken_project(tmp_path)
    c = project.canaries
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update(project.env)
    store = f"sqlite:///{tmp_path / 'c.db'}"
    commands = {
        "build": ["build"],
        "build --json": ["build", "--json"],
        "serve": ["serve", "--port", "0", "--store", store],
    }
    for what, argv in commands.items():
        done = subprocess.run(
            [str(CHARTER), *argv, "--project", str(project.root)],
            capture_output=True,
            env=env,
            timeout=120,
            check=False,
        )
        out = done.stdout + done.stderr
        assert done.returncode == 1, (what, out)
        assert not found(c.dep, out), (what, out)
        assert b"[REDACTED]" in out, (what, out)
        assert b"bad.yaml" in out, (what, out)
        assert b"/args_schema/properties/url/pattern" in out, (what, out)
        assert b"unknown keyword" in out, (what, out)


def test_serve_env_redacts_with_that_environments_deployment(tmp_path: Path) -> None:
    """``charter serve --env prod`` reads ``charter.deploy.prod.yaml``: its errors are scrubbed
    of that file's secrets, not only of ``charter.deploy.yaml``'s (which may not know them)."""
    project = _broken_project(tmp_path)
    c = project.canaries
    default = project.root / "charter.deploy.yaml"
    deploy = json.loads(default.read_text())
    (project.root / "charter.deploy.prod.yaml").write_text(
        json.dumps({**deploy, "environment": "prod"})
    )
    default.write_text(json.dumps({k: v for k, v in deploy.items() if k != "redaction"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update(project.env)
    done = subprocess.run(
        [str(CHARTER), "serve", "--env", "prod", "--port", "0", "--project", str(project.root),
         "--store", f"sqlite:///{tmp_path / 'c.db'}"],
        capture_output=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert b"unknown keyword" in out, out
    assert not found(c.dep, out), out


def _broken_project(tmp_path: Path) -> PrivacyProject:
    """The privacy project with a tool file whose schema quotes the deployment's secret."""
    project = write_privacy_project(tmp_path / "privacy", Canaries.fresh())
    c = project.canaries
    (project.root / "bad.yaml").write_text(
        "tools:\n"
        "  - id: svc.bad\n"
        "    description: A tool whose schema quotes the upstream token.\n"
        "    args_schema:\n"
        "      type: object\n"
        "      properties:\n"
        f'        url: {{type: string, pattern: "({c.dep}"}}\n'
        f"        x: {{type: string, {c.dep}: 1}}\n"
    )
    charter_yaml = project.root / "charter.yaml"
    charter_yaml.write_text(
        charter_yaml.read_text().replace(
            "{python: [tools.py]}", "{python: [tools.py], files: [bad.yaml]}"
        )
    )
    return project
