"""The proposals pages through the app on a real loopback server (the workflow-copilot
example, its scripted model drafting the proposals): the list and its status filter, a
proposal's page, and every form — approve, reject, apply — with its refusals: a stale
baseline (409), a proposal that no longer validates (422), an illegal transition (400), a
missing permission (403), an unconfirmed apply, missing CSRF, a foreign Origin, and another
tenant's id (404)."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx2
from fastapi import FastAPI

from charter.client import Client
from tests.console._console import csrf_of, signed_in
from tests.console._copilot import Copilot, propose
from tests.server._harness import ThreadServer

_SEEN = re.compile(r'sse-connect="(/console/proposals/[^"]+)"')


def _one(server: ThreadServer, copilot: Copilot, message: str) -> str:
    (created,) = propose(server.url, copilot.keys["app"], message)
    return str(created["proposalId"])


def _post(
    client: httpx2.Client, pid: str, action: str, **data: str
) -> tuple[httpx2.Response, httpx2.Response | None]:
    """Post a proposal form with the page's CSRF token; follow a redirect once."""
    token = csrf_of(client.get(f"/console/proposals/{pid}").text)
    answer = client.post(f"/console/proposals/{pid}/{action}", data={"csrf_token": token, **data})
    after = client.get(answer.headers["location"]) if answer.status_code == 303 else None
    return answer, after


def _status(html: str) -> str:
    found = re.search(r'data-testid="proposal-status" data-status="([^"]+)"', html)
    assert found is not None
    return found.group(1)


def _refusal(answer: httpx2.Response, status: int, reason: str) -> None:
    assert answer.status_code == status, answer.text
    assert f'data-testid="action-error" data-reason="{reason}" data-status="{status}"' in (
        answer.text
    )
    assert 'data-testid="action-hint"' in answer.text


def test_list_filter_detail_and_reject(copilot_server: ThreadServer, copilot: Copilot) -> None:
    server = copilot_server
    bob = signed_in(server.url, copilot.keys["bob"])
    assert 'data-testid="proposals-empty"' in bob.get("/console/proposals").text
    pid = _one(server, copilot, "create onboarding")
    alice = signed_in(server.url, copilot.keys["alice"])
    listing = alice.get("/console/proposals")
    assert listing.status_code == 200
    assert 'data-testid="nav-proposals" aria-current="page"' in listing.text
    assert f'data-proposal-id="{pid}" data-status="validated"' in listing.text
    assert pid in alice.get("/console/proposals", params={"status": "validated"}).text
    assert pid not in alice.get("/console/proposals", params={"status": "applied"}).text
    assert pid in alice.get("/console/proposals", params={"status": "bogus"}).text  # = any

    page = alice.get(f"/console/proposals/{pid}")
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "<script>" not in page.text
    for fact in (
        'data-testid="kind">workflow',
        'data-testid="target">a new one',
        'data-testid="baseline">—',
        'data-testid="rationale">Send a welcome e-mail, then wait.',
        'data-testid="warnings-empty"',
        'data-testid="diagnostics-empty"',
        'data-testid="diff-added"',
        'data-label="a1"',
        'data-label="a2"',
        "SendEmail",
        'data-testid="diff-removed-none"',
        'data-testid="diff-changed-none"',
        'data-testid="approve"',
        'data-testid="reject"',
        'data-testid="requested-by">app',
    ):
        assert fact in page.text, fact
    assert _status(page.text) == "validated"

    # another tenant's operator: absent from the list, 404 for the page, stream and forms
    assert pid not in bob.get("/console/proposals").text
    for path in (f"/console/proposals/{pid}", f"/console/proposals/{pid}/stream"):
        missing = bob.get(path)
        assert missing.status_code == 404
        assert "PROPOSAL_NOT_FOUND" in missing.text
    token = csrf_of(bob.get("/console/proposals").text)
    for action in ("approve", "reject", "apply"):
        answer = bob.post(
            f"/console/proposals/{pid}/{action}", data={"csrf_token": token, "confirm": "yes"}
        )
        assert answer.status_code == 404
        assert "PROPOSAL_NOT_FOUND" in answer.text

    answer, after = _post(alice, pid, "reject", reason="we onboard by hand")
    assert answer.status_code == 303
    assert after is not None
    assert f"Proposal {pid} rejected." in after.text
    assert _status(after.text) == "rejected"
    assert 'data-testid="history-row" data-status="rejected"' in after.text
    assert "we onboard by hand" in after.text
    assert 'data-testid="no-action"' in after.text
    assert pid in alice.get("/console/proposals", params={"status": "rejected"}).text
    again, _ = _post(alice, pid, "reject")
    _refusal(again, 400, "PROPOSAL_ILLEGAL_TRANSITION")


