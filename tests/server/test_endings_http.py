"""Over HTTP: an approval past its lifetime is ``expired`` in ``GET /v1/approvals`` (also with
``?status=pending``), and ``charter serve``'s periodic upkeep records the expiry and frees the
run without anyone listing.

The server runs on a fake clock (shared with the test) so the lifetime passes without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx2
import pytest

from charter.client import Client
from charter.errors import PermissionDenied
from charter.runtime import open_runtime
from charter.server import create_app
from charter.testing.clock import FakeClock
from tests.server._harness import Project, ThreadServer, write_served_project

PUT = {"key": "k", "value": "v", "seconds": 0}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Project, FakeClock, ThreadServer]]:
    project = write_served_project(tmp_path / "served")
    clock = FakeClock(step=timedelta(0))

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(project.root, store="sqlite:///.charter/charter.db", clock=clock)

    with ThreadServer(create_app(opener=opener, maintain_s=0.05)) as live:
        yield project, clock, live


def pending_put(app: Client) -> tuple[dict[str, str], str]:
    ctx = app.resolve_context("all")
    out = app.call(ctx["context_id"], "kv.put", "w1", {"key": "k", "value": "v"})
    assert out.status.value == "pending_approval", out
    assert out.approval is not None
    return ctx, str(out.approval["id"])


def test_expired_approval_is_never_listed_as_pending(
    served: tuple[Project, FakeClock, ThreadServer],
) -> None:
    project, clock, server = served
    with (
        Client(server.url, project.keys["app"]) as app,
        Client(server.url, project.keys["alice"]) as alice,
    ):
        ctx, aid = pending_put(app)
        assert [r["approval_id"] for r in alice.approvals(status="pending")] == [aid]
        assert app.get_run(ctx["run_id"])["status"] == "input_required"
        clock.advance(timedelta(seconds=301))
        assert alice.approvals(status="pending") == []
        assert [r["approval_id"] for r in alice.approvals(status="expired")] == [aid]
        assert alice.get_approval(aid)["status"] == "expired"


def test_the_server_sweeps_expired_approvals_and_frees_the_run(
    served: tuple[Project, FakeClock, ThreadServer],
) -> None:
    project, clock, server = served
    with Client(server.url, project.keys["app"]) as app:
        ctx, _ = pending_put(app)
        clock.advance(timedelta(seconds=301))
        deadline = time.monotonic() + 10
        while app.get_run(ctx["run_id"])["status"] != "running":
            assert time.monotonic() < deadline, "the upkeep never freed the run"
            time.sleep(0.05)
        types = [e["type"] for e in app.events(ctx["run_id"])["events"]]
        assert types.count("approval_expired") == 1


def test_an_operator_cancels_a_run_over_http(
    served: tuple[Project, FakeClock, ThreadServer],
) -> None:
    project, _, server = served
    with (
        Client(server.url, project.keys["app"]) as app,
        Client(server.url, project.keys["alice"]) as alice,
        Client(server.url, project.keys["bob"]) as bob,
    ):
        ctx, _ = pending_put(app)
        with pytest.raises(PermissionDenied) as refused:
            app.cancel_run(ctx["run_id"], reason="an app may not")
        assert refused.value.reason == "ENDER_NOT_HUMAN"
        with pytest.raises(PermissionDenied) as foreign:
            bob.cancel_run(ctx["run_id"], reason="another tenant")
        assert foreign.value.reason == "RUN_NOT_FOUND"
        manifest = alice.cancel_run(ctx["run_id"], reason="wrong ticket")
        assert manifest["status"] == "cancelled"
        assert app.get_run(ctx["run_id"])["status"] == "cancelled"
        assert alice.verify_run(ctx["run_id"])["ok"] is True
        assert [r["status"] for r in alice.approvals()] == ["rejected"]


@pytest.mark.parametrize("ending", ["cancel", "fail"])
def test_no_context_is_resolved_over_http_in_a_run_that_has_ended(
    served: tuple[Project, FakeClock, ThreadServer], ending: str
) -> None:
    """``POST /v1/contexts`` naming an ended run is ``403 RUN_ENDED`` (the kernel's refusal),
    and nothing is recorded in the run; an open run of the tenant still takes contexts."""
    project, _, server = served
    with (
        Client(server.url, project.keys["app"]) as app,
        Client(server.url, project.keys["alice"]) as alice,
    ):
        ctx = app.resolve_context("all")
        again = app.resolve_context("reader", run_id=ctx["run_id"])
        assert again["run_id"] == ctx["run_id"]
        getattr(alice, f"{ending}_run")(ctx["run_id"], reason="done with it")
        events = app.events(ctx["run_id"])["events"]
        answer = httpx2.post(
            f"{server.url}/v1/contexts",
            json={"profile": "all", "run": ctx["run_id"]},
            headers={"Authorization": f"Bearer {project.keys['app']}"},
            timeout=30,
        )
        assert answer.status_code == 403, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        problem = answer.json()
        assert (problem["code"], problem["reason"]) == ("permission_denied", "RUN_ENDED")
        with pytest.raises(PermissionDenied) as refused:
            app.resolve_context("all", run_id=ctx["run_id"])
        assert refused.value.reason == "RUN_ENDED"
        assert app.events(ctx["run_id"])["events"] == events
