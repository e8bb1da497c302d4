"""OpenTelemetry export of the core's finished spans, through the official SDK.

Off unless an exporter is configured by the standard variables:

- ``OTEL_SDK_DISABLED=true`` turns it off whatever else is set;
- ``OTEL_TRACES_EXPORTER``: a comma-separated list of ``otlp`` (OTLP over HTTP
  with protobuf), ``console`` (one JSON object per span on stdout, for a quick
  look) and ``none``; unset means none;
- ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``OTEL_EXPORTER_OTLP_PROTOCOL``: only
  ``http/protobuf`` (the default) is supported; ``grpc`` and ``http/json`` are a
  configuration error at start-up;
- the OTLP exporter reads ``OTEL_EXPORTER_OTLP_ENDPOINT`` (``/v1/traces`` is
  appended) or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as is), ``_HEADERS``,
  ``_TIMEOUT``, ``_COMPRESSION``, ``_CERTIFICATE``... (both the general and the
  ``_TRACES_`` forms) itself;
- the batch processor reads ``OTEL_BSP_SCHEDULE_DELAY``, ``OTEL_BSP_MAX_QUEUE_SIZE``,
  ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` and ``OTEL_BSP_EXPORT_TIMEOUT``;
- the resource: ``OTEL_SERVICE_NAME`` (default ``agentsvc``) and
  ``OTEL_RESOURCE_ATTRIBUTES``;
- sampling (``sampler_from_env``, applied by the core tracer when a trace starts):
  ``OTEL_TRACES_SAMPLER`` = ``parentbased_always_on`` (default), ``always_on``,
  ``always_off``, ``traceidratio``, ``parentbased_always_off`` or
  ``parentbased_traceidratio``, with ``OTEL_TRACES_SAMPLER_ARG`` the ratio. Only
  the export skips unsampled traces: the metrics count every turn.

Export runs off the hot path: ``on_end`` converts the span and appends it to the
``BatchSpanProcessor``'s queue; the processor's thread sends batches. A full
queue drops spans (the SDK logs it) rather than slowing a reply. ``aclose``
flushes and shuts the exporter down (service shutdown). A span whose trace is not
sampled (an incoming ``traceparent`` with the sampled flag off) is not exported.

The collector's address is the operator's configuration, like the model
providers': the exporter's HTTP client does not go through the outbound guard.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Status, StatusCode, TraceFlags

from agentsvc_core.ports.telemetry import FinishedSpan, SpanSink

__all__ = ["OtelConfigError", "OtelExport", "otel_export_from_env", "sampler_from_env"]

VERSION = "0.1.0"
_KINDS = {
    "internal": trace_api.SpanKind.INTERNAL,
    "server": trace_api.SpanKind.SERVER,
    "client": trace_api.SpanKind.CLIENT,
}
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_UNSET = Status(StatusCode.UNSET)


class OtelConfigError(Exception):
    """An OTEL_* setting this service cannot honour (the message says which)."""


class OtelExport(SpanSink):
    """Hands each finished span to an OpenTelemetry span processor (batching)."""

    def __init__(self, processor: SpanProcessor, resource: Resource) -> None:
        self._processor = processor
        self._resource = resource
        self._scope = InstrumentationScope("agentsvc", VERSION)

    def on_end(self, span: FinishedSpan) -> None:
        if not span.sampled:
            return
        trace_id = int(span.trace_id, 16)
        context = trace_api.SpanContext(trace_id, int(span.span_id, 16), False, _SAMPLED)
        parent = (
            None
            if span.parent_span_id is None
            else trace_api.SpanContext(
                trace_id, int(span.parent_span_id, 16), span.parent_remote, _SAMPLED
            )
        )
        status = _UNSET if span.status != "error" else Status(StatusCode.ERROR)
        self._processor.on_end(
            ReadableSpan(
                name=span.name,
                context=context,
                parent=parent,
                resource=self._resource,
                attributes=dict(span.attributes),
                kind=_KINDS[span.kind],
                status=status,
                start_time=span.start_ns,
                end_time=span.end_ns,
                instrumentation_scope=self._scope,
            )
        )

    def flush(self, timeout_ms: int = 30_000) -> bool:
        return self._processor.force_flush(timeout_ms)

    async def aclose(self) -> None:
        """Export what is queued, then stop the processor's thread (in a worker
        thread: the last export may take up to the exporter's timeout)."""
        await asyncio.to_thread(self._processor.shutdown)


def _exporters(env: Mapping[str, str]) -> list[SpanExporter]:
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",")]
    exporters: list[SpanExporter] = []
    for name in names:
        if name in {"", "none"}:
            continue
        if name == "otlp":
            protocol = (
                env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf"
            ).strip()
            if protocol != "http/protobuf":
                raise OtelConfigError(
                    f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported: "
                    "use http/protobuf (OTLP over HTTP)"
                )
            # imported here: it loads requests and protobuf, which a service
            # without export does not need
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
                OTLPSpanExporter,
            )

            exporters.append(OTLPSpanExporter())
        elif name == "console":
            exporters.append(ConsoleSpanExporter())
        else:
            raise OtelConfigError(
                f"OTEL_TRACES_EXPORTER={name} is not supported: use otlp, console or none"
            )
    return exporters


def _resource(env: Mapping[str, str]) -> Resource:
    from_env = Resource.create()  # OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME
    name = env.get("OTEL_SERVICE_NAME") or from_env.attributes.get(SERVICE_NAME)
    if not name or str(name).startswith("unknown_service"):
        name = "agentsvc"
    return from_env.merge(Resource({SERVICE_NAME: str(name), SERVICE_VERSION: VERSION}))


_SAMPLERS = {
    "always_on": (1.0, False),
    "always_off": (0.0, False),
    "traceidratio": (None, False),
    "parentbased_always_on": (1.0, True),
    "parentbased_always_off": (0.0, True),
    "parentbased_traceidratio": (None, True),
}


def sampler_from_env(env: Mapping[str, str] | None = None) -> tuple[float, bool]:
    """``OTEL_TRACES_SAMPLER`` (default ``parentbased_always_on``) and
    ``OTEL_TRACES_SAMPLER_ARG`` (the ratio, default 1.0) as the core tracer's
    ``(sample_ratio, parent_based)``. Raises ``OtelConfigError`` for another sampler."""
    env = os.environ if env is None else env
    name = env.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on"
    if name not in _SAMPLERS:
        raise OtelConfigError(
            f"OTEL_TRACES_SAMPLER={name} is not supported: use one of {', '.join(_SAMPLERS)}"
        )
    ratio, parent_based = _SAMPLERS[name]
    if ratio is None:
        raw = env.get("OTEL_TRACES_SAMPLER_ARG", "").strip() or "1.0"
        try:
            ratio = float(raw)
        except ValueError:
            raise OtelConfigError(f"OTEL_TRACES_SAMPLER_ARG={raw} is not a number") from None
        if not 0.0 <= ratio <= 1.0:
            raise OtelConfigError(f"OTEL_TRACES_SAMPLER_ARG={raw} is not between 0 and 1")
    return ratio, parent_based


def otel_export_from_env(env: Mapping[str, str] | None = None) -> list[OtelExport]:
    """One ``OtelExport`` per configured exporter (none: export is off). Raises
    ``OtelConfigError`` for a setting that cannot be honoured."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    exporters = _exporters(env)
    if not exporters:
        return []
    resource = _resource(env)
    return [OtelExport(BatchSpanProcessor(e), resource) for e in exporters]
