"""A whole project, hunted for canaries as an attacker would (SQLite and PostgreSQL).

Secrets go in as argument values, as object keys, inside URLs, and come back from the tools
percent-encoded, base64-encoded (standard, URL-safe, inside a longer base64 text), JSON-
escaped, in exception messages and as an artifact name; they travel through the Python API,
``charter serve`` over HTTP, MCP (the official SDK client on the server's ``/mcp/all``, and
on a ``charter mcp`` subprocess over stdio at DEBUG — its raw stdout and stderr kept) and
chat (a scripted model that also streams a secret split over two deltas). Then the database
(SQLite: the main file, ``-wal`` and ``-shm``; PostgreSQL: ``pg_dump``), the audit JSONL, the
server's stdout and stderr at DEBUG, the run exports and the raw SSE streams are searched for
every canary in every common encoding. A non-secret argument value of tools without
``audit`` pointers must be absent too; an audited value must be present (the positive
control that shows the scan can find something).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client as McpClient
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from charter.client import Client
from charter.kernel.envelope import CallStatus
from charter.runtime import open_runtime
from tests.privacy._project import Canaries, PrivacyProject, write_privacy_project
from tests.server._harness import free_port
from tests.stores.conftest import create_database, drop_database

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
CHARTER = Path(sys.executable).with_name("charter")


def needles(value: str) -> set[str]:
    """A canary in every common encoding (and its random part alone)."""
    raw = value.encode()
    tail = value.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
    return {
        value,
        tail,
        urllib.parse.quote(value, safe=""),
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        base64.b64encode(b"user:" + raw).decode()[8:-4],
        "".join(f"\\u{ord(ch):04x}" for ch in value),
        raw.hex(),
        tail.encode().hex(),
    }


def found(value: str, blob: bytes) -> list[str]:
    text = blob.decode("utf-8", "replace")
    hits = [n for n in needles(value) if n in text]
    if value.encode("utf-16-le") in blob:
        hits.append("utf-16")
    return hits


def scan(canaries: Canaries, blobs: dict[str, bytes]) -> dict[str, list[str]]:
    """``{"where: canary": [encodings found]}`` for every hidden canary found anywhere."""
    leaks = {}
    for where, blob in blobs.items():
        for name, value in canaries.hidden.items():
            hits = found(value, blob)
            if hits:
                leaks[f"{where}: {name}"] = hits
    return leaks


# --- the Python API ------------------------------------------------------------------------


async def python_api(project: PrivacyProject, store: str, audit: Path) -> list[str]:
    c = project.canaries
    async with open_runtime(project.root, store=store, audit_file=audit) as rt:
        ctx = await rt.resolve_context("app", "all")
        cid = ctx.context_id
        secret_config = {"api_key": c.arg, "region": "eu", c.dep: "as a key"}
        url = f"https://upstream.example/v1?key={urllib.parse.quote(c.arg)}&t={c.dep}"
        ok = await rt.call(cid, "svc.fetch", "f1", {"url": url, "config": secret_config}, as_="app")
        assert ok.status is CallStatus.SUCCEEDED, ok.error
        assert c.arg not in json.dumps(ok.to_dict())
        raised = await rt.call(
            cid,
            "svc.fetch",
            "f2",
            {"url": url, "config": secret_config, "mode": "raise"},
            as_="app",
        )
        assert raised.status is CallStatus.FAILED
        assert raised.error is not None
        assert "upstream" in raised.error["message"]
        told = await rt.call(cid, "svc.progress", "g1", {"steps": 2}, as_="app")
        assert told.status is CallStatus.SUCCEEDED, told.error
        texts = [
            e.payload["text"]
            for e in await rt.events(ctx.run_id)
            if e.type == "tool_progress" and e.payload.get("stage") == "message"
        ]
        said = "".join(texts)
        assert "step 2 of 2 is done" in said  # the messages are recorded, in order
        assert said.index("[REDACTED]") < said.index("step 1 of 2")  # the split secret, caught
        plain = await rt.call(cid, "notes.search", "s1", {"query": c.plain}, as_="app")
        assert plain.status is CallStatus.SUCCEEDED
        audited = {"path": c.audited, "body": c.plain}
        kept = await rt.call(cid, "notes.audited", "a1", audited, as_="app")
        assert kept.status is CallStatus.SUCCEEDED
        private = await rt.call(cid, "svc.private", "p1", {"query": c.plain}, as_="app")
        assert private.data == {"record": f"the private record of {c.plain}"}  # returned live
        again = await rt.call(cid, "svc.private", "p1", {"query": c.plain}, as_="app")
        assert again.metrics.cached
        assert again.data is None  # never stored
        row = (await rt.get_call(cid, "p1", as_="app")).to_dict()
        assert row["receipt"]["result_fingerprint"].startswith("hmac-sha256:")
        named = await rt.call(
            cid, "files.save", "n1", {"name": f"{c.dep}.txt", "text": "x"}, as_="app"
        )
        assert named.error is not None
        assert named.error["reason"] == "ARTIFACT_NAME_SECRET"
        leaked = await rt.call(cid, "files.leak", "n2", {}, as_="app")
        assert leaked.error is not None
        assert leaked.error["reason"] == "ARTIFACT_NAME_SECRET"
        pending = await rt.call(
            cid, "svc.configure", "w1", {"config": {"api_key": c.arg, "host": "h"}}, as_="app"
        )
        assert pending.approval is not None
        full = await rt.get_approval(pending.approval["id"], as_="alice", full=True)
        assert full["full_arguments"] == {"config": {"api_key": "[REDACTED]", "host": "h"}}
        await rt.approve(pending.approval["id"], as_="alice")
        done = await rt.call(
            cid, "svc.configure", "w1", {"config": {"api_key": c.arg, "host": "h"}}, as_="app"
        )
        assert done.status is CallStatus.SUCCEEDED
        return [ctx.run_id]


# --- the server: HTTP, MCP, chat, SSE --------------------------------------------------------


@contextmanager
def serve_debug(project: PrivacyProject, store: str) -> Iterator[tuple[str, Path, Path]]:
    """``charter serve --log-level debug`` with stdout and stderr captured to files."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update(project.env)
    out, err = project.root / "serve.stdout", project.root / "serve.stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [
                str(CHARTER),
                "serve",
                "--project",
                str(project.root),
                "--store",
                store,
                "--port",
                str(port),
                "--log-level",
                "debug",
            ],
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                if proc.poll() is not None:
                    raise RuntimeError(f"charter serve exited: {err.read_text()}")
                try:
                    if httpx2.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx2.TransportError:
                    pass
                time.sleep(0.1)
            yield url, out, err
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def raw_sse(
    url: str,
    key: str,
    method: str,
    path: str,
    *,
    until: bytes = b"conversation.completed",
    **kw: Any,
) -> bytes:
    """The raw bytes of an SSE response, read until ``until`` arrives (or it is idle for 30 s:
    a loaded machine may take seconds to send the first event)."""
    headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
    chunks: list[bytes] = []
    try:
        with httpx2.stream(
            method,
            url + path,
            headers=headers,
            timeout=httpx2.Timeout(10.0, read=30.0),
            **kw,
        ) as response:
            for chunk in response.iter_raw():
                chunks.append(chunk)
                seen = b"".join(chunks)
                at = seen.find(until)
                if at >= 0 and (b"\r\n\r\n" in seen[at:] or b"\n\n" in seen[at:]):
                    break  # that event is whole
    except httpx2.ReadTimeout:
        pass
    return b"".join(chunks)


