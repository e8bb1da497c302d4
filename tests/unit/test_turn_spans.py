"""The spans of a turn (docs/architecture.md, "Spans: one model, several outputs"): one
``invoke_agent`` span per reply, child of the request's span, with a ``chat {model}``
span per model call, an ``execute_tool {tool}`` span per tool call and a
``resolve_credentials`` span for the resolver call; named and attributed by the
OpenTelemetry GenAI conventions, with no key, credential or content in any attribute.
The same finished spans feed every sink: a recording sink, the SDK's in-memory
exporter and the metrics."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client import CollectorRegistry

from agentsvc_adapters.telemetry import OtelExport, SpanMetrics
from agentsvc_core.entities import Agent, Principal, ToolCall, Usage
from agentsvc_core.errors import Upstream
from agentsvc_core.ports import (
    ChatModel,
    ModelEvent,
    ModelRequest,
    ServerTools,
    TextDelta,
    ToolCallRequested,
    ToolSpec,
    UsageReport,
)
from agentsvc_core.ports.resolver import CredentialResolver, Resolution, ResolverRequest
from agentsvc_core.ports.telemetry import CURRENT, FinishedSpan, SpanSink
from agentsvc_core.telemetry import SpanTracer
from agentsvc_core.use_cases.turn.conversation import SendInput
from agentsvc_core.use_cases.turn.events import Done, ErrorEvent, Meta
from tests.unit.turn_world import read_all, resolver_world

ORG = "org-spans"
WHO = Principal(org_id=ORG, method="api_key", user_id="alice")
USER_KEY = "sk-alice-own-key-7f3a9"  # what the resolver answers: never in a span
TOOL_CREDENTIAL = "tool-credential-b41e"  # what a tool reads and answers: never in a span
ARGUMENT = "secret-argument-c92d"  # a tool call's argument: content, never in a span
CONTENT = "the user's words 5e1f"  # the message: content, never in a span
TOOL_STEPS = 2
HEX32 = re.compile(r"[0-9a-f]{32}")


class Recorder(SpanSink):
    def __init__(self) -> None:
        self.spans: list[FinishedSpan] = []

    def on_end(self, span: FinishedSpan) -> None:
        self.spans.append(span)

    def named(self, prefix: str) -> list[FinishedSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]


class Resolver(CredentialResolver):
    async def resolve(
        self, url: str, request: ResolverRequest, secrets: list[str], timeout_ms: int
    ) -> Resolution:
        return Resolution(USER_KEY, "key")


class Model(ChatModel):
    """A 'beta' model: asks for the tool TOOL_STEPS times, then answers."""

    provider = "beta"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if self.fail:
            yield TextDelta("partial")
            raise Upstream("the provider answered 503", code="PROVIDER_UNAVAILABLE")
        steps = sum(1 for m in request.messages if m.role == "tool")
        if steps < TOOL_STEPS:
            call = ToolCall(id=f"call-{steps}", name="kb__search", arguments={"q": ARGUMENT})
            yield ToolCallRequested(call)
        else:
            yield TextDelta("done")
        yield UsageReport(Usage(input_tokens=10, output_tokens=2))


class Tools(ServerTools):
    def owns(self, name: str) -> bool:
        return True  # the turn's one source: every name is its own

    def is_extension(self, name: str) -> bool:
        return True  # its tools are traced as MCP tools

    async def list_tools(
        self, who: Principal, agent: Agent, setup: object = None
    ) -> list[ToolSpec]:
        return [ToolSpec(name="kb__search", description="search")]

    async def call(
        self, who: Principal, agent: Agent, name: str, arguments: dict[str, Any], ctx: Any = None
    ) -> str:
        return f"found with {TOOL_CREDENTIAL}"


async def a_turn(
    sinks: list[SpanSink], *, fail: bool = False, parent: bool = True
) -> tuple[list[Any], Agent, Any]:
    """One turn (resolver on, TOOL_STEPS tool calls) under a request's span. Returns
    the turn's events, the agent and the thread."""
    tracer = SpanTracer(sinks)
    w = await resolver_world(WHO, Model(fail), Tools(), Resolver(), tracer=tracer)
    agent, thread = w.agent, w.thread
    request = tracer.start("POST /api/threads/{thread_id}/messages", "server")
    token = CURRENT.set(request.context) if parent else None
    try:
        turn = await w.conversation.send(WHO, thread.id, SendInput(content=CONTENT))
    finally:
        if token is not None:
            CURRENT.reset(token)
    events = await read_all(turn)
    request.end()
    return events, agent, thread


