"""``charter demo tutoring-panel``: the governed flow against a separate HTTP executor.

Starts the example's executor process (``executor/server.py``) on a free loopback port,
points a copy of the deployment file at it, then: readiness → context → read tools → a write
that waits for approval → the application may not approve → a teacher approves → re-submit →
the receipt on repetition → the ledger verifies. The executor is stopped at the end.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from charter.cli._output import console, print_step, print_table, show_envelope
from charter.errors import UserError
from charter.ledger.verify import verify_run
from charter.project.build import build_project, save_build
from charter.runtime import ledger_key_for, open_runtime

DEFAULT_URL = "http://127.0.0.1:8765"
DEMO_DEPLOY = Path(".charter") / "demo.deploy.yaml"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise UserError(f"the executor process exited with code {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise UserError(f"the executor did not listen on port {port} within {timeout_s:g} s")


@contextmanager
def running_executor(directory: Path) -> Iterator[str]:
    """Start ``executor/server.py`` on a free port; yield its URL; stop it on exit."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    process = subprocess.Popen(
        [sys.executable, str(directory / "executor" / "server.py"), "--port", str(port)],
        cwd=directory,
        env=env,
        start_new_session=True,
    )
    try:
        _wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def demo_deployment(directory: Path, url: str) -> Path:
    """A copy of the deployment file bound to ``url`` (paths made relative to its folder)."""
    text = (directory / "charter.deploy.yaml").read_text(encoding="utf-8")
    if DEFAULT_URL not in text:
        raise UserError(f"charter.deploy.yaml no longer binds the tools to {DEFAULT_URL}")
    text = text.replace(DEFAULT_URL, url).replace("{file: .charter/", "{file: ")
    target = directory / DEMO_DEPLOY
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target


async def tutoring_demo(directory: Path) -> bool:
    directory = directory.resolve()
    b = build_project(directory)
    save_build(b, directory)
    print_step("1. Build", f" {b.digest} ({len(b.tools)} tools)")
    with running_executor(directory) as url:
        deploy = demo_deployment(directory, url)
        print_step("2. Executor", f" started at {url} (executor/server.py)")
        async with open_runtime(directory, deploy=deploy) as rt:
            report = await rt.readiness(fresh=True)
            table = Table(title="3. Readiness (charter check)", title_justify="left")
            for col in ("tool", "executor", "version", "digest", "status"):
                table.add_column(col)
            for t in report.tools:
                cells = (
                    t.tool_id,
                    t.executor,
                    f"{t.expected_version} = {t.reported_version}",
                    (t.reported_digest or "-")[:19],
                    t.status if t.ready else f"{t.status} {t.reason}",
                )
                table.add_row(*(escape(str(cell)) for cell in cells))
            print_table(table)
            ctx = await rt.resolve_context("panel", "panel", agent="tutor")
            print_step(
                "4. Context",
                f" {ctx.context_id} for the side panel (tenant northside), "
                f"run {ctx.run_id}; tools: {', '.join(t.id for t in ctx.tools)}",
            )
            show_envelope(
                "5. panel searches math courses (read, over HTTP)",
                await rt.call(
                    ctx.context_id, "courses.search", "s1", {"subject": "math"}, as_="panel"
                ),
            )
            show_envelope(
                "6. panel reads Ben's progress",
                await rt.call(
                    ctx.context_id, "learners.progress", "p1", {"learner_id": "l-ben"}, as_="panel"
                ),
            )
            enroll = {"learner_id": "l-ben", "course_id": "alg-1"}
            first = await rt.call(ctx.context_id, "enrollments.create", "e1", enroll, as_="panel")
            show_envelope("7. panel enrolls Ben in Algebra I (a write)", first)
            if first.approval is None:
                return False
            try:
                await rt.approve(first.approval["id"], as_="panel")
            except Exception as exc:
                print_step("8. panel tries to approve its own call", f": refused — {exc}")
            await rt.approve(first.approval["id"], as_="rivera", reason="Ben asked for it")
            print_step("9. rivera (teacher, operator) approves", f" {first.approval['id']}")
            done = await rt.call(ctx.context_id, "enrollments.create", "e1", enroll, as_="panel")
            show_envelope("10. panel re-submits: the executor enrolls Ben", done)
            show_envelope(
                "11. the same call id again: the recorded receipt, nothing runs twice",
                await rt.call(ctx.context_id, "enrollments.create", "e1", enroll, as_="panel"),
            )
            show_envelope(
                "12. Ben's progress now",
                await rt.call(
                    ctx.context_id, "learners.progress", "p2", {"learner_id": "l-ben"}, as_="panel"
                ),
            )
            ledger = await verify_run(rt.store, ctx.run_id, ledger_key_for(directory, deploy))
            print_step(
                "13. Ledger",
                f" {ledger.run_id}: "
                f"{'verified' if ledger.ok else 'FAILED ' + str(ledger.reason)} "
                f"({ledger.events} events)",
            )
            ok = ledger.ok and done.status.value == "succeeded" and report.ready
    console.print("[bold]14. Executor[/] stopped")
    return ok
