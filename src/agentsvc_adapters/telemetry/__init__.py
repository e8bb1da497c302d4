"""Sinks of the core's finished spans (``agentsvc_core.ports.telemetry``):
OpenTelemetry export (``otel``), turn-level Prometheus metrics (``metrics``), and
the ``traceparent`` header of outbound calls (``propagation``)."""

from agentsvc_adapters.telemetry.metrics import SpanMetrics
from agentsvc_adapters.telemetry.otel import (
    OtelConfigError,
    OtelExport,
    otel_export_from_env,
    sampler_from_env,
)
from agentsvc_adapters.telemetry.propagation import add_traceparent

__all__ = [
    "OtelConfigError",
    "OtelExport",
    "SpanMetrics",
    "add_traceparent",
    "otel_export_from_env",
    "sampler_from_env",
]
