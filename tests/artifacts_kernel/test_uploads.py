"""Uploads and downloads over a real server on 127.0.0.1: hostile names, tenants, integrity."""

from __future__ import annotations

import urllib.parse

import httpx2
import pytest

from charter.client import Client
from charter.errors import Failure
from charter.server.routes.artifacts import content_disposition
from tests.server._harness import Project, ThreadServer

HOSTILE = 'rep"ort; filename=evil.sh\r\n\u202e日本.txt'


def _run(client: Client) -> str:
    ctx = client.resolve_context("all")
    return str(ctx["run_id"])


def test_upload_download_round_trip_with_a_hostile_name(
    served: Project, server: ThreadServer, clients: dict[str, Client]
) -> None:
    app = clients["app"]
    run_id = _run(app)
    data = bytes(range(256)) * 5000
    # a name with CR/LF and a bidi override is refused by the path rules
    with pytest.raises(Failure) as caught:
        app.upload_artifact(run_id, data, name=HOSTILE)
    assert caught.value.reason.startswith("ARTIFACT_PATH")
    name = 'rep"ort; filename=evil.sh 日本 100%.txt'
    record = app.upload_artifact(run_id, data, name=name, media_type="text/plain")
    assert record["trust"] == "untrusted"
    assert record["path"] == name
    # the same name again gets -v2; the first is untouched
    again = app.upload_artifact(run_id, b"other", name=name)
    assert again["path"] == 'rep"ort; filename=evil.sh 日本 100%-v2.txt'
    listed = app.list_artifacts(run_id)
    assert [a["artifact_id"] for a in listed] == [record["artifact_id"], again["artifact_id"]]
    headers = {"Authorization": f"Bearer {served.keys['app']}"}
    response = httpx2.get(
        f"{server.url}/v1/runs/{run_id}/artifacts/{record['artifact_id']}", headers=headers
    )
    assert response.status_code == 200
    assert response.content == data
    assert response.headers["content-type"].startswith("text/plain")
    disposition = response.headers["content-disposition"]
    assert "\r" not in disposition
    assert "\n" not in disposition
    encoded = disposition.split("filename*=UTF-8''", 1)[1]
    assert urllib.parse.unquote(encoded) == name
    assert app.download_artifact(run_id, again["artifact_id"]) == b"other"


def test_multipart_upload(
    clients: dict[str, Client], served: Project, server: ThreadServer
) -> None:
    run_id = _run(clients["app"])
    response = httpx2.post(
        f"{server.url}/v1/runs/{run_id}/artifacts",
        headers={"Authorization": f"Bearer {served.keys['app']}"},
        files={"file": ("dir/../notes.md", b"# notes", "text/markdown")},
    )
    assert response.status_code == 201, response.text
    assert response.json()["path"] == "notes.md"
    assert response.json()["media_type"] == "text/markdown"


def test_another_tenants_run_answers_404(clients: dict[str, Client]) -> None:
    run_id = _run(clients["app"])
    record = clients["app"].upload_artifact(run_id, b"secret", name="s.txt")
    for call in (
        lambda c: c.list_artifacts(run_id),
        lambda c: c.download_artifact(run_id, record["artifact_id"]),
        lambda c: c.upload_artifact(run_id, b"x", name="y.txt"),
    ):
        with pytest.raises(Failure) as caught:
            call(clients["gapp"])
        assert caught.value.reason == "RUN_NOT_FOUND"


def test_a_tampered_file_is_never_delivered_complete(
    served: Project, server: ThreadServer, clients: dict[str, Client]
) -> None:
    app = clients["app"]
    run_id = _run(app)
    record = app.upload_artifact(run_id, b"A" * 3_000_000, name="big.bin")
    path = served.root / ".charter" / "artifacts" / run_id / "big.bin"
    path.chmod(0o644)
    path.write_bytes(b"B" * 3_000_000)  # same size, other content
    with pytest.raises((Failure, httpx2.HTTPError)):
        app.download_artifact(run_id, record["artifact_id"])


def test_content_disposition_is_safe_for_any_name() -> None:
    value = content_disposition('a/"x";\\ é.txt')
    assert value.startswith('attachment; filename="')
    assert "filename*=UTF-8''%22x%22%3B%5C%20%C3%A9.txt" in value


def test_verify_over_the_api_checks_artifact_files(
    served: Project, server: ThreadServer, clients: dict[str, Client]
) -> None:
    app = clients["app"]
    run_id = _run(app)
    record = app.upload_artifact(run_id, b"report v1", name="report.txt")
    assert app.verify_run(run_id)["ok"] is True
    path = served.root / ".charter" / "artifacts" / run_id / "report.txt"
    path.chmod(0o644)
    path.write_bytes(b"report v2")
    report = app.verify_run(run_id)
    assert report["ok"] is False
    assert report["reason"] == "ARTIFACT_INTEGRITY_MISMATCH"
    assert report["artifact_id"] == record["artifact_id"]


@pytest.mark.parametrize(
    "given", ["text/html\r\nX-Evil:1", "not a type", "text", "\x00", "", "TEXT/<b>"]
)
def test_an_invalid_media_type_is_refused_not_replaced(
    clients: dict[str, Client], served: Project, server: ThreadServer, given: str
) -> None:
    """``?media_type=`` that is not a media type is 422 ``ARTIFACT_MEDIA_TYPE_INVALID`` naming
    the parameter (as the CLI's ``--media-type``), with nothing stored; it used to be
    registered as ``application/octet-stream`` (201)."""
    app = clients["app"]
    run_id = _run(app)
    url = f"{server.url}/v1/runs/{run_id}/artifacts"
    auth = {"Authorization": f"Bearer {served.keys['app']}"}
    for sent in (
        {"params": {"name": "m1.txt", "media_type": given}, "content": b"hello"},
        {"params": {"media_type": given}, "files": {"file": ("m1.txt", b"hello", "text/plain")}},
    ):
        response = httpx2.post(url, headers=auth, **sent)  # type: ignore[arg-type]
        assert response.status_code == 422, response.text
        problem = response.json()
        assert (problem["code"], problem["reason"]) == (
            "invalid_input",
            "ARTIFACT_MEDIA_TYPE_INVALID",
        )
        assert "media_type" in problem["detail"]
        assert "evil" not in response.text.lower()
    assert app.list_artifacts(run_id) == []
    good = httpx2.post(
        url, headers=auth, params={"name": "m1.txt", "media_type": " Text/Plain "}, content=b"hi"
    )
    assert good.status_code == 201, good.text
    assert good.json()["media_type"] == "text/plain"


def test_a_body_content_type_that_is_no_media_type_is_registered_as_octet_stream(
    clients: dict[str, Client], served: Project, server: ThreadServer
) -> None:
    """Only the explicit parameter is refused: a body's own Content-Type the client may not
    control (a quoted charset, say) falls back to application/octet-stream, as documented."""
    run_id = _run(clients["app"])
    response = httpx2.post(
        f"{server.url}/v1/runs/{run_id}/artifacts",
        headers={
            "Authorization": f"Bearer {served.keys['app']}",
            "Content-Type": 'text/plain; charset="utf-8"',
        },
        params={"name": "q.txt"},
        content=b"hi",
    )
    assert response.status_code == 201, response.text
    assert response.json()["media_type"] == "application/octet-stream"
