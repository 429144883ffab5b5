"""``charter.client.Client``: the HTTP API from synchronous Python."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx2

from charter.client import _common as c
from charter.errors import TransientExternal
from charter.kernel.envelope import Envelope


class Client:
    """A client of one Charter server, acting as the principal its API key (or JWT) names.

    with Client("http://127.0.0.1:8750", api_key=KEY) as cl:
        ctx = cl.resolve_context("editor")
        env = cl.call(ctx["context_id"], "notes.add", "c1", {"title": "t", "body": "b"})

    Errors raise Charter's exception tree (``PermissionDenied`` with reason
    ``CONTEXT_NOT_FOUND``, ``TransientExternal`` with ``SERVER_UNREACHABLE``, ...). A call's
    outcome is never an exception: :meth:`call` returns the envelope whatever its status.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        c.check_base_url(base_url)
        if api_key:
            c.check_api_key(api_key)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx2.Client(
            base_url=base_url.rstrip("/"),
            headers=headers,
            timeout=timeout,
            transport=transport,
            follow_redirects=False,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, **kw: Any) -> httpx2.Response:
        with c.translated():
            return self._http.request(method, path, **kw)

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        return c.check(self._request(method, path, **kw))

    # -- health -----------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self._json("GET", "/healthz")
        return result

    def ready(self) -> dict[str, Any]:
        """The readiness report (also when not ready: check ``status``)."""
        response = self._request("GET", "/readyz")
        if response.status_code not in (200, 503):
            raise c.failure_from(response)
        result: dict[str, Any] = response.json()
        return result

    # -- contexts and calls -----------------------------------------------------------

    def resolve_context(
        self,
        profile: str,
        *,
        agent: str | None = None,
        objective: str | None = None,
        attachments: Sequence[tuple[str, str]] = (),
        run_id: str | None = None,
        format: str = "charter",
    ) -> dict[str, Any]:
        body = c.context_body(profile, agent, objective, attachments, run_id)
        result: dict[str, Any] = self._json(
            "POST", "/v1/contexts", json=body, params={"format": format}
        )
        return result

    def get_context(self, context_id: str, *, format: str = "charter") -> dict[str, Any]:
        result: dict[str, Any] = self._json(
            "GET", f"/v1/contexts/{context_id}", params={"format": format}
        )
        return result

    def report_disclosure(
        self,
        context_id: str,
        *,
        tools: Sequence[Mapping[str, str]],
        schema_digest: str,
        tokens: int,
        attachment_ids: Sequence[str] = (),
        request_id: str | None = None,
        model: str | None = None,
    ) -> dict[str, Any]:
        """Report what one model request actually carried (``tools`` as ``{id, version}``);
        the answer holds the flags against the context's offer (docs/kernel.md)."""
        body: dict[str, Any] = {
            "tools": [dict(t) for t in tools],
            "schema_digest": schema_digest,
            "tokens": tokens,
            "attachment_ids": list(attachment_ids),
        }
        if request_id is not None:
            body["request_id"] = request_id
        if model is not None:
            body["model"] = model
        result: dict[str, Any] = self._json(
            "POST", f"/v1/contexts/{context_id}/disclosures", json=body
        )
        return result

    def run_disclosures(self, run_id: str) -> dict[str, Any]:
        """Offered against reported, per context of the run (``charter runs disclosure``)."""
        result: dict[str, Any] = self._json("GET", f"/v1/runs/{run_id}/disclosures")
        return result

    def call(
        self,
        context_id: str,
        tool: str,
        call_id: str,
        arguments: str | bytes | Mapping[str, Any] = "{}",
        *,
        approval_id: str | None = None,
        parent_span_id: str | None = None,
        task_id: str | None = None,
    ) -> Envelope:
        """One governed call; ``parent_span_id`` (default: the delegating call this code
        runs inside, in a remote executor) names the call it is made in."""
        response = self._request(
            "POST",
            f"/v1/contexts/{context_id}/calls",
            content=c.call_body(tool, call_id, arguments, approval_id, task_id),
            headers=c.call_headers(parent_span_id),
        )
        return c.envelope_from(response)

    def get_call(self, context_id: str | None, call_id: str) -> dict[str, Any]:
        """A call's row and receipt; ``context_id`` None finds it by its id alone (``409
        CALL_ID_AMBIGUOUS`` when two of your contexts have it)."""
        path = f"/v1/calls/{call_id}"
        if context_id is not None:
            path = f"/v1/calls/{context_id}/{call_id}"
        result: dict[str, Any] = self._json("GET", path)
        return result

    # -- approvals --------------------------------------------------------------------

    def approvals(self, *, status: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit}
        if status is not None:
            params["status"] = status
        result: list[dict[str, Any]] = self._json("GET", "/v1/approvals", params=params)
        return result

    def get_approval(self, approval_id: str, *, full: bool = False) -> dict[str, Any]:
        """One approval; ``full`` adds its whole redacted arguments (operators only)."""
        params = {"full": "true"} if full else {}
        result: dict[str, Any] = self._json("GET", f"/v1/approvals/{approval_id}", params=params)
        return result

    def approve(
        self,
        approval_id: str,
        *,
        reason: str | None = None,
        token: str | None = None,
        tenant: str | None = None,
    ) -> dict[str, Any]:
        return self._decide("approve", approval_id, reason, token, tenant)

    def reject(
        self,
        approval_id: str,
        *,
        reason: str | None = None,
        token: str | None = None,
        tenant: str | None = None,
    ) -> dict[str, Any]:
        return self._decide("reject", approval_id, reason, token, tenant)

    def _decide(
        self,
        verb: str,
        approval_id: str,
        reason: str | None,
        token: str | None,
        tenant: str | None,
    ) -> dict[str, Any]:
        body, headers = c.decision(reason, token, tenant)
        if token is not None:  # the token alone decides: send no bearer credential
            headers["Authorization"] = ""
        result: dict[str, Any] = self._json(
            "POST", f"/v1/approvals/{approval_id}/{verb}", json=body, headers=headers
        )
        return result

    # -- artifacts --------------------------------------------------------------------

    def list_artifacts(self, run_id: str) -> list[dict[str, Any]]:
        """The run's registered artifacts, in registration order."""
        result: list[dict[str, Any]] = self._json("GET", f"/v1/runs/{run_id}/artifacts")
        return result

    def upload_artifact(
        self, run_id: str, data: bytes, *, name: str, media_type: str | None = None
    ) -> dict[str, Any]:
        """Upload ``data`` as ``name`` (a taken name gets ``-vN``); returns the registration."""
        params = {"name": name, **({"media_type": media_type} if media_type else {})}
        result: dict[str, Any] = self._json(
            "POST",
            f"/v1/runs/{run_id}/artifacts",
            params=params,
            content=data,
            headers={"Content-Type": "application/octet-stream"},
        )
        return result

    def download_artifact(self, run_id: str, artifact_id: str) -> bytes:
        """The artifact's bytes (the server verified them; the size is checked here too)."""
        response = self._request("GET", f"/v1/runs/{run_id}/artifacts/{artifact_id}")
        if response.status_code >= 400:
            raise c.failure_from(response)
        return response.content

    # -- runs and events --------------------------------------------------------------

    def create_run(
        self,
        *,
        session_id: str | None = None,
        workflow: str | None = None,
        inputs: Mapping[str, tuple[str, bytes]] | None = None,
    ) -> dict[str, Any]:
        """An ad-hoc run, or a run of a catalog ``workflow`` (``inputs``: TYPE → (path,
        bytes)); returns its manifest."""
        body = c.run_body(session_id, workflow, inputs or {})
        result: dict[str, Any] = self._json("POST", "/v1/runs", json=body)
        return result

    def runs(self, *, limit: int = 50) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._json("GET", "/v1/runs", params={"limit": limit})
        return result

    def get_run(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._json("GET", f"/v1/runs/{run_id}")
        return result

    def verify_run(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._json("GET", f"/v1/runs/{run_id}/verify")
        return result

    def cancel_run(self, run_id: str, *, reason: str) -> dict[str, Any]:
        """An operator cancels a run (calls in flight settle first); returns its manifest."""
        result: dict[str, Any] = self._json(
            "POST", f"/v1/runs/{run_id}/cancel", json={"reason": reason}
        )
        return result

    def fail_run(self, run_id: str, *, reason: str) -> dict[str, Any]:
        result: dict[str, Any] = self._json(
            "POST", f"/v1/runs/{run_id}/fail", json={"reason": reason}
        )
        return result

    def end_task(self, run_id: str, task_id: str, action: str, *, reason: str) -> dict[str, Any]:
        """``action``: cancel, fail or skip; returns the task row."""
        result: dict[str, Any] = self._json(
            "POST", f"/v1/runs/{run_id}/tasks/{task_id}/{action}", json={"reason": reason}
        )
        return result

    # -- catalog runs: tasks, handoffs, finishing (docs/workflows.md) -----------------

    def tasks(self, run_id: str) -> list[dict[str, Any]]:
        """A catalog run's tasks, each with its pinned ``contract``."""
        result: list[dict[str, Any]] = self._json("GET", f"/v1/runs/{run_id}/tasks")
        return result

    def task(self, run_id: str, task_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._json("GET", f"/v1/runs/{run_id}/tasks/{task_id}")
        return result

    def record_handoff(
        self, run_id: str, task_id: str, handoff: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Record the handoff binding the task's next attempt; the task with ``handoff_id``."""
        result: dict[str, Any] = self._json(
            "POST", f"/v1/runs/{run_id}/tasks/{task_id}/handoff", json=dict(handoff)
        )
        return result

    def start_task(self, run_id: str, task_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._json("POST", f"/v1/runs/{run_id}/tasks/{task_id}/start")
        return result

    def complete_task(self, run_id: str, task_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._json("POST", f"/v1/runs/{run_id}/tasks/{task_id}/complete")
        return result

    def finish_run(self, run_id: str) -> dict[str, Any]:
        """``{"run_id", "status": "completed" | "partial", "gaps"}``."""
        result: dict[str, Any] = self._json("POST", f"/v1/runs/{run_id}/finish")
        return result

    def events(self, run_id: str, *, after: int = 0, limit: int = 500) -> dict[str, Any]:
        """One page of events as JSON: ``{"events": [...], "next_after": SEQ}``."""
        result: dict[str, Any] = self._json(
            "GET", f"/v1/runs/{run_id}/events", params={"after": after, "limit": limit}
        )
        return result

    def stream_events(
        self,
        run_id: str,
        *,
        after: int = 0,
        max_reconnects: int = 5,
        retry_s: float = 0.2,
        read_timeout: float | None = 60.0,
    ) -> Iterator[dict[str, Any]]:
        """Follow the run's events over SSE; a dropped connection is resumed with
        ``Last-Event-ID`` so no event is missed or repeated. Ends when the server ends the
        stream (the run reached a terminal status)."""
        last = after
        failures = 0
        while True:
            headers = {"Accept": "text/event-stream", "Last-Event-ID": str(last)}
            try:
                with (
                    c.translated(),
                    self._http.stream(
                        "GET",
                        f"/v1/runs/{run_id}/events",
                        headers=headers,
                        timeout=httpx2.Timeout(10.0, read=read_timeout),
                    ) as response,
                ):
                    if response.status_code >= 400:
                        response.read()
                        raise c.failure_from(response)
                    for sse in httpx2.EventSource(response):
                        event = c.sse_event(sse)
                        if event is not None:
                            last = int(event["seq"])
                            failures = 0
                            yield event
                return
            except TransientExternal:
                failures += 1
                if failures > max_reconnects:
                    raise
                time.sleep(retry_s)

    # -- chat -------------------------------------------------------------------------

    def chat_agents(self) -> dict[str, Any]:
        """The agents you may chat with and the server's defaults: ``{"agents": [{name,
        description}], "defaultAgent", "defaultProfile"}`` (a default is None when the
        deployment sets none). A server older than the endpoint raises ``InvalidInput`` with
        reason ``ROUTE_NOT_FOUND``."""
        result: dict[str, Any] = self._json("GET", "/v1/chat/agents")
        return result

    def chat(
        self,
        message: str,
        *,
        conversation_id: str | None = None,
        profile: str | None = None,
        agent: str | None = None,
        attachments: Sequence[tuple[str, str]] = (),
        read_timeout: float | None = 300.0,
    ) -> Iterator[dict[str, Any]]:
        """Send a message and follow the turn's stream events until ``conversation.completed``.
        If the connection drops, the turn goes on on the server: resume with
        :meth:`chat_events` after the last sequence you saw."""
        body = c.chat_body(
            message,
            conversation_id=conversation_id,
            profile=profile,
            agent=agent,
            attachments=attachments,
        )
        yield from self._chat_stream("POST", "/v1/chat", {}, json=body, read_timeout=read_timeout)

    def chat_events(
        self, conversation_id: str, *, after: int = 0, read_timeout: float | None = 300.0
    ) -> Iterator[dict[str, Any]]:
        """A conversation's stored events after ``after`` (sent as ``Last-Event-ID``), then
        the running turn's live ones."""
        yield from self._chat_stream(
            "GET",
            f"/v1/chat/{conversation_id}/events",
            {"Last-Event-ID": str(after)},
            read_timeout=read_timeout,
        )

    def _chat_stream(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        *,
        read_timeout: float | None,
        **kw: Any,
    ) -> Iterator[dict[str, Any]]:
        with (
            c.translated(),
            self._http.stream(
                method,
                path,
                headers={"Accept": "text/event-stream", **headers},
                timeout=httpx2.Timeout(10.0, read=read_timeout),
                **kw,
            ) as response,
        ):
            if response.status_code >= 400:
                response.read()
                raise c.failure_from(response)
            for sse in httpx2.EventSource(response):
                event = c.chat_event(sse)
                if event is not None:
                    yield event
                    if event["type"] == "conversation.completed":
                        return

    # -- proposals --------------------------------------------------------------------

    def proposals(self, *, status: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit, **({"status": status} if status else {})}
        result: list[dict[str, Any]] = self._json("GET", "/v1/proposals", params=params)
        return result

    def get_proposal(self, proposal_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._json("GET", f"/v1/proposals/{proposal_id}")
        return result

    def approve_proposal(self, proposal_id: str, *, reason: str | None = None) -> dict[str, Any]:
        body = {"reason": reason} if reason else {}
        result: dict[str, Any] = self._json(
            "POST", f"/v1/proposals/{proposal_id}/approve", json=body
        )
        return result

    def reject_proposal(self, proposal_id: str, *, reason: str | None = None) -> dict[str, Any]:
        body = {"reason": reason} if reason else {}
        result: dict[str, Any] = self._json(
            "POST", f"/v1/proposals/{proposal_id}/reject", json=body
        )
        return result

    def apply_proposal(self, proposal_id: str, *, reason: str | None = None) -> dict[str, Any]:
        body = {"reason": reason} if reason else {}
        result: dict[str, Any] = self._json("POST", f"/v1/proposals/{proposal_id}/apply", json=body)
        return result
