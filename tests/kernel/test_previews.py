"""What a person and the ledger see of a call's arguments: the approval preview over budget
(every field path, type and size; values cut per field) and secrets found anywhere in it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from charter.contracts.preview import FIELD_CHARS, preview, shape
from charter.kernel.envelope import CallStatus
from charter.kernel.redaction import REDACTED
from charter.ledger.calls_projection import approval_key
from tests.kernel.conftest import APP, Env

pytestmark = pytest.mark.anyio

SECRET = "S3cr3t-0f-the-C4nary-77aa"


async def test_the_preview_of_a_10_kib_argument_keeps_the_write_target(env: Env) -> None:
    ctx = await env.kernel.resolve_context(APP, "all")
    big = "x" * 10 * 1024
    args = {"key": "/srv/www/index.html", "value": big}
    out = await env.kernel.call(ctx.context_id, "kv.put", "big", args, principal=APP)
    assert out.status is CallStatus.PENDING_APPROVAL
    assert out.approval is not None
    row = await env.store.get_row(approval_key(ctx.run_id, out.approval["id"]))
    summary = row["summary"]
    assert summary["truncated"] is True
    assert summary["maxBytes"] == 2048
    assert summary["totalBytes"] > 10 * 1024
    fields = {f["path"]: f for f in summary["fields"]}
    assert fields["/key"] == {
        "path": "/key",
        "type": "string",
        "size": 19,
        "value": "/srv/www/index.html",
    }
    assert fields["/value"]["size"] == 10 * 1024
    assert fields["/value"]["value"] == "x" * FIELD_CHARS + "…"
    assert len(json.dumps(summary)) < 1024


@pytest.mark.parametrize(
    "args",
    [
        {"url": f"https://h/p?key={SECRET}", "body": {"api_key": SECRET}},
        {"api_key": SECRET, "note": f"key is {SECRET}"},
        {"config": {"password": SECRET}, SECRET: "as a key", "q": f"a%20{SECRET}"},
    ],
    ids=["inside-url", "innocent-key", "object-key"],
)
async def test_a_secret_argument_is_scrubbed_from_every_other_field(
    env: Env, args: dict[str, Any]
) -> None:
    contract = env.build.tool("kv.put").contract
    views = env.kernel.state.summary(contract, args)
    rendered = json.dumps([views.preview, views.full, views.record])
    assert SECRET not in rendered
    assert REDACTED in rendered
    assert "https://h/p?key=" in rendered or "note" in rendered or "config" in rendered


def test_preview_and_shape_of_a_small_document() -> None:
    doc = {"path": "/a", "items": [1, 2.5, True, None], "empty": {}, "n": {"x/y~": "z"}}
    assert preview(doc, 4096) == doc
    assert shape(doc) == {
        "fields": {
            "/path": "string:2",
            "/items/0": "integer",
            "/items/1": "number",
            "/items/2": "boolean",
            "/items/3": "null",
            "/empty": "object:0",
            "/n/x~1y~0": "string:1",
        },
        "bytes": len(json.dumps(doc, separators=(",", ":"))),
    }
    listing = preview(doc, 10)
    assert [f["path"] for f in listing["fields"]] == list(shape(doc)["fields"])


def test_very_many_fields_are_listed_up_to_a_bound() -> None:
    doc = {"rows": [{"id": i} for i in range(1000)]}
    listing = preview(doc, 2048)
    assert len(listing["fields"]) == 256
    assert listing["omittedFields"] == 1000 - 256
    assert shape(doc)["omittedFields"] == 1000 - 256
