"""``charter artifacts ls|get|put``: a run's registered files, locally or over the API.

Local mode opens the project's runtime (``--project``, ``--store``, ``--deploy``) and acts as
``--as PRINCIPAL``: another tenant's run answers ``RUN_NOT_FOUND`` exactly like a missing one,
as the server does. ``--server URL`` (with ``CHARTER_API_KEY``) uses the HTTP API instead.

* ``ls`` lists the registrations in order.
* ``get`` downloads into a temporary file beside the output, checks the sha256 and size
  against the registration, and only then publishes it — never over an existing file unless
  ``--force``.
* ``put`` uploads a file as an ``untrusted`` user upload (type ``upload``, no producer); a
  taken name gets the next ``-vN`` version.

This module also adapts the deployment's artifact store to the ledger's
:data:`~charter.ledger.verify.ArtifactSource` for ``charter runs export|verify``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import anyio.to_thread
import typer
from rich.markup import escape
from rich.table import Table

from charter.artifacts.ledger_source import store_source
from charter.artifacts.ports import ArtifactStore
from charter.artifacts.records import MEDIA_TYPE, ArtifactRecord, Producer, StoredObject, Trust
from charter.artifacts.user_file import open_user_file
from charter.cli._output import JSON_OPTION, console, print_json, print_table, reported_errors
from charter.cli.kernel_cmds import AS, DEPLOY, PROJECT, SERVER, STORE, _principal, _remote, _run
from charter.client import Client
from charter.deploy.deployment import load_deployment
from charter.errors import ContractViolation, Failure, InvalidInput, PermissionDenied, ResourceLimit
from charter.ledger.events import decode
from charter.ledger.verify import ArtifactSource
from charter.runtime import Runtime, artifact_store

app = typer.Typer(
    help="A run's artifacts: list, download (checksum-verified), upload (untrusted).",
    no_args_is_help=True,
)

DEFAULT_MEDIA_TYPE = "application/octet-stream"
_CHUNK = 1 << 20
_MISSING = frozenset({"ARTIFACT_NOT_FOUND", "ARTIFACT_NOT_DIRECTORY"})
_IRREGULAR = frozenset(
    {"ARTIFACT_SYMLINK", "ARTIFACT_HARDLINK", "ARTIFACT_NOT_REGULAR", "ARTIFACT_INTEGRITY_MISMATCH"}
)


# -- the store as the ledger's artifact source -------------------------------------------


def deployment_source(run_id: str, deploy: Path | None, project: Path) -> ArtifactSource:
    """The artifact source of the deployment that applies to ``project``."""

    def open_store() -> ArtifactStore:
        deployment = load_deployment(deploy, project_dir=project)
        return artifact_store(deployment, project)

    return store_source(open_store, run_id)


# -- helpers -----------------------------------------------------------------------------


def record_dict(record: ArtifactRecord) -> dict[str, Any]:
    """The registration as the HTTP API shows it."""
    return {"run_id": record.run_id, **record.to_event_payload()}


async def _check_run(rt: Runtime, run_id: str, who: str) -> None:
    """Another tenant's run answers exactly like a missing one (as over the API)."""
    principal = rt.principal(who)
    rows = await rt.store.read_stored(run_id, after=0, limit=1)
    tenant = decode(rows[0]).payload.get("tenant") if rows else None
    if not rows or tenant != principal.tenant:
        raise PermissionDenied("no such run", reason="RUN_NOT_FOUND", run_id=run_id)


def _not_found(run_id: str) -> Failure:
    return PermissionDenied("no such artifact", reason="ARTIFACT_NOT_FOUND", run_id=run_id)