async def test_the_span_tree_of_a_turn_with_tool_calls() -> None:
    rec = Recorder()
    events, agent, thread = await a_turn([rec])
    assert isinstance(events[-1], Done)
    (request,) = rec.named("POST ")
    (reply,) = rec.named("invoke_agent")
    chats = rec.named("chat ")
    tools = rec.named("execute_tool ")
    (resolver,) = rec.named("resolve_credentials")
    assert reply.name == f"invoke_agent {agent.name}"
    assert [c.name for c in chats] == ["chat m1"] * (TOOL_STEPS + 1)
    assert [t.name for t in tools] == ["execute_tool kb__search"] * TOOL_STEPS
    assert len(rec.spans) == 1 + 1 + len(chats) + len(tools) + 1
    # one trace; the reply is the request's child, the calls are the reply's
    assert {s.trace_id for s in rec.spans} == {request.trace_id}
    assert reply.parent_span_id == request.span_id
    assert {s.parent_span_id for s in chats + tools} == {reply.span_id}
    # the resolver is asked for the first model call's key, inside that call
    assert resolver.parent_span_id == chats[0].span_id
    assert request.parent_span_id is None
    assert len({s.span_id for s in rec.spans}) == len(rec.spans)
    # in order: each span starts after its parent and ends before it
    for child in chats + tools:
        assert reply.start_ns <= child.start_ns <= child.end_ns <= reply.end_ns
    assert [s.kind for s in (request, reply, chats[0], tools[0], resolver)] == [
        "server",
        "internal",
        "client",
        "internal",
        "client",
    ]
    # the meta event carries the trace id (W3C: 32 lowercase hex)
    meta = events[0]
    assert isinstance(meta, Meta)
    assert meta.trace_id == request.trace_id
    assert HEX32.fullmatch(meta.trace_id)
    assert b'"traceId":"' + meta.trace_id.encode() + b'"' in msgspec.json.encode(meta)
    assert thread is not None


async def test_span_attributes_follow_the_genai_conventions() -> None:
    rec = Recorder()
    _, agent, thread = await a_turn([rec])
    (reply,) = rec.named("invoke_agent")
    chat = rec.named("chat ")[0]
    tool = rec.named("execute_tool ")[1]
    (resolver,) = rec.named("resolve_credentials")
    assert reply.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert reply.attributes["gen_ai.provider.name"] == "openai"
    assert reply.attributes["gen_ai.agent.id"] == str(agent.id)
    assert reply.attributes["gen_ai.agent.name"] == agent.name
    assert reply.attributes["gen_ai.conversation.id"] == str(thread.id)
    assert reply.attributes["gen_ai.request.model"] == "beta:m1"
    assert reply.attributes["agentsvc.run.status"] == "completed"
    assert reply.attributes["gen_ai.usage.input_tokens"] == 10 * (TOOL_STEPS + 1)
    assert reply.attributes["gen_ai.usage.output_tokens"] == 2 * (TOOL_STEPS + 1)
    assert reply.status == "unset"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["agentsvc.provider.family"] == "beta"
    assert chat.attributes["gen_ai.request.model"] == "m1"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 10
    assert chat.attributes["gen_ai.usage.output_tokens"] == 2
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("other",)
    assert chat.attributes["agentsvc.key_source"] == "byok"
    ttft = chat.attributes["gen_ai.response.time_to_first_chunk"]
    assert isinstance(ttft, float)
    assert 0 <= ttft <= chat.duration_s
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "kb__search"
    assert tool.attributes["gen_ai.tool.call.id"] == "call-1"
    assert tool.attributes["gen_ai.tool.type"] == "extension"
    assert tool.attributes["agentsvc.tool.outcome"] == "ok"
    assert resolver.attributes["agentsvc.resolver.outcome"] == "key"


async def test_no_key_credential_or_content_in_any_span() -> None:
    rec = Recorder()
    events, _, _ = await a_turn([rec])
    # they did go through the turn...
    assert any(TOOL_CREDENTIAL in str(e) for e in events)
    assert any(ARGUMENT in str(e) for e in events)
    # ...and none reached a span's name or attributes; content is only in the
    # payloads (which the stored trace keeps and the export never sends), the key nowhere
    for span in rec.spans:
        bare = msgspec.structs.replace(span, input=None, output=None)
        text = msgspec.json.encode(bare).decode()
        for secret in (USER_KEY, TOOL_CREDENTIAL, ARGUMENT, CONTENT, "found with"):
            assert secret not in text, (span.name, secret)
        assert USER_KEY not in msgspec.json.encode([span.input, span.output]).decode()
    tools = rec.named("execute_tool")
    # the payloads are the tool's arguments and result
    assert any(ARGUMENT in str(t.input) and TOOL_CREDENTIAL in str(t.output) for t in tools)


