"""The scripted fake providers speak the two wire formats faithfully over real HTTP.

The service's parsers are tested against ``tests.fakes.providers``; these tests pin the fake
itself: event sequences, delta reassembly, usage, errors before and during a stream, pacing and
concurrency, request recording and the echoing default reply.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from tests.fakes.providers import (
    FakeProvider,
    Reply,
    ToolCallSpec,
    fake_alpha,
    fake_beta,
    split_tokens,
)

ALPHA_HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
BETA_HEADERS = {"authorization": "Bearer sk-test"}
ALPHA_PATH = "/v1/messages"
BETA_PATH = "/v1/chat/completions"

Event = tuple[str | None, Any]


# --- helpers -----------------------------------------------------------------------------


def parse_sse(raw: str) -> list[Event]:
    """(event name, decoded data) per SSE event; ``[DONE]`` stays a string."""
    events: list[Event] = []
    for block in raw.split("\n\n"):
        if not block.strip():
            continue
        name: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            key, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if key == "event":
                name = value
            elif key == "data":
                data.append(value)
        joined = "\n".join(data)
        events.append((name, joined if joined == "[DONE]" else json.loads(joined)))
    return events


def alpha_body(content: Any = "Hi", *, stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 256,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": content}],
        "stream": stream,
        **extra,
    }


def beta_body(content: Any = "Hi", *, stream: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": content},
        ],
        "stream": stream,
        **extra,
    }
    if stream:
        body.setdefault("stream_options", {"include_usage": True})
    return body


def post_alpha(fake: FakeProvider, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(fake.base_url + ALPHA_PATH, json=body, headers=ALPHA_HEADERS, timeout=10)


def post_beta(fake: FakeProvider, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(fake.base_url + BETA_PATH, json=body, headers=BETA_HEADERS, timeout=10)


def alpha_text(events: list[Event]) -> str:
    return "".join(
        d["delta"]["text"]
        for name, d in events
        if name == "content_block_delta" and d["delta"]["type"] == "text_delta"
    )


def beta_chunks(events: list[Event]) -> list[dict[str, Any]]:
    assert events[-1] == (None, "[DONE]")
    return [d for _, d in events[:-1]]


def beta_text(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def alpha_server() -> Iterator[FakeProvider]:
    with fake_alpha() as fake:
        yield fake


@pytest.fixture(scope="module")
def beta_server() -> Iterator[FakeProvider]:
    with fake_beta() as fake:
        yield fake


@pytest.fixture
def alpha(alpha_server: FakeProvider) -> FakeProvider:
    alpha_server.reset()
    return alpha_server


@pytest.fixture
def beta(beta_server: FakeProvider) -> FakeProvider:
    beta_server.reset()
    return beta_server


# --- alpha: Anthropic Messages -----------------------------------------------------------


def test_split_tokens_keeps_the_text() -> None:
    assert split_tokens("Hello big  world!\n") == ["Hello", " big", "  world!", "\n"]
    assert split_tokens("") == []


def test_alpha_text_stream_has_the_documented_event_sequence(alpha: FakeProvider) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    alpha.enqueue(Reply(text=text, input_tokens=30))
    r = post_alpha(alpha, alpha_body())
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert r.headers["request-id"].startswith("req_")
    events = parse_sse(r.text)
    n = len(split_tokens(text))
    assert [name for name, _ in events] == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * n,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(d["type"] == name for name, d in events)
    message = events[0][1]["message"]
    assert message["id"].startswith("msg_")
    assert {k: message[k] for k in ("type", "role", "model", "content", "stop_reason")} == {
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
    }
    assert message["usage"]["input_tokens"] == 30
    assert events[1][1] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    assert alpha_text(events) == text
    assert events[-3][1] == {"type": "content_block_stop", "index": 0}
    delta = events[-2][1]
    assert delta["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] == n


def test_alpha_tool_use_arguments_reassemble(alpha: FakeProvider) -> None:
    args = {"city": "Zürich", "days": 3, "units": {"temp": "C"}, "tags": ["a", "b"]}
    alpha.enqueue(
        Reply(
            text="Let me check.",
            tool_calls=[
                ToolCallSpec(id="toolu_01", name="get_weather", arguments=args),
                ToolCallSpec(id="toolu_02", name="now", arguments={}),
            ],
        )
    )
    events = parse_sse(post_alpha(alpha, alpha_body(tools=[{"name": "get_weather"}])).text)
    starts = [d for name, d in events if name == "content_block_start"]
    assert [s["content_block"] for s in starts] == [
        {"type": "text", "text": ""},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}},
        {"type": "tool_use", "id": "toolu_02", "name": "now", "input": {}},
    ]
    assert [s["index"] for s in starts] == [0, 1, 2]
    for index, expected in ((1, args), (2, {})):
        parts = [
            d["delta"]["partial_json"]
            for name, d in events
            if name == "content_block_delta" and d["index"] == index
        ]
        assert all(
            d["delta"]["type"] == "input_json_delta"
            for name, d in events
            if name == "content_block_delta" and d["index"] == index
        )
        assert parts[0] == ""  # the real API opens with an empty fragment
        assert json.loads("".join(parts)) == expected
    assert len([1 for name, d in events if name == "content_block_delta" and d["index"] == 1]) > 3
    assert alpha_text(events) == "Let me check."
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_alpha_usage_explicit_tokens_and_stop_reason(alpha: FakeProvider) -> None:
    alpha.enqueue(
        Reply(
            tokens=["Hel", "lo", "!"],
            input_tokens=7,
            cached_tokens=100,
            output_tokens=42,
            stop_reason="length",  # the other vocabulary is translated
        )
    )
    events = parse_sse(post_alpha(alpha, alpha_body()).text)
    deltas = [d["delta"]["text"] for name, d in events if name == "content_block_delta"]
    assert deltas == ["Hel", "lo", "!"]
    start_usage = events[0][1]["message"]["usage"]
    assert start_usage["input_tokens"] == 7
    assert start_usage["cache_read_input_tokens"] == 100
    final = events[-2][1]
    assert final["delta"]["stop_reason"] == "max_tokens"
    assert final["usage"]["output_tokens"] == 42
    assert final["usage"]["cache_read_input_tokens"] == 100


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (429, "rate_limit_error"),
        (500, "api_error"),
        (529, "overloaded_error"),
        (401, "authentication_error"),
        (400, "invalid_request_error"),
    ],
)
def test_alpha_http_errors(alpha: FakeProvider, status: int, error_type: str) -> None:
    alpha.enqueue(Reply(status=status))
    r = post_alpha(alpha, alpha_body())
    assert r.status_code == status
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert isinstance(body["error"]["message"], str)
    assert r.headers.get("retry-after") == ("0" if status == 429 else None)


def test_alpha_error_fields_can_be_overridden(alpha: FakeProvider) -> None:
    alpha.enqueue(Reply(status=429, error_message="slow down", headers={"Retry-After": "7"}))
    r = post_alpha(alpha, alpha_body())
    assert r.json()["error"] == {"type": "rate_limit_error", "message": "slow down"}
    assert r.headers["retry-after"] == "7"


def test_alpha_mid_stream_error_event(alpha: FakeProvider) -> None:
    alpha.enqueue(Reply(text="one two three four", error_after_tokens=2))
    events = parse_sse(post_alpha(alpha, alpha_body()).text)
    assert [name for name, _ in events] == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "error",
    ]
    assert alpha_text(events) == "one two"
    assert events[-1][1] == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


def test_alpha_mid_stream_disconnect(alpha: FakeProvider) -> None:
    alpha.enqueue(Reply(text="one two three", error_after_tokens=1, mid_stream_error="disconnect"))
    seen: list[str] = []
    with (
        httpx.Client(base_url=alpha.base_url, timeout=10) as client,
        client.stream("POST", ALPHA_PATH, json=alpha_body(), headers=ALPHA_HEADERS) as r,
    ):
        assert r.status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            seen.extend(r.iter_lines())
    assert "event: message_stop" not in seen
    assert alpha.active_streams == 0


def test_alpha_non_streaming_message(alpha: FakeProvider) -> None:
    alpha.enqueue(
        Reply(
            text="Calling.",
            tool_calls=[ToolCallSpec(id="toolu_9", name="f", arguments={"x": 1})],
            cached_tokens=5,
        )
    )
    r = post_alpha(alpha, alpha_body(stream=False))
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    message = r.json()
    assert message["type"] == "message"
    assert message["role"] == "assistant"
    assert message["content"] == [
        {"type": "text", "text": "Calling."},
        {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {"x": 1}},
    ]
    assert message["stop_reason"] == "tool_use"
    assert message["usage"] == {
        "input_tokens": 12,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 5,
        "output_tokens": 1 + len(split_tokens("Calling.")),
    }


def test_alpha_non_streaming_failure_is_an_error_status(alpha: FakeProvider) -> None:
    alpha.enqueue(Reply(error_after_tokens=1))
    r = post_alpha(alpha, alpha_body(stream=False))
    assert r.status_code == 529
    assert r.json()["error"]["type"] == "overloaded_error"


def test_alpha_compaction_block_is_passed_through(alpha: FakeProvider) -> None:
    block = {"type": "compaction", "content": "Earlier: the user asked about weather."}
    alpha.enqueue(Reply(text="Sunny.", compaction=block), Reply(text="Sunny.", compaction=block))
    events = parse_sse(post_alpha(alpha, alpha_body()).text)
    starts = [d for name, d in events if name == "content_block_start"]
    assert starts[0] == {"type": "content_block_start", "index": 0, "content_block": block}
    assert starts[1]["index"] == 1
    assert alpha_text(events) == "Sunny."
    whole = post_alpha(alpha, alpha_body(stream=False)).json()
    assert whole["content"] == [block, {"type": "text", "text": "Sunny."}]


def test_alpha_requests_are_recorded_with_headers_and_body(alpha: FakeProvider) -> None:
    body = alpha_body(tools=[{"name": "f", "input_schema": {"type": "object"}}])
    post_alpha(alpha, body)
    alpha.wait_for_requests(1)
    (request,) = alpha.requests
    assert request.method == "POST"
    assert request.path == ALPHA_PATH
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["content-type"] == "application/json"
    assert request.json == body
    assert json.loads(request.body) == body


def test_alpha_refuses_what_the_real_api_refuses(alpha: FakeProvider) -> None:
    alpha.enqueue(Reply(text="kept for later"))
    no_key = httpx.post(
        alpha.base_url + ALPHA_PATH, json=alpha_body(), headers={"anthropic-version": "2023-06-01"}
    )
    assert no_key.status_code == 401
    assert no_key.json()["error"]["type"] == "authentication_error"
    no_version = httpx.post(
        alpha.base_url + ALPHA_PATH, json=alpha_body(), headers={"x-api-key": "k"}
    )
    assert no_version.status_code == 400
    body = alpha_body()
    del body["max_tokens"]
    assert post_alpha(alpha, body).status_code == 400
    wrong_path = httpx.post(alpha.base_url + "/v1/complete", json={}, headers=ALPHA_HEADERS)
    assert wrong_path.status_code == 404
    assert wrong_path.json()["error"]["type"] == "not_found_error"
    assert alpha.queued == 1  # refused requests consume no scripted reply
    assert len(alpha.requests) == 4
    assert alpha_text(parse_sse(post_alpha(alpha, alpha_body()).text)) == "kept for later"
    # The current official SDK sends its key as a bearer token instead of x-api-key.
    bearer = {"authorization": "Bearer sk-ant-test", "anthropic-version": "2023-06-01"}
    with_bearer = httpx.post(alpha.base_url + ALPHA_PATH, json=alpha_body("ok?"), headers=bearer)
    assert alpha_text(parse_sse(with_bearer.text)) == "You said: ok?"


@pytest.mark.parametrize(
    ("content", "echoed"),
    [
        ("plain string", "plain string"),
        (
            [
                {"type": "text", "text": "look at"},
                {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
                {"type": "text", "text": "this"},
            ],
            "look at this",
        ),
        (
            [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "21 degrees"}],
            "21 degrees",
        ),
    ],
)
def test_alpha_default_reply_echoes_the_last_user_message(
    alpha: FakeProvider, content: Any, echoed: str
) -> None:
    body = alpha_body()
    body["messages"] = [
        {"role": "user", "content": "an older question"},
        {"role": "assistant", "content": "an answer"},
        {"role": "user", "content": content},
    ]
    assert alpha_text(parse_sse(post_alpha(alpha, body).text)) == f"You said: {echoed}"


def test_queue_is_consumed_in_order_then_the_default_answers(alpha: FakeProvider) -> None:
    alpha.enqueue(Reply(text="one"), Reply(text="two"))
    assert alpha.queued == 2
    texts = [alpha_text(parse_sse(post_alpha(alpha, alpha_body("3rd")).text)) for _ in range(3)]
    assert texts == ["one", "two", "You said: 3rd"]
    alpha.default = Reply(text="fixed")
    assert alpha_text(parse_sse(post_alpha(alpha, alpha_body()).text)) == "fixed"


def test_a_client_disconnect_closes_the_stream(alpha: FakeProvider) -> None:
    alpha.enqueue(Reply(tokens=["x"] * 500, token_delay=0.01))
    with (
        httpx.Client(base_url=alpha.base_url, timeout=10) as client,
        client.stream("POST", ALPHA_PATH, json=alpha_body(), headers=ALPHA_HEADERS) as r,
    ):
        lines = r.iter_lines()  # held: dropping the iterator would close the connection
        for line in lines:
            if line == "event: content_block_delta":
                break
        assert alpha.active_streams == 1
    started = time.monotonic()
    alpha.wait_for_active_streams(0, timeout=3)
    assert time.monotonic() - started < 2  # long before the 5 s the stream would take


# --- beta: OpenAI Chat Completions -------------------------------------------------------


def test_beta_text_stream_chunks_and_usage(beta: FakeProvider) -> None:
    text = "Hello there, general Kenobi."
    beta.enqueue(Reply(text=text, input_tokens=20, cached_tokens=8))
    r = post_beta(beta, beta_body())
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    events = parse_sse(r.text)
    assert all(name is None for name, _ in events)
    chunks = beta_chunks(events)
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["id"].startswith("chatcmpl-")
    assert {c["model"] for c in chunks} == {"gpt-test"}
    first, *middle, finish, usage = chunks
    assert first["choices"] == [
        {
            "index": 0,
            "delta": {"role": "assistant", "content": "", "refusal": None},
            "logprobs": None,
            "finish_reason": None,
        }
    ]
    assert len(middle) == len(split_tokens(text))
    assert all(c["choices"][0]["finish_reason"] is None for c in middle)
    assert beta_text(chunks) == text
    assert finish["choices"][0]["delta"] == {}
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert all(c["usage"] is None for c in chunks[:-1])
    assert usage["choices"] == []
    n = len(split_tokens(text))
    assert usage["usage"]["prompt_tokens"] == 28  # OpenAI counts cached tokens in the prompt
    assert usage["usage"]["completion_tokens"] == n
    assert usage["usage"]["total_tokens"] == 28 + n
    assert usage["usage"]["prompt_tokens_details"]["cached_tokens"] == 8


def test_beta_without_include_usage_sends_no_usage(beta: FakeProvider) -> None:
    body = beta_body()
    del body["stream_options"]
    chunks = beta_chunks(parse_sse(post_beta(beta, body).text))
    assert all("usage" not in c for c in chunks)
    assert all(c["choices"] for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def collect_tool_calls(chunks: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    calls: dict[int, dict[str, Any]] = {}
    for c in chunks:
        for tc in (c["choices"][0]["delta"].get("tool_calls") or []) if c["choices"] else []:
            call = calls.setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
            if "id" in tc:
                call["id"] = tc["id"]
                assert tc["type"] == "function"
            call["name"] = tc["function"].get("name", call["name"])
            call["arguments"] += tc["function"].get("arguments", "")
    return calls


def test_beta_tool_call_arguments_arrive_split_and_reassemble(beta: FakeProvider) -> None:
    args = {"query": "weather in Zürich", "limit": 5, "filters": {"days": [1, 2]}}
    beta.enqueue(
        Reply(
            text="Searching.",
            tool_calls=[
                ToolCallSpec(id="call_a", name="search", arguments=args),
                ToolCallSpec(id="call_b", name="clock", arguments={}),
            ],
        )
    )
    tools = [{"type": "function", "function": {"name": "search", "parameters": {}}}]
    chunks = beta_chunks(parse_sse(post_beta(beta, beta_body(tools=tools)).text))
    calls = collect_tool_calls(chunks)
    assert calls[0]["id"] == "call_a"
    assert calls[0]["name"] == "search"
    assert json.loads(calls[0]["arguments"]) == args
    assert (calls[1]["id"], calls[1]["name"], json.loads(calls[1]["arguments"])) == (
        "call_b",
        "clock",
        {},
    )
    argument_deltas = [
        tc
        for c in chunks
        if c["choices"]
        for tc in c["choices"][0]["delta"].get("tool_calls", [])
        if tc["index"] == 0 and tc["function"].get("arguments")
    ]
    assert len(argument_deltas) > 3
    assert beta_text(chunks) == "Searching."
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_beta_tool_only_reply_carries_the_role_on_the_first_tool_chunk(beta: FakeProvider) -> None:
    beta.enqueue(
        Reply(tokens=[], tool_calls=[ToolCallSpec(id="call_z", name="f", arguments={"a": 1})])
    )
    chunks = beta_chunks(parse_sse(post_beta(beta, beta_body()).text))
    first = chunks[0]["choices"][0]["delta"]
    assert first["role"] == "assistant"
    assert first["content"] is None
    assert first["tool_calls"][0]["id"] == "call_z"
    assert json.loads(collect_tool_calls(chunks)[0]["arguments"]) == {"a": 1}
    assert chunks[-1]["usage"]["completion_tokens"] == len(
        [
            1
            for c in chunks
            if c["choices"]
            for tc in c["choices"][0]["delta"].get("tool_calls", [])
            if tc["function"].get("arguments")
        ]
    )


@pytest.mark.parametrize(
    ("status", "error_type", "code"),
    [
        (429, "requests", "rate_limit_exceeded"),
        (500, "server_error", None),
        (503, "service_unavailable_error", "server_is_overloaded"),
        (401, "invalid_request_error", "invalid_api_key"),
        (400, "invalid_request_error", None),
    ],
)
def test_beta_http_errors(
    beta: FakeProvider, status: int, error_type: str, code: str | None
) -> None:
    beta.enqueue(Reply(status=status))
    r = post_beta(beta, beta_body())
    assert r.status_code == status
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["code"]) == (error_type, code)
    assert r.headers.get("retry-after") == ("0" if status == 429 else None)


def test_beta_mid_stream_error_payload(beta: FakeProvider) -> None:
    beta.enqueue(Reply(text="a b c d", error_after_tokens=3, error_code="boom"))
    events = parse_sse(post_beta(beta, beta_body()).text)
    assert "[DONE]" not in [d for _, d in events]
    *chunks, (_, last) = events
    assert beta_text([d for _, d in chunks]) == "a b c"
    assert last == {
        "error": {
            "message": "The server had an error while processing your request. Sorry about that!",
            "type": "server_error",
            "param": None,
            "code": "boom",
        }
    }


def test_beta_mid_stream_disconnect(beta: FakeProvider) -> None:
    beta.enqueue(Reply(text="a b c d", error_after_tokens=2, mid_stream_error="disconnect"))
    lines: list[str] = []
    with (
        httpx.Client(base_url=beta.base_url, timeout=10) as client,
        client.stream("POST", BETA_PATH, json=beta_body(), headers=BETA_HEADERS) as r,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        lines.extend(r.iter_lines())
    assert "data: [DONE]" not in lines


def test_beta_non_streaming_completion(beta: FakeProvider) -> None:
    beta.enqueue(
        Reply(text="", tool_calls=[ToolCallSpec(id="call_1", name="f", arguments={"k": "v"})]),
        Reply(text="Just text.", stop_reason="max_tokens"),
    )
    tool = post_beta(beta, beta_body(stream=False)).json()
    assert tool["object"] == "chat.completion"
    (choice,) = tool["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert (call["id"], call["type"], call["function"]["name"]) == ("call_1", "function", "f")
    assert json.loads(call["function"]["arguments"]) == {"k": "v"}
    assert tool["usage"]["prompt_tokens"] == 12
    text = post_beta(beta, beta_body(stream=False)).json()
    assert text["choices"][0]["message"]["content"] == "Just text."
    assert "tool_calls" not in text["choices"][0]["message"]
    assert text["choices"][0]["finish_reason"] == "length"


def test_beta_requests_are_recorded_and_refusals_consume_nothing(beta: FakeProvider) -> None:
    beta.enqueue(Reply(text="scripted"))
    no_key = httpx.post(beta.base_url + BETA_PATH, json=beta_body())
    assert no_key.status_code == 401
    assert no_key.json()["error"]["type"] == "invalid_request_error"
    assert beta.queued == 1
    body = beta_body(tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
    assert beta_text(beta_chunks(parse_sse(post_beta(beta, body).text))) == "scripted"
    beta.wait_for_requests(2)
    request = beta.requests[1]
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.path == BETA_PATH
    assert request.json == body


@pytest.mark.parametrize(
    ("content", "echoed"),
    [
        ("plain string", "plain string"),
        (
            [
                {"type": "text", "text": "what is"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "text", "text": "this?"},
            ],
            "what is this?",
        ),
    ],
)
def test_beta_default_reply_echoes_the_last_user_message(
    beta: FakeProvider, content: Any, echoed: str
) -> None:
    body = beta_body()
    body["messages"] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "old"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "user", "content": content},
        {"role": "tool", "tool_call_id": "call_1", "content": "tool output"},
    ]
    chunks = beta_chunks(parse_sse(post_beta(beta, body).text))
    assert beta_text(chunks) == f"You said: {echoed}"


# --- pacing, concurrency, lifecycle ------------------------------------------------------


async def test_a_slow_stream_does_not_block_a_fast_one(beta: FakeProvider) -> None:
    beta.enqueue(
        Reply(tokens=["slow"], first_token_delay=0.8),
        Reply(tokens=["a", "b", "c"], token_delay=0.05),
    )
    slow_elapsed: list[float] = []
    async with httpx.AsyncClient(base_url=beta.base_url, headers=BETA_HEADERS) as client:

        async def slow() -> None:
            started = time.monotonic()
            r = await client.post(BETA_PATH, json=beta_body())
            slow_elapsed.append(time.monotonic() - started)
            assert beta_text(beta_chunks(parse_sse(r.text))) == "slow"

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            await beta.wait_for_requests_async(1)
            started = time.monotonic()
            fast = await client.post(BETA_PATH, json=beta_body())
            fast_elapsed = time.monotonic() - started
            assert beta_text(beta_chunks(parse_sse(fast.text))) == "abc"
            assert beta.active_streams == 1  # the slow one is still open
    assert 0.1 <= fast_elapsed < 0.5
    assert slow_elapsed[0] >= 0.8


async def test_hundreds_of_concurrent_streams(alpha: FakeProvider) -> None:
    n = 200
    # each stream stays open long enough for all of them to be open at once, even on a
    # slow machine where opening 200 connections takes a while (0.3 s was not)
    alpha.default = Reply(tokens=["x", "y"], first_token_delay=3.0, token_delay=0.01)
    limits = httpx.Limits(max_connections=n + 10)
    async with httpx.AsyncClient(
        base_url=alpha.base_url, headers=ALPHA_HEADERS, limits=limits, timeout=20
    ) as client:
        texts: list[str] = []

        async def one() -> None:
            r = await client.post(ALPHA_PATH, json=alpha_body())
            texts.append(alpha_text(parse_sse(r.text)))

        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
            await alpha.wait_for_active_streams_async(n, timeout=10)
    assert texts == ["xy"] * n
    assert alpha.active_streams == 0


def test_stop_cuts_open_streams_and_start_is_idempotent() -> None:
    fake = fake_beta(api_key="sk-right")
    url = fake.start()
    assert fake.start() == url
    assert url.startswith("http://127.0.0.1:")
    assert not url.endswith("/")
    wrong = httpx.post(
        url + BETA_PATH, json=beta_body(), headers={"authorization": "Bearer sk-wrong"}
    )
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    fake.enqueue(Reply(tokens=["t"] * 1000, token_delay=0.01))
    with (
        httpx.Client(base_url=url, timeout=10) as client,
        client.stream(
            "POST", BETA_PATH, json=beta_body(), headers={"authorization": "Bearer sk-right"}
        ) as r,
    ):
        lines = r.iter_lines()
        assert next(lines).startswith("data: ")
        started = time.monotonic()
        fake.stop()
        assert time.monotonic() - started < 3
        with pytest.raises(httpx.RemoteProtocolError):
            for _ in lines:
                pass
    fake.stop()  # idempotent
    with pytest.raises(RuntimeError):
        _ = fake.base_url


async def test_async_context_manager_and_waiting_from_async_code() -> None:
    async with fake_alpha() as fake:
        with pytest.raises(TimeoutError):
            await fake.wait_for_requests_async(1, timeout=0.05)
        async with httpx.AsyncClient(base_url=fake.base_url, headers=ALPHA_HEADERS) as client:
            r = await client.post(ALPHA_PATH, json=alpha_body("from async"))
        await fake.wait_for_requests_async(1)
        assert alpha_text(parse_sse(r.text)) == "You said: from async"
        await fake.wait_for_active_streams_async(0)
    with pytest.raises(RuntimeError):
        _ = fake.base_url
