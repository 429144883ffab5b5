"""The privacy canary project: tools that take, echo, encode and raise with secrets.

Three canaries (random per test):

- ``arg``: a secret the caller passes under a sensitive key (``config.api_key``);
- ``dep``: a deployment secret (``redaction.values: [{env: PRIVACY_UPSTREAM}]``) that the
  tools read from their environment and leak in results, exception texts, object keys and
  artifact names, encoded every common way; the scripted model says it split over two deltas,
  and a tool reports it split over two progress messages;
- ``plain``: a non-secret argument value of tools without ``audit`` pointers.

And one positive control, ``audited``: the value of a field a contract lists under ``audit``,
which *is* kept — so a scan that finds nothing is known to be able to find something.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import textwrap
from dataclasses import dataclass
from pathlib import Path

TOOLS = '''
"""Tools that leak secrets every way a careless tool could."""
from __future__ import annotations

import base64
import json
import os
import urllib.parse
from typing import Any

import charter


def _forms(value: str) -> dict[str, Any]:
    return {
        "plain": f"value is {value}",
        "percent": urllib.parse.quote(value, safe=""),
        "b64": base64.b64encode(("user:" + value).encode()).decode(),
        "b64url": base64.urlsafe_b64encode(value.encode()).decode(),
        "json": json.dumps({"v": value}).replace(value[0], "\\\\u%04x" % ord(value[0])),
        "as_key": {value: 1},
        "in_url": f"https://upstream.example/v1?token={value}&x=1",
    }


@charter.tool("notes.search")
def search(query: str, limit: int = 10) -> dict[str, Any]:
    """Search notes (the query is not a secret, and not audited)."""
    return {"count": 0, "limit": limit, "query_chars": len(query)}


@charter.tool("notes.audited", audit=["/path"])
def audited(path: str, body: str) -> dict[str, Any]:
    """A tool whose path argument is audited (kept); the body is not."""
    return {"ok": True, "bytes": len(body)}


@charter.tool("svc.fetch")
def fetch(url: str, config: dict[str, Any], mode: str = "ok") -> dict[str, Any]:
    """Call an upstream with a key; echo what it got, encoded every way."""
    token = os.environ["PRIVACY_UPSTREAM"]
    key = str(config.get("api_key"))
    if mode == "raise":
        raise RuntimeError(
            f"upstream {url} refused key {key} / {urllib.parse.quote(key)} and token "
            f"{base64.b64encode(token.encode()).decode()}"
        )
    return {"token": _forms(token), "key": _forms(key), "url": url}


@charter.tool("svc.private", store_result=False)
def private(query: str) -> dict[str, Any]:
    """A lookup whose result must never be stored."""
    return {"record": f"the private record of {query}"}


@charter.tool("files.save", artifacts={"writes": True})
def save(name: str, text: str, ctx: charter.Context) -> dict[str, Any]:
    """Save a file under a name the caller chose."""
    assert ctx.artifacts is not None
    ctx.artifacts.put(name, text.encode())
    return {"saved": len(text)}


@charter.tool("files.leak", artifacts={"writes": True})
def leak(ctx: charter.Context) -> dict[str, Any]:
    """Name a file after the upstream token."""
    assert ctx.artifacts is not None
    ctx.artifacts.put("dump-" + os.environ["PRIVACY_UPSTREAM"] + ".txt", b"x")
    return {}


@charter.tool("svc.progress")
async def progress(steps: int, ctx: charter.Context) -> dict[str, Any]:
    """Report progress, saying the upstream token split across two messages."""
    token = os.environ["PRIVACY_UPSTREAM"]
    half = len(token) // 2
    ctx.progress("starting; the upstream token is " + token[:half])
    ctx.progress(token[half:] + " and step 1 of 2 is done")
    ctx.progress("step 2 of 2 is done")
    return {"steps": steps}


@charter.tool("svc.chatty")
def chatty(count: int, config: dict[str, Any], ctx: charter.Context) -> dict[str, Any]:
    """Many progress messages from a worker thread; the caller's key split across two."""
    key = str(config.get("api_key"))
    ctx.progress("using key " + key[:7])
    ctx.progress(key[7:] + " now")
    for i in range(count):
        ctx.progress(f"line {i};")
    return {"count": count}


