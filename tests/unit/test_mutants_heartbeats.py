"""Heartbeats of a process's running replies (use_cases/turn/heartbeats.py): one write per
beat for all of them, a beat every quarter of the stale span, none once no reply
is left."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any
from uuid import UUID

import pytest

from agentsvc_core.errors import Unavailable
from agentsvc_core.use_cases.turn import heartbeats as heartbeats_module
from agentsvc_core.use_cases.turn.conversation import SendInput
from agentsvc_core.use_cases.turn.heartbeats import Heartbeats
from tests.unit.turn_world import HANG, ORG, WHO, Clock, Script, read_all, world


class Beats:
    """A store that records heartbeats; ``fail`` makes the next ones raise."""

    def __init__(self) -> None:
        self.beats: list[tuple[list[tuple[str, UUID]], datetime]] = []
        self.fail = 0
        self.after: Any = None  # called after each beat

    async def heartbeat(self, runs: list[tuple[str, UUID]], at: datetime) -> None:
        if self.fail:
            self.fail -= 1
            if self.after:
                self.after()
            raise Unavailable("no database")
        self.beats.append((runs, at))
        if self.after:
            self.after()


async def test_one_write_per_beat_names_every_running_reply() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    running: dict[UUID, tuple[str, object, object]] = {
        a: ("org-a", None, None),
        b: ("org-b", None, None),
    }
    store, clock = Beats(), Clock()
    store.after = running.clear  # the replies end after the first beat
    beats = Heartbeats(store, clock, 0, running)  # type: ignore[arg-type]
    beats.ensure()
    task = beats._task
    assert task is not None
    await asyncio.wait_for(task, 5)
    assert store.beats == [([("org-a", a), ("org-b", b)], clock.now())]


async def test_no_beat_without_running_replies_and_the_task_ends() -> None:
    store = Beats()
    beats = Heartbeats(store, Clock(), 0, {})  # type: ignore[arg-type]
    beats.ensure()
    task = beats._task
    assert task is not None
    await asyncio.wait_for(task, 5)
    assert store.beats == []
    assert beats._task is None  # ended: the next ensure starts it again


async def test_a_failed_beat_does_not_end_the_beats() -> None:
    run = uuid.uuid4()
    running: dict[UUID, tuple[str, object, object]] = {run: (ORG, None, None)}
    store = Beats()
    store.fail = 1
    beats = Heartbeats(store, Clock(), 0, running)  # type: ignore[arg-type]
    store.after = lambda: running.clear() if store.beats else None
    beats.ensure()
    assert beats._task is not None
    await asyncio.wait_for(beats._task, 5)
    assert [runs for runs, _ in store.beats] == [[(ORG, run)]]


async def test_the_replies_that_ended_between_beats_are_not_named() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    running: dict[UUID, tuple[str, object, object]] = {a: (ORG, None, None), b: (ORG, None, None)}
    store = Beats()

    def after() -> None:
        if len(store.beats) == 1:
            del running[a]
        else:
            running.clear()

    store.after = after
    beats = Heartbeats(store, Clock(), 0, running)  # type: ignore[arg-type]
    beats.ensure()
    assert beats._task is not None
    await asyncio.wait_for(beats._task, 5)
    assert [runs for runs, _ in store.beats] == [[(ORG, a), (ORG, b)], [(ORG, b)]]


async def test_ensure_starts_one_task_and_again_after_cancel() -> None:
    running: dict[UUID, tuple[str, object, object]] = {uuid.uuid4(): (ORG, None, None)}
    beats = Heartbeats(Beats(), Clock(), 3600, running)  # type: ignore[arg-type]
    beats.ensure()
    first = beats._task
    beats.ensure()
    assert beats._task is first
    beats.cancel()
    assert first is not None
    with pytest.raises(asyncio.CancelledError):
        await first
    assert first.cancelled()
    beats.ensure()
    assert beats._task is not first
    assert beats._task is not None
    beats.cancel()
    Heartbeats(Beats(), Clock(), 1, {}).cancel()  # type: ignore[arg-type]  # nothing to cancel


async def test_a_running_reply_beats_every_quarter_of_the_stale_span(monkeypatch: Any) -> None:
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float, *args: Any) -> Any:
        if delay:
            waits.append(delay)
            delay = 0
        return await real_sleep(delay, *args)

    class OnlyHeartbeatsSleep:
        """The heartbeats module's ``asyncio``: its sleeps are recorded, nobody else's
        (the reply's flush timer sleeps too)."""

        def __getattr__(self, name: str) -> Any:
            return sleep if name == "sleep" else getattr(asyncio, name)

    w = await world(Script([HANG]), stale_after_s=20.0)
    monkeypatch.setattr(heartbeats_module, "asyncio", OnlyHeartbeatsSleep())
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    w.clock.advance(7)
    await asyncio.wait_for(w.model.waiting.wait(), 5)
    for _ in range(3):
        await real_sleep(0)
    (run,) = await w.runs()
    assert waits
    assert set(waits) == {5.0}
    assert run.heartbeat_at == w.clock.now() != run.started_at
    await w.conversation.stop(WHO, w.thread.id)
    await read_all(turn)
