"""The client's edges that the real service does not easily show, over
``httpx.MockTransport``: every status of the tree, the wire format of bodies and
queries, retryable and final statuses while re-attaching, the SSE decoder."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest

from agentsvc_client import (
    AgentsvcError,
    AsyncClient,
    Client,
    Conflict,
    Done,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ReplyError,
    ServerError,
    StreamInterrupted,
    ThreadBusy,
    Token,
    UnexpectedResponse,
    UnsupportedMediaType,
)
from agentsvc_client._sse import RawEvent, SSEDecoder

Handler = Callable[[httpx.Request], httpx.Response]
THREAD = "3515b0c2-0000-4000-8000-000000000001"
RUN = "a01b0000-0000-4000-8000-000000000002"


def _client(handler: Handler, **kwargs: Any) -> Client:
    return Client(
        "http://agentsvc.test", "ask_unit", transport=httpx.MockTransport(handler), **kwargs
    )


def _error(status: int, code: str, **headers: str) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        body = {"error": code, "detail": f"detail of {code}"}
        return httpx.Response(status, json=body, headers={"X-Request-Id": "rid-1", **headers})

    return handler


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (403, "FORBIDDEN", Forbidden),
        (404, "NOT_FOUND", NotFound),
        (405, "METHOD_NOT_ALLOWED", MethodNotAllowed),
        (409, "THREAD_BUSY", ThreadBusy),
        (409, "IDEMPOTENCY_KEY_IN_USE", Conflict),
        (413, "PAYLOAD_TOO_LARGE", PayloadTooLarge),
        (415, "UNSUPPORTED_MEDIA_TYPE", UnsupportedMediaType),
        (500, "INTERNAL_ERROR", ServerError),
        (503, "UNAVAILABLE", ServerError),
        (418, "TEAPOT", AgentsvcError),
    ],
)
def test_each_status_has_its_class(status: int, code: str, cls: type[AgentsvcError]) -> None:
    with _client(_error(status, code)) as c, pytest.raises(AgentsvcError) as caught:
        c.agents.list()
    assert type(caught.value) is cls
    assert (caught.value.status, caught.value.error) == (status, code)
    assert caught.value.detail == f"detail of {code}"
    assert caught.value.request_id == "rid-1"


def test_rate_limited_says_when_to_retry() -> None:
    with (
        _client(_error(429, "RATE_LIMITED", **{"Retry-After": "7"})) as c,
        pytest.raises(RateLimited) as caught,
    ):
        c.keys.list()
    assert caught.value.retry_after == 7.0


def test_an_error_that_is_not_json_keeps_its_text() -> None:
    with (
        _client(lambda r: httpx.Response(502, text="Bad gateway from a proxy")) as c,
        pytest.raises(ServerError) as caught,
    ):
        c.agents.list()
    assert caught.value.error is None
    assert caught.value.detail == "Bad gateway from a proxy"


def test_an_answer_that_does_not_match_the_model_is_unexpected() -> None:
    with (
        _client(lambda r: httpx.Response(200, json={"id": 1})) as c,
        pytest.raises(UnexpectedResponse),
    ):
        c.agents.get("x")


def test_bodies_go_camel_case_without_the_unset_and_queries_without_none() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(400, json={"error": "BAD_REQUEST", "detail": "stop here"})

    with _client(handler) as c:
        with pytest.raises(AgentsvcError):
            c.agents.update("a1", stable_preamble="Be brief.", default_profile=None)
        with pytest.raises(AgentsvcError):
            c.logs.list(agent_id="a1", limit=5)
    assert json.loads(seen[0].content) == {"stablePreamble": "Be brief.", "defaultProfile": None}
    assert seen[0].headers["content-type"] == "application/json"
    assert seen[0].headers["authorization"] == "Bearer ask_unit"
    assert dict(seen[1].url.params) == {"agentId": "a1", "limit": "5"}


def _sse(*events: tuple[str, int, Mapping[str, object]]) -> bytes:
    return b"".join(
        f"id: {i}\nevent: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, i, data in events
    )


META = ("meta", 1, {"startedAt": "t", "runId": RUN, "threadId": THREAD, "model": "local"})


def test_a_retryable_status_while_re_attaching_is_retried_and_a_final_one_raises() -> None:
    answers = [
        httpx.Response(200, content=_sse(META, ("token", 2, {"delta": "Hi"}))),  # then ends
        httpx.Response(503, json={"error": "UNAVAILABLE", "detail": "restarting"}),
        httpx.Response(
            200,
            content=_sse(
                ("token", 2, {"delta": "Hi"}),  # sent again: dropped
                ("token", 3, {"delta": "!"}),
                ("done", 4, {"ok": True, "content": "Hi!"}),
            ),
        ),
    ]
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return answers.pop(0)

    with _client(handler, stream_backoff=0.001) as c:
        events = list(c.send_message(THREAD, "Hello"))
    assert [e.id for e in events] == [1, 2, 3, 4]
    assert "".join(e.delta for e in events if isinstance(e, Token)) == "Hi!"
    assert isinstance(events[-1], Done)
    assert [(r.method, r.headers.get("last-event-id")) for r in requests] == [
        ("POST", None),
        ("GET", "2"),
        ("GET", "2"),
    ]
    assert requests[1].url.params["runId"] == RUN
    assert requests[0].headers["idempotency-key"]

    # a reply past its replay window: 404, not retried
    answers[:] = [
        httpx.Response(200, content=_sse(META)),
        httpx.Response(404, json={"error": "NOT_FOUND", "detail": "run not found"}),
    ]
    with _client(handler, stream_backoff=0.001) as c, pytest.raises(NotFound):
        list(c.send_message(THREAD, "Hello"))


async def test_async_re_attach_over_a_mock_transport() -> None:
    answers = [
        httpx.Response(200, content=_sse(META)),
        httpx.Response(200, content=_sse(("done", 2, {"ok": True, "content": ""}))),
    ]
    keys: list[str | None] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers.get("idempotency-key") or request.headers.get("last-event-id"))
        return answers.pop(0)

    async with AsyncClient(
        "http://agentsvc.test", "k", transport=httpx.MockTransport(handler), stream_backoff=0.001
    ) as c:
        done = await c.send_message(THREAD, "Hello", idempotency_key="my-key").final()
    assert done.ok
    assert keys == ["my-key", "1"]


def test_the_sse_decoder() -> None:
    decoder = SSEDecoder()
    lines = [
        ": keep-alive",
        "",
        "id: 7",
        "event: token",
        'data: {"delta":',
        'data: "x"}',
        "",
        "data: no name",
        "",
    ]
    out = [e for e in map(decoder.feed, lines) if e is not None]
    assert out == [RawEvent("token", "7", '{"delta":\n"x"}'), RawEvent("message", "7", "no name")]


def test_an_attach_that_keeps_failing_gives_up_with_where_it_was() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        raise httpx.ReadError("connection reset", request=request)

    with _client(handler, stream_retries=2, stream_backoff=0.001) as c:
        stream = c.threads.attach(THREAD, run_id=RUN, last_event_id=7)
        with pytest.raises(StreamInterrupted) as caught:
            list(stream)
    assert (caught.value.run_id, caught.value.last_event_id, caught.value.attempts) == (RUN, 7, 3)
    assert [(r.method, r.headers["last-event-id"]) for r in seen] == [("GET", "7")] * 3
    assert isinstance(caught.value.__cause__, httpx.ReadError)


def test_an_event_without_data_is_not_dispatched() -> None:
    decoder = SSEDecoder()
    lines = ["event: token", "", "id: 3", "event: token", 'data: {"delta": "y"}', ""]
    out = [e for e in map(decoder.feed, lines) if e is not None]
    assert out == [RawEvent("token", "3", '{"delta": "y"}')]


def test_an_event_that_does_not_decode_is_an_unexpected_response() -> None:
    bad_meta = ("meta", 1, {"startedAt": 1, "runId": RUN, "threadId": THREAD, "model": "x"})

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_sse(bad_meta))

    with _client(handler) as c, pytest.raises(UnexpectedResponse, match="meta"):
        list(c.send_message(THREAD, "Hello"))


def test_a_path_parameter_is_one_segment() -> None:
    """An id from elsewhere (a user's input) cannot reach another route."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(404, json={"error": "NOT_FOUND", "detail": "agent not found"})

    with _client(handler) as c:
        for bad in ("../keys/x", "a#b", "a?b=1", "a/b"):
            with pytest.raises(NotFound):
                c.agents.get(bad)
    assert [r.url.raw_path.decode() for r in seen] == [
        "/api/agents/..%2Fkeys%2Fx",
        "/api/agents/a%23b",
        "/api/agents/a%3Fb%3D1",
        "/api/agents/a%2Fb",
    ]


def test_an_attach_after_an_event_needs_the_run_id() -> None:
    with _client(lambda r: httpx.Response(500)) as c, pytest.raises(ValueError, match="run_id"):
        c.threads.attach(THREAD, last_event_id=4)


def test_a_reply_error_gives_the_connection_back() -> None:
    closed: list[bool] = []

    class Body(httpx.SyncByteStream):
        def __iter__(self):
            yield _sse(META, ("error", 2, {"code": "PROVIDER_ERROR", "detail": "boom"}))

        def close(self) -> None:
            closed.append(True)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Body())

    with _client(handler) as c:
        stream = c.send_message(THREAD, "Hello")
        with pytest.raises(ReplyError):
            stream.final()
        assert closed == [True]  # before the client closes
