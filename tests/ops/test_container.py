"""The container recipe without a container engine: the Dockerfile and compose.yaml are
linted, and what the image runs — the project its build steps make, its entrypoint command,
its health check, with compose's environment — is started twice (two replicas) against a
real PostgreSQL database and an S3 endpoint (moto), and driven through the HTTP client."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

import charter
from charter.client import Client
from charter.kernel.envelope import CallStatus
from tests.server._harness import free_port
from tests.stores.conftest import create_database, drop_database

ROOT = Path(__file__).resolve().parents[2]
CHARTER = str(Path(sys.executable).parent / "charter")


def instructions(text: str) -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = (pending + stripped).strip()
        pending = ""
        keyword, _, rest = whole.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return out


def final_stage(steps: list[tuple[str, str]]) -> list[tuple[str, str]]:
    starts = [i for i, (k, _) in enumerate(steps) if k == "FROM"]
    return steps[starts[-1] :]


def one(steps: list[tuple[str, str]], keyword: str) -> str:
    found = [rest for k, rest in steps if k == keyword]
    assert len(found) == 1, f"expected one {keyword}, found {len(found)}"
    return found[0]


DOCKERFILE = instructions((ROOT / "Dockerfile").read_text())
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
ENV_EXAMPLE = dict(
    line.split("=", 1)
    for line in (ROOT / "container" / "env.example").read_text().splitlines()
    if line and not line.startswith("#")
)


# -- lint ---------------------------------------------------------------------------------


def test_the_image_is_slim_non_root_and_checks_readiness() -> None:
    image = final_stage(DOCKERFILE)
    assert re.fullmatch(r"python:3\.\d+-slim", one(image, "FROM")), "a pinned slim Python base"
    user = one(image, "USER")
    assert user not in {"root", "0"}
    keywords = [k for k, _ in image]
    assert keywords.index("USER") < keywords.index("ENTRYPOINT"), "the server never runs as root"
    assert "/readyz" in one(image, "HEALTHCHECK")
    entry = json.loads(one(image, "ENTRYPOINT"))  # exec form: signals reach the server
    assert entry[:2] == ["charter", "serve"]
    assert entry[entry.index("--port") + 1] == one(image, "EXPOSE")
    assert not [rest for k, rest in DOCKERFILE if k == "ADD"], "COPY only; nothing downloaded"


def test_every_run_step_is_valid_shell_and_installs_without_a_cache() -> None:
    runs = [rest for k, rest in DOCKERFILE if k == "RUN"]
    assert runs
    for command in runs:
        checked = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
        assert checked.returncode == 0, f"{command}: {checked.stderr}"
        if "pip install" in command:
            assert "--no-cache-dir" in command


def test_compose_runs_two_replicas_on_one_postgres_and_one_bucket() -> None:
    services = COMPOSE["services"]
    replicas = [name for name, s in services.items() if s.get("build") == "."]
    assert len(replicas) == 2
    stores = {services[r]["environment"]["CHARTER_STORE"] for r in replicas}
    assert len(stores) == 1
    assert next(iter(stores)).startswith("postgresql://")
    ports = {services[r]["ports"][0] for r in replicas}
    assert len(ports) == 2
    for r in replicas:
        assert services[r]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert {"postgres", "s3"} <= set(services)
    text = (ROOT / "compose.yaml").read_text()
    required = set(re.findall(r"\$\{(\w+):\?", text))
    assert required <= set(ENV_EXAMPLE), "every required variable is in container/env.example"


# -- what the image runs --------------------------------------------------------------------


def _image_project(tmp_path: Path, s3_endpoint: str) -> Path:
    """The project directory the image's build steps make, at a temporary path."""
    image_root = tmp_path / "srv"
    image_root.mkdir()
    build = one(final_stage(DOCKERFILE), "RUN")
    for step in (s.strip() for s in build.split("&&")):
        if step.startswith(("charter init", "rm -rf /srv/project", "mkdir")):
            argv = [a.replace("/srv", str(image_root)) for a in shlex.split(step)]
            if argv[0] == "charter":
                argv[0] = CHARTER
            subprocess.run(argv, check=True, capture_output=True, timeout=120)
    project = image_root / "project"
    copy = next(rest for k, rest in DOCKERFILE if k == "COPY" and "charter.deploy.yaml" in rest)
    source = next(a for a in copy.split() if not a.startswith("--"))
    deploy = (ROOT / source).read_text().replace("http://s3:9000", s3_endpoint)
    deploy = deploy.replace("/srv/", f"{image_root}/")
    (project / "charter.deploy.yaml").write_text(deploy)
    assert not (project / ".charter").exists(), "no development secrets in the image"
    return project