def progress_said(raw: bytes) -> str:
    """The text of the progress messages a run's SSE stream carried, joined in order."""
    texts = []
    for line in raw.decode().splitlines():
        if not line.startswith("data: "):
            continue
        event = json.loads(line[len("data: ") :])
        payload = event.get("payload") or {}
        if event.get("type") == "tool_progress" and payload.get("stage") == "message":
            texts.append(str(payload.get("text", "")))
    return "".join(texts)


async def over_mcp(url: str, project: PrivacyProject) -> None:
    c = project.canaries
    headers = {"Authorization": f"Bearer {project.app_key}"}
    async with (
        httpx2.AsyncClient(headers=headers, trust_env=False) as http,
        McpClient(streamable_http_client(url + "/mcp/all", http_client=http), cache=None) as mcp,
    ):
        fetched = await mcp.call_tool(
            "svc_fetch",
            {"url": f"https://u.example/?k={c.arg}", "config": {"api_key": c.arg}},
        )
        assert not fetched.is_error
        assert c.arg not in json.dumps(fetched.structured_content)
        searched = await mcp.call_tool("notes_search", {"query": c.plain})
        assert not searched.is_error


async def over_mcp_stdio(project: PrivacyProject, store: str) -> tuple[list[str], dict[str, bytes]]:
    """``charter mcp`` over stdio (a real subprocess, the official SDK client) at DEBUG: the
    server's raw stdout (every MCP message it sent, copied by ``tee``) and stderr are kept."""
    c = project.canaries
    out, err = project.root / "mcp.stdout", project.root / "mcp.stderr"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update(project.env)  # PYTHONPATH stays: the subprocess runs this checkout
    argv = [sys.executable, "-m", "charter", "mcp", "--profile", "all", "--as", "app",
            "--project", str(project.root), "--store", store, "--log-level", "debug"]  # fmt: skip
    server = StdioServerParameters(
        command="sh",
        args=["-c", '"$@" | tee "$0"', str(out), *argv],
        cwd=project.root,
        env=env,
    )
    secret_url = f"https://u.example/?k={c.arg}&t={urllib.parse.quote(c.dep)}"
    with err.open("w") as errlog:
        async with McpClient(stdio_client(server, errlog=errlog), cache=None) as mcp:
            fetched = await mcp.call_tool(
                "svc_fetch", {"url": secret_url, "config": {"api_key": c.arg, c.dep: 1}}
            )
            assert not fetched.is_error, fetched
            run_id = str((fetched.meta or {})["charter/run_id"])
            raised = await mcp.call_tool(
                "svc_fetch", {"url": secret_url, "config": {"api_key": c.arg}, "mode": "raise"}
            )
            assert raised.is_error
            searched = await mcp.call_tool("notes_search", {"query": c.plain})
            assert not searched.is_error
            told = await mcp.call_tool("svc_progress", {"steps": 2})
            assert not told.is_error
            leaked = await mcp.call_tool("files_leak", {})
            assert leaked.is_error
            assert "ARTIFACT_NAME_SECRET" in json.dumps(leaked.model_dump(mode="json"))
            pending = await mcp.call_tool("svc_configure", {"config": {"api_key": c.arg}})
            assert "pending_approval" in json.dumps(pending.model_dump(mode="json"))
    blobs = {"mcp stdio stdout": out.read_bytes(), "mcp stdio stderr": err.read_bytes()}
    assert b"svc_fetch" in blobs["mcp stdio stdout"]  # tee saw the MCP messages
    assert b'"level": "debug"' in blobs["mcp stdio stderr"], blobs["mcp stdio stderr"][-2000:]
    return [run_id], blobs


