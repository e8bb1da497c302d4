"""HttpMetrics (agentsvc_web/metrics.py): its counts, as Prometheus reads them."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agentsvc_web.metrics import HttpMetrics, new_registry


def test_counts_and_histogram_buckets_read_back_through_the_text_format() -> None:
    registry = new_registry()
    metrics = HttpMetrics(registry)
    for seconds in (0.001, 0.005, 0.2, 3.0, 500.0):
        metrics.observe("/api/agents", "GET", 200, seconds)
    metrics.observe("/api/agents", "GET", 404, 0.002)
    metrics.observe("/api/agents", "PROPFIND", 405, 0.002)
    metrics.streams_open += 2
    families = {
        f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())
    }
    counts = {
        (s.labels["method"], s.labels["status"]): s.value
        for s in families["agentsvc_http_requests"].samples
    }
    assert counts == {("GET", "200"): 5, ("GET", "404"): 1, ("other", "405"): 1}
    get = [
        s
        for s in families["agentsvc_http_request_duration_seconds"].samples
        if s.labels["method"] == "GET"
    ]
    buckets = {s.labels["le"]: s.value for s in get if s.name.endswith("_bucket")}
    assert buckets["0.005"] == 3  # 0.001, 0.005 (a bound is inclusive), 0.002
    assert buckets["0.25"] == 4
    assert buckets["5.0"] == 5
    assert buckets["120.0"] == 5
    assert buckets["+Inf"] == 6
    total = next(s.value for s in get if s.name.endswith("_sum"))
    assert abs(total - (0.001 + 0.005 + 0.2 + 3.0 + 500.0 + 0.002)) < 1e-9
    assert next(s.value for s in get if s.name.endswith("_count")) == 6
    assert families["agentsvc_sse_streams_open"].samples[0].value == 2
    assert "_created" not in generate_latest(registry).decode()