def _compose_environment(store: str, image_root: Path) -> dict[str, str]:
    """compose's environment for a replica, then the image's own ``ENV`` lines."""
    service = COMPOSE["services"]["charter-a"]["environment"]
    env: dict[str, str] = {}
    for key, value in service.items():
        env[key] = re.sub(
            r"\$\{(\w+)(?::[?-][^}]*)?\}", lambda m: ENV_EXAMPLE.get(m.group(1), ""), str(value)
        )
    env["CHARTER_STORE"] = store  # compose's host `postgres` is this test's database
    for rest in (r for k, r in final_stage(DOCKERFILE) if k == "ENV"):
        for pair in shlex.split(rest):
            name, _, value = pair.partition("=")
            env[name] = value.replace("/srv", str(image_root))
    return env


@pytest.fixture
def s3() -> Iterator[tuple[str, Any]]:
    from moto.server import ThreadedMotoServer

    from charter.artifacts.s3 import client

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    s3 = client(
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=ENV_EXAMPLE["S3_ACCESS_KEY"],
        aws_secret_access_key=ENV_EXAMPLE["S3_SECRET_KEY"],
    )
    s3.create_bucket(Bucket="charter-artifacts")
    try:
        yield endpoint, s3
    finally:
        server.stop()


def _start(
    argv: list[str], project: Path, env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(argv, cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the entrypoint exited: {log.read_text()}")
        try:
            if httpx2.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"not ready within 60 s: {log.read_text()}")


@pytest.mark.postgres
@pytest.mark.slow
def test_two_replicas_as_the_image_runs_them(tmp_path: Path, s3: tuple[str, Any]) -> None:
    endpoint, s3_client = s3
    project = _image_project(tmp_path, endpoint)
    database = create_database()
    store = f"postgresql://postgres@127.0.0.1:5432/{database}"
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("CHARTER_", "AWS_"))}
    env = {**base_env, **_compose_environment(store, project.parent)}
    env["AWS_ACCESS_KEY_ID"] = ENV_EXAMPLE["S3_ACCESS_KEY"]
    env["AWS_SECRET_ACCESS_KEY"] = ENV_EXAMPLE["S3_SECRET_KEY"]
    assert env["CHARTER_DEPLOY"] == str(project / "charter.deploy.yaml")
    entry = json.loads(one(final_stage(DOCKERFILE), "ENTRYPOINT"))
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    try:
        for name in ("a", "b"):
            port = free_port()
            argv = [
                {"0.0.0.0": "127.0.0.1", "8750": str(port), "/srv/project": str(project)}.get(a, a)
                for a in entry
            ]
            argv[0] = CHARTER
            log = tmp_path / f"replica-{name}.log"
            procs.append(_start(argv, project, env, log))
            urls.append(f"http://127.0.0.1:{port}")
            _wait_ready(urls[-1], procs[-1], log)
        a, b = urls
        health = json.loads(one(final_stage(DOCKERFILE), "HEALTHCHECK").split("CMD", 1)[1])
        probe = [sys.executable if health[0] == "python" else health[0], *health[1:]]
        probe = [p.replace("127.0.0.1:8750", b.removeprefix("http://")) for p in probe]
        assert subprocess.run(probe, timeout=30).returncode == 0, "the image's health check"
        assert httpx2.get(f"{a}/healthz").json()["version"] == charter.__version__

        note = {"title": "from the image", "body": "two replicas, one ledger"}
        with (
            Client(a, ENV_EXAMPLE["CHARTER_KEY_APP"]) as app,
            Client(b, ENV_EXAMPLE["CHARTER_KEY_ALICE"]) as alice,
        ):
            ctx = app.resolve_context("editor")
            pending = app.call(ctx["context_id"], "notes.add", "img-1", note)
            assert pending.status is CallStatus.PENDING_APPROVAL
            assert pending.approval
            assert alice.approve(pending.approval["id"])["status"] == "approved"
            done = app.call(ctx["context_id"], "notes.add", "img-1", note)
            assert done.status is CallStatus.SUCCEEDED
            assert alice.get_call(ctx["context_id"], "img-1")["state"] == "succeeded"
            stored = app.upload_artifact(ctx["run_id"], b"report", name="report.txt")
            assert alice.download_artifact(ctx["run_id"], stored["artifact_id"]) == b"report"
        keys = [
            o["Key"]
            for o in s3_client.list_objects_v2(Bucket="charter-artifacts").get("Contents", [])
        ]
        assert any(k.endswith("/report.txt") for k in keys), keys
        # the audit trail on the volume: both replicas' decisions, whole lines
        audit = (project.parent / "audit" / "audit.jsonl").read_text()
        trail = [json.loads(line) for line in audit.splitlines()]
        assert any(r.get("call_id") == "img-1" and r.get("outcome") == "succeeded" for r in trail)
        assert any(r.get("outcome") == "approved" for r in trail), trail
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        drop_database(database)
        shutil.rmtree(tmp_path / "srv", ignore_errors=True)
