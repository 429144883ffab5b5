"""``/v1/runs/{run_id}/artifacts``: upload (registered ``untrusted``), list, download.

Uploads stream the body straight into a create-only writer (raw body with ``?name=``, or
``multipart/form-data`` with one ``file`` part whose file name is the default name); the body
is not buffered by the server middleware and is limited by ``artifacts.max_upload_bytes`` of
the deployment (``ARTIFACT_TOO_LARGE``). A name already taken gets the next ``-vN`` version.
Downloads are streamed and checksum-verified: the size is checked before the first byte, and
the last chunk is held back until the checksum matched, so a changed file never arrives
complete (the connection is cut short instead). Another tenant's run answers 404.
"""

from __future__ import annotations

import functools
import re
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from starlette.exceptions import HTTPException

from charter.artifacts.records import MEDIA_TYPE, ArtifactRecord, Producer, Trust
from charter.errors import Failure, InvalidInput, PermissionDenied, ResourceLimit
from charter.kernel.principals import Principal
from charter.server.intake import JsonRoute
from charter.server.problems import problem_responses
from charter.server.state import ServerState, get_principal, get_state

router = APIRouter(tags=["artifacts"], route_class=JsonRoute)

DEFAULT_MEDIA_TYPE = "application/octet-stream"
_UNSAFE_ASCII = re.compile(r"[^A-Za-z0-9._ -]")


def record_dict(record: ArtifactRecord) -> dict[str, Any]:
    return {"run_id": record.run_id, **record.to_event_payload()}


def content_disposition(path: str) -> str:
    """``attachment`` with an ASCII fallback and the exact name as RFC 6266 ``filename*``."""
    name = path.rsplit("/", 1)[-1]
    fallback = _UNSAFE_ASCII.sub("_", name).strip() or "artifact"
    encoded = urllib.parse.quote(name, safe="")
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"


def _media_type(value: str | None) -> str:
    """The media type a body or file part declared in its ``Content-Type``; one that is not a
    plain ``type/subtype`` (or none) is registered as ``application/octet-stream``."""
    if not value:
        return DEFAULT_MEDIA_TYPE
    value = value.strip().lower()
    return value if MEDIA_TYPE.fullmatch(value) else DEFAULT_MEDIA_TYPE


def _given_media_type(value: str | None) -> str | None:
    """The ``media_type`` query parameter, checked before any byte is read: given, it must be
    a media type (``ARTIFACT_MEDIA_TYPE_INVALID`` otherwise, as ``charter artifacts put
    --media-type`` refuses it) — never silently replaced. The value is not echoed."""
    if value is None:
        return None
    value = value.strip().lower()
    if MEDIA_TYPE.fullmatch(value) is None:
        raise InvalidInput(
            "the media_type query parameter must be type/subtype (lower case, at most four "
            "simple parameters)",
            reason="ARTIFACT_MEDIA_TYPE_INVALID",
        )
    return value


async def _chunks(request: Request) -> tuple[str | None, str | None, AsyncIterator[bytes]]:
    """(file name, media type, body chunks) of a raw or a one-file multipart upload."""
    ctype = request.headers.get("content-type", "")
    if not ctype.lower().startswith("multipart/form-data"):
        return None, ctype or None, request.stream()
    try:
        form = await request.form(max_files=1, max_fields=4)
    except HTTPException as exc:  # Starlette's multipart parser refused the form
        raise _form_invalid(str(exc.detail)) from None
    upload = form.get("file")
    if upload is None or isinstance(upload, str):
        await form.close()
        raise InvalidInput("the multipart body has no `file` part", reason="UPLOAD_NO_FILE")

    async def read() -> AsyncIterator[bytes]:
        try:
            while chunk := await upload.read(1 << 20):
                yield chunk
        finally:
            await form.close()

    name = form.get("name")
    return (
        name if isinstance(name, str) and name else upload.filename,
        upload.content_type,
        read(),
    )


