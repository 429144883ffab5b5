"""The workflow-copilot example served with the console, for the proposals pages.

Its scripted model (replaced here) drafts proposals on request: clean creates
(``onboarding``, ``billing``, ``invoices``), two competing updates of ``invoices``, two
creates of one name (the second no longer validates once the first is applied) and a
blocked one. Two more operators join the
deployment: ``carol`` (acme) may approve proposals but not apply them; ``bob`` is another
tenant's operator.
"""

from __future__ import annotations

import hashlib
import secrets
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from charter.client import Client
from charter.project.init import init_project

SCRIPT = """
rules:
  - match: "(?i)create onboarding"
    steps:
      - call: {id: cat, tool: activities_catalog, arguments: {}}
      - call:
          id: prop
          tool: workflow_proposeCreate
          arguments:
            name: onboarding
            rationale: "Send a welcome e-mail, then wait."
            activities: [{id: a1, type: SendEmail}, {id: a2, type: Delay}]
      - say: "I proposed it; an operator can approve and apply it."
  - match: "(?i)create billing"
    steps:
      - call:
          id: prop
          tool: workflow_proposeCreate
          arguments:
            name: billing
            rationale: "Charge, then ask a person."
            activities: [{id: b1, type: HttpRequest}, {id: b2, type: Approve}]
      - say: "Proposed."
  - match: "(?i)create invoices"
    steps:
      - call:
          id: prop
          tool: workflow_proposeCreate
          arguments:
            name: invoices
            rationale: "Call the ledger, then ask a person."
            activities: [{id: i1, type: HttpRequest}, {id: i2, type: Approve}]
  - match: "(?i)update invoices"
    steps:
      - call: {id: get, tool: workflow_getDefinition, arguments: {definition_id: invoices}}
      - calls:
          - id: up1
            tool: workflow_proposeUpdate
            arguments:
              definition_id: invoices
              baseline_version: "{{get.data.version}}"
              rationale: "Send a receipt too."
              activities:
                - {id: i1, type: HttpRequest}
                - {id: i2, type: Approve}
                - {id: i3, type: SendEmail}
          - id: up2
            tool: workflow_proposeUpdate
            arguments:
              definition_id: invoices
              baseline_version: "{{get.data.version}}"
              rationale: "E-mail instead of calling out; no approval step."
              activities: [{id: i1, type: SendEmail}]
      - say: "Two alternative updates are proposed."
  - match: "(?i)create reports twice"
    steps:
      - call:
          id: r1
          tool: workflow_proposeCreate
          arguments: {name: reports, rationale: "Weekly.", activities: [{id: r1, type: Delay}]}
      - call:
          id: r2
          tool: workflow_proposeCreate
          arguments: {name: reports, rationale: "Daily.", activities: [{id: r1, type: SendEmail}]}
      - say: "Two alternatives."
  - match: "(?i)create broken"
    steps:
      - call:
          id: prop
          tool: workflow_proposeCreate
          arguments: {name: broken, rationale: "Beam it.", activities: [{id: x1, type: Teleport}]}
      - say: "Proposed, with errors."
  - match: ""
    steps: [{say: "I can create or update workflows."}]
"""

EXTRA = {
    "carol": ("acme", ["workflows:read", "approvals:approve", "proposals:approve"]),
    "bob": ("globex", ["workflows:read", "proposals:approve", "proposals:apply"]),
}


@dataclass(frozen=True)
class Copilot:
    root: Path
    keys: dict[str, str]


def write_copilot_project(root: Path) -> Copilot:
    init_project(root, template="workflow-copilot")
    (root / "script.yaml").write_text(textwrap.dedent(SCRIPT))
    secret_dir = root / ".charter" / "secrets"
    keys = {n: (secret_dir / f"{n}.key").read_text().strip() for n in ("alice", "app")}
    deploy_file = root / "charter.deploy.yaml"
    deploy: dict[str, Any] = yaml.safe_load(deploy_file.read_text())
    for name, (tenant, permissions) in EXTRA.items():
        keys[name] = secrets.token_urlsafe(24)
        deploy["principals"][name] = {
            "kind": "operator",
            "tenant": tenant,
            "permissions": permissions,
            "api_key": {"sha256": hashlib.sha256(keys[name].encode()).hexdigest()},
        }
    deploy_file.write_text(yaml.safe_dump(deploy, sort_keys=False))
    return Copilot(root=root, keys=keys)


def propose(url: str, key: str, message: str) -> list[dict[str, Any]]:
    """The proposals an application's chat turn created: ``[{proposalId, status, ...}]``."""
    with Client(url, key) as client:
        events = list(client.chat(message, agent="copilot"))
    assert events[-1]["type"] == "conversation.completed", events[-1]
    return [e["data"] for e in events if e["type"] == "proposal.created"]
