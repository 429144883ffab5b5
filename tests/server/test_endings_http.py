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
