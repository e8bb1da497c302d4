"""The Turn buffer the SSE stream reads: wake-ups, timeouts, several and cancelled readers."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from agentsvc_core.ports import StopSignal
from agentsvc_core.use_cases.turn.events import Token, Turn


def a_turn() -> Turn:
    return Turn(uuid.uuid4(), uuid.uuid4())


async def test_a_waiting_reader_wakes_on_emit_and_gets_everything_since() -> None:
    turn = a_turn()
    reader = asyncio.create_task(turn.read(0, 5))
    await asyncio.sleep(0)
    turn.emit(Token(delta="a"))
    turn.emit(Token(delta="b"))
    assert await asyncio.wait_for(reader, 1) == [Token(delta="a"), Token(delta="b")]


async def test_a_quiet_turn_times_out_then_delivers_later_events() -> None:
    turn = a_turn()
    assert await turn.read(0, 0.01) is None
    turn.emit(Token(delta="late"))
    assert await turn.read(0, 0.01) == [Token(delta="late")]
    assert await turn.read(1, 0.01) is None


async def test_several_readers_all_wake() -> None:
    turn = a_turn()
    readers = [asyncio.create_task(turn.read(0, 5)) for _ in range(3)]
    await asyncio.sleep(0)
    turn.emit(Token(delta="x"))
    assert await asyncio.wait_for(asyncio.gather(*readers), 1) == [[Token(delta="x")]] * 3


async def test_a_cancelled_reader_does_not_disturb_the_next() -> None:
    turn = a_turn()
    gone = asyncio.create_task(turn.read(0, 5))
    await asyncio.sleep(0)
    gone.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await gone
    reader = asyncio.create_task(turn.read(0, 5))
    await asyncio.sleep(0)
    turn.emit(Token(delta="y"))
    assert await asyncio.wait_for(reader, 1) == [Token(delta="y")]


async def test_close_ends_waiting_readers_once_everything_was_read() -> None:
    turn = a_turn()
    turn.emit(Token(delta="z"))
    reader = asyncio.create_task(turn.read(1, 5))
    await asyncio.sleep(0)
    turn.close()
    assert await asyncio.wait_for(reader, 1) == []
    assert await turn.read(0, 5) == [Token(delta="z")]  # what was said stays readable


def test_stop_signal_runs_callbacks_once_and_removers_work() -> None:
    signal = StopSignal()
    seen: list[str] = []
    signal.on_set(lambda: seen.append("a"))
    remove = signal.on_set(lambda: seen.append("b"))
    remove()
    remove()  # harmless twice
    signal.set()
    signal.set()  # once only
    assert seen == ["a"]
    assert signal.is_set()
    signal.on_set(lambda: seen.append("late"))  # already set: runs at once
    assert seen == ["a", "late"]
