"""Creating catalog runs from the outside: ``POST /v1/runs`` bodies and ``--input`` options.

``POST /v1/runs`` takes ``{"workflow": SLUG, "inputs": {TYPE: {path, media_type,
content_base64}}}``; ``charter runs create SLUG --input TYPE=FILE`` reads the files. Both end in
:meth:`charter.workflows.service.WorkflowRuns.create_run` (pinned contract, tasks, inputs
registered as untrusted artifacts, run ``running``).
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from charter.artifacts.user_file import read_user_file
from charter.contracts.text import shown
from charter.errors import InvalidInput
from charter.kernel.principals import Principal
from charter.workflows.service import RunInput, WorkflowRuns

if TYPE_CHECKING:
    from charter.runtime import Runtime


class InputFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, max_length=512)
    media_type: str = Field(default="application/octet-stream", max_length=255)
    content_base64: str


class CatalogRunRequest(BaseModel):
    """``POST /v1/runs``: an ad-hoc run without ``workflow``, a catalog run with it."""

    model_config = ConfigDict(extra="forbid")

    session_id: str | None = Field(default=None, max_length=128)
    workflow: str | None = Field(default=None, max_length=64)
    inputs: dict[str, InputFile] = Field(default_factory=dict)


def inputs_from_request(inputs: Mapping[str, InputFile]) -> list[RunInput]:
    out = []
    for typ, item in sorted(inputs.items()):
        try:
            data = base64.b64decode(item.content_base64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidInput(
                f"input {shown(typ)}: content_base64 is not base64", reason="RUN_INPUT_INVALID"
            ) from exc
        out.append(RunInput(type=typ, path=item.path, data=data, media_type=item.media_type))
    return out


def inputs_from_options(options: Sequence[str], *, base: Path) -> list[RunInput]:
    """``TYPE=FILE`` options: the file's name becomes the artifact path under ``inputs/``."""
    out = []
    for opt in options:
        typ, sep, file = opt.partition("=")
        if not sep or not typ or not file:
            raise InvalidInput(
                f"--input {shown(opt)}: expected TYPE=FILE", reason="RUN_INPUT_INVALID"
            )
        path = base / file
        try:  # a name too long for the file system is no such file either
            path = path.resolve()
            found = path.exists()
        except OSError:
            found = False
        if not found:
            raise InvalidInput(f"--input {shown(opt)}: no such file", reason="RUN_INPUT_INVALID")
        # a regular file only: a FIFO or a device (/dev/zero) would be read forever
        data = read_user_file(path, what=f"--input {shown(opt)}:")
        media = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        out.append(RunInput(type=typ, path=f"inputs/{path.name}", data=data, media_type=media))
    return out


async def create_catalog_run(
    rt: Runtime,
    principal: Principal,
    workflow: str,
    inputs: Sequence[RunInput] = (),
    *,
    session_id: str | None = None,
) -> str:
    rt.redactor.refuse_in_id(session_id, "session_id")
    runs = WorkflowRuns(build=rt.build, store=rt.store, artifacts=rt.artifacts)
    return await runs.create_run(
        workflow,
        principal=principal.name,
        tenant=principal.tenant,
        session_id=session_id,
        inputs=inputs,
    )
