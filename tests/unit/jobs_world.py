"""What the job queue tests share (``tests/unit/test_jobs.py`` on MemoryJobs,
``tests/contract/test_jobs_postgres.py`` on PgJobs): handlers that record what
they ran and signal events, and waits with generous timeouts (never a timed
assertion: a slow machine waits longer, it does not fail)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Protocol

import pytest

from agentsvc_core.ports.jobs import Again, JobHandlers, JobQueue

WAIT_S = 60.0  # generous: how long a test waits for something that should happen


class Worker(JobQueue, Protocol):
    async def work(self, handlers: JobHandlers) -> None: ...

    def stop(self) -> None: ...


def kind() -> str:
    """A kind of its own per test, so that tests sharing a database never run
    each other's jobs."""
    return f"test.{uuid.uuid4().hex[:12]}"


async def within(aw: Awaitable[object]) -> None:
    await asyncio.wait_for(aw, WAIT_S)


async def until(check: Callable[[], Awaitable[bool]], pause: float = 0.05) -> None:
    """Wait until ``check`` answers True (it is asked again and again)."""
    async with asyncio.timeout(WAIT_S):
        while not await check():  # noqa: ASYNC110 (the queue's state has no event to wait on)
            await asyncio.sleep(pause)


class Recorder:
    """A handler that records each payload it ran and wakes whoever waits for a count."""

    def __init__(self) -> None:
        self.ran: list[bytes] = []
        self._changed = asyncio.Event()

    async def __call__(self, payload: bytes) -> None:
        self.ran.append(payload)
        self._changed.set()

    async def count(self, n: int) -> None:
        async with asyncio.timeout(WAIT_S):
            while len(self.ran) < n:
                self._changed.clear()
                await self._changed.wait()


class Blocking:
    """A handler that says it started and runs until released."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.finished: list[bytes] = []
        self.starts = 0

    async def __call__(self, payload: bytes) -> None:
        self.starts += 1
        self.started.set()
        await self.release.wait()
        self.finished.append(payload)


class Running:
    """A worker's ``work`` in a task; ``stop`` and wait for it at the end."""

    def __init__(self, worker: Worker, handlers: JobHandlers) -> None:
        self.worker = worker
        self.task = asyncio.create_task(worker.work(handlers))

    async def stop(self) -> None:
        self.worker.stop()
        await within(self.task)


# --- the behaviours, each against either queue -----------------------------------


async def a_job_runs_once(make: Callable[[], Worker]) -> None:
    jobs, k, done = make(), kind(), Recorder()
    other, later = kind(), Recorder()
    assert await jobs.enqueue(k, b"one")
    running = Running(jobs, {k: done, other: later})
    try:
        await done.count(1)
        # a job enqueued after it has run too: the first had its chance to run twice
        assert await jobs.enqueue(other, b"later")
        await later.count(1)
    finally:
        await running.stop()
    assert done.ran == [b"one"]


async def a_key_dedupes_while_waiting_and_running(make: Callable[[], Worker]) -> None:
    jobs, k, handler = make(), kind(), Blocking()
    key = f"key-{uuid.uuid4().hex}"
    assert await jobs.enqueue(k, b"first", key=key) is True
    assert await jobs.enqueue(k, b"second", key=key) is False  # waiting
    assert await jobs.enqueue(k, b"unkeyed") is True  # no key: no dedupe
    running = Running(jobs, {k: handler})
    try:
        await within(handler.started.wait())
        assert await jobs.enqueue(k, b"third", key=key) is False  # running (or the unkeyed)
        handler.release.set()
        # once it has run, the key is free (the completion is recorded in the background)
        await until(lambda: jobs.enqueue(k, b"again", key=key))
        await until(_async(lambda: len(handler.finished) == 3))
    finally:
        handler.release.set()
        await running.stop()
    assert sorted(handler.finished) == [b"again", b"first", b"unkeyed"]


def _async(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def go() -> bool:
        return check()

    return go


async def delay_s_delays(make: Callable[[], Worker]) -> None:
    jobs, k = make(), kind()
    order: list[tuple[bytes, float]] = []
    ran = asyncio.Event()

    async def handler(payload: bytes) -> None:
        order.append((payload, time.monotonic()))
        if len(order) == 2:
            ran.set()

    start = time.monotonic()
    assert await jobs.enqueue(k, b"delayed", delay_s=1.5)
    assert await jobs.enqueue(k, b"now")
    running = Running(jobs, {k: handler})
    try:
        await within(ran.wait())
    finally:
        await running.stop()
    assert [p for p, _ in order] == [b"now", b"delayed"]
    assert order[1][1] - start >= 1.5  # never sooner than asked


async def again_runs_the_job_again_under_its_own_key(make: Callable[[], Worker]) -> None:
    """A handler that answers ``Again(delay_s)`` runs again with the same payload,
    no sooner than the delay, and its key stays taken until the second run ends."""
    jobs, k = make(), kind()
    key = f"key-{uuid.uuid4().hex}"
    starts: list[tuple[bytes, float]] = []
    release = asyncio.Event()

    async def handler(payload: bytes) -> Again | None:
        starts.append((payload, time.monotonic()))
        if len(starts) == 1:
            return Again(1.0)
        await release.wait()  # the second run holds the key until released
        return None

    assert await jobs.enqueue(k, b"one", key=key)
    running = Running(jobs, {k: handler})
    try:
        await until(_async(lambda: len(starts) >= 1))
        # waiting to run again, or running again: the key is taken either way
        assert await jobs.enqueue(k, b"other", key=key) is False
        await until(_async(lambda: len(starts) >= 2))
        assert await jobs.enqueue(k, b"other", key=key) is False
        release.set()
        # once the second run has ended, the key is free
        await until(lambda: jobs.enqueue(k, b"after", key=key))
        await until(_async(lambda: len(starts) >= 3))
    finally:
        release.set()
        await running.stop()
    assert [p for p, _ in starts] == [b"one", b"one", b"after"]
    assert starts[1][1] - starts[0][1] >= 1.0  # never sooner than asked


async def a_failing_handler_is_logged_and_the_worker_goes_on(
    make: Callable[[], Worker], caplog: pytest.LogCaptureFixture
) -> None:
    jobs, bad, good, done = make(), kind(), kind(), Recorder()

    async def boom(payload: bytes) -> None:
        raise RuntimeError("handler defect")

    caplog.set_level(logging.ERROR, logger="agentsvc.jobs")
    assert await jobs.enqueue(bad, b"x")
    running = Running(jobs, {bad: boom, good: done})
    try:
        await until(_async(lambda: any(bad in r.getMessage() for r in caplog.records)))
        assert await jobs.enqueue(good, b"y")
        await done.count(1)
    finally:
        await running.stop()
    (record,) = [r for r in caplog.records if bad in r.getMessage()]
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)
    assert done.ran == [b"y"]


async def stop_lets_a_running_job_finish(make: Callable[[], Worker]) -> None:
    jobs, k, handler = make(), kind(), Blocking()
    assert await jobs.enqueue(k, b"long")
    running = Running(jobs, {k: handler})
    await within(handler.started.wait())
    jobs.stop()
    await asyncio.sleep(0.2)  # not an assertion on time: gives a wrong stop the chance to end it
    assert not running.task.done()
    handler.release.set()
    await within(running.task)
    assert handler.finished == [b"long"]
