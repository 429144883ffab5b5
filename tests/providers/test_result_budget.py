"""A tool result reaches the model within its byte budget, or as a marker that says it did not."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from charter.adapters import result_text
from charter.kernel.acceptance import model_text
from charter.kernel.envelope import CallStatus, Envelope
from charter.providers.orchestrator import ChatSettings, KernelInvoker


def test_model_text_passes_a_fitting_body_and_marks_an_oversized_one() -> None:
    body = {"status": "succeeded", "data": {"rows": ["x" * 10] * 3}, "error": None}
    text, marker = model_text(body, 1000)
    assert marker is None
    assert json.loads(text) == body
    text, marker = model_text(body, 20)
    assert marker == {
        "status": "succeeded",
        "truncated": True,
        "maxBytes": 20,
        "note": "the tool result exceeded the model's result budget",
    }
    assert json.loads(text) == marker


def test_the_chat_orchestrator_clamps_what_the_model_gets() -> None:
    settings = ChatSettings(result_max_bytes=64)
    invoker: Any = KernelInvoker.__new__(KernelInvoker)
    invoker.o = SimpleNamespace(settings=settings)  # _content reads only the budget
    big = Envelope(call_id="c1", status=CallStatus.SUCCEEDED, data={"text": "y" * 500})
    content, data = invoker._content(big)
    assert json.loads(content)["truncated"] is True
    assert data["maxBytes"] == 64
    small = Envelope(call_id="c2", status=CallStatus.SUCCEEDED, data={"n": 1})
    content, data = invoker._content(small)
    assert json.loads(content) == {"status": "succeeded", "data": {"n": 1}, "error": None}
    assert data == {"n": 1}


def test_the_framework_adapters_clamp_what_the_model_gets() -> None:
    big = Envelope(call_id="c1", status=CallStatus.SUCCEEDED, data={"text": "y" * 500})
    assert json.loads(result_text(big, 64))["truncated"] is True
    assert json.loads(result_text(big))["data"] == {"text": "y" * 500}  # 64 KiB by default
