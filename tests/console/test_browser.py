"""The console in a real browser: Debian's Chromium driven by Playwright (the Python package
only — no browser is downloaded; ``CHARTER_CHROMIUM`` overrides ``/usr/bin/chromium``).

Sign in, watch a pending approval arrive live while a test client submits a write call,
approve it, watch the run timeline show the dispatch and the result without a reload,
reject another, verify the ledger, visit every page; watch a proposal arrive live, approve
and apply it, see another proposal's status change without a reload — with no console
errors and no failed requests. Screenshots go to ``test-output/console/`` (and, with
``CHARTER_DOCS_SCREENSHOTS=1``, to ``docs/img/`` for docs/console.md).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect, sync_playwright

from charter.client import Client
from tests.console._copilot import Copilot, propose
from tests.server._harness import Project, ThreadServer

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = Path(os.environ.get("CHARTER_TEST_OUTPUT", ROOT / "test-output")) / "console"
DOCS_IMG = ROOT / "docs" / "img"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LIVE_MS = 15_000  # how long to wait for a live update before failing


def chromium_path() -> str:
    path = os.environ.get("CHARTER_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.fail(
            f"Chromium not found at {path}: install Debian's browser with "
            "`apt-get install -y chromium` (or set CHARTER_CHROMIUM); the browser tests "
            "never download one"
        )
    return path


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    executable = chromium_path()
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 860},
        )
        try:
            yield browser
        finally:
            browser.close()


class Problems:
    """Console errors, page errors and failed requests seen by a page."""

    def __init__(self, page: Page) -> None:
        self.seen: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.seen.append(f"page error: {exc}"))
        page.on("requestfailed", self._failed)
        page.on("response", self._response)

    def _console(self, message: object) -> None:
        if getattr(message, "type", "") == "error":
            self.seen.append(f"console error: {getattr(message, 'text', '')}")

    def _failed(self, request: object) -> None:
        url = str(getattr(request, "url", ""))
        failure = str(getattr(request, "failure", ""))
        if (url.endswith("/stream") or "/stream?" in url) and "ERR_ABORTED" in failure:
            return  # an event stream closed because the page navigated away
        self.seen.append(f"request failed: {url} {failure}")

    def _response(self, response: object) -> None:
        status = int(getattr(response, "status", 0))
        if status >= 400:
            self.seen.append(f"HTTP {status}: {getattr(response, 'url', '')}")


def shot(page: Page, name: str, *, full_page: bool = False) -> None:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    path = OUTPUT / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    if os.environ.get("CHARTER_DOCS_SCREENSHOTS") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMG / f"{name}.png")


def write_call(app: Client, context_id: str, call_id: str) -> str:
    env = app.call(context_id, "kv.put", call_id, {"key": call_id, "value": "from the agent"})
    assert env.status.value == "pending_approval"
    assert env.approval is not None
    return str(env.approval["id"])


def test_operator_approves_live_in_the_browser(
    context: BrowserContext, server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    page = context.new_page()
    problems = Problems(page)
    page.goto(f"{server.url}/console/approvals")
    expect(page).to_have_url(f"{server.url}/console/login?next=/console/approvals")
    page.get_by_test_id("credential").fill(project.keys["alice"])
    page.get_by_test_id("sign-in").click()
    expect(page.get_by_test_id("whoami")).to_have_text("alice · acme")
    expect(page.get_by_test_id("approvals-empty")).to_be_visible()

    # An agent asks for a write while the operator watches the inbox.
    app = clients["app"]
    ctx = app.resolve_context("all", objective="file the weekly report")
    first = write_call(app, ctx["context_id"], "write-1")
    card = page.locator(f'[data-testid="approval"][data-approval-id="{first}"]')
    expect(card).to_be_visible(timeout=LIVE_MS)
    expect(card.get_by_test_id("requested-by")).to_have_text("app")
    expect(card.get_by_test_id("danger")).to_have_text("danger: high")
    expect(card.get_by_test_id("time-left")).to_contain_text("m ")
    shot(page, "console-inbox")

    card.get_by_test_id("reason").fill("matches the change ticket")
    card.get_by_test_id("approve").click()
    expect(page.get_by_test_id("notice")).to_have_text(f"Approval {first} approved.")
    expect(page.locator(f'[data-approval-id="{first}"][data-status="approved"]')).to_be_visible()

    # The run page follows the run live: the agent retries with the approval.
    page.goto(f"{server.url}/console/runs/{ctx['run_id']}")
    timeline = page.get_by_test_id("timeline")
    expect(timeline.locator('[data-type="approval_approved"]')).to_have_count(1)
    page.evaluate("document.body.dataset.notReloaded = 'yes'")
    expect(page.locator('[data-testid="call-row"][data-call-id="write-1"]')).to_have_attribute(
        "data-state", "pending_approval"
    )
    env = app.call(
        ctx["context_id"],
        "kv.put",
        "write-1",
        {"key": "write-1", "value": "from the agent"},
        approval_id=first,
    )
    assert env.status.value == "succeeded"
    expect(timeline.locator('[data-type="approval_consumed"]')).to_have_count(1, timeout=LIVE_MS)
    expect(timeline.locator('[data-type="tool_progress"]')).to_have_count(2, timeout=LIVE_MS)
    expect(timeline.locator('[data-type="tool_call_recorded"]')).to_have_count(1, timeout=LIVE_MS)
    expect(page.locator('[data-testid="call-row"][data-call-id="write-1"]')).to_have_attribute(
        "data-state", "succeeded", timeout=LIVE_MS
    )
    assert page.evaluate("document.body.dataset.notReloaded") == "yes"
    shot(page, "console-run")

    page.get_by_test_id("verify").click()
    expect(page.get_by_test_id("verify-result")).to_have_attribute("data-ok", "true")

    # Another write: rejected from the inbox.
    page.get_by_test_id("nav-approvals").click()
    second = write_call(app, ctx["context_id"], "write-2")
    card = page.locator(f'[data-testid="approval"][data-approval-id="{second}"]')
    expect(card).to_be_visible(timeout=LIVE_MS)
    card.get_by_test_id("reason").fill("not during the freeze")
    card.get_by_test_id("reject").click()
    expect(page.get_by_test_id("notice")).to_have_text(f"Approval {second} rejected.")
    assert clients["alice"].get_approval(second)["status"] == "rejected"

    for slug in ("runs", "attention", "readiness", "audit"):
        page.get_by_test_id(f"nav-{slug}").click()
        expect(page.get_by_test_id(f"nav-{slug}")).to_have_attribute("aria-current", "page")
    page.get_by_test_id("nav-runs").click()
    page.locator(f'[data-run-id="{ctx["run_id"]}"] a').click()
    expect(page.get_by_test_id("run-id")).to_have_text(ctx["run_id"])
    page.get_by_test_id("sign-out").click()
    expect(page.get_by_test_id("signin-form")).to_be_visible()
    page.close()
    assert problems.seen == []


def test_application_credential_cannot_sign_in(
    context: BrowserContext, server: ThreadServer, project: Project
) -> None:
    page = context.new_page()
    page.goto(f"{server.url}/console/login")
    page.get_by_test_id("credential").fill(project.keys["app"])
    page.get_by_test_id("sign-in").click()
    expect(page.get_by_test_id("signin-error")).to_contain_text("application credential")
    page.close()


def test_operator_applies_a_proposal_in_the_browser(
    context: BrowserContext, copilot_server: ThreadServer, copilot: Copilot
) -> None:
    url = copilot_server.url
    page = context.new_page()
    problems = Problems(page)
    page.goto(f"{url}/console/proposals")
    page.get_by_test_id("credential").fill(copilot.keys["alice"])
    page.get_by_test_id("sign-in").click()
    expect(page.get_by_test_id("nav-proposals")).to_have_attribute("aria-current", "page")
    expect(page.get_by_test_id("proposals-empty")).to_be_visible()

    # The copilot proposes a workflow while the operator watches the list.
    (created,) = propose(url, copilot.keys["app"], "please create onboarding")
    pid = created["proposalId"]
    row = page.locator(f'[data-testid="proposal-row"][data-proposal-id="{pid}"]')
    expect(row).to_be_visible(timeout=LIVE_MS)
    expect(row).to_have_attribute("data-status", "validated")
    row.get_by_test_id("proposal-link").click()
    expect(page.get_by_test_id("proposal-id")).to_have_text(pid)
    status = page.get_by_test_id("proposal-status")
    expect(status).to_have_text("validated")
    expect(page.get_by_test_id("kind")).to_have_text("workflow")
    expect(page.get_by_test_id("rationale")).to_have_text("Send a welcome e-mail, then wait.")
    added = page.get_by_test_id("diff-added").get_by_test_id("diff-item")
    expect(added).to_have_count(2)
    expect(added.first).to_contain_text("SendEmail")
    expect(page.get_by_test_id("diagnostics-empty")).to_be_visible()

    page.get_by_test_id("reason").fill("reviewed the graph")
    page.get_by_test_id("approve").click()
    expect(page.get_by_test_id("notice")).to_have_text(f"Proposal {pid} approved.")
    expect(status).to_have_text("approved")
    page.get_by_test_id("confirm").check()
    shot(page, "console-proposal", full_page=True)
    page.get_by_test_id("apply").click()
    expect(page.get_by_test_id("notice")).to_have_text(f"Proposal {pid} applied.")
    expect(status).to_have_text("applied")
    expect(page.get_by_test_id("applied-result")).to_contain_text('"definition_id": "onboarding"')
    expect(page.get_by_test_id("no-action")).to_be_visible()

    # Another proposal, approved elsewhere while its page is open: the status follows.
    (other,) = propose(url, copilot.keys["app"], "please create billing")
    page.goto(f"{url}/console/proposals/{other['proposalId']}")
    expect(status).to_have_text("validated")
    page.evaluate("document.body.dataset.notReloaded = 'yes'")
    with Client(url, copilot.keys["alice"]) as api:
        api.approve_proposal(other["proposalId"], reason="approved through the API")
    expect(status).to_have_text("approved", timeout=LIVE_MS)
    expect(page.get_by_test_id("history")).to_contain_text("approved through the API")
    assert page.evaluate("document.body.dataset.notReloaded") == "yes"

    page.get_by_test_id("back-to-proposals").click()
    page.get_by_test_id("filter-status").select_option("applied")
    page.get_by_test_id("filter-apply").click()
    expect(page.locator('[data-testid="proposal-row"]')).to_have_count(1)
    expect(row).to_have_attribute("data-status", "applied")
    page.close()
    assert problems.seen == []
