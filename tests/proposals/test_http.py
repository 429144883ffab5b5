"""``/v1/proposals`` over a real server: every transition and refusal, and an applier that
dies mid-apply (the server process is SIGKILLed inside the applier) leaves the proposal
``approved`` with its apply call ``unknown`` — and it is never applied twice."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from charter.client import Client
from charter.errors import Failure, InvalidInput, PermissionDenied, TransientExternal
from charter.project.init import init_project
from tests.chat.conftest import Live
from tests.server._harness import spawn_serve

CREATE = "please create a workflow for onboarding"
UPDATE = "update the onboarding workflow"
DIE = """
    import os as _os
    import signal as _signal

    with open(DATA.parent / "apply-journal.txt", "a") as _journal:
        _journal.write(proposal_id + "\\n")
    if _os.environ.get("WF_DIE_IN_APPLY") == "1":
        _os.kill(_os.getpid(), _signal.SIGKILL)
"""


def _proposals(client: Client, message: str) -> list[dict[str, Any]]:
    events = list(client.chat(message, agent="copilot"))
    return [e["data"] for e in events if e["type"] == "proposal.created"]


def _reason(exc: pytest.ExceptionInfo[Failure]) -> str:
    return exc.value.reason


@pytest.fixture
def clients(copilot: Live) -> Iterator[dict[str, Client]]:
    made = {name: Client(copilot.url, key) for name, key in copilot.keys.items()}
    yield made
    for client in made.values():
        client.close()


def test_each_transition_and_refusal(copilot: Live, clients: dict[str, Client]) -> None:
    app, alice, intruder = clients["app"], clients["alice"], clients["intruder"]
    (created,) = _proposals(app, CREATE)
    pid = created["proposalId"]
    assert alice.get_proposal(pid)["status"] == "validated"
    assert pid in {p["proposal_id"] for p in alice.proposals(status="validated")}

    # cross-tenant: 404 for every verb, and absent from the list
    for verb in (intruder.get_proposal, intruder.approve_proposal, intruder.apply_proposal):
        with pytest.raises(PermissionDenied) as missing:
            verb(pid)
        assert _reason(missing) == "PROPOSAL_NOT_FOUND"
    assert intruder.proposals() == []
    answer = httpx2.get(
        f"{copilot.url}/v1/proposals/{pid}",
        headers={"Authorization": f"Bearer {copilot.keys['intruder']}"},
    )
    assert answer.status_code == 404

    # apply before approve: 400; without permissions: 403
    with pytest.raises(InvalidInput) as early:
        alice.apply_proposal(pid)
    assert _reason(early) == "PROPOSAL_ILLEGAL_TRANSITION"
    with pytest.raises(PermissionDenied) as cannot_approve:
        app.approve_proposal(pid)
    assert _reason(cannot_approve) == "PROPOSAL_PERMISSION_MISSING"

    # validated -> approved -> (apply without permission 403) -> applied
    assert alice.approve_proposal(pid, reason="ok")["status"] == "approved"
    with pytest.raises(InvalidInput) as twice:
        alice.reject_proposal(pid)
    assert _reason(twice) == "PROPOSAL_ILLEGAL_TRANSITION"
    with pytest.raises(PermissionDenied) as cannot_apply:
        app.apply_proposal(pid)
    assert _reason(cannot_apply) == "PROPOSAL_PERMISSION_MISSING"
    applied = alice.apply_proposal(pid)
    assert applied["status"] == "applied"
    with pytest.raises(InvalidInput) as again:
        alice.apply_proposal(pid)
    assert _reason(again) == "PROPOSAL_ILLEGAL_TRANSITION"

    # validated -> rejected, and a rejected proposal cannot be approved or applied
    first, second = (p["proposalId"] for p in _proposals(app, UPDATE))
    assert alice.reject_proposal(first, reason="no")["status"] == "rejected"
    for verb in (alice.approve_proposal, alice.apply_proposal):
        with pytest.raises(InvalidInput) as illegal:
            verb(first)
        assert _reason(illegal) == "PROPOSAL_ILLEGAL_TRANSITION"

    # stale baseline: 409 (the target moved since the proposal)
    (third, fourth) = (p["proposalId"] for p in _proposals(app, UPDATE))
    for p in (second, third):
        alice.approve_proposal(p)
    assert alice.apply_proposal(second)["status"] == "applied"
    with pytest.raises(InvalidInput) as stale:
        alice.apply_proposal(third)
    assert _reason(stale) == "PROPOSAL_BASELINE_STALE"
    status = httpx2.post(
        f"{copilot.url}/v1/proposals/{third}/apply",
        headers={"Authorization": f"Bearer {copilot.keys['alice']}"},
    )
    assert status.status_code == 409
    assert alice.get_proposal(third)["status"] == "approved"
    assert alice.get_proposal(fourth)["status"] == "validated"


def test_invalid_on_apply_is_422(tmp_path: Path) -> None:
    """Two create proposals for one name: once the first is applied, the second no longer
    validates (``definition.exists``) — 422, and it stays approved."""
    root = tmp_path / "p"
    init_project(root, template="workflow-copilot")
    keys = _keys(root)
    with (
        spawn_serve(root, "sqlite:///.charter/charter.db") as url,
        Client(url, keys["app"]) as app,
        Client(url, keys["alice"]) as alice,
    ):
        (one,) = _proposals(app, CREATE)
        (two,) = _proposals(app, CREATE)
        for p in (one, two):
            alice.approve_proposal(p["proposalId"])
        assert alice.apply_proposal(one["proposalId"])["status"] == "applied"
        answer = httpx2.post(
            f"{url}/v1/proposals/{two['proposalId']}/apply",
            headers={"Authorization": f"Bearer {keys['alice']}"},
        )
        assert answer.status_code == 422
        assert answer.json()["reason"] == "PROPOSAL_INVALID"
        assert alice.get_proposal(two["proposalId"])["status"] == "approved"


def _keys(root: Path) -> dict[str, str]:
    secrets = root / ".charter" / "secrets"
    return {n: (secrets / f"{n}.key").read_text().strip() for n in ("alice", "app", "intruder")}


def test_an_applier_that_dies_mid_apply_is_never_applied_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "p"
    init_project(root, template="workflow-copilot")
    tools = root / "tools" / "workflows.py"
    source = tools.read_text()
    marker = (
        '    """Write a new definition version from an approved proposal (Charter calls this)."""\n'
    )
    assert marker in source
    tools.write_text(source.replace(marker, marker + DIE.lstrip("\n")))
    keys = _keys(root)
    store = "sqlite:///.charter/charter.db"
    monkeypatch.setenv("WF_DIE_IN_APPLY", "1")
    with (
        spawn_serve(root, store) as url,
        Client(url, keys["app"]) as app,
        Client(url, keys["alice"]) as alice,
    ):
        (created,) = _proposals(app, CREATE)
        pid = created["proposalId"]
        alice.approve_proposal(pid)
        with pytest.raises(TransientExternal):
            alice.apply_proposal(pid)  # the server dies inside the applier
    monkeypatch.delenv("WF_DIE_IN_APPLY")
    with spawn_serve(root, store) as url, Client(url, keys["alice"]) as alice:
        row = alice.get_proposal(pid)
        assert row["status"] == "approved"
        with pytest.raises(Failure) as retried:
            alice.apply_proposal(pid)
        assert _reason(retried) == "PROPOSAL_APPLY_UNKNOWN"
        assert alice.get_proposal(pid)["status"] == "approved"
        ctx_id, call_id = row["apply"]["context_id"], row["apply"]["call_id"]
        assert alice.get_call(ctx_id, call_id)["state"] == "unknown"
    lines = (root / "data" / "apply-journal.txt").read_text().splitlines()
    assert lines == [pid]  # the applier ran once, and never again
    data = json.loads((root / "data" / "workflows.json").read_text())
    assert "onboarding" not in data["acme"]["definitions"]
