"""The alpha (Anthropic Messages) and beta (OpenAI Chat Completions) adapters, against the
scripted fake providers over real HTTP (``tests.fakes.providers``), plus a few wire
corner cases through ``httpx.MockTransport``."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
import anyio
import httpx
import pytest

from agentsvc_adapters.llm import alpha as alpha_wire
from agentsvc_adapters.llm.alpha import AlphaModel
from agentsvc_adapters.llm.beta import BetaModel
from agentsvc_core.entities import Message, ToolCall, Usage
from agentsvc_core.errors import Upstream
from agentsvc_core.ports import (
    ChatModel,
    Finished,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallRequested,
    ToolSpec,
    UsageReport,
)
from agentsvc_core.ports.telemetry import FinishedSpan
from agentsvc_core.telemetry import SpanTracer
from tests.fakes.providers import FakeProvider, Reply, ToolCallSpec, fake_alpha, fake_beta

KEY = "sk-platform-0123456789abcdef"
BYOK = "sk-byok-fedcba9876543210"
WEATHER = ToolSpec(
    name="weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def msg(role: Any, content: str = "", **kw: Any) -> Message:
    return Message(
        id=uuid.uuid4(),
        org_id="org",
        thread_id=uuid.uuid4(),
        role=role,
        content=content,
        created_at=datetime.now(UTC),
        **kw,
    )


def ask(text: str = "Hi", **kw: Any) -> ModelRequest:
    return ModelRequest(model="m-1", system="Be brief.", messages=[msg("user", text)], **kw)


def make(kind: str, base_url: str, **kw: Any) -> AlphaModel | BetaModel:
    kw.setdefault("backoff_s", 0.01)
    if kind == "alpha":
        return AlphaModel(base_url, KEY, **kw)
    return BetaModel(base_url + "/v1", KEY, **kw)


async def collect(model: ChatModel, request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in model.stream(request)]


async def failure(model: ChatModel, request: ModelRequest) -> tuple[list[ModelEvent], Upstream]:
    """The events before the Upstream error, and the error."""
    seen: list[ModelEvent] = []
    try:
        async for event in model.stream(request):
            seen.append(event)  # noqa: PERF401 - the events before the failure are the point
    except Upstream as exc:
        return seen, exc
    pytest.fail(f"no Upstream error; events: {seen}")


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@dataclass
class Case:
    kind: str
    fake: FakeProvider
    model: AlphaModel | BetaModel


@pytest.fixture(scope="module")
def fakes() -> Iterator[dict[str, FakeProvider]]:
    with fake_alpha() as a, fake_beta() as b:
        yield {"alpha": a, "beta": b}


@pytest.fixture(params=["alpha", "beta"])
async def case(
    request: pytest.FixtureRequest, fakes: dict[str, FakeProvider]
) -> AsyncIterator[Case]:
    fake = fakes[request.param]
    fake.reset()
    model = make(request.param, fake.base_url)
    yield Case(request.param, fake, model)
    await model.aclose()


# --- streaming text, request shape, keys ---------------------------------------------------


async def test_text_arrives_one_delta_per_provider_delta(case: Case) -> None:
    tokens = ["Hel", "lo", " wörld", " ✓"]
    case.fake.enqueue(Reply(tokens=tokens, input_tokens=21, output_tokens=4))
    events = await collect(case.model, ask())
    assert events == [
        *(TextDelta(t) for t in tokens),
        UsageReport(Usage(input_tokens=21, output_tokens=4, cached_input_tokens=0)),
        Finished("stop"),
    ]


async def test_alpha_request_shape(fakes: dict[str, FakeProvider]) -> None:
    fake = fakes["alpha"]
    fake.reset()
    model = make("alpha", fake.base_url)
    await collect(model, ask(tools=[WEATHER, ToolSpec(name="now")], max_tokens=321))
    await model.aclose()
    (req,) = fake.requests
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == KEY
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert req.headers["content-type"] == "application/json"
    assert req.json == {
        "model": "m-1",
        "max_tokens": 321,
        "stream": True,
        "system": "Be brief.",
        "tools": [
            {
                "name": "weather",
                "description": "The weather in a city.",
                "input_schema": WEATHER.parameters,
            },
            {"name": "now", "input_schema": {"type": "object", "properties": {}}},
        ],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
    }


async def test_beta_request_shape(fakes: dict[str, FakeProvider]) -> None:
    fake = fakes["beta"]
    fake.reset()
    model = make("beta", fake.base_url)
    await collect(model, ask(tools=[WEATHER], max_tokens=321))
    await collect(model, ModelRequest(model="m-2", system="", messages=[msg("user", "Yo")]))
    await model.aclose()
    first, second = fake.requests
    assert first.path == "/v1/chat/completions"
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert first.json == {
        "model": "m-1",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        "max_completion_tokens": 321,
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "weather",
                    "description": "The weather in a city.",
                    "parameters": WEATHER.parameters,
                },
            }
        ],
    }
    assert second.json["messages"] == [{"role": "user", "content": "Yo"}]  # no empty system


async def test_a_byok_key_overrides_the_platform_key_for_that_call(case: Case) -> None:
    await collect(case.model, ask(api_key=BYOK))
    await collect(case.model, ask())
    byok, platform = case.fake.requests
    assert BYOK in str(byok.headers)
    assert KEY not in str(byok.headers)
    assert KEY in str(platform.headers)


# --- tool calls ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3])
async def test_tool_calls_are_reassembled(case: Case, n: int) -> None:
    specs = [
        ToolCallSpec(
            id=f"call_{i}",
            name="weather",
            arguments={"city": f"Zürich {i}", "days": i, "opts": {"units": "C", "tags": ["a"]}},
        )
        for i in range(n)
    ]
    case.fake.enqueue(Reply(text="Let me check.", tool_calls=specs))
    events = await collect(case.model, ask(tools=[WEATHER]))
    assert text_of(events) == "Let me check."
    calls = [e.call for e in events if isinstance(e, ToolCallRequested)]
    assert calls == [ToolCall(id=s.id, name=s.name, arguments=s.arguments) for s in specs]
    assert isinstance(events[-2], UsageReport)
    assert events[-1] == Finished("tool_calls")


async def test_a_tool_call_without_arguments_gets_an_empty_dict(case: Case) -> None:
    case.fake.enqueue(Reply(tokens=[], tool_calls=[ToolCallSpec(id="c", name="now", arguments={})]))
    events = await collect(case.model, ask())
    assert ToolCallRequested(ToolCall(id="c", name="now", arguments={})) in events


def history() -> list[Message]:
    calls = (
        ToolCall(id="call_1", name="weather", arguments={"city": "Paris"}),
        ToolCall(id="call_2", name="weather", arguments={"city": "Rome"}),
    )
    later = ToolCall(id="call_3", name="weather", arguments={"city": "Paris", "day": "tomorrow"})
    return [
        msg("user", "Weather in Paris and Rome?"),
        msg("assistant", "Let me check.", tool_calls=calls),
        msg("tool", "Sunny, 24C", tool_call_id="call_1", sender_name="weather"),
        msg("tool", "Rain, 18C", tool_call_id="call_2", sender_name="weather"),
        msg("assistant", "Paris is sunny; Rome is rainy."),
        msg("user", "And tomorrow?"),
        msg("assistant", "", status="stopped"),  # stopped before its first token
        msg("user", "In Paris only."),
        msg("assistant", "", tool_calls=(later,)),
        msg("tool", "Cloudy", tool_call_id="call_3", sender_name="weather"),
    ]


async def test_alpha_maps_a_multi_turn_history(fakes: dict[str, FakeProvider]) -> None:
    fake = fakes["alpha"]
    fake.reset()
    model = make("alpha", fake.base_url)
    request = ModelRequest(model="m", system="Be brief.", messages=history(), tools=[WEATHER])
    await collect(model, request)
    await model.aclose()

    def text(t: str) -> dict[str, Any]:
        return {"type": "text", "text": t}

    def use(i: int, args: dict[str, Any]) -> dict[str, Any]:
        return {"type": "tool_use", "id": f"call_{i}", "name": "weather", "input": args}

    def result(i: int, content: str) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": f"call_{i}", "content": content}

    assert fake.requests[0].json["messages"] == [
        {"role": "user", "content": [text("Weather in Paris and Rome?")]},
        {
            "role": "assistant",
            "content": [text("Let me check."), use(1, {"city": "Paris"}), use(2, {"city": "Rome"})],
        },
        {"role": "user", "content": [result(1, "Sunny, 24C"), result(2, "Rain, 18C")]},
        {"role": "assistant", "content": [text("Paris is sunny; Rome is rainy.")]},
        {"role": "user", "content": [text("And tomorrow?"), text("In Paris only.")]},
        {"role": "assistant", "content": [use(3, {"city": "Paris", "day": "tomorrow"})]},
        {"role": "user", "content": [result(3, "Cloudy")]},
    ]


def test_alpha_puts_tool_results_before_text_in_a_merged_user_message() -> None:
    call = ToolCall(id="c1", name="now", arguments={})
    messages = [
        msg("user", "What time is it?"),
        msg("assistant", "", tool_calls=(call,)),
        msg("user", "(hurry)"),
        msg("tool", "", tool_call_id="c1"),
    ]
    body = alpha_wire.request_body(ModelRequest(model="m", system="", messages=messages))
    assert "system" not in body
    assert body["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1"},
            {"type": "text", "text": "(hurry)"},
        ],
    }


async def test_beta_maps_a_multi_turn_history(fakes: dict[str, FakeProvider]) -> None:
    fake = fakes["beta"]
    fake.reset()
    model = make("beta", fake.base_url)
    await collect(model, ModelRequest(model="m", system="Be brief.", messages=history()))
    await model.aclose()

    def call(i: int, arguments: str) -> dict[str, Any]:
        return {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "weather", "arguments": arguments},
        }

    assert fake.requests[0].json["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [call(1, '{"city":"Paris"}'), call(2, '{"city":"Rome"}')],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 24C"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Rain, 18C"},
        {"role": "assistant", "content": "Paris is sunny; Rome is rainy."},
        {"role": "user", "content": "And tomorrow?"},
        {"role": "user", "content": "In Paris only."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call(3, '{"city":"Paris","day":"tomorrow"}')],
        },
        {"role": "tool", "tool_call_id": "call_3", "content": "Cloudy"},
    ]


# --- usage -----------------------------------------------------------------------------------


async def test_usage_counts_cached_tokens_in_the_input_total(case: Case) -> None:
    case.fake.enqueue(Reply(text="Hi there", input_tokens=100, cached_tokens=40, output_tokens=7))
    events = await collect(case.model, ask())
    # alpha: 100 uncached + 40 cache reads; beta: prompt_tokens = 140 including 40 cached
    assert UsageReport(Usage(input_tokens=140, output_tokens=7, cached_input_tokens=40)) in events


@pytest.mark.parametrize(
    ("reason", "finished"),
    [("end_turn", "stop"), ("max_tokens", "length"), ("tool_use", "tool_calls"), ("odd", "other")],
)
async def test_finish_reasons_are_mapped(case: Case, reason: str, finished: str) -> None:
    case.fake.enqueue(Reply(text="Hi", stop_reason=reason))
    events = await collect(case.model, ask())
    assert events[-1] == Finished(finished)  # type: ignore[arg-type]


# --- errors and retries ---------------------------------------------------------------------

RETRIED = {429, 500, 503, 529}


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, "PROVIDER_BAD_REQUEST"),
        (401, "PROVIDER_AUTH"),
        (403, "PROVIDER_AUTH"),
        (404, "PROVIDER_BAD_REQUEST"),
        (413, "PROVIDER_BAD_REQUEST"),
        (422, "PROVIDER_BAD_REQUEST"),
        (429, "PROVIDER_RATE_LIMITED"),
        (500, "PROVIDER_UNAVAILABLE"),
        (503, "PROVIDER_UNAVAILABLE"),
        (529, "PROVIDER_UNAVAILABLE"),
    ],
)
async def test_http_errors_map_to_codes(case: Case, status: int, code: str) -> None:
    case.fake.default = Reply(status=status)
    seen, err = await failure(case.model, ask())
    assert seen == []
    assert err.code == code
    assert err.detail.startswith(f"the {case.kind} provider answered {status}: ")
    assert len(err.detail) < 400
    assert KEY not in err.detail
    assert len(case.fake.requests) == (3 if status in RETRIED else 1)


@pytest.mark.parametrize("status", [429, 503, 529])
async def test_a_retryable_error_before_the_first_token_is_retried(case: Case, status: int) -> None:
    case.fake.enqueue(Reply(status=status), Reply(text="Second time lucky"))
    events = await collect(case.model, ask())
    assert text_of(events) == "Second time lucky"
    assert len(case.fake.requests) == 2


async def test_the_retries_are_noted_on_the_model_calls_span(case: Case) -> None:
    """The span entered around the call (the reply's ``chat`` span) carries how many
    times the call was retried: the trace's ``provider_retry`` evaluation reads it."""
    case.fake.enqueue(Reply(status=503), Reply(status=503), Reply(text="Third time"))
    rec = Sink()
    with SpanTracer([rec]).start("chat m"):
        events = await collect(case.model, ask())
    assert text_of(events) == "Third time"
    (ended,) = rec.spans
    assert ended.attributes["agentsvc.provider.retries"] == 2
    case.fake.enqueue(Reply(text="At once"))
    with SpanTracer([rec]).start("chat m"):
        await collect(case.model, ask())
    assert "agentsvc.provider.retries" not in rec.spans[-1].attributes


class Sink:
    def __init__(self) -> None:
        self.spans: list[FinishedSpan] = []

    def on_end(self, span: FinishedSpan) -> None:
        self.spans.append(span)


async def test_a_json_answer_instead_of_a_stream_is_an_error_that_says_so(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    """A provider (or a proxy) that ignores ``stream: true`` and answers the whole
    message as JSON: one clear error, not retried, logged once, quoting no reply."""
    case.fake.enqueue(Reply(text="the whole private reply", ignore_stream=True))
    with caplog.at_level(logging.WARNING, logger="agentsvc.llm"):
        seen, err = await failure(case.model, ask())
    assert seen == []
    assert err.code == "PROVIDER_ERROR"
    assert err.detail.startswith(
        f"the {case.kind} provider answered 200 with JSON instead of an event stream"
    )
    assert "private reply" not in err.detail
    assert len(case.fake.requests) == 1
    logged = [r for r in caplog.records if r.name.startswith("agentsvc.llm")]
    assert len(logged) == 1  # one line for the failure, not one per layer
    assert "instead of an event stream" in logged[0].getMessage()
    assert logged[0].levelno == logging.WARNING
    assert "PROVIDER_ERROR" in logged[0].getMessage()


@pytest.mark.parametrize("kind", ["alpha", "beta"])
async def test_a_json_error_answered_with_200_is_quoted(kind: str) -> None:
    body = b'{"error": {"type": "invalid_request_error", "message": "streaming is off for ' + (
        KEY.encode() + b'"}}'
    )

    async def stream() -> AsyncIterator[bytes]:
        yield body

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "application/json; charset=utf-8"}, content=stream()
        )

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        model = (
            AlphaModel("http://x", KEY, http=http)
            if kind == "alpha"
            else (BetaModel("http://x", KEY, http=http))
        )
        _, err = await failure(model, ask())
    assert "instead of an event stream" in err.detail
    assert "invalid_request_error: streaming is off for [redacted]" in err.detail
    assert KEY not in err.detail


