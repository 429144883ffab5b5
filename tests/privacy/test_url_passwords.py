"""A password inside a URL is never kept, wherever the URL turns up.

Charter cannot know every password a tool or a library holds, but a URL's userinfo says which
part is one: ``postgresql://app:PASSWORD@db:5432/prod``. A database driver quotes its DSN in
an error, a tool returns a connection string, an HTTP client logs the URL it called (a chat
provider's ``base_url`` with credentials). Such a password is scrubbed by the redactor's text
rules, as ``password=...`` is, and the rest of the URL (scheme, user, host, port, path) is
kept: the error still says where it failed.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import textwrap
from pathlib import Path

import pytest

from charter.kernel.envelope import CallStatus
from charter.kernel.redaction import REDACTED, Redactor
from charter.runtime import open_runtime
from charter.server.logs import configure_logging
from tests.privacy.test_canary_project import sqlite_files

pytestmark = pytest.mark.anyio

PASSWORD = "s3cr3t-PASSWORD-xyz"

TOOLS = '''
from typing import Any

import charter

DSN = "postgresql://app:s3cr3t-PASSWORD-xyz@{host}:5432/prod"


@charter.tool("db.ping")
def ping(host: str) -> dict[str, Any]:
    """Connect, and fail the way drivers do: quoting the DSN."""
    raise RuntimeError("could not connect to " + DSN.format(host=host) + ": refused")


@charter.tool("db.dsn")
def dsn(host: str, ctx: charter.Context) -> dict[str, Any]:
    """Report progress and return the connection string."""
    ctx.progress("connecting to " + DSN.format(host=host))
    return {"dsn": DSN.format(host=host), "cache": "redis://:s3cr3t-PASSWORD-xyz@cache:6379/0"}
'''


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "tools.py").write_text(TOOLS)
    (root / "charter.yaml").write_text(
        textwrap.dedent(
            """
            name: urls
            tools: {python: [tools.py]}
            profiles:
              all: {include: [db.ping, db.dsn]}
            """
        )
    )
    return root


async def test_a_dsn_password_from_a_tool_is_kept_nowhere(tmp_path: Path) -> None:
    root = _project(tmp_path / "urls")
    db, audit = tmp_path / "c.db", tmp_path / "audit.jsonl"
    async with open_runtime(root, store=f"sqlite:///{db}", audit_file=audit) as rt:
        ctx = await rt.resolve_context("local", "all")
        failed = await rt.call(ctx.context_id, "db.ping", "p1", {"host": "db1"}, as_="local")
        done = await rt.call(ctx.context_id, "db.dsn", "d1", {"host": "db1"}, as_="local")
        events = await rt.events(ctx.run_id)
    assert failed.status is CallStatus.FAILED
    assert done.status is CallStatus.SUCCEEDED
    assert failed.error is not None
    # the error still says where: user, host, port, database
    assert f"postgresql://app:{REDACTED}@db1:5432/prod" in failed.error["message"]
    assert done.data == {
        "dsn": f"postgresql://app:{REDACTED}@db1:5432/prod",
        "cache": f"redis://:{REDACTED}@cache:6379/0",
    }
    answers = json.dumps([failed.to_dict(), done.to_dict()])
    recorded = json.dumps([e.to_dict() for e in events])
    assert "connecting to postgresql://app:" in recorded  # the progress message is kept
    for where, blob in {
        "answers": answers.encode(),
        "events": recorded.encode(),
        "audit": audit.read_bytes(),
        **sqlite_files(db),
    }.items():
        assert PASSWORD.encode() not in blob, where


def test_a_logged_request_url_loses_its_password(monkeypatch: pytest.MonkeyPatch) -> None:
    """``charter serve``'s log handler, before and whatever runtime is open: httpx logs each
    request's URL with its userinfo (a chat provider's ``base_url``) at INFO."""
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    loggers = {name: logging.getLogger(name) for name in ("charter", "uvicorn.error")}
    saved_named = {n: (lg.handlers[:], lg.level, lg.propagate) for n, lg in loggers.items()}
    try:
        configure_logging("info")
        logging.getLogger("httpx.url-test").info(
            'HTTP Request: %s %s "%s"',
            "POST",
            f"http://user:{PASSWORD}@127.0.0.1:9/v1/chat/completions",
            "HTTP/1.1 401 Unauthorized",
        )
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        for name, (handlers, level, propagate) in saved_named.items():
            loggers[name].handlers[:] = handlers
            loggers[name].setLevel(level)
            loggers[name].propagate = propagate
    text = stream.getvalue()
    assert PASSWORD not in text
    assert f"POST http://user:{REDACTED}@127.0.0.1:9/v1/chat/completions" in text


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("ssh://git@github.com/org/repo", "ssh://git@github.com/org/repo"),  # no password
        ("http://host:8080/a@b", "http://host:8080/a@b"),  # a port, then a path
        ("mail bob@example.com at http://h:1/x", "mail bob@example.com at http://h:1/x"),
        (f"amqp://u:{PASSWORD}@@mq/vh", f"amqp://u:{REDACTED}@mq/vh"),  # a raw '@' in it
        ("postgresql://bob:***@h/db", "postgresql://bob:***@h/db"),  # masked by the store
        (
            f"a https://u:{PASSWORD}@h/x and redis://:{PASSWORD}@r:6379",
            f"a https://u:{REDACTED}@h/x and redis://:{REDACTED}@r:6379",
        ),
    ],
)
def test_only_the_userinfo_password_goes(text: str, kept: str) -> None:
    assert Redactor().redact_text(text) == kept
