"""Stopping a thread's reply and waiting for its end (use_cases/turn/halt.py), which
a thread's deletion does first: a reply of this process is awaited, one of another
process is stopped through the bus and looked for again, an orphaned one is marked
interrupted at once, and the wait has a deadline."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

from agentsvc_core.entities import Run
from agentsvc_core.use_cases.turn.halt import HALT_POLL_S, Halting
from tests.unit.turn_world import T0

ORG = "org-halt"
THREAD = uuid.uuid4()
STALE = timedelta(seconds=45)


def a_run() -> Run:
    return Run(
        id=uuid.uuid4(),
        org_id=ORG,
        thread_id=THREAD,
        status="running",
        started_at=T0,
        heartbeat_at=T0,
    )


class Clock:
    def now(self) -> Any:
        return T0


class Store:
    """Answers ``running`` from ``answers`` (the last one again), records each ask."""

    def __init__(self, *answers: Run | None, orphaned: bool = False) -> None:
        self.answers = list(answers)
        self.asked: list[Any] = []
        self.orphaned = orphaned
        self.interrupted: list[Any] = []

    async def running(self, org: str, thread_id: Any, stale_before: Any) -> Run | None:
        self.asked.append((org, thread_id, stale_before))
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    async def interrupt_orphaned(self, org: str, run_id: Any, at: Any) -> bool:
        self.interrupted.append((org, run_id, at))
        return self.orphaned


class Stops:
    def __init__(self) -> None:
        self.published: list[Any] = []

    async def publish(self, run_id: Any) -> None:
        self.published.append(run_id)


def halting(store: Store, running: dict[Any, Any] | None = None) -> tuple[Halting, Stops]:
    stops = Stops()
    h = Halting(store, stops, running or {}, Clock(), STALE)  # type: ignore[arg-type]
    return h, stops


async def test_a_thread_with_no_reply_is_halted_at_once() -> None:
    store = Store(None)
    h, stops = halting(store)
    assert await h.halt(ORG, THREAD, 5.0) is True
    assert store.asked == [(ORG, THREAD, T0 - STALE)]
    assert stops.published == []


async def test_a_reply_whose_process_is_gone_is_marked_interrupted() -> None:
    run = a_run()
    store = Store(run, orphaned=True)
    h, stops = halting(store)
    assert await h.halt(ORG, THREAD, 5.0) is True
    assert store.interrupted == [(ORG, run.id, T0)]
    assert stops.published == []


async def test_a_reply_of_another_process_is_stopped_once_and_looked_for_again() -> None:
    run = a_run()
    store = Store(run, run, run, None)
    h, stops = halting(store)
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert await asyncio.wait_for(h.halt(ORG, THREAD, 5.0), 3) is True
    assert stops.published == [run.id]  # once, however many looks
    assert len(store.asked) == 4
    assert loop.time() - began >= 2.5 * HALT_POLL_S  # it waited between looks


async def test_a_reply_of_this_process_is_awaited_not_taken_for_orphaned() -> None:
    run = a_run()
    task = asyncio.create_task(asyncio.sleep(0.1))
    store = Store(run, None, orphaned=True)
    h, stops = halting(store, {run.id: (ORG, task, object())})
    assert await asyncio.wait_for(h.halt(ORG, THREAD, 5.0), 3) is True
    assert store.interrupted == []  # it runs here: not orphaned
    assert stops.published == [run.id]
    assert task.done()


async def test_a_reply_that_does_not_end_in_time_is_a_false() -> None:
    run = a_run()
    forever = asyncio.create_task(asyncio.Event().wait())
    h, _ = halting(Store(run), {run.id: (ORG, forever, object())})
    assert await asyncio.wait_for(h.halt(ORG, THREAD, 0.3), 3) is False
    elsewhere, _ = halting(Store(run))
    assert await asyncio.wait_for(elsewhere.halt(ORG, THREAD, 0.3), 3) is False
    forever.cancel()


async def test_a_reply_that_ends_within_the_wait_is_a_true() -> None:
    run = a_run()
    soon = asyncio.create_task(asyncio.sleep(0.2))
    h, _ = halting(Store(run, None), {run.id: (ORG, soon, object())})
    assert await asyncio.wait_for(h.halt(ORG, THREAD, 0.8), 3) is True