async def test_a_provider_failure_marks_the_call_and_the_reply() -> None:
    rec = Recorder()
    events, _, _ = await a_turn([rec], fail=True)
    assert isinstance(events[-1], ErrorEvent)
    (chat,) = rec.named("chat ")
    (reply,) = rec.named("invoke_agent")
    assert chat.status == "error"
    assert chat.error_type == "PROVIDER_UNAVAILABLE"
    assert chat.attributes["error.type"] == "PROVIDER_UNAVAILABLE"
    assert reply.status == "error"
    assert reply.attributes["agentsvc.run.status"] == "failed"
    assert reply.attributes["error.type"] == "PROVIDER_UNAVAILABLE"


async def test_meta_carries_a_trace_id_without_any_sink_or_parent() -> None:
    events, _, _ = await a_turn([], parent=False)
    meta = events[0]
    assert isinstance(meta, Meta)
    assert HEX32.fullmatch(meta.trace_id)
    assert meta.trace_id != "0" * 32


async def test_the_sdk_exports_the_same_spans() -> None:
    memory = InMemorySpanExporter()
    export = OtelExport(SimpleSpanProcessor(memory), Resource.create({"service.name": "t"}))
    rec = Recorder()
    events, agent, _ = await a_turn([rec, export])
    exported = memory.get_finished_spans()
    assert sorted(s.name for s in exported) == sorted(s.name for s in rec.spans)
    by_name = {s.name: s for s in exported}
    reply = by_name[f"invoke_agent {agent.name}"]
    request = by_name["POST /api/threads/{thread_id}/messages"]
    chat = by_name["chat m1"]
    assert reply.context is not None
    assert request.context is not None
    assert f"{reply.context.trace_id:032x}" == events[0].trace_id
    assert reply.parent is not None
    assert reply.parent.span_id == request.context.span_id
    assert request.kind is SpanKind.SERVER
    assert chat.kind is SpanKind.CLIENT
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.usage.input_tokens"] == 10
    assert chat.status.status_code is StatusCode.UNSET
    assert reply.resource.attributes["service.name"] == "t"
    memory.clear()
    await a_turn([export], fail=True)
    failed = {s.name: s for s in memory.get_finished_spans()}["chat m1"]
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes is not None
    assert failed.attributes["error.type"] == "PROVIDER_UNAVAILABLE"


async def test_metrics_count_the_turn_without_tenant_labels() -> None:
    registry = CollectorRegistry()
    _, agent, thread = await a_turn([SpanMetrics(registry)])
    await a_turn([SpanMetrics(other := CollectorRegistry())], fail=True)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    calls = TOOL_STEPS + 1
    assert value("agentsvc_replies_total", outcome="completed", family="beta") == 1
    assert value("agentsvc_tokens_total", family="beta", kind="input") == 10 * calls
    assert value("agentsvc_tokens_total", family="beta", kind="output") == 2 * calls
    assert value("agentsvc_tool_calls_total", outcome="ok") == TOOL_STEPS
    assert value("agentsvc_resolver_calls_total", outcome="key") == 1
    assert value("agentsvc_provider_time_to_first_token_seconds_count", family="beta") == calls
    assert (
        value("agentsvc_provider_errors_total", family="beta", code="PROVIDER_UNAVAILABLE") is None
    )
    assert (
        other.get_sample_value(
            "agentsvc_provider_errors_total", {"family": "beta", "code": "PROVIDER_UNAVAILABLE"}
        )
        == 1
    )
    assert (
        other.get_sample_value("agentsvc_replies_total", {"outcome": "failed", "family": "beta"})
        == 1
    )
    tenant = {ORG, str(agent.id), str(thread.id), agent.name, "kb__search", USER_KEY, "alice"}
    for metric in registry.collect():
        for sample in metric.samples:
            assert not tenant & set(sample.labels.values()), sample


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", ("0af7", True)),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", ("0af7", False)),
        ("00-00000000000000000000000000000000-b7ad6b7169203331-01", None),
        ("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", None),
        ("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", None),
        ("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", None),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra", None),
        ("garbage", None),
        ("", None),
    ],
)
def test_traceparent_parsing(header: str, expected: tuple[str, bool] | None) -> None:
    from agentsvc_core.telemetry import parse_traceparent  # noqa: PLC0415

    got = parse_traceparent(header)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert got.trace_id.startswith(expected[0])
        assert got.sampled is expected[1]
        assert got.remote
        assert got.traceparent() == header
