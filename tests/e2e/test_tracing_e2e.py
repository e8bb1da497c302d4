"""Tracing end to end (docs/operations.md, "Traces: OpenTelemetry"): the real service
process with ``OTEL_TRACES_EXPORTER=otlp`` sends the spans of a turn with tool calls to
an OTLP receiver on loopback (OTLP/HTTP, protobuf, decoded here with
opentelemetry-proto); the MCP server and the credential resolver receive a
``traceparent`` naming the span that called them; the ``meta`` event names the
trace."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.e2e.service import client, running
from tests.fakes.providers import FakeProvider, Reply, ToolCallSpec
from tests.mcp_servers.server import HttpMcpServer
from tests.sse import names, parse
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

USER_KEY = "sk-traced-user-key-8c1d"


async def _body(receive: Any) -> bytes:
    body: bytes = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            return body


class OtlpReceiver:
    """``POST /v1/traces`` (OTLP/HTTP, protobuf): keeps every span it receives."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.resources: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await _body(receive)
        status = 404
        if scope["path"] == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for rs in request.resource_spans:
                resource = {a.key: a.value.string_value for a in rs.resource.attributes}
                self.resources.append(resource)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append(
                            {
                                "name": s.name,
                                "trace_id": s.trace_id.hex(),
                                "span_id": s.span_id.hex(),
                                "parent": s.parent_span_id.hex() or None,
                                "kind": s.kind,
                                "status": s.status.code,
                                "attributes": {a.key: _value(a.value) for a in s.attributes},
                            }
                        )
            status = 200
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/x-protobuf")],
            }
        )
        await send(
            {"type": "http.response.body", "body": ExportTraceServiceResponse().SerializeToString()}
        )

    def named(self, prefix: str) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["name"].startswith(prefix)]


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


