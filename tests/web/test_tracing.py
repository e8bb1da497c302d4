"""A server span per request (docs/architecture.md, "Spans: one model, several outputs"):
named by the route template, with the HTTP attributes, parent of the reply a send
starts, child of an incoming ``traceparent``; and the export's configuration by the
standard OTEL_* variables (docs/operations.md, "Traces: OpenTelemetry")."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agentsvc_adapters.telemetry import OtelConfigError, OtelExport, otel_export_from_env
from agentsvc_core.ports.telemetry import FinishedSpan
from agentsvc_web.app import create_app
from agentsvc_web.bootstrap import Services, build_services
from agentsvc_web.settings import Settings, SettingsError
from tests.sse import parse

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def traced() -> Iterator[tuple[TestClient[Any], InMemorySpanExporter]]:
    key = f"ask_web_{uuid.uuid4().hex}"
    settings = Settings(
        storage="memory", bootstrap_api_key=key, bootstrap_org=f"web-{uuid.uuid4().hex[:8]}"
    )
    base = build_services(settings)
    memory = InMemorySpanExporter()
    services = Services(
        settings,
        base.storage,
        base.verifier,
        base.conversation._router,
        base.stops,
        box=base.box,
        mcp_client=base.mcp_client,
        urls=base.urls,
        registry=base.registry,
        oauth_network=base.oauth_network,
        resolver=base.resolver,
        webhooks=base.webhook_caller,
        exports=[OtelExport(SimpleSpanProcessor(memory), Resource.create())],
    )
    services.closers.extend(base.closers)
    with TestClient(create_app(settings, services)) as client:
        client.headers["Authorization"] = f"Bearer {key}"
        yield client, memory


def by_name(memory: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {s.name: s for s in memory.get_finished_spans()}


def test_a_send_is_a_server_span_parent_of_its_reply(
    traced: tuple[TestClient[Any], InMemorySpanExporter],
) -> None:
    client, memory = traced
    agent = client.post("/api/agents", json={"name": "Helper"}).json()
    thread = client.post("/api/threads", json={"agentId": agent["id"]}).json()
    r = client.post(
        f"/api/threads/{thread['id']}/messages",
        json={"content": "hello"},
        headers={"traceparent": CALLER},
    )
    assert r.status_code == 200
    meta = parse(r.text)[0].data
    spans = by_name(memory)
    request = spans["POST /api/threads/{thread_id}/messages"]
    reply = spans["invoke_agent Helper"]
    assert request.kind is SpanKind.SERVER
    assert request.attributes == {
        "http.request.method": "POST",
        "http.route": "/api/threads/{thread_id}/messages",
        "http.response.status_code": 200,
    }
    assert request.context is not None
    assert request.parent is not None
    assert request.parent.span_id == 0x00F067AA0BA902B7
    assert request.parent.is_remote
    assert f"{request.context.trace_id:032x}" == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert meta["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert reply.parent is not None
    assert reply.parent.span_id == request.context.span_id
    assert "POST /api/agents" in spans


def test_a_refused_request_is_a_span_with_its_status_not_an_error(
    traced: tuple[TestClient[Any], InMemorySpanExporter],
) -> None:
    client, memory = traced
    r = client.get("/api/agents", headers={"Authorization": "Bearer ask_wrong"})
    assert r.status_code == 401
    span = by_name(memory)["GET /api/agents"]
    assert span.attributes is not None
    assert span.attributes["http.response.status_code"] == 401
    assert span.status.status_code is StatusCode.UNSET
    assert span.parent is None  # no traceparent: a new trace
    assert client.get("/healthz").status_code == 200
    assert "GET /healthz" in by_name(memory)


def test_export_is_off_unless_an_exporter_is_configured() -> None:
    assert otel_export_from_env({}) == []
    assert otel_export_from_env({"OTEL_TRACES_EXPORTER": "none"}) == []
    assert otel_export_from_env({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}) == []
    (export,) = otel_export_from_env(
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    )
    export._processor.shutdown()


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
        {"OTEL_TRACES_EXPORTER": "zipkin"},
    ],
)
def test_an_exporter_that_cannot_be_honoured_is_a_clear_error(env: dict[str, str]) -> None:
    with pytest.raises(OtelConfigError, match="not supported"):
        otel_export_from_env(env)


def test_the_service_refuses_to_start_with_an_unsupported_exporter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "jaeger")
    with pytest.raises(SettingsError, match="OTEL_TRACES_EXPORTER=jaeger"):
        build_services(Settings(storage="memory"))


def test_traceparent_goes_out_only_with_export_on(monkeypatch: pytest.MonkeyPatch) -> None:
    assert build_services(Settings(storage="memory")).urls.request_hooks == ()  # type: ignore[attr-defined]
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    services = build_services(Settings(storage="memory"))
    assert len(services.urls.request_hooks) == 1  # type: ignore[attr-defined]
    assert services.tracer.propagating


async def test_shutdown_flushes_what_the_batch_holds() -> None:
    memory = InMemorySpanExporter()
    # a batch due in an hour: only the shutdown sends it
    export = OtelExport(
        BatchSpanProcessor(memory, schedule_delay_millis=3_600_000), Resource.create()
    )
    export.on_end(
        FinishedSpan(
            trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
            span_id="00f067aa0ba902b7",
            parent_span_id=None,
            parent_remote=False,
            sampled=True,
            name="invoke_agent A",
            kind="internal",
            start_ns=1,
            end_ns=2,
            attributes={},
            status="unset",
        )
    )
    assert memory.get_finished_spans() == ()
    await export.aclose()
    assert [s.name for s in memory.get_finished_spans()] == ["invoke_agent A"]


def test_an_unsampled_trace_is_not_exported() -> None:
    memory = InMemorySpanExporter()
    export = OtelExport(SimpleSpanProcessor(memory), Resource.create())
    span = FinishedSpan(
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        span_id="00f067aa0ba902b7",
        parent_span_id="00f067aa0ba902b8",
        parent_remote=True,
        sampled=False,
        name="GET /healthz",
        kind="server",
        start_ns=1,
        end_ns=2,
        attributes={},
        status="unset",
    )
    export.on_end(span)
    assert memory.get_finished_spans() == ()


class _Headers:
    """A loopback ASGI app that keeps the headers of each request."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.mark.parametrize("export_on", [True, False])
