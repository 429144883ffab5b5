"""``/metrics`` through the official Prometheus client: one registry per app, and the
multiprocess mode that sums every worker's values when ``PROMETHEUS_MULTIPROC_DIR`` is set."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from charter.server.metrics import ServerMetrics, gauge


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_two_apps_in_one_process_keep_their_own_counts() -> None:
    first, second = ServerMetrics(), ServerMetrics()
    first.record_call("kv.get", "succeeded", 0.01)
    first.record_call("kv.put", "unknown", 0.5)
    second.record_phase("intent", 0.0002)
    one = _samples(first.render().decode())
    two = _samples(second.render().decode())
    assert one[("charter_calls_total", (("status", "succeeded"), ("tool", "kv.get")))] == 1
    assert one[("charter_unknown_outcomes_total", (("tool", "kv.put"),))] == 1
    assert ("charter_calls_total", (("status", "succeeded"), ("tool", "kv.get"))) not in two
    assert two[("charter_call_phase_seconds_count", (("phase", "intent"),))] == 1


def test_shared_gauges_follow_the_process_values() -> None:
    metrics = ServerMetrics()
    text = metrics.render(
        [gauge("charter_unknown_calls", "Unknown calls.", {("kv.put",): 3.0}, labels=("tool",))]
    ).decode()
    assert _samples(text)[("charter_unknown_calls", (("tool", "kv.put"),))] == 3


_WORKER = textwrap.dedent(
    """
    import sys
    from charter.server.metrics import ServerMetrics
    metrics = ServerMetrics()
    for _ in range(int(sys.argv[1])):
        metrics.record_call("kv.get", "succeeded", 0.01)
    metrics.record_request("GET", "/healthz", 200)
    """
)

_SCRAPER = textwrap.dedent(
    """
    import sys
    from charter.server.metrics import ServerMetrics
    sys.stdout.write(ServerMetrics().render().decode())
    """
)


def test_multiprocess_mode_sums_every_worker(tmp_path: Path) -> None:
    """Two worker processes record calls; a scrape served by a third sees their sum."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for count in ("2", "3"):
        subprocess.run([sys.executable, "-c", _WORKER, count], env=env, check=True, timeout=60)
    scraped = subprocess.run(
        [sys.executable, "-c", _SCRAPER], env=env, check=True, capture_output=True, text=True
    ).stdout
    samples = _samples(scraped)
    assert samples[("charter_calls_total", (("status", "succeeded"), ("tool", "kv.get")))] == 5
    key = (("method", "GET"), ("route", "/healthz"), ("status", "200"))
    assert samples[("charter_http_requests_total", key)] == 2