def test_approve_then_apply_and_the_refusals(
    copilot_server: ThreadServer, copilot: Copilot
) -> None:
    server = copilot_server
    pid = _one(server, copilot, "create billing")
    alice = signed_in(server.url, copilot.keys["alice"])
    api = Client(server.url, copilot.keys["alice"])
    try:
        early, _ = _post(alice, pid, "apply", confirm="yes")
        _refusal(early, 400, "PROPOSAL_ILLEGAL_TRANSITION")
        assert _status(early.text) == "validated"

        page = alice.get(f"/console/proposals/{pid}")
        token = csrf_of(page.text)
        missing = alice.post(f"/console/proposals/{pid}/approve", data={"reason": "x"})
        assert missing.status_code == 403
        assert "CSRF_INVALID" in missing.text
        foreign = alice.post(
            f"/console/proposals/{pid}/approve",
            data={"csrf_token": token},
            headers={"Origin": "https://evil.example"},
        )
        assert foreign.status_code == 403
        assert "ORIGIN_MISMATCH" in foreign.text
        carol = signed_in(server.url, copilot.keys["carol"])
        stolen = carol.post(f"/console/proposals/{pid}/approve", data={"csrf_token": token})
        assert stolen.status_code == 403  # a token belongs to one session
        assert api.get_proposal(pid)["status"] == "validated"

        # carol may approve but not apply
        answer, after = _post(carol, pid, "approve", reason="matches the ticket")
        assert answer.status_code == 303
        assert after is not None
        assert f"Proposal {pid} approved." in after.text
        assert _status(after.text) == "approved"
        assert 'data-testid="apply-form"' in after.text
        assert 'data-testid="permission-note"' in after.text
        assert "matches the ticket" in after.text
        denied, _ = _post(carol, pid, "apply", confirm="yes")
        _refusal(denied, 403, "PROPOSAL_PERMISSION_MISSING")

        unconfirmed, _ = _post(alice, pid, "apply")
        _refusal(unconfirmed, 422, "CONFIRMATION_REQUIRED")
        assert api.get_proposal(pid)["status"] == "approved"

        answer, after = _post(alice, pid, "apply", confirm="yes")
        assert answer.status_code == 303
        assert after is not None
        assert f"Proposal {pid} applied." in after.text
        assert _status(after.text) == "applied"
        assert 'data-testid="applied-result">Applied by alice' in after.text
        assert "&#34;definition_id&#34;: &#34;billing&#34;" in after.text
        row = api.get_proposal(pid)
        assert row["status"] == "applied"
        assert row["applied"]["result"] == {"definition_id": "billing", "version": 1}
        twice, _ = _post(alice, pid, "apply", confirm="yes")
        _refusal(twice, 400, "PROPOSAL_ILLEGAL_TRANSITION")
        verified = alice.get(f"/console/runs/{row['run_id']}", params={"verify": "1"})
        assert 'data-testid="verify-result" data-ok="true"' in verified.text
    finally:
        api.close()


def test_stale_baseline_is_a_409_with_fresh_diagnostics(
    copilot_server: ThreadServer, copilot: Copilot
) -> None:
    server = copilot_server
    alice = signed_in(server.url, copilot.keys["alice"])
    base = _one(server, copilot, "create invoices")
    assert _post(alice, base, "approve")[0].status_code == 303
    assert _post(alice, base, "apply", confirm="yes")[0].status_code == 303

    updates = propose(server.url, copilot.keys["app"], "update invoices")
    first, second = (p["proposalId"] for p in updates)
    page = alice.get(f"/console/proposals/{first}").text
    assert 'data-testid="target"><code>invoices</code>' in page
    assert 'data-testid="baseline">version 1' in page
    assert 'data-label="i3"' in page.split('data-testid="diff-added"')[1]
    page = alice.get(f"/console/proposals/{second}").text
    assert 'data-label="i1"' in page.split('data-testid="diff-changed"')[1]
    assert 'data-label="i2"' in page.split('data-testid="diff-removed"')[1]

    for pid in (first, second):
        assert _post(alice, pid, "approve")[0].status_code == 303
    assert _post(alice, first, "apply", confirm="yes")[0].status_code == 303
    stale, _ = _post(alice, second, "apply", confirm="yes")
    _refusal(stale, 409, "PROPOSAL_BASELINE_STALE")
    assert 'data-testid="fresh-diagnostics"' in stale.text
    assert 'data-code="baseline.stale" data-severity="error"' in stale.text
    assert _status(stale.text) == "approved"


