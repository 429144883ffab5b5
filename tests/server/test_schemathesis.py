"""schemathesis against the served OpenAPI document: generated requests (20 examples per
operation) to every operation of a real server; no 5xx, and every answer matches the
documented status codes, media types and schemas.

``positive_data_acceptance`` is left out on purpose: it expects every schema-valid request to
succeed, but a schema-valid profile name that the Build does not have, or arguments that break
a tool's own contract, are rightly refused (422) — that is domain validation, not a defect.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.server._harness import Project, ThreadServer


@pytest.mark.slow
def test_openapi_conformance(server: ThreadServer, project: Project) -> None:
    api = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    headers = {"Authorization": f"Bearer {project.keys['alice']}"}
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) >= 14
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=20,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(
                headers=headers, timeout=30, excluded_checks=[positive_data_acceptance]
            )

        check()