def _form_invalid(detail: str) -> InvalidInput:
    """A multipart body the parser could not read: what is wrong with the form (its messages
    are fixed texts, never the body's content)."""
    if detail.startswith("Too many files"):
        why = "it holds more than one file (send one `file` part)"
    elif detail.startswith("Too many fields"):
        why = "it holds too many fields (send a `file` part and an optional `name`)"
    else:
        why = detail.rstrip(".") or "it cannot be parsed"
    return InvalidInput(
        f"the multipart/form-data body is malformed: {why}", reason="BODY_MALFORMED"
    )


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Close an upload's chunk iterator (releases a multipart form's spooled file)."""
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()


@router.post(
    "/runs/{run_id}/artifacts",
    status_code=201,
    responses=problem_responses(401, 404, 413, 422, 507),
    summary="Upload a file into a run (registered as an untrusted user upload)",
)
async def upload(
    run_id: str,
    request: Request,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
    name: Annotated[str | None, Query(max_length=1024)] = None,
    media_type: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    await state.check_run(run_id, principal)
    given_type = _given_media_type(media_type)
    service = state.runtime.artifacts
    limit = state.runtime.deployment.artifacts.max_upload_bytes
    form_name, form_type, chunks = await _chunks(request)
    path = name or form_name
    try:
        if not path:
            raise InvalidInput("give the file's name (?name= or the form)", reason="UPLOAD_NO_NAME")
        path = path.replace("\\", "/").rsplit("/", 1)[-1] if name is None else path
        service.check_name(path)
        writer = await anyio.to_thread.run_sync(
            functools.partial(service.store.open_write, run_id, path, versioned=True)
        )
    except BaseException:
        await _drain(chunks)
        raise
    total = 0
    try:
        async for chunk in chunks:
            total += len(chunk)
            if total > limit:
                raise ResourceLimit(
                    f"the upload is larger than {limit} bytes",
                    reason="ARTIFACT_TOO_LARGE",
                    details={"limit": limit},
                )
            await anyio.to_thread.run_sync(writer.write, chunk)
        stored = await anyio.to_thread.run_sync(writer.close)
    except BaseException:
        await anyio.to_thread.run_sync(writer.abort)
        await _drain(chunks)
        raise
    try:
        record = await service.register(
            run_id,
            stored,
            type="upload",
            media_type=given_type or _media_type(form_type),
            producer=Producer(),
            trust=Trust.UNTRUSTED,
        )
    except Failure:
        await service.rollback(run_id, [stored])
        raise
    return record_dict(record)


@router.get(
    "/runs/{run_id}/artifacts",
    responses=problem_responses(401, 404),
    summary="A run's registered artifacts, in registration order",
)
async def list_artifacts(
    run_id: str,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
) -> list[dict[str, Any]]:
    await state.check_run(run_id, principal)
    return [record_dict(r) for r in await state.runtime.artifacts.registry.list(run_id)]


@router.get(
    "/runs/{run_id}/artifacts/{artifact_id}",
    responses={
        200: {"description": "The file's bytes", "content": {"application/octet-stream": {}}},
        **problem_responses(401, 404),
    },
    summary="Download an artifact (streamed, checksum-verified)",
)
async def download(
    run_id: str,
    artifact_id: str,
    principal: Annotated[Principal, Depends(get_principal)],
    state: Annotated[ServerState, Depends(get_state)],
) -> StreamingResponse:
    await state.check_run(run_id, principal)
    service = state.runtime.artifacts
    record = await service.registry.get(run_id, artifact_id)
    if record is None:
        raise PermissionDenied("no such artifact", reason="ARTIFACT_NOT_FOUND", run_id=run_id)
    reader = await anyio.to_thread.run_sync(
        functools.partial(
            service.store.open_read,
            run_id,
            record.path,
            expected_sha256=record.sha256,
            expected_size=record.size,
        )
    )

    def chunks() -> Iterator[bytes]:
        with reader:
            held = b""
            while chunk := reader.read(1 << 20):  # the read past the end verifies
                if held:
                    yield held
                held = chunk
            if held:
                yield held

    async def body() -> AsyncIterator[bytes]:
        iterator = chunks()
        while True:
            chunk = await anyio.to_thread.run_sync(next, iterator, b"")
            if not chunk:
                return
            yield chunk

    return StreamingResponse(
        body(),
        media_type=record.media_type,
        headers={
            "Content-Disposition": content_disposition(record.path),
            "Content-Length": str(record.size),
            "X-Content-Type-Options": "nosniff",
            "Digest": "sha-256=" + record.sha256.removeprefix("sha256:"),
        },
    )
