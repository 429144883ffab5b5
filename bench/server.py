"""Governed calls over HTTP beside a bare FastAPI endpoint calling the same function.

    .venv/bin/python bench/server.py [--seconds 5] [--concurrency 32] [--skip-postgres]

Starts, on loopback, in one run: a bare FastAPI app (uvicorn) whose endpoint calls the trivial
function; ``charter serve`` on SQLite; ``charter serve`` on PostgreSQL (one replica, then two
behind a client-side round robin). A closed-loop load generator (asyncio, httpx2) keeps
``--concurrency`` requests in flight for ``--seconds`` per configuration, each worker calling
through its own context (one agent session each), and reports throughput and p50/p99 latency;
then one worker alone gives the unloaded p50 (the latency comparison with the bare endpoint,
free of queueing). Also PostgreSQL transactions per governed call (from
``pg_stat_database``). Everything shares this machine's cores with the load generator.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx2
import psycopg

TOOL = '''
import charter


@charter.tool("bench.echo", permissions=["bench:read"])
def echo(n: int) -> dict:
    """Return the number: the trivial function both endpoints call."""
    return {"n": n}
'''
BARE = """
import sys
from fastapi import FastAPI
import uvicorn

app = FastAPI()


def echo(n: int) -> dict:
    return {"n": n}


@app.post("/bare")
async def bare(body: dict) -> dict:
    return echo(int(body["arguments"]["n"]))


uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""
ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_project(root: Path, key: str) -> None:
    (root / "tools.py").write_text(TOOL)
    (root / "charter.yaml").write_text(
        "name: benchserver\ntools: {python: [tools.py]}\n"
        "profiles:\n  all: {include: [bench.echo]}\n"
    )
    secrets_dir = root / ".charter" / "secrets"
    secrets_dir.mkdir(parents=True)
    for name in ("fingerprint.key", "ledger.key"):
        (secrets_dir / name).write_text(secrets.token_hex(32))
        (secrets_dir / name).chmod(0o600)
    digest = hashlib.sha256(key.encode()).hexdigest()
    (root / "charter.deploy.yaml").write_text(
        textwrap.dedent(
            f"""
            environment: bench
            secrets:
              fingerprint_key: {{file: .charter/secrets/fingerprint.key}}
              ledger_key: {{file: .charter/secrets/ledger.key}}
            limits: {{run_tool_calls: null, run_elapsed_s: null}}
            principals:
              app:
                kind: application
                tenant: bench
                permissions: [bench:read]
                api_key: {{sha256: {digest}}}
            """
        )
    )


def start(cmd: list[str], url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx2.get(url, timeout=1)
            return proc
        except httpx2.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{cmd} did not start: {log.read_text()}")


def serve(root: Path, store: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    charter = str(Path(sys.executable).parent / "charter")
    cmd = [charter, "serve", "-p", str(root), "--store", store, "--port", str(port)]
    cmd += ["--log-level", "warning"]
    url = f"http://127.0.0.1:{port}"
    return start(cmd, f"{url}/healthz", root / f"serve-{port}.log"), url


async def load(
    urls: list[str], key: str, contexts: list[str] | None, seconds: float, concurrency: int
) -> dict[str, Any]:
    """Closed loop: ``concurrency`` workers, worker ``i`` on ``urls[i % n]`` and, for governed
    calls, its own context ``contexts[i]`` (one agent session each, as in production)."""
    latencies: list[float] = []
    errors = 0
    stop = time.perf_counter() + seconds
    counter = 0

    async def worker(i: int) -> None:
        nonlocal errors, counter
        base = urls[i % len(urls)]
        async with httpx2.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30
        ) as http:
            while time.perf_counter() < stop:
                counter += 1
                n = counter
                body = {"tool": "bench.echo", "call_id": f"c{i}-{n}", "arguments": {"n": n}}
                path = f"/v1/contexts/{contexts[i]}/calls" if contexts else "/bare"
                t0 = time.perf_counter()
                response = await http.post(path, json=body)
                latencies.append(time.perf_counter() - t0)
                if response.status_code != 200:
                    errors += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - t0
    latencies.sort()
    return {
        "calls": len(latencies),
        "errors": errors,
        "per_s": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
    }


def pg_xacts(db: str) -> int:
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (db,)
        ).fetchone()
    return int(row[0]) if row else 0