def test_no_longer_valid_is_a_422(copilot_server: ThreadServer, copilot: Copilot) -> None:
    server = copilot_server
    alice = signed_in(server.url, copilot.keys["alice"])
    created = propose(server.url, copilot.keys["app"], "create reports twice")
    assert [c["status"] for c in created] == ["validated", "validated"]
    first, second = (c["proposalId"] for c in created)
    for pid in (first, second):
        assert _post(alice, pid, "approve")[0].status_code == 303
    assert _post(alice, first, "apply", confirm="yes")[0].status_code == 303
    invalid, _ = _post(alice, second, "apply", confirm="yes")
    _refusal(invalid, 422, "PROPOSAL_INVALID")
    assert 'data-code="definition.exists"' in invalid.text
    assert _status(invalid.text) == "approved"


def test_blocked_proposal_shows_diagnostics_and_can_only_be_rejected(
    copilot_server: ThreadServer, copilot: Copilot
) -> None:
    server = copilot_server
    pid = _one(server, copilot, "create broken")
    alice = signed_in(server.url, copilot.keys["alice"])
    page = alice.get(f"/console/proposals/{pid}").text
    assert _status(page) == "blocked"
    assert 'data-testid="diagnostics"' in page
    assert 'data-code="activity.unavailable" data-severity="error"' in page
    assert "<code>/activities/0/type</code>" in page
    assert "&#39;Teleport&#39; is not available" in page
    assert 'data-testid="approve"' not in page
    assert 'data-testid="reject"' in page
    refused, _ = _post(alice, pid, "approve")
    _refusal(refused, 400, "PROPOSAL_ILLEGAL_TRANSITION")
    answer, after = _post(alice, pid, "reject", reason="no such activity")
    assert answer.status_code == 303
    assert after is not None
    assert _status(after.text) == "rejected"


def test_live_streams_send_changes(copilot_server: ThreadServer, copilot: Copilot) -> None:
    server = copilot_server
    pid = _one(server, copilot, "create broken")
    alice = signed_in(server.url, copilot.keys["alice"])
    listing = alice.get("/console/proposals")
    stream_url = _SEEN.search(listing.text)
    assert stream_url is not None
    with alice.stream("GET", "/console/proposals/stream") as stream:  # no `seen`: sends at once
        assert stream.headers["content-type"].startswith("text/event-stream")
        frame = _first_data(stream)
    assert "event: proposals" in frame[0]
    assert any(pid in line for line in frame)

    page = alice.get(f"/console/proposals/{pid}")
    stream_url = _SEEN.search(page.text)
    assert stream_url is not None
    seen_url = stream_url.group(1).replace("&amp;", "&")
    _post(alice, pid, "reject", reason="changed while watching")
    with alice.stream("GET", seen_url) as stream:  # the page's state: the change is sent
        frame = _first_data(stream)
    assert "event: status" in frame[0]
    assert any('data-status="rejected"' in line for line in frame)


def _first_data(stream: httpx2.Response) -> list[str]:
    """The lines of the first SSE frame that carries data (``event:`` line first)."""
    lines: list[str] = []
    for line in stream.iter_lines():
        if line.startswith("event:"):
            lines = [line]
        elif line.startswith("data:"):
            lines.append(line)
        elif line == "" and len(lines) > 1:
            return lines
    raise AssertionError("the stream ended without data")


def test_expired_proposal_is_refused(
    copilot_app: FastAPI, copilot_server: ThreadServer, copilot: Copilot
) -> None:
    server = copilot_server
    pid = _one(server, copilot, "create onboarding")
    alice = signed_in(server.url, copilot.keys["alice"])
    token = csrf_of(alice.get(f"/console/proposals/{pid}").text)
    kernel = copilot_app.state.charter.runtime.kernel
    real = kernel.clock
    kernel.clock = lambda: real() + timedelta(days=8)  # past the proposal's 7-day lifetime
    try:
        answer = alice.post(f"/console/proposals/{pid}/approve", data={"csrf_token": token})
    finally:
        kernel.clock = real
    _refusal(answer, 400, "PROPOSAL_ILLEGAL_TRANSITION")
    assert "cannot approve the proposal: it is expired" in answer.text
    assert _status(answer.text) == "expired"
    assert pid in alice.get("/console/proposals", params={"status": "expired"}).text