def _media_type(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip().lower()
    if MEDIA_TYPE.fullmatch(value) is None:
        raise InvalidInput(
            "--media-type must be type/subtype (lower case, at most four simple parameters)",
            reason="ARTIFACT_MEDIA_TYPE_INVALID",
        )
    return value


def _file_chunks(f: BinaryIO) -> Iterator[bytes]:
    while chunk := f.read(_CHUNK):
        yield chunk


def _save(
    chunks: Iterable[bytes], out: Path, *, sha256: str, size: int, force: bool, run_id: str
) -> None:
    """Write ``chunks`` beside ``out``, check them, then publish as ``out``.

    Without ``force`` the file is published with ``link`` (never replaces anything); with it,
    with ``replace``. Nothing is left behind when the content does not match.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part", dir=out.parent)
    try:
        digest = hashlib.sha256()
        got = 0
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    digest.update(chunk)
                    got += len(chunk)
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:  # a full or failing disk: name the output, not the temporary
            if exc.filename is not None:
                raise
            raise OSError(exc.errno, exc.strerror, str(out)) from None
        if got != size or "sha256:" + digest.hexdigest() != sha256:
            raise ContractViolation(
                "the artifact's content does not match its recorded checksum",
                reason="ARTIFACT_INTEGRITY_MISMATCH",
                run_id=run_id,
            )
        if force:
            os.replace(tmp, out)
            return
        try:
            os.link(tmp, out)
        except FileExistsError:
            raise _exists(out) from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _exists(out: Path) -> Failure:
    return InvalidInput(
        f"{out} already exists (give --force to replace it)", reason="OUTPUT_EXISTS"
    )


# -- commands ----------------------------------------------------------------------------


@app.command("ls")
def ls(
    run_id: str = typer.Argument(..., help="The run."),
    as_: str | None = AS,
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """List a run's registered artifacts, in registration order."""

    async def go(rt: Runtime) -> list[dict[str, Any]]:
        await _check_run(rt, run_id, _principal(as_, as_json))
        return [record_dict(r) for r in await rt.artifacts.registry.list(run_id)]

    if server:
        rows = _remote(server, as_json, lambda cl: cl.list_artifacts(run_id))
    else:
        rows = _run(project, store, deploy, as_json, go)
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print(f"No artifacts in {run_id}.", markup=False)
        return
    table = Table()
    table.add_column("artifact", no_wrap=True)
    for col in ("path", "media type", "size", "trust", "created"):
        table.add_column(col, overflow="fold")
    for r in rows:
        cells = (
            r["artifact_id"],
            r["path"],
            r["media_type"],
            r["size"],
            r["trust"],
            r["created_at"],
        )
        table.add_row(*(escape(str(cell)) for cell in cells))
    print_table(table)


@app.command("get")
def get(
    run_id: str = typer.Argument(..., help="The run."),
    artifact_id: str = typer.Argument(..., help="The artifact id (see `charter artifacts ls`)."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Where to write (default: the artifact's file name here)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing output file."),
    as_: str | None = AS,
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Download an artifact, checksum-verified; never overwrites a file unless --force."""

    def target(record: dict[str, Any]) -> Path:
        out = output if output is not None else Path(str(record["path"]).rsplit("/", 1)[-1])
        if not force and os.path.lexists(out):
            raise _exists(out)
        return out

    async def go(rt: Runtime) -> tuple[dict[str, Any], Path]:
        await _check_run(rt, run_id, _principal(as_, as_json))
        record = await rt.artifacts.registry.get(run_id, artifact_id)
        if record is None:
            raise _not_found(run_id)
        row = record_dict(record)
        out = target(row)

        def copy() -> None:
            with rt.artifacts.store.open_read(
                run_id, record.path, expected_sha256=record.sha256, expected_size=record.size
            ) as reader:
                _save(
                    iter(functools.partial(reader.read, _CHUNK), b""),
                    out,
                    sha256=record.sha256,
                    size=record.size,
                    force=force,
                    run_id=run_id,
                )

        await anyio.to_thread.run_sync(copy)
        return row, out

    def remote(cl: Client) -> tuple[dict[str, Any], Path]:
        row = next((r for r in cl.list_artifacts(run_id) if r["artifact_id"] == artifact_id), None)
        if row is None:
            raise _not_found(run_id)
        out = target(row)
        data = cl.download_artifact(run_id, artifact_id)
        _save([data], out, sha256=row["sha256"], size=row["size"], force=force, run_id=run_id)
        return row, out

    if server:
        row, out = _remote(server, as_json, remote)
    else:
        row, out = _run(project, store, deploy, as_json, go)
    if as_json:
        print_json({**row, "output": str(out)})
    else:
        console.print(
            f"{row['artifact_id']}: {row['size']} bytes, {row['sha256']} verified, "
            f"written to {out}",
            markup=False,
        )


@app.command("put")
def put(
    run_id: str = typer.Argument(..., help="The run."),
    file: Path = typer.Argument(..., help="The file to upload (a regular file)."),
    name: str | None = typer.Option(
        None, "--name", help="The run-relative name (default: the file's name)."
    ),
    media_type: str | None = typer.Option(
        None, "--media-type", help=f"The media type (default {DEFAULT_MEDIA_TYPE})."
    ),
    as_: str | None = AS,
    server: str | None = SERVER,
    project: Path = PROJECT,
    store: str | None = STORE,
    deploy: Path | None = DEPLOY,
    as_json: bool = JSON_OPTION,
) -> None:
    """Upload a file into a run as an untrusted user upload; a taken name gets -vN."""
    with reported_errors(as_json):
        mtype = _media_type(media_type)
        # a regular file, opened now: never a FIFO, a device or a directory read forever
        source = open_user_file(file, what="FILE")
    path = name or file.name

    async def go(rt: Runtime) -> dict[str, Any]:
        await _check_run(rt, run_id, _principal(as_, as_json))
        service = rt.artifacts
        limit = rt.deployment.artifacts.max_upload_bytes

        service.check_name(path)

        def write() -> StoredObject:
            with service.store.open_write(run_id, path, versioned=True) as writer:
                total = 0
                for chunk in _file_chunks(source):
                    total += len(chunk)
                    if total > limit:
                        raise ResourceLimit(
                            f"the upload is larger than {limit} bytes",
                            reason="ARTIFACT_TOO_LARGE",
                            details={"limit": limit},
                        )
                    writer.write(chunk)
            return writer.result

        stored = await anyio.to_thread.run_sync(write)
        try:
            record = await service.register(
                run_id,
                stored,
                type="upload",
                media_type=mtype or DEFAULT_MEDIA_TYPE,
                producer=Producer(),
                trust=Trust.UNTRUSTED,
            )
        except Failure:
            await service.rollback(run_id, [stored])
            raise
        return record_dict(record)

    with source:
        if server:
            row = _remote(
                server,
                as_json,
                lambda cl: cl.upload_artifact(run_id, source.read(), name=path, media_type=mtype),
            )
        else:
            row = _run(project, store, deploy, as_json, go)
    if as_json:
        print_json(row)
    else:
        console.print(
            f"uploaded {row['path']} as {row['artifact_id']} ({row['size']} bytes, "
            f"{row['sha256']}, trust {row['trust']})",
            markup=False,
        )


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="artifacts")
