"""The console against a careless or hostile browser: tokens and cookies with characters a
constant-time comparison of ``str`` refuses (anything not ASCII). Each is a refusal — a
sign-in page, a 403 or a redirect to sign in — never a 500."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path
from urllib.parse import urlsplit

from charter.client import Client
from charter.runtime import open_runtime
from charter.server import create_app
from tests.console._console import STORE, browser, csrf_of, sign_in, signed_in
from tests.server._harness import Project, ThreadServer, write_served_project


def raw_get(url: str, path: str, header: bytes) -> bytes:
    """One GET with a header whose bytes are sent as they are (latin-1, not ASCII)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n".encode()
            + header
            + b"\r\nConnection: close\r\n\r\n"
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data.split(b"\r\n", 1)[0]


def test_a_non_ascii_signin_token_is_refused_not_a_500(
    server: ThreadServer, project: Project
) -> None:
    client = browser(server.url)
    client.get("/console/login")
    answer = client.post(
        "/console/login", data={"csrf_token": "é" * 12, "credential": project.keys["alice"]}
    )
    assert answer.status_code == 403, answer.text
    assert "sign-in form expired" in answer.text
    assert "charter_console=" not in answer.headers.get("set-cookie", "")


def test_a_non_ascii_csrf_token_on_a_console_form_is_csrf_invalid(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    client = signed_in(server.url, project.keys["alice"])
    ctx = clients["app"].resolve_context("all")
    env = clients["app"].call(ctx["context_id"], "kv.put", "hostile-1", {"key": "h", "value": "v"})
    assert env.approval is not None
    approval_id = env.approval["id"]
    answer = client.post(f"/console/approvals/{approval_id}/approve", data={"csrf_token": "é"})
    assert answer.status_code == 403, answer.text
    assert "CSRF_INVALID" in answer.text
    assert clients["alice"].get_approval(approval_id)["status"] == "pending"
    token = csrf_of(client.get("/console/approvals").text)
    client.post(f"/console/approvals/{approval_id}/reject", data={"csrf_token": token})


def test_non_ascii_cookies_are_no_session(server: ThreadServer, project: Project) -> None:
    session = signed_in(server.url, project.keys["alice"]).cookies["charter_console"]
    for cookie in (
        b"charter_console=\xc3\xa9.\xc3\xa9",
        b"charter_console=" + session.encode()[:-1] + b"\xe9",
    ):
        status = raw_get(server.url, "/console/approvals", b"Cookie: " + cookie)
        assert status == b"HTTP/1.1 303 See Other", (cookie, status)


def test_an_api_key_with_two_dots_signs_in_without_jwt(tmp_path: Path) -> None:
    """A deployment without ``jwt:`` whose operator key looks like a JWT (``a.b.c``): the key
    is an API key, the session gets the normal lifetime (no 500 reading a token's ``exp``)."""
    root = write_served_project(tmp_path)
    deploy = root.root / "charter.deploy.yaml"
    text = deploy.read_text()
    key = "sk.live.0123456789abcdef"
    start = text.index("jwt:")
    end = text.index("principals:")
    text = text[:start] + text[end:]
    old = hashlib.sha256(root.keys["alice"].encode()).hexdigest()
    deploy.write_text(text.replace(old, hashlib.sha256(key.encode()).hexdigest()))

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root.root, store=STORE)

    with ThreadServer(create_app(opener=opener)) as live:
        _, answer = sign_in(live.url, key)
        assert answer.status_code == 303, answer.text
        assert "charter_console=" in answer.headers["set-cookie"]


def test_a_run_stream_position_out_of_range_is_a_422_page(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    """``?after=`` beyond any sequence number is refused before the stream starts (it used to
    overflow the store's integer inside the stream); a non-number is an HTML 422 page that
    does not echo what was sent."""
    client = signed_in(server.url, project.keys["alice"])
    run = clients["app"].create_run()
    for after in ("99999999999999999999999", "-1", "zz-not-a-number"):
        answer = client.get(f"/console/runs/{run['run_id']}/stream", params={"after": after})
        assert answer.status_code == 422, (after, answer.text)
        assert answer.headers["content-type"].startswith("text/html")
        assert 'data-reason="REQUEST_INVALID"' in answer.text
        assert after not in answer.text


def test_a_console_reason_is_capped_like_the_api_one(
    server: ThreadServer, project: Project, clients: dict[str, Client]
) -> None:
    """The API refuses a decision or ending reason over 2048 characters; the console's forms
    do too, before anything is recorded."""
    client = signed_in(server.url, project.keys["alice"])
    token = csrf_of(client.get("/console/approvals").text)
    run = clients["app"].create_run()
    ctx = clients["app"].resolve_context("all")
    env = clients["app"].call(ctx["context_id"], "kv.put", "hostile-2", {"key": "r", "value": "v"})
    assert env.approval is not None
    long = "x" * 2049
    posts = [
        (f"/console/runs/{run['run_id']}/cancel", {"csrf_token": token, "reason": long}),
        (
            f"/console/approvals/{env.approval['id']}/approve",
            {"csrf_token": token, "reason": long},
        ),
    ]
    for path, data in posts:
        answer = client.post(path, data=data)
        assert answer.status_code == 422, (path, answer.text)
        assert 'data-reason="REASON_TOO_LONG"' in answer.text
    assert clients["app"].get_run(run["run_id"])["status"] == "running"
    assert clients["alice"].get_approval(env.approval["id"])["status"] == "pending"
    client.post(f"/console/approvals/{env.approval['id']}/reject", data={"csrf_token": token})


def test_rotating_an_operators_key_ends_the_sessions_signed_in_with_the_old_one(
    tmp_path: Path,
) -> None:
    """A console session outlives a restart (replicas and restarts share its MAC key); it
    used to outlive the rotation of the operator's leaked API key as well, for up to 8 h."""
    root = write_served_project(tmp_path)
    deploy = root.root / "charter.deploy.yaml"

    def opener():  # type: ignore[no-untyped-def]
        return open_runtime(root.root, store=STORE)

    with ThreadServer(create_app(opener=opener)) as live:
        kept = signed_in(live.url, root.keys["alice"])
        cookies = dict(kept.cookies)
    with ThreadServer(create_app(opener=opener)) as live:  # a restart, the same key
        again = browser(live.url)
        again.cookies.update(cookies)
        assert again.get("/console/approvals").status_code == 200
    old = hashlib.sha256(root.keys["alice"].encode()).hexdigest()
    new_key = "rotated-0123456789abcdef"
    deploy.write_text(deploy.read_text().replace(old, hashlib.sha256(new_key.encode()).hexdigest()))
    with ThreadServer(create_app(opener=opener)) as live:  # the key rotated
        stale = browser(live.url)
        stale.cookies.update(cookies)
        page = stale.get("/console/approvals")
        assert page.status_code == 303, page.status_code
        assert "/console/login" in page.headers["location"]
        fresh = signed_in(live.url, new_key)
        assert fresh.get("/console/approvals").status_code == 200
