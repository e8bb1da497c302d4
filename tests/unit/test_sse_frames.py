"""SSE framing of a turn: ids, batching, keep-alive comments while the model is silent."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

from litestar import Request

from agentsvc_core.use_cases.turn.events import Done, Meta, Token, Turn
from agentsvc_web.settings import Settings
from agentsvc_web.sse import KEEPALIVE, KEEPALIVE_S, SseResponse, SseStream, sse_frames
from tests.sse import parse


async def test_keep_alive_comments_while_silent_then_numbered_events() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    turn.emit(
        Meta(started_at=datetime.now(UTC), run_id=turn.run_id, thread_id=turn.thread_id, model="m")
    )
    frames: list[bytes] = []

    async def read() -> None:
        frames.extend([frame async for frame in sse_frames(turn, keepalive_s=0.02)])

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.09)  # the model is silent: keep-alives
    turn.emit(Token(delta="Hel"))
    turn.emit(Token(delta="lo"))
    turn.emit(Done(ok=True, content="Hello"))
    turn.close()
    await asyncio.wait_for(reader, 2)
    assert frames.count(KEEPALIVE) >= 2
    assert frames[0].startswith(b"id: 1\nevent: meta\n")
    events = parse(b"".join(frames).decode())
    assert [(e.id, e.event) for e in events] == [
        (1, "meta"),
        (2, "token"),
        (3, "token"),
        (4, "done"),
    ]
    assert events[-1].data == {"ok": True, "content": "Hello"}
    # events that arrived together went out in one write
    assert any(b"event: token" in f and b"event: done" in f for f in frames)


async def test_a_late_reader_gets_everything_from_the_start() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    for i in range(5):
        turn.emit(Token(delta=str(i)))
    turn.close()
    frames = [f async for f in sse_frames(turn, keepalive_s=1)]
    assert [e.data["delta"] for e in parse(b"".join(frames).decode())] == ["0", "1", "2", "3", "4"]


def _asgi(turn: Turn) -> Any:
    # a minimal scope, not a whole HTTP scope: the response reads none of the rest
    scope: Any = {"type": "http", "method": "POST", "app": None}
    request: Request[Any, Any, Any] = Request(scope=scope)
    return SseStream(
        sse_frames(turn, keepalive_s=1), media_type="text/event-stream"
    ).to_asgi_response(None, request)


async def test_the_response_writes_each_batch_then_ends_without_reading_the_request() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    turn.emit(Token(delta="a"))
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if len(sent) == 2:  # after the first batch, the rest of the reply comes
            turn.emit(Token(delta="b"))
            turn.emit(Done(ok=True, content="ab"))
            turn.close()

    async def receive() -> dict[str, Any]:
        raise AssertionError("nothing waits on the client: leaving does not cancel the reply")

    await asyncio.wait_for(_asgi(turn)({}, receive, send), 2)
    assert sent[0]["type"] == "http.response.start"
    bodies = [m for m in sent[1:] if m["type"] == "http.response.body"]
    assert [b["more_body"] for b in bodies] == [True, True, False]
    assert [e.event for e in parse(b"".join(b["body"] for b in bodies).decode())] == [
        "token",
        "token",
        "done",
    ]


async def test_a_server_that_raises_for_a_gone_client_ends_the_response_quietly() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    turn.emit(Token(delta="a"))
    turn.close()
    calls = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal calls
        calls += 1
        if message["type"] == "http.response.body":
            raise OSError("client disconnected")

    async def receive() -> dict[str, Any]:
        raise AssertionError("not read")

    await asyncio.wait_for(_asgi(turn)({}, receive, send), 2)
    assert calls == 2  # the start, then the first body write, which raised


def test_the_keep_alive_interval_is_15_s_by_default() -> None:
    # a comment line every 15 s while the model is silent (docs/client-guide.md, "Events")
    assert KEEPALIVE_S == 15.0
    assert sse_frames.__defaults__ == (KEEPALIVE_S, 0)  # (keep-alive, first event index)
    assert Settings().sse_keepalive_s == KEEPALIVE_S  # what the web layer wires
    assert Settings.from_env({}).sse_keepalive_s == KEEPALIVE_S


async def test_a_silent_turn_gets_one_keep_alive_per_interval() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    frames = sse_frames(turn, keepalive_s=0.05)
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await anext(frames) == KEEPALIVE
    assert await anext(frames) == KEEPALIVE
    assert loop.time() - start >= 0.1  # not sooner than the interval
    turn.close()
    assert [f async for f in frames] == []


def test_the_response_is_our_own_asgi_response() -> None:
    # built by its constructor, not a Litestar response whose class was swapped
    assert type(_asgi(Turn(uuid.uuid4(), uuid.uuid4()))) is SseResponse
