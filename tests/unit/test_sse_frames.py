"""SSE framing of a turn: ids, batching, keep-alive comments while the model is silent."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

from agentsvc_core.use_cases.turn import Done, Meta, Token, Turn
from agentsvc_web.sse import KEEPALIVE, sse_frames
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
