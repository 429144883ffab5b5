"""``charter init``: write a small, working example project."""

from __future__ import annotations

import os
import secrets
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from charter.errors import UserError

TEMPLATES = ("basic", "tutoring-panel", "workflow-copilot", "report-pipeline")
_RENAMES = {"gitignore.txt": ".gitignore"}
_SKIP = {"__pycache__"}


def _files(node: Traversable, prefix: str = "") -> list[tuple[str, Traversable]]:
    out = []
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.name in _SKIP or child.name.endswith(".pyc"):
            continue
        rel = f"{prefix}{_RENAMES.get(child.name, child.name)}"
        if child.is_dir():
            out.extend(_files(child, rel + "/"))
        else:
            out.append((rel, child))
    return out


def init_project(
    directory: str | Path, *, template: str = "basic", force: bool = False
) -> list[str]:
    """Copy a template into ``directory``; returns the relative paths written.

    Refuses to write into a directory that already holds a ``charter.yaml`` unless ``force``.
    Never overwrites other existing files: it refuses and names them instead.
    """
    if template not in TEMPLATES:
        raise UserError(f"unknown example {template!r}; choose one of: {', '.join(TEMPLATES)}")
    target = Path(directory)
    root = resources.files("charter.project").joinpath("templates", template)
    files = _files(root)
    if target.exists() and not target.is_dir():
        raise UserError(f"{target} exists and is not a directory")
    existing = [rel for rel, _ in files if (target / rel).exists()]
    if existing and not force:
        raise UserError(
            f"{target} already contains {', '.join(existing)}; "
            "choose an empty directory or pass --force to overwrite"
        )
    for rel, node in files:
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(node.read_bytes())
    written = [rel for rel, _ in files]
    written += make_dev_secrets(target, TEMPLATE_SECRETS.get(template, ()))
    return written


DEV_SECRETS = (
    "fingerprint.key",
    "ledger.key",
    "approval.token",
    "alice.key",
    "app.key",
    "intruder.key",
)
TEMPLATE_SECRETS = {
    "tutoring-panel": ("rivera.key", "panel.key", "executor.credential", "executor.signing.key"),
}
SECRETS_DIR = ".charter/secrets"


def make_dev_secrets(target: Path, extra: tuple[str, ...] = ()) -> list[str]:
    """Random development secrets the example deployment file references (mode 0600).

    Existing files are kept, so re-running ``init --force`` never changes a key that data
    was already written under.
    """
    directory = target / SECRETS_DIR
    for private in (directory.parent, directory):  # .charter/ and its secrets: owner only
        private.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(private, 0o700)
    made = []
    for name in DEV_SECRETS + extra:
        path = directory / name
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(32) + "\n")
        made.append(f"{SECRETS_DIR}/{name}")
    return made