async def test_a_long_retry_after_fails_at_once(case: Case) -> None:
    case.fake.enqueue(Reply(status=429, headers={"retry-after": "30"}))
    _, err = await failure(case.model, ask())
    assert err.code == "PROVIDER_RATE_LIMITED"
    assert len(case.fake.requests) == 1


@pytest.mark.parametrize("how", ["event", "disconnect"])
async def test_a_mid_stream_failure_is_raised_after_the_tokens_and_not_retried(
    case: Case, how: Any
) -> None:
    case.fake.enqueue(
        Reply(tokens=["a", "b", "c", "d"], error_after_tokens=2, mid_stream_error=how)
    )
    seen, err = await failure(case.model, ask())
    assert seen == [TextDelta("a"), TextDelta("b")]
    assert err.code == "PROVIDER_ERROR"
    assert ("failed mid-stream" if how == "event" else "dropped the stream") in err.detail
    assert len(case.fake.requests) == 1


async def test_a_stalled_stream_times_out(case: Case) -> None:
    model = make(case.kind, case.fake.base_url, read_timeout_s=0.2)
    case.fake.enqueue(Reply(text="late", first_token_delay=1.5))
    started = time.monotonic()
    _, err = await failure(model, ask())
    assert err.code == "PROVIDER_TIMEOUT"
    assert time.monotonic() - started < 1.0
    # A response that never starts times out too, and is not retried (it may be generating).
    case.fake.enqueue(Reply(status=503, first_token_delay=1.5))
    _, err = await failure(model, ask())
    assert err.code == "PROVIDER_TIMEOUT"
    assert len(case.fake.requests) == 2
    await model.aclose()