@charter.tool("svc.configure", effect="write", permissions=["svc:write"])
def configure(config: dict[str, Any]) -> dict[str, Any]:
    """A write that needs approval and takes a secret."""
    return {"configured": sorted(config)}
'''

CHARTER_YAML = """
name: privacy
tools: {python: [tools.py]}
profiles:
  all:
    include: [notes.search, notes.audited, svc.fetch, svc.private, files.save, files.leak,
              svc.configure, svc.progress, svc.chatty]
"""


@dataclass(frozen=True)
class Canaries:
    arg: str
    dep: str
    plain: str
    audited: str

    @classmethod
    def fresh(cls) -> Canaries:
        return cls(
            arg=f"ARGSECRET{secrets.token_hex(10)}",
            dep=f"DEPSECRET{secrets.token_hex(10)}",
            plain=f"plainvalue{secrets.token_hex(10)}",
            audited=f"auditedpath{secrets.token_hex(10)}",
        )

    @property
    def hidden(self) -> dict[str, str]:
        """The canaries that must be found nowhere."""
        return {"arg": self.arg, "dep": self.dep, "plain": self.plain}


@dataclass(frozen=True)
class PrivacyProject:
    root: Path
    app_key: str
    alice_key: str
    canaries: Canaries

    @property
    def env(self) -> dict[str, str]:
        return {"PRIVACY_UPSTREAM": self.canaries.dep}


def _script(c: Canaries) -> str:
    half = len(c.dep) // 2
    return textwrap.dedent(
        f"""
        rules:
          - match: "(?i)fetch"
            steps:
              - say: "Fetching."
              - call:
                  id: f
                  tool: svc_fetch
                  arguments: {{url: "https://upstream.example/?k={c.arg}",
                               config: {{api_key: "{c.arg}"}}}}
              - call: {{id: s, tool: notes_search, arguments: {{query: "{c.plain}"}}}}
              - say: "The upstream token is {c.dep[:half]}"
              - say: "{c.dep[half:]}, and the call ended {{{{f.status}}}}."
          - match: ""
            steps: [{{say: "Hello."}}]
        """
    )


def write_privacy_project(root: Path, canaries: Canaries) -> PrivacyProject:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(TOOLS)
    (root / "charter.yaml").write_text(textwrap.dedent(CHARTER_YAML))
    (root / "script.yaml").write_text(_script(canaries))
    secret_dir = root / ".charter" / "secrets"
    secret_dir.mkdir(parents=True, exist_ok=True)
    for name in ("fingerprint.key", "ledger.key"):
        (secret_dir / name).write_text(secrets.token_hex(32) + "\n")
        (secret_dir / name).chmod(0o600)
    app_key, alice_key = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    (secret_dir / "app.key").write_text(app_key + "\n")
    alice_digest = hashlib.sha256(alice_key.encode()).hexdigest()
    deploy = {
        "environment": "test",
        "mode": "enforce",
        "secrets": {
            "fingerprint_key": {"file": ".charter/secrets/fingerprint.key"},
            "ledger_key": {"file": ".charter/secrets/ledger.key"},
        },
        "principals": {
            "app": {
                "kind": "application",
                "tenant": "acme",
                "permissions": ["svc:write"],
                "api_key": {"file": ".charter/secrets/app.key"},
            },
            "alice": {
                "kind": "operator",
                "tenant": "acme",
                "permissions": ["svc:write", "approvals:approve"],
                "api_key": {"sha256": alice_digest},
            },
        },
        "enable": ["svc.configure"],
        "redaction": {"values": [{"env": "PRIVACY_UPSTREAM"}]},
        "chat": {"provider": "scripted", "script": "script.yaml", "profile": "all"},
    }
    (root / "charter.deploy.yaml").write_text(json.dumps(deploy, indent=2))
    return PrivacyProject(root=root, app_key=app_key, alice_key=alice_key, canaries=canaries)
