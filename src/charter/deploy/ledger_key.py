"""Which ledger key a runtime or ``charter runs`` uses, read one way whatever names it."""

from __future__ import annotations

import os
from pathlib import Path

from charter.deploy.deployment import (
    Deployment,
    deployment_path,
    load_deployment,
    local_default_deployment,
)
from charter.ledger.chain import LedgerKey, key_material
from charter.stores.factory import load_ledger_key


def ledger_key_for(
    project_dir: Path,
    deploy: str | os.PathLike[str] | None = None,
    *,
    deployment: Deployment | None = None,
) -> LedgerKey:
    """The one place the ledger key is chosen, for the runtime and ``charter runs`` alike.

    1. a deployment file applies (``--deploy``, ``CHARTER_DEPLOY`` or ``charter.deploy.yaml``)
       and names ``secrets.ledger_key``: that key;
    2. else ``CHARTER_LEDGER_KEY`` / ``CHARTER_LEDGER_KEY_FILE``;
    3. else the local development key ``.charter/ledger.key`` (created on first use).

    A key file is read by :func:`~charter.ledger.chain.key_material` whoever names it, so a
    file gives the same key named by a deployment or by ``CHARTER_LEDGER_KEY_FILE``.
    """
    path = deployment_path(Path(deploy) if deploy is not None else None, project_dir=project_dir)
    if path is not None:
        found = deployment or load_deployment(path, project_dir=project_dir)
        if found.ledger_key is not None:
            what = f"secrets.ledger_key ({found.ledger_key.reference})"
            return LedgerKey.derive_id(key_material(found.ledger_key.resolve(), what=what))
    if os.environ.get("CHARTER_LEDGER_KEY") or os.environ.get("CHARTER_LEDGER_KEY_FILE"):
        return load_ledger_key()
    local = local_default_deployment(project_dir).ledger_key
    assert local is not None
    return LedgerKey.derive_id(key_material(local.resolve(), what=local.reference))