def contexts(urls: list[str], key: str, n: int) -> list[str]:
    """``n`` contexts (one per worker), context ``i`` resolved through ``urls[i % len(urls)]``."""
    out = []
    for i in range(n):
        answer = httpx2.post(
            f"{urls[i % len(urls)]}/v1/contexts",
            json={"profile": "all"},
            headers={"Authorization": f"Bearer {key}"},
        )
        answer.raise_for_status()
        out.append(str(answer.json()["context_id"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--skip-postgres", action="store_true")
    opts = parser.parse_args()
    key = secrets.token_urlsafe(24)
    results: dict[str, dict[str, Any]] = {}
    procs: list[subprocess.Popen[bytes]] = []
    db = f"charter_bench_{secrets.token_hex(4)}"
    n = opts.concurrency

    def measure(name: str, urls: list[str], ctxs: list[str] | None) -> dict[str, Any]:
        """Throughput at ``--concurrency``, then the unloaded latency with one worker."""
        loaded = asyncio.run(load(urls, key, ctxs, opts.seconds, n))
        single = asyncio.run(load(urls, key, ctxs, min(opts.seconds, 3.0), 1))
        loaded["p50_c1_ms"] = single["p50_ms"]
        loaded["calls_c1"] = single["calls"]
        loaded["errors"] += single["errors"]
        results[name] = loaded
        return loaded

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_project(root, key)
        try:
            port = free_port()
            (root / "bare.py").write_text(BARE)
            procs.append(
                start(
                    [sys.executable, str(root / "bare.py"), str(port)],
                    f"http://127.0.0.1:{port}/docs",
                    root / "bare.log",
                )
            )
            measure("bare FastAPI endpoint", [f"http://127.0.0.1:{port}"], None)
            procs.pop().terminate()
            proc, url = serve(root, "sqlite:///.charter/charter.db")
            procs.append(proc)
            measure("governed, 1 replica, SQLite", [url], contexts([url], key, n))
            procs.pop().terminate()
            if not opts.skip_postgres:
                with psycopg.connect(ADMIN, autocommit=True) as conn:
                    conn.execute(f"CREATE DATABASE {db}")
                pg = f"postgresql://postgres@127.0.0.1:5432/{db}"
                proc_a, url_a = serve(root, pg)
                procs.append(proc_a)
                ctxs = contexts([url_a], key, n)
                before = pg_xacts(db)
                one = measure("governed, 1 replica, PostgreSQL", [url_a], ctxs)
                one["pg_xacts_per_call"] = (pg_xacts(db) - before) / (
                    one["calls"] + one["calls_c1"]
                )
                proc_b, url_b = serve(root, pg)
                procs.append(proc_b)
                before = pg_xacts(db)
                two = measure("governed, 2 replicas, PostgreSQL", [url_a, url_b], ctxs)
                two["pg_xacts_per_call"] = (pg_xacts(db) - before) / (
                    two["calls"] + two["calls_c1"]
                )
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=20)
            if not opts.skip_postgres:
                with psycopg.connect(ADMIN, autocommit=True) as conn:
                    conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    base = results["bare FastAPI endpoint"]
    print(
        f"{'configuration':34} {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'p50 c=1':>8} {'x bare c=1':>10} pg xacts/call"
    )
    for name, r in results.items():
        xacts = f"{r['pg_xacts_per_call']:.1f}" if "pg_xacts_per_call" in r else ""
        print(
            f"{name:34} {r['per_s']:8.0f} {r['p50_ms']:7.2f} {r['p99_ms']:7.2f} "
            f"{r['p50_c1_ms']:8.2f} {r['p50_c1_ms'] / base['p50_c1_ms']:10.2f} "
            f"{xacts:>6}  (errors {r['errors']})"
        )


if __name__ == "__main__":
    main()