class ResolverReceiver:
    """A credential resolver that answers a key and keeps the headers it got."""

    def __init__(self) -> None:
        self.headers: list[dict[str, str]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await _body(receive)
        self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        body = b'{"apiKey": "' + USER_KEY.encode() + b'", "source": "byok"}'
        await send({"type": "http.response.body", "body": body})


@pytest.fixture
def world(pg_url: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    otlp, resolver = OtlpReceiver(), ResolverReceiver()
    fake = FakeProvider("beta")
    base = fake.start()
    mcp = HttpMcpServer("streamable_http")
    mcp.start()
    key = f"ask_e2e_{uuid.uuid4().hex}"
    with serve(otlp) as otlp_url, serve(resolver) as resolver_url:
        try:
            with running(
                {
                    "AGENTSVC_DATABASE_URL": pg_url,
                    "AGENTSVC_BOOTSTRAP_API_KEY": key,
                    "AGENTSVC_BOOTSTRAP_ORG": f"otel-{uuid.uuid4().hex[:8]}",
                    "AGENTSVC_BETA_BASE_URL": f"{base}/v1",
                    "AGENTSVC_BETA_API_KEY": "sk-platform-key-for-tracing",
                    "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
                    "AGENTSVC_DATA_DIR": str(tmp_path / "data"),
                    "OTEL_TRACES_EXPORTER": "otlp",
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                    "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_url,
                    "OTEL_BSP_SCHEDULE_DELAY": "100",
                    "OTEL_SERVICE_NAME": "agentsvc-e2e",
                },
                log=tmp_path / "svc.log",
            ) as svc:
                http = client(svc, key)
                yield {
                    "svc": svc,
                    "c": http,
                    "otlp": otlp,
                    "resolver": resolver,
                    "resolver_url": f"{resolver_url}/resolve",
                    "fake": fake,
                    "mcp": mcp,
                }
                http.close()
                assert USER_KEY not in svc.output()
        finally:
            mcp.stop()
            fake.stop()


def wait_for(check: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the spans did not arrive"
        time.sleep(0.05)


def test_an_otlp_receiver_gets_the_spans_of_a_turn_with_tool_calls(w: dict[str, Any]) -> None:
    c, otlp, fake = w["c"], w["otlp"], w["fake"]
    server = c.post(
        "/api/mcps",
        json={"name": "Test Tools", "transport": "streamable_http", "url": w["mcp"].url},
    ).json()
    agent = c.post("/api/agents", json={"name": "Tracer", "defaultModel": "gpt-traced"}).json()
    c.post(f"/api/agents/{agent['id']}/mcps", json={"mcpServerId": server["id"]})
    r = c.put(
        f"/api/agents/{agent['id']}/credentials",
        json={"enabled": True, "resolverUrl": w["resolver_url"], "timeoutMs": 2000},
    )
    assert r.status_code == 200, r.text
    thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()
    whoami = {"header": "traceparent"}
    fake.enqueue(
        Reply(text="", tool_calls=[ToolCallSpec("call-1", "test-tools__whoami", whoami)]),
        Reply(text="", tool_calls=[ToolCallSpec("call-2", "test-tools__whoami", whoami)]),
        Reply(text="all done"),
    )
    caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    r = c.post(
        f"/api/threads/{thread['id']}/messages",
        json={"content": "trace me"},
        headers={"traceparent": caller},
    )
    assert r.status_code == 200, r.text
    events = parse(r.text)
    assert names(events)[-1] == "done", r.text
    trace_id = events[0].data["traceId"]
    # the caller's trace goes on: the meta event names it
    assert trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"

    # the request's span ends after the reply's stream, so it may come in a later batch
    wait_for(lambda: len(otlp.named("invoke_agent")) == 1)
    wait_for(lambda: len(otlp.named("POST /api/threads/{thread_id}/messages")) == 1)
    (request,) = otlp.named("POST /api/threads/{thread_id}/messages")
    (reply,) = otlp.named("invoke_agent")
    chats = otlp.named("chat ")
    tools = otlp.named("execute_tool ")
    (resolve,) = otlp.named("resolve_credentials")
    assert {s["trace_id"] for s in (request, reply, *chats, *tools, resolve)} == {trace_id}
    assert resolve["attributes"]["agentsvc.resolver.outcome"] == "key"
    assert request["parent"] == "00f067aa0ba902b7"  # the caller's span
    assert request["attributes"]["http.route"] == "/api/threads/{thread_id}/messages"
    assert request["attributes"]["http.response.status_code"] == 200
    assert reply["parent"] == request["span_id"]
    assert reply["name"] == "invoke_agent Tracer"
    assert [s["name"] for s in chats] == ["chat gpt-traced"] * 3
    assert [s["name"] for s in tools] == ["execute_tool test-tools__whoami"] * 2
    assert {s["parent"] for s in (*chats, *tools)} == {reply["span_id"]}
    assert tools[0]["attributes"]["gen_ai.tool.call.id"] == "call-1"
    assert chats[0]["attributes"]["gen_ai.provider.name"] == "openai"
    assert chats[0]["attributes"]["gen_ai.usage.input_tokens"] == 12
    assert reply["attributes"]["agentsvc.run.status"] == "completed"
    assert {"service.name": "agentsvc-e2e"}.items() <= otlp.resources[0].items()
    for span in otlp.spans:
        assert USER_KEY not in str(span)

    # traceparent reached the MCP server (naming the tool call's span) and the resolver
    results = [e.data["result"] for e in events if e.event == "tool_result"]
    assert results == [f"00-{trace_id}-{t['span_id']}-01" for t in tools]
    (resolver_call,) = w["resolver"].headers
    assert resolver_call["traceparent"] == f"00-{trace_id}-{resolve['span_id']}-01"
    # not to the model provider: it is not an outbound call of a user's URL
    assert "traceparent" not in fake.requests[-1].headers


@pytest.fixture
def w(world: dict[str, Any]) -> dict[str, Any]:
    return world
