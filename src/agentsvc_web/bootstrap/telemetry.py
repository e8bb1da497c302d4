"""What the service says about itself: ``/metrics`` (the app's own registry, the
HTTP side, the turn's span metrics and the readings scraped from adapters), the one
span tracer with its sinks (the OpenTelemetry export when configured), and the
stored traces: their prices, retention, logs and analytics."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import NamedTuple

from prometheus_client import CollectorRegistry

from agentsvc_adapters.outbound import FAILURES as OUTBOUND_FAILURES
from agentsvc_adapters.postgres import PostgresStorage
from agentsvc_adapters.prices import PriceFileError, load_prices
from agentsvc_adapters.telemetry import OtelExport, SpanMetrics
from agentsvc_core.ports import Clock, Storage
from agentsvc_core.telemetry import SpanTracer
from agentsvc_core.use_cases.analytics import Analytics
from agentsvc_core.use_cases.traces.build import TraceConfig
from agentsvc_core.use_cases.traces.reading import Traces
from agentsvc_web.metrics import HttpMetrics, Reading, ReadingsCollector, new_registry
from agentsvc_web.settings import Settings, SettingsError


class Observability(NamedTuple):
    metrics: CollectorRegistry  # /metrics: this app's own registry (agentsvc_web/metrics.py)
    http_metrics: HttpMetrics
    tracer: SpanTracer


def observability(
    storage: Storage, exports: Sequence[OtelExport], sampling: tuple[float, bool]
) -> Observability:
    """The app's registry with the HTTP metrics and the adapters' readings on it,
    and the tracer whose finished spans feed the turn's metrics on the same
    registry, like the OpenTelemetry export (when configured)."""
    metrics = new_registry()
    http_metrics = HttpMetrics(metrics)
    metrics.register(_scrape_time_metrics(storage))
    ratio, parent_based = sampling  # which new traces the export sends
    tracer = SpanTracer(
        [SpanMetrics(metrics), *exports],
        propagating=bool(exports),
        sample_ratio=ratio,
        parent_based=parent_based,
    )
    return Observability(metrics, http_metrics, tracer)


def trace_config(settings: Settings) -> TraceConfig:
    """The prices of model calls (``AGENTSVC_PRICES_FILE``) and how turns' traces are
    kept."""
    try:
        prices = load_prices(settings.prices_file)
    except PriceFileError as exc:
        raise SettingsError(str(exc)) from None
    return TraceConfig(
        prices=prices,
        retention=timedelta(days=settings.trace_retention_days),
        payload_bytes=settings.trace_payload_bytes,
        slow_first_token_s=settings.eval_slow_first_token_ms / 1000,
    )


def traces_and_analytics(
    settings: Settings, storage: Storage, clock: Clock, traces: TraceConfig
) -> tuple[Traces, Analytics]:
    """The stored traces read back (``/api/logs``) and summed (``/api/analytics``)."""
    return (
        Traces(storage.traces, clock),
        Analytics(storage.analytics, clock, traces.prices.taken, settings.trace_retention_days),
    )


def _scrape_time_metrics(storage: Storage) -> ReadingsCollector:
    """Numbers the adapters keep anyway, read when /metrics is scraped: the
    outbound guard's failures by reason and, on PostgreSQL, the pool's use."""
    readings: list[Reading] = []
    if isinstance(storage, PostgresStorage):
        use = storage.pool_use
        for key, kind, doc in _POOL_READINGS:
            name = f"agentsvc_db_pool_{key}"
            readings.append((name, doc, kind, lambda key=key: use()[key]))  # type: ignore[misc]
    return ReadingsCollector(
        readings,
        labelled=(
            "agentsvc_outbound_failures",
            "Outbound calls (MCP servers, OAuth, resolver, registry, web tools) refused by the "
            "outbound guard or not connected (reason=unreachable), by reason",
            "reason",
            lambda: dict(OUTBOUND_FAILURES),
        ),
    )


_POOL_READINGS = (
    ("size", "gauge", "Connections the database pool holds now"),
    ("available", "gauge", "Idle connections in the database pool now"),
    ("waiting", "gauge", "Requests waiting for a database connection now"),
    ("max", "gauge", "The database pool's maximum size (AGENTSVC_DB_POOL_MAX)"),
    ("requests", "counter", "Connections requested from the database pool"),
    ("requests_errors", "counter", "Connection requests that failed (timeout, pool full)"),
    ("requests_wait_seconds", "counter", "Time spent waiting for a database connection"),
    ("connections_errors", "counter", "Failed attempts to open a database connection"),
    ("connections_lost", "counter", "Database connections found broken"),
)