def provider_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "agentsvc.llm" and r.levelno == logging.WARNING
    ]


async def test_a_providers_400_is_logged_once_with_its_code(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    """A provider's 400 leaves one log line, with its code and never the provider's
    message (docs/security.md, "Headers and logs")."""
    caplog.set_level(logging.INFO, "agentsvc.llm")
    case.fake.enqueue(Reply(status=400, error_message=f"bad request, your key is {KEY}"))
    await failure(case.model, ask())
    assert provider_warnings(caplog) == [
        f"{case.kind} provider call failed: PROVIDER_BAD_REQUEST (HTTP 400)"
    ]
    assert KEY not in caplog.text


async def test_a_retried_failure_is_logged_once_when_it_ends_the_call(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "agentsvc.llm")
    case.fake.default = Reply(status=503)
    await failure(case.model, ask())
    final = [m for m in provider_warnings(caplog) if "call failed" in m]
    assert final == [f"{case.kind} provider call failed: PROVIDER_UNAVAILABLE (HTTP 503)"]


@pytest.mark.parametrize("how", ["event", "disconnect"])
async def test_a_broken_stream_is_logged_once(
    case: Case, how: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "agentsvc.llm")
    case.fake.enqueue(
        Reply(tokens=["a", "b", "c"], error_after_tokens=1, mid_stream_error=how, error_message=KEY)
    )
    await failure(case.model, ask())
    (line,) = provider_warnings(caplog)
    assert line.startswith(f"{case.kind} provider call failed: PROVIDER_ERROR (")
    assert KEY not in caplog.text


async def test_keys_never_reach_an_error_detail(case: Case) -> None:
    echo = f"bad key {KEY} / {BYOK} / Bearer {BYOK}"
    case.fake.enqueue(
        Reply(status=401, error_message=echo),
        Reply(status=401, error_message=echo),
        Reply(tokens=["x"], error_after_tokens=1, error_message=echo),
    )
    for request in (ask(), ask(api_key=BYOK), ask(api_key=BYOK)):
        _, err = await failure(case.model, request)
        assert "[redacted]" in err.detail
        assert KEY not in err.detail
        assert BYOK not in err.detail
        assert KEY not in repr(case.model)


async def test_an_unreachable_provider_is_unavailable(case: Case) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = make(case.kind, f"http://127.0.0.1:{port}")
    _, err = await failure(model, ask())
    await model.aclose()
    assert err.code == "PROVIDER_UNAVAILABLE"
    assert err.detail.startswith(f"the {case.kind} provider could not be reached")


# --- stopping ----------------------------------------------------------------------------------


class Tracking(httpx.AsyncBaseTransport):
    """A real transport that records when a response body is closed, and TCP connects
    (httpcore's ``trace`` request extension)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.open_bodies = 0
        self.connects = 0

    async def trace(self, name: str, info: dict[str, Any]) -> None:
        if name == "connection.connect_tcp.complete":
            self.connects += 1

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.extensions["trace"] = self.trace
        response = await self.inner.handle_async_request(request)
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        body: httpx.AsyncByteStream = stream  # narrowed for the class below
        self.open_bodies += 1
        tracker = self

        class Body(httpx.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                async for chunk in body:
                    yield chunk

            async def aclose(self) -> None:
                tracker.open_bodies -= 1
                await body.aclose()

        return httpx.Response(response.status_code, headers=response.headers, stream=Body())

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_closing_the_stream_early_releases_the_connection(case: Case) -> None:
    transport = Tracking()
    async with httpx.AsyncClient(transport=transport) as http:
        model = make(case.kind, case.fake.base_url, http=http)
        case.fake.enqueue(Reply(tokens=[f" w{i}" for i in range(50)], token_delay=0.1))
        stream = model.stream(ask())
        assert await anext(stream) == TextDelta(" w0")
        assert await anext(stream) == TextDelta(" w1")
        assert case.fake.active_streams == 1
        assert transport.open_bodies == 1
        await stream.aclose()  # type: ignore[attr-defined]
        assert transport.open_bodies == 0  # closed by aclose() itself, not later by the GC
        await case.fake.wait_for_active_streams_async(0, timeout=1)


async def test_cancelling_the_consumer_releases_the_connection(case: Case) -> None:
    transport = Tracking()
    async with httpx.AsyncClient(transport=transport) as http:
        model = make(case.kind, case.fake.base_url, http=http)
        case.fake.enqueue(Reply(tokens=[f" w{i}" for i in range(50)], token_delay=0.1))
        got: list[ModelEvent] = []

        async def consume() -> None:
            async for event in model.stream(ask()):
                got.append(event)  # noqa: PERF401 - cancelled midway: keep what arrived

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await anyio.sleep(0.35)
            tg.cancel_scope.cancel()
        assert 2 <= len(got) < 10
        assert transport.open_bodies == 0
        await case.fake.wait_for_active_streams_async(0, timeout=1)


async def test_a_complete_stream_leaves_the_connection_reusable(case: Case) -> None:
    transport = Tracking()
    async with httpx.AsyncClient(transport=transport) as http:
        model = make(case.kind, case.fake.base_url, http=http)
        for _ in range(3):
            await collect(model, ask())
        assert transport.open_bodies == 0
        assert transport.connects == 1  # keep-alive: the three calls shared one connection


class AioTracking:
    """An aiohttp session that counts new TCP connections (the default client)."""

    def __init__(self) -> None:
        self.connects = 0
        trace = aiohttp.TraceConfig()

        async def connected(*_: object) -> None:
            self.connects += 1

        trace.on_connection_create_end.append(connected)
        self.session = aiohttp.ClientSession(trace_configs=[trace])


async def test_aiohttp_closing_the_stream_early_closes_the_connection(case: Case) -> None:
    tracking = AioTracking()
    async with tracking.session:
        model = make(case.kind, case.fake.base_url, http=tracking.session)
        case.fake.enqueue(Reply(tokens=[f" w{i}" for i in range(50)], token_delay=0.1))
        stream = model.stream(ask())
        assert await anext(stream) == TextDelta(" w0")
        assert case.fake.active_streams == 1
        await stream.aclose()  # type: ignore[attr-defined]
        await case.fake.wait_for_active_streams_async(0, timeout=1)
        # the half-read connection was not put back: the next call connects anew
        await collect(model, ask())
        assert tracking.connects == 2


async def test_aiohttp_cancelling_the_consumer_closes_the_connection(case: Case) -> None:
    tracking = AioTracking()
    async with tracking.session:
        model = make(case.kind, case.fake.base_url, http=tracking.session)
        case.fake.enqueue(Reply(tokens=[f" w{i}" for i in range(50)], token_delay=0.1))
        got: list[ModelEvent] = []

        async def consume() -> None:
            async for event in model.stream(ask()):
                got.append(event)  # noqa: PERF401 - cancelled midway: keep what arrived

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await anyio.sleep(0.35)
            tg.cancel_scope.cancel()
        assert 2 <= len(got) < 10
        await case.fake.wait_for_active_streams_async(0, timeout=1)


async def test_aiohttp_complete_streams_share_one_connection(case: Case) -> None:
    tracking = AioTracking()
    async with tracking.session:
        model = make(case.kind, case.fake.base_url, http=tracking.session)
        for _ in range(3):
            assert TextDelta in {type(e) for e in await collect(model, ask())}
        assert tracking.connects == 1  # keep-alive: the three calls shared one connection


async def test_the_default_client_is_one_pooled_session_per_model(case: Case) -> None:
    model = make(case.kind, case.fake.base_url)
    try:
        await collect(model, ask())
        first = model._http._session
        await collect(model, ask())
        assert first is not None
        assert model._http._session is first
    finally:
        await model.aclose()
    assert first.closed


async def test_the_default_client_keeps_no_provider_cookies() -> None:
    """A provider's (a load balancer's) cookie is not sent back: the client serves
    every tenant, so nothing one request set may ride along with the next."""
    seen: list[bytes] = []
    chunk = (
        b'{"id":"c","object":"chat.completion.chunk",'
        b'"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}'
    )

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            seen.append(head)
            body = b"data: " + chunk + b"\n\ndata: [DONE]\n\n"
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"set-cookie: __lb=tenant-a-session; Path=/\r\n"
                b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    model = make("beta", f"http://localhost:{port}")  # (no cookies for IP addresses anyway)
    try:
        for _ in range(2):
            assert text_of(await collect(model, ask())) == "hi"
    finally:
        await model.aclose()
        server.close()
    assert len(seen) == 2
    assert b"cookie" not in seen[1].lower().replace(b"set-cookie", b"")


# --- wire corner cases, through a MockTransport --------------------------------------------------


def mock(body: bytes | list[bytes], seen: list[httpx.Request] | None = None) -> httpx.AsyncClient:
    chunks = [body] if isinstance(body, bytes) else body

    async def stream() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream())

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def alpha_sse(*events: tuple[str, str]) -> bytes:
    return "".join(f"event: {n}\r\ndata: {d}\r\n\r\n" for n, d in events).encode()


ALPHA_TOOL_STREAM = alpha_sse(
    (
        "message_start",
        '{"message":{"usage":{"input_tokens":5,"cache_creation_input_tokens":7,'
        '"cache_read_input_tokens":3,"output_tokens":1}}}',
    ),
    ("content_block_start", '{"index":0,"content_block":{"type":"tool_use","id":"t1","name":"f"}}'),
    (
        "content_block_delta",
        '{"index":0,"delta":{"type":"input_json_delta","partial_json":"{\\"a\\": "}}',
    ),
    ("content_block_stop", '{"index":0}'),
    ("message_delta", '{"delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}}'),
    ("message_stop", "{}"),
)


async def test_alpha_corner_cases_byte_by_byte() -> None:
    chunks = [ALPHA_TOOL_STREAM[i : i + 1] for i in range(len(ALPHA_TOOL_STREAM))]
    async with mock(chunks) as http:
        events = await collect(AlphaModel("http://x", KEY, http=http), ask())
    assert events == [
        # cut off mid-call: the arguments are no JSON object, and are kept as they came
        ToolCallRequested(ToolCall(id="t1", name="f", arguments={"_raw": '{"a": '})),
        # input total = 5 uncached + 7 cache writes + 3 cache reads
        UsageReport(Usage(input_tokens=15, output_tokens=9, cached_input_tokens=3)),
        Finished("length"),
    ]


async def test_alpha_truncated_stream() -> None:
    async with mock(ALPHA_TOOL_STREAM[:-40]) as http:
        _, err = await failure(AlphaModel("http://x", KEY, http=http), ask())
        assert err.code == "PROVIDER_ERROR"
        assert "before message_stop" in err.detail


async def test_alpha_without_a_key_calls_a_proxy_that_needs_none() -> None:
    """Only a base URL (a proxy that adds the key itself): no x-api-key header is
    sent, and the reply streams (docs/models.md)."""
    with fake_alpha(api_key="") as proxy:
        model = AlphaModel(proxy.base_url, "")
        try:
            proxy.enqueue(Reply(text="through the proxy"))
            events = await collect(model, ask())
        finally:
            await model.aclose()
        (request,) = proxy.requests
    assert text_of(events) == "through the proxy"
    assert "x-api-key" not in request.headers
    assert "authorization" not in request.headers
    assert request.headers["anthropic-version"] == alpha_wire.ANTHROPIC_VERSION


def beta_sse(*chunks: str, done: bool = True) -> bytes:
    return "".join(f"data: {c}\n\n" for c in chunks).encode() + (
        b"data: [DONE]\n\n" if done else b""
    )


async def test_beta_local_server_options() -> None:
    """No key: no Authorization header; ``max_tokens`` for servers that only know it;
    calls without ``index``; invalid arguments; no ``[DONE]`` after a finish reason."""
    body = beta_sse(
        '{"choices":[{"delta":{"content":"ok"}}]}',
        '{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}',
        '{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"[1"}}]}}]}',
        '{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}',
        done=False,
    )
    seen: list[httpx.Request] = []
    async with mock(body, seen) as http:
        model = BetaModel(
            "http://localhost:11434/v1/", "", http=http, max_tokens_field="max_tokens"
        )
        events = await collect(model, ask(max_tokens=99))
        await model.aclose()  # an injected client is the caller's: still usable
        assert not http.is_closed
    assert events == [
        TextDelta("ok"),
        ToolCallRequested(ToolCall(id="a", name="f", arguments={})),
        ToolCallRequested(ToolCall(id="b", name="g", arguments={"_raw": "[1"})),
        Finished("tool_calls"),  # the server sent no usage: no report
    ]
    (request,) = seen
    assert str(request.url) == "http://localhost:11434/v1/chat/completions"
    assert "authorization" not in request.headers
    sent = request.read()
    assert b'"max_tokens":99' in sent
    assert b"max_completion_tokens" not in sent


async def test_beta_broken_streams() -> None:
    cut = beta_sse('{"choices":[{"delta":{"content":"a"}}]}', done=False)
    garbage = b"data: {not json\n\n"
    for body, expected in ((cut, "before [DONE]"), (garbage, "malformed")):
        async with mock(body) as http:
            _, err = await failure(BetaModel("http://x/v1", KEY, http=http), ask())
        assert err.code == "PROVIDER_ERROR"
        assert expected in err.detail
