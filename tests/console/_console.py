"""Helpers for the console tests: sign in over HTTP, read CSRF tokens, seed an unknown call."""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path

import httpx2

from charter.ledger.events import NewEvent
from charter.runtime import open_runtime

STORE = "sqlite:///.charter/charter.db"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    assert found is not None, "no CSRF token in the page"
    return found.group(1)


OPEN: list[httpx2.Client] = []  # closed after each test (conftest)


def browser(url: str, origin: str | None = None) -> httpx2.Client:
    """A client that behaves like a browser posting forms of this site (sends ``Origin``)."""
    client = httpx2.Client(base_url=url, headers={"Origin": origin or url}, timeout=30)
    OPEN.append(client)
    return client


def sign_in(url: str, credential: str) -> tuple[httpx2.Client, httpx2.Response]:
    client = browser(url)
    page = client.get("/console/login")
    answer = client.post(
        "/console/login",
        data={"csrf_token": csrf_of(page.text), "credential": credential, "next": ""},
    )
    return client, answer


def signed_in(url: str, credential: str) -> httpx2.Client:
    client, answer = sign_in(url, credential)
    assert answer.status_code == 303, answer.text
    return client


def seed_unknown(root: Path, context_id: str, call_id: str) -> None:
    """A call left ``dispatching`` by a process that died, then reconciled to ``unknown``
    (what a crash mid-call leaves behind), written through a second runtime on the store."""

    async def go() -> None:
        async with open_runtime(root, store=STORE) as rt:
            kernel = rt.kernel
            ctx = await kernel.get_context(context_id)
            assert ctx is not None
            contract = rt.build.tool("kv.echo").contract
            await rt.store.append(
                ctx.run_id,
                [
                    NewEvent(
                        type="tool_progress",
                        payload={
                            "stage": "started",
                            "context_id": context_id,
                            "call_id": call_id,
                            "tool_id": contract.id,
                            "tool_version": contract.version,
                            "contract_digest": contract.digest,
                            "fingerprint": "hmac-sha256:test:00",
                            "tenant": ctx.tenant,
                            "actor": "app",
                            "summary": {"text": "hello"},
                            "idempotency_key": f"idk-{call_id}",
                            "owner": {"host": socket.gethostname(), "pid": 2**22 + 7, "start": "0"},
                            "task_id": None,
                            "mode": "enforce",
                            "run_call_budget": 1000,
                        },
                    )
                ],
            )
            await kernel.reconcile()

    asyncio.run(go())


def seed_late_result(root: Path, context_id: str, call_id: str) -> None:
    """An executor's answer that arrived after ``call_id`` was reconciled to unknown."""

    async def go() -> None:
        async with open_runtime(root, store=STORE) as rt:
            ctx = await rt.kernel.get_context(context_id)
            assert ctx is not None
            receipt = {"status": "succeeded", "data": {"echo": "late hello"}, "error": None}
            await rt.store.append(
                ctx.run_id,
                [
                    NewEvent(
                        type="tool_progress",
                        payload={
                            "stage": "late_result",
                            "context_id": context_id,
                            "call_id": call_id,
                            "call_state": "unknown",
                            "receipt": receipt,
                        },
                    )
                ],
            )

    asyncio.run(go())