def over_server(project: PrivacyProject, url: str) -> tuple[list[str], dict[str, bytes]]:
    c = project.canaries
    streams: dict[str, bytes] = {}
    with Client(url, project.app_key) as app:
        ctx = app.resolve_context("all")
        cid, run_id = ctx["context_id"], str(ctx["run_id"])
        config = {"api_key": c.arg, c.dep: 1}
        out = app.call(cid, "svc.fetch", "h1", {"url": f"https://x/?t={c.dep}", "config": config})
        assert out.status is CallStatus.SUCCEEDED, out
        out = app.call(cid, "notes.search", "h2", {"query": c.plain})
        assert out.status is CallStatus.SUCCEEDED, out
        out = app.call(cid, "svc.progress", "h4", {"steps": 2})
        assert out.status is CallStatus.SUCCEEDED, out
        out = app.call(cid, "svc.fetch", "h3", {"url": "u", "config": config, "mode": "raise"})
        assert out.status is CallStatus.FAILED
        with pytest.raises(Exception) as refused:
            app.upload_artifact(run_id, b"x", name=f"up-{urllib.parse.quote(c.dep)}.bin")
        assert getattr(refused.value, "reason", None) == "ARTIFACT_NAME_SECRET"
        listed = httpx2.get(  # the run's last event so far: the stream is read up to it
            f"{url}/v1/runs/{run_id}/events?limit=1000",
            headers={"Authorization": f"Bearer {project.app_key}"},
            timeout=30,
        ).json()
        last = f"id: {listed['next_after']}".encode()
        streams["run events SSE"] = raw_sse(
            url, project.app_key, "GET", f"/v1/runs/{run_id}/events", until=last
        )
        body = {"message": "please fetch", "profile": "all"}
        streams["chat SSE"] = raw_sse(url, project.app_key, "POST", "/v1/chat", json=body)
    # progress is streamed (joined: the stream redactor may hold back the last characters of
    # one message, where they could begin a form of a secret, and send them with the next)
    assert "step 1 of 2 is done" in progress_said(streams["run events SSE"])
    assert b"assistant.delta" in streams["chat SSE"], streams["chat SSE"][:2000]
    assert b"[REDACTED]" in streams["chat SSE"]
    return [run_id], streams


