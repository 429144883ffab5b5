"""``CHARTER_LEDGER_KEY_FILE`` reads a key file exactly as a deployment's ``{file: PATH}`` does.

One reader (:func:`charter.ledger.chain.key_material`): the file's bytes are the key, a
trailing newline dropped; hex text is not decoded. Through the real ``charter`` command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import charter as charter_pkg
from tests.conftest import copy_demo

SRC = str(Path(charter_pkg.__file__).resolve().parent.parent)


def charter(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "NO_COLOR": "1", "COLUMNS": "200", **extra}
    for name in ("CHARTER_STORE", "CHARTER_DEPLOY", "CHARTER_LEDGER_KEY", "CHARTER_LEDGER_KEY_ID"):
        if name not in extra:
            env.pop(name, None)
    if "CHARTER_LEDGER_KEY_FILE" not in extra:
        env.pop("CHARTER_LEDGER_KEY_FILE", None)
    return subprocess.run(
        [sys.executable, "-m", "charter", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


@pytest.fixture
def exported(demo_template: Path, tmp_path: Path) -> tuple[Path, Path, str]:
    """A project made by ``charter init`` (its ledger key: 64 hex characters and a newline),
    one call, and its export."""
    demo = copy_demo(demo_template, tmp_path)  # what `charter init demo` wrote
    made = charter("call", "notes.search", "--profile", "reader", "--as", "app",
                   "--call-id", "s1", "--json", cwd=demo)  # fmt: skip
    assert made.returncode == 0, made.stderr
    run_id = json.loads(made.stdout)["run_id"]
    out = tmp_path / "export"
    done = charter("runs", "export", run_id, str(out), cwd=demo)
    assert done.returncode == 0, done.stderr
    return demo, out, run_id


def test_the_deployments_key_file_verifies_through_the_variable(
    exported: tuple[Path, Path, str], tmp_path: Path
) -> None:
    demo, out, run_id = exported
    key_file = demo / ".charter" / "secrets" / "ledger.key"
    assert key_file.read_bytes().rstrip(b"\n").isalnum()  # hex text, as init writes it
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    keyed = charter("runs", "verify", str(out), "--json", cwd=elsewhere,
                    CHARTER_LEDGER_KEY_FILE=str(key_file))  # fmt: skip
    assert keyed.returncode == 0, keyed.stdout + keyed.stderr
    assert json.loads(keyed.stdout)["ok"] is True
    assert json.loads(keyed.stdout)["mac_checked"] is True

    # The same bytes without the trailing newline are the same key.
    bare = tmp_path / "bare.key"
    bare.write_bytes(key_file.read_bytes().rstrip(b"\n"))
    again = charter("runs", "verify", str(out), cwd=elsewhere, CHARTER_LEDGER_KEY_FILE=str(bare))
    assert again.returncode == 0, again.stdout + again.stderr

    # The hex text decoded is another key: the file's bytes are the key, one way only.
    decoded = tmp_path / "decoded.key"
    decoded.write_bytes(bytes.fromhex(key_file.read_text().strip()))
    other = charter("runs", "verify", str(out), cwd=elsewhere,
                    CHARTER_LEDGER_KEY_FILE=str(decoded))  # fmt: skip
    assert other.returncode == 1
    assert "LEDGER_MAC_INVALID" in other.stdout + other.stderr

    # A stored run verifies in the project with the variable naming the same file.
    in_project = charter("runs", "verify", run_id, cwd=demo, CHARTER_LEDGER_KEY_FILE=str(key_file))
    assert in_project.returncode == 0, in_project.stdout + in_project.stderr


def test_a_bad_key_file_is_a_clear_error(exported: tuple[Path, Path, str], tmp_path: Path) -> None:
    _, out, _ = exported
    short = tmp_path / "short.key"
    short.write_text("s3cr3t-value\n")
    refused = charter("runs", "verify", str(out), cwd=tmp_path,
                      CHARTER_LEDGER_KEY_FILE=str(short))  # fmt: skip
    assert refused.returncode == 1
    text = refused.stdout + refused.stderr
    assert "shorter than 16 bytes" in text
    assert "CHARTER_LEDGER_KEY_FILE" in text
    assert "s3cr3t-value" not in text
    assert "Traceback" not in text

    missing = tmp_path / "nowhere.key"
    gone = charter("runs", "verify", str(out), cwd=tmp_path,
                   CHARTER_LEDGER_KEY_FILE=str(missing))  # fmt: skip
    assert gone.returncode == 1
    assert "cannot read the ledger key file" in gone.stdout + gone.stderr
    assert "Traceback" not in gone.stdout + gone.stderr
    assert not missing.exists()