async def test_the_guards_clients_name_the_current_span_only_with_export_on(
    export_on: bool,
) -> None:
    from agentsvc_adapters.outbound import OutboundGuard  # noqa: PLC0415
    from agentsvc_adapters.telemetry import add_traceparent  # noqa: PLC0415
    from agentsvc_core.telemetry import SpanTracer  # noqa: PLC0415
    from tests.web.live import serve  # noqa: PLC0415

    app = _Headers()
    guard = OutboundGuard(
        allow_private_network=True, request_hooks=(add_traceparent,) if export_on else ()
    )
    tracer = SpanTracer()
    with serve(app) as url:
        async with guard.http_client(timeout=5.0) as http:
            await http.get(url + "/outside")  # no current span
            with tracer.start("resolve_credentials", "client") as span:
                await http.get(url + "/inside")
    outside, inside = app.seen
    assert "traceparent" not in outside
    if export_on:
        assert inside["traceparent"] == f"00-{span.trace_id}-{span.context.span_id}-01"
    else:
        assert "traceparent" not in inside


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, (1.0, True)),
        ({"OTEL_TRACES_SAMPLER": "always_off"}, (0.0, False)),
        ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, (0.25, False)),
        ({"OTEL_TRACES_SAMPLER": "parentbased_traceidratio"}, (1.0, True)),
    ],
)
def test_the_sampler_comes_from_the_standard_variables(
    env: dict[str, str], expected: tuple[float, bool]
) -> None:
    from agentsvc_adapters.telemetry import sampler_from_env  # noqa: PLC0415

    assert sampler_from_env(env) == expected


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_TRACES_SAMPLER": "jaeger_remote"},
        {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"},
        {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
    ],
)
def test_a_sampler_that_cannot_be_honoured_is_a_clear_error(env: dict[str, str]) -> None:
    from agentsvc_adapters.telemetry import sampler_from_env  # noqa: PLC0415

    with pytest.raises(OtelConfigError):
        sampler_from_env(env)


def test_unsampled_traces_reach_the_metrics_but_not_the_export() -> None:
    from prometheus_client import CollectorRegistry  # noqa: PLC0415

    from agentsvc_adapters.telemetry import SpanMetrics  # noqa: PLC0415
    from agentsvc_core.telemetry import SpanTracer, parse_traceparent  # noqa: PLC0415

    memory = InMemorySpanExporter()
    registry = CollectorRegistry()
    export = OtelExport(SimpleSpanProcessor(memory), Resource.create())
    never = SpanTracer([SpanMetrics(registry), export], sample_ratio=0.0, parent_based=True)
    reply = never.start("invoke_agent A", attributes={"gen_ai.operation.name": "invoke_agent"})
    with reply, never.start("chat m", "client") as child:
        assert not child.context.sampled  # a child follows its trace
    assert memory.get_finished_spans() == ()
    assert (
        registry.get_sample_value(
            "agentsvc_replies_total", {"outcome": "completed", "family": "unknown"}
        )
        == 1
    )
    # parent-based: a caller's sampled trace is exported whatever the ratio
    caller = parse_traceparent(CALLER)
    never.start("GET /healthz", "server", parent=caller).end()
    assert [s.name for s in memory.get_finished_spans()] == ["GET /healthz"]
    # not parent-based: the ratio decides, also under a caller's trace
    strict = SpanTracer([export], sample_ratio=0.0, parent_based=False)
    strict.start("GET /healthz", "server", parent=caller).end()
    assert len(memory.get_finished_spans()) == 1


def test_metrics_shows_the_turns_counts(
    traced: tuple[TestClient[Any], InMemorySpanExporter],
) -> None:
    client, _ = traced
    agent = client.post("/api/agents", json={"name": "Counted"}).json()
    thread = client.post("/api/threads", json={"agentId": agent["id"]}).json()
    r = client.post(f"/api/threads/{thread['id']}/messages", json={"content": "hello"})
    assert r.status_code == 200
    text = client.get("/metrics").text
    assert 'agentsvc_replies_total{family="local",outcome="completed"} 1.0' in text
    assert 'agentsvc_tokens_total{family="local",kind="output"}' in text
    assert thread["id"] not in text
    assert agent["id"] not in text