# --- the scan ------------------------------------------------------------------------------


def exports(project: PrivacyProject, store: str, run_ids: list[str]) -> dict[str, bytes]:
    blobs: dict[str, bytes] = {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    env.update(project.env)
    for run_id in run_ids:
        target = project.root / "exports" / run_id
        proc = subprocess.run(
            [
                str(CHARTER),
                "runs",
                "export",
                run_id,
                str(target),
                "--deploy",
                str(project.root / "charter.deploy.yaml"),
                "--store",
                store,
            ],
            capture_output=True,
            cwd=project.root,
            env=env,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        blobs[f"export {run_id} (cli output)"] = proc.stdout + proc.stderr
        for path in sorted(target.rglob("*")):
            if path.is_file():
                blobs[f"export {path.relative_to(target)}"] = path.read_bytes()
    assert blobs
    return blobs


def sqlite_files(db: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes() for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()
    }


def pg_dump(name: str) -> bytes:
    proc = subprocess.run(
        ["pg_dump", "-h", "127.0.0.1", "-U", "postgres", "--data-only", name],
        capture_output=True,
        check=True,
    )
    return proc.stdout


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if request.param == "sqlite":
        yield "sqlite", f"sqlite:///{tmp_path / 'privacy' / 'charter.db'}"
        return
    name = create_database()
    try:
        yield name, f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        drop_database(name)


async def test_no_canary_anywhere_in_a_whole_project(
    tmp_path: Path, store: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = write_privacy_project(tmp_path / "privacy", Canaries.fresh())
    c = project.canaries
    for key, value in project.env.items():
        monkeypatch.setenv(key, value)
    label, url = store
    audit = tmp_path / "audit.jsonl"
    run_ids = await python_api(project, url, audit)
    stdio_runs, stdio_blobs = await over_mcp_stdio(project, url)
    with serve_debug(project, url) as (base, stdout, stderr):
        await over_mcp(base, project)
        served_runs, streams = over_server(project, base)
    blobs: dict[str, bytes] = {
        "audit JSONL": audit.read_bytes(),
        "serve stdout": stdout.read_bytes(),
        "serve stderr": stderr.read_bytes(),
        **streams,
        **stdio_blobs,
        **exports(project, url, run_ids + stdio_runs + served_runs),
    }
    if label == "sqlite":
        db = Path(url.removeprefix("sqlite://"))
        database = sqlite_files(db)
        assert set(database) >= {"charter.db"}
    else:
        database = {"pg_dump": pg_dump(label)}
    blobs.update({f"database {k}": v for k, v in database.items()})
    # the scan can find: the audited value is kept, the server logged at DEBUG
    assert any(found(c.audited, blob) for blob in database.values()), "audited value missing"
    assert b'"level": "debug"' in blobs["serve stderr"]
    assert audit.stat().st_size > 0
    assert scan(c, blobs) == {}
