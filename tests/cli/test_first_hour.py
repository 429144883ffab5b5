"""A newcomer's first hour (issue 23), through the real ``charter`` executable.

Each test follows one step of the README's tour or one piece of bad input a new user meets,
and checks that the output says what the next step needs.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import copy_demo

CHARTER = str(Path(sys.executable).parent / "charter")


def charter(*args: str, cwd: Path, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    for name in ("CHARTER_STORE", "CHARTER_DEPLOY", "CHARTER_SERVER", "CHARTER_API_KEY"):
        env.pop(name, None)
    return subprocess.run(
        [CHARTER, *args], cwd=cwd, capture_output=True, text=True, env=env, check=False
    )


def pasted(line: str, prefix: str) -> list[str]:
    """The command a line of output offers after ``prefix``, as argv for the real executable."""
    assert prefix in line, line
    argv = shlex.split(line.split(prefix, 1)[1])
    assert argv[0] == "charter"
    return argv[1:]


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path) -> Path:
    return copy_demo(demo_template, tmp_path)  # what `charter init demo` wrote


def test_pending_call_prints_the_commands_that_complete_it(demo: Path) -> None:
    # Run from outside the project, so the printed commands must carry --project too.
    here = demo.parent
    args = '{"title": "t", "body": "b"}'
    out = charter(
        "call", "notes.add", "--project", "demo", "--profile", "editor", "--as", "app",
        "--call-id", "a1", "--args", args, cwd=here,
    )  # fmt: skip
    assert out.returncode == 3, out.stderr
    lines = out.stdout.splitlines()
    approve = pasted(next(x for x in lines if "approves with:" in x), "approves with:")
    retry = pasted(next(x for x in lines if "complete the call" in x), "complete the call with:")
    assert approve[:2] == ["approvals", "approve"]
    assert approve[-2:] == ["--as", "OPERATOR"]
    assert approve[approve.index("--project") + 1] == "demo"
    assert retry[retry.index("--context") + 1].startswith("ctx-")
    assert retry[retry.index("--args") + 1] == args
    assert retry[retry.index("--call-id") + 1] == "a1"

    approve[-1] = "alice"
    decided = charter(*approve, cwd=here)
    assert decided.returncode == 0, decided.stderr
    assert "approved" in decided.stdout

    done = charter(*retry, cwd=here)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("succeeded  call a1")
    # The approved approval was used: no second one was opened.
    listed = charter("approvals", "ls", "--project", "demo", "--as", "alice", "--json", cwd=here)
    rows = json.loads(listed.stdout)
    assert [r["status"] for r in rows] == ["consumed"]


def test_star_permission_grants_everything_as_documented(demo: Path) -> None:
    deploy = demo / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text().replace(
            "principals:\n",
            'principals:\n  root:\n    kind: operator\n    tenant: acme\n    permissions: ["*"]\n',
        )
    )
    args = '{"title": "t", "body": "b"}'
    asked = charter(
        "call", "notes.add", "--profile", "editor", "--as", "root", "--call-id", "r1",
        "--args", args, "--json", cwd=demo,
    )  # fmt: skip
    assert asked.returncode == 3, asked.stdout + asked.stderr
    pending = json.loads(asked.stdout)
    # "*" holds approvals:approve too, so root (an operator) may approve.
    decided = charter("approvals", "approve", pending["approval"]["id"], "--as", "root", cwd=demo)
    assert decided.returncode == 0, decided.stderr
    done = charter(
        "call", "notes.add", "--context", pending["context_id"], "--call-id", "r1",
        "--args", args, cwd=demo,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_bad_permission_is_still_refused_by_name(demo: Path) -> None:
    deploy = demo / "charter.deploy.yaml"
    deploy.write_text(deploy.read_text().replace("[notes:read]", '["**"]'))
    out = charter("call", "notes.search", "--profile", "reader", "--as", "app",
                  "--call-id", "x", cwd=demo)  # fmt: skip
    assert out.returncode == 1
    assert "permissions[0]" in out.stderr
    assert "is not a valid permission" in out.stderr


def test_runs_commands_take_project_and_list_nothing_before_the_first_run(demo: Path) -> None:
    here = demo.parent
    empty = charter("runs", "ls", "--project", "demo", cwd=here)
    assert empty.returncode == 0, empty.stderr
    assert "No runs yet." in empty.stdout
    assert json.loads(charter("runs", "ls", "-p", "demo", "--json", cwd=here).stdout) == []
    made = charter("call", "notes.search", "-p", "demo", "--profile", "reader", "--as", "app",
                   "--call-id", "s1", "--json", cwd=here)  # fmt: skip
    assert made.returncode == 0, made.stderr
    run_id = json.loads(made.stdout)["run_id"]
    listed = json.loads(charter("runs", "ls", "--project", "demo", "--json", cwd=here).stdout)
    assert [r["run_id"] for r in listed] == [run_id]
    shown = charter("runs", "show", run_id, "--project", "demo", "--json", cwd=here)
    assert json.loads(shown.stdout)["run_id"] == run_id
    events = charter("runs", "events", run_id, "--project", "demo", "--json", cwd=here)
    assert events.returncode == 0, events.stderr
    assert "tool_call_recorded" in events.stdout
    verified = charter("runs", "verify", run_id, "--project", "demo", cwd=here)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # Nothing was created where the commands ran: the project's own store and key were used.
    assert not (here / ".charter").exists()


def test_bad_status_unknown_profile_and_mistyped_tool_say_what_would_work(demo: Path) -> None:
    bogus = charter("approvals", "ls", "--as", "alice", "--status", "bogus", cwd=demo)
    assert bogus.returncode == 1
    assert "pending, approved, rejected, expired, consumed" in bogus.stderr

    profile = charter("call", "notes.search", "--profile", "redaer", "--as", "app",
                      "--call-id", "p1", cwd=demo)  # fmt: skip
    assert profile.returncode == 1
    assert "unknown profile 'redaer' (known: editor, reader)" in profile.stderr
    resolved = charter("contexts", "resolve", "--profile", "redaer", "--as", "app", cwd=demo)
    assert "(known: editor, reader)" in resolved.stderr

    typo = charter("call", "notes.serch", "--profile", "reader", "--as", "app",
                   "--call-id", "t1", cwd=demo)  # fmt: skip
    assert typo.returncode == 4
    assert "did you mean: notes.search?" in typo.stdout


BAD_WRITE = '''
import time

import charter


@charter.tool("notes.stamp", effect="write", permissions=["notes:write"], timeout_s=0.5)
def stamp() -> dict:
    """Stamp the notebook; slower than its deadline, so its outcome is in doubt."""
    time.sleep(3)
    return {}
'''


def test_an_unknown_outcome_says_how_to_resolve_it(demo: Path) -> None:
    (demo / "tools" / "stamp.py").write_text(BAD_WRITE)
    config = demo / "charter.yaml"
    config.write_text(
        config.read_text()
        .replace("    - tools/notes.py\n", "    - tools/notes.py\n    - tools/stamp.py\n")
        .replace("include: [notes.search, notes.get, notes.add]", "include: [notes.stamp]", 1)
    )
    deploy = demo / "charter.deploy.yaml"
    deploy.write_text(
        deploy.read_text()
        .replace("enable: [notes.add]", "enable: [notes.add, notes.stamp]")
        .replace("  notes.add: {executor: python}", "  notes.add: {executor: python}\n"
                 "  notes.stamp: {executor: python}")
    )  # fmt: skip
    asked = charter("call", "notes.stamp", "--profile", "editor", "--as", "app",
                    "--call-id", "u1", "--json", cwd=demo)  # fmt: skip
    assert asked.returncode == 3, asked.stdout + asked.stderr
    pending = json.loads(asked.stdout)
    approved = charter("approvals", "approve", pending["approval"]["id"], "--as", "alice", cwd=demo)
    assert approved.returncode == 0, approved.stderr
    out = charter("call", "notes.stamp", "--context", pending["context_id"],
                  "--call-id", "u1", cwd=demo)  # fmt: skip
    assert out.returncode == 8, out.stdout + out.stderr
    assert out.stdout.startswith("unknown  call u1")
    lines = out.stdout.splitlines()
    show = pasted(next(x for x in lines if "calls show" in x), "  ")
    assert charter(*show, cwd=demo).returncode == 0
    resolve = next(x for x in lines if "calls resolve" in x)
    assert "--outcome succeeded|failed|abandoned" in resolve
    argv = pasted(resolve.replace("succeeded|failed|abandoned", "failed"), "  ")
    argv[-1] = "alice"
    argv[argv.index("--reason") + 1] = "nothing was stamped"
    settled = charter(*argv, cwd=demo)
    assert settled.returncode == 0, settled.stderr
    assert "is now failed" in settled.stdout


def test_piped_tables_are_plain_and_never_cut_an_id(demo: Path) -> None:
    asked = charter("call", "notes.add", "--profile", "editor", "--as", "app", "--call-id", "a1",
                    "--args", '{"title": "t", "body": "b"}', "--json", cwd=demo)  # fmt: skip
    pending = json.loads(asked.stdout)
    box = set("│┃━─┏┗╇")
    runs = charter("runs", "ls", cwd=demo, columns=40)
    assert runs.returncode == 0, runs.stderr
    assert not box & set(runs.stdout)
    assert "…" not in runs.stdout
    row = next(x for x in runs.stdout.splitlines() if pending["run_id"] in x)
    assert row.split()[:3] == [pending["run_id"], "adhoc", "input_required"]

    approvals = charter("approvals", "ls", "--as", "alice", cwd=demo, columns=40)
    row = next(x for x in approvals.stdout.splitlines() if pending["approval"]["id"] in x)
    assert row.split()[:4] == [pending["approval"]["id"], "pending", "notes.add", "a1"]

    assert charter("build", cwd=demo).returncode == 0
    inspected = charter("inspect", cwd=demo, columns=40)
    assert inspected.returncode == 0, inspected.stderr
    assert not box & set(inspected.stdout)
    header = next(x for x in inspected.stdout.splitlines() if x.startswith("id "))
    assert header.split() == ["id", "name", "version", "effect", "danger", "approval", "digest"]
    # A long line of text is not broken either: the whole command stays on one line.
    text = charter("call", "notes.add", "--profile", "editor", "--as", "app", "--call-id", "a2",
                   "--args", '{"title": "t", "body": "b"}', cwd=demo, columns=40)  # fmt: skip
    line = next(x for x in text.stdout.splitlines() if "complete the call" in x)
    assert line.endswith("--as app")


def test_the_example_tools_keep_each_tenant_to_its_own_notes(demo: Path) -> None:
    def call(tool: str, who: str, call_id: str, args: str, profile: str = "reader") -> dict:
        out = charter("call", tool, "--profile", profile, "--as", who, "--call-id", call_id,
                      "--args", args, "--json", cwd=demo)  # fmt: skip
        return dict(json.loads(out.stdout))

    note = '{"title": "acme plans", "body": "secret"}'
    pending = call("notes.add", "app", "a1", note, profile="editor")
    approved = charter("approvals", "approve", pending["approval"]["id"], "--as", "alice", cwd=demo)
    assert approved.returncode == 0, approved.stderr
    added = charter("call", "notes.add", "--context", pending["context_id"], "--call-id", "a1",
                    "--args", note, "--json", cwd=demo)  # fmt: skip
    note_id = json.loads(added.stdout)["data"]["note"]["id"]

    mine = call("notes.search", "app", "s1", '{"query": "acme"}')
    assert [n["id"] for n in mine["data"]["notes"]] == [note_id]
    theirs = call("notes.search", "intruder", "s2", '{"query": ""}')
    assert theirs["status"] == "succeeded"
    assert theirs["data"] == {"notes": []}
    peek = call("notes.get", "intruder", "g1", json.dumps({"note_id": note_id}))
    assert peek["data"] == {"note": None}
    assert call("notes.get", "app", "g2", json.dumps({"note_id": note_id}))["data"]["note"]


def test_demo_shows_cross_tenant_reads_refused(tmp_path: Path) -> None:
    out = charter("demo", "d", cwd=tmp_path, columns=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "intruder searches in its own context: nothing of acme" in out.stdout
    assert "answered like a missing note" in out.stdout
    assert '"note": null' in out.stdout
    assert "Ledger" in out.stdout
    assert "verified" in out.stdout


def test_chat_errors_name_the_cause_and_exit_non_zero(demo: Path) -> None:
    # charter init's project: the agent is "assistant", the profiles are reader and editor.
    out = charter("chat", "--agent", "assistant", "--as", "app", "-m", "hello", cwd=demo)
    assert out.returncode == 1
    assert "unknown profile 'assistant' (the profile defaults to the agent's name)" in out.stderr
    assert "known: editor, reader" in out.stderr
    assert "server log" not in out.stdout + out.stderr

    deploy = demo / "charter.deploy.yaml"
    plain = deploy.read_text()
    deploy.write_text(
        plain + "chat:\n  provider: openai\n  model: m\n  base_url: http://127.0.0.1:9/v1\n"
        "  api_key_env: CHARTER_TEST_UNSET_KEY\n"
    )
    args = ["chat", "--agent", "assistant", "--profile", "editor", "--as", "app", "-m", "hi"]
    missing = charter(*args, cwd=demo)
    assert missing.returncode == 1
    assert "PROVIDER_credential_missing" in missing.stderr
    assert "API key variable is unset" in missing.stderr
    assert "server log" not in missing.stdout + missing.stderr

    env = {**os.environ, "CHARTER_TEST_UNSET_KEY": "not-a-real-key", "NO_COLOR": "1"}
    refused = subprocess.run(
        [CHARTER, *args], cwd=demo, capture_output=True, text=True, env=env, check=False
    )
    assert refused.returncode == 1
    assert "could not be reached" in refused.stderr
    assert "not-a-real-key" not in refused.stdout + refused.stderr


def test_verifying_an_export_outside_the_project_never_creates_keys(demo: Path) -> None:
    made = charter("call", "notes.search", "--profile", "reader", "--as", "app",
                   "--call-id", "s1", "--json", cwd=demo)  # fmt: skip
    run_id = json.loads(made.stdout)["run_id"]
    exported = demo.parent / "export"
    assert charter("runs", "export", run_id, str(exported), cwd=demo).returncode == 0
    elsewhere = demo.parent / "elsewhere"
    elsewhere.mkdir()

    bare = charter("runs", "verify", str(exported), cwd=elsewhere)
    assert bare.returncode == 0, bare.stdout + bare.stderr
    assert "no key given: chain checked, MAC not checked" in bare.stdout
    assert "LEDGER_MAC_INVALID" not in bare.stdout + bare.stderr
    assert list(elsewhere.iterdir()) == []
    as_json = json.loads(charter("runs", "verify", str(exported), "--json", cwd=elsewhere).stdout)
    assert as_json["ok"] is True
    assert as_json["mac_checked"] is False

    key_file = demo / ".charter" / "secrets" / "ledger.key"
    env = {**os.environ, "CHARTER_LEDGER_KEY_FILE": str(key_file), "NO_COLOR": "1"}
    keyed = subprocess.run([CHARTER, "runs", "verify", str(exported)], cwd=elsewhere,
                           capture_output=True, text=True, env=env, check=False)  # fmt: skip
    assert keyed.returncode == 0, keyed.stdout + keyed.stderr
    assert "MAC, lifecycles" in keyed.stdout
    assert list(elsewhere.iterdir()) == []

    # A wrong key is still caught: the MAC is checked whenever a key is given.
    wrong = elsewhere.parent / "wrong.key"
    wrong.write_text("00" * 32)
    env["CHARTER_LEDGER_KEY_FILE"] = str(wrong)
    refused = subprocess.run([CHARTER, "runs", "verify", str(exported)], cwd=elsewhere,
                             capture_output=True, text=True, env=env, check=False)  # fmt: skip
    assert refused.returncode == 1
    assert "LEDGER_MAC_INVALID" in refused.stderr


def test_calls_show_finds_a_call_by_its_id_alone(demo: Path) -> None:
    """``charter calls show ID`` needed ``--context``; it finds the call by its id now, and
    names the contexts when several have that id."""
    search = ["call", "notes.search", "--profile", "reader", "--as", "app", "--args", "{}"]
    made = charter(*search, "--call-id", "find-me", "--json", cwd=demo)
    assert made.returncode == 0, made.stdout + made.stderr
    shown = charter("calls", "show", "find-me", "--json", cwd=demo)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    row = json.loads(shown.stdout)
    assert (row["call_id"], row["state"]) == ("find-me", "succeeded")
    missing = charter("calls", "show", "never-made", "--json", cwd=demo)
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["reason"] == "CALL_NOT_FOUND"
    assert charter(*search, "--call-id", "find-me", cwd=demo).returncode == 0  # a new context
    twice = charter("calls", "show", "find-me", cwd=demo)
    assert twice.returncode == 1
    assert "CALL_ID_AMBIGUOUS" in twice.stderr
    assert row["context_id"] in twice.stderr
    assert "--context" in twice.stderr
