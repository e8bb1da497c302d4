"""MemoryJobs, the memory storage's job queue (adapters/jobs.py): the job queue's
rules (ports/jobs.py) in one process. The same behaviours run on PgJobs in
tests/contract/test_jobs_postgres.py."""

from __future__ import annotations

import pytest

from agentsvc_adapters.jobs import MemoryJobs
from tests.unit import jobs_world as w


def _make() -> MemoryJobs:
    return MemoryJobs(heartbeat_s=2)


async def test_a_job_runs_once() -> None:
    await w.a_job_runs_once(_make)


async def test_a_key_dedupes_while_waiting_and_running_and_is_free_after() -> None:
    await w.a_key_dedupes_while_waiting_and_running(_make)


async def test_delay_s_delays_a_job() -> None:
    await w.delay_s_delays(_make)


async def test_again_runs_the_job_again_under_its_own_key() -> None:
    await w.again_runs_the_job_again_under_its_own_key(_make)


async def test_a_failing_handler_is_logged_and_the_worker_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    await w.a_failing_handler_is_logged_and_the_worker_goes_on(_make, caplog)


async def test_stop_lets_a_running_job_finish() -> None:
    await w.stop_lets_a_running_job_finish(_make)


async def test_jobs_wait_for_a_worker_that_starts_later() -> None:
    jobs, k, done = _make(), w.kind(), w.Recorder()
    assert await jobs.enqueue(k, b"early")
    running = w.Running(jobs, {k: done})
    try:
        await done.count(1)
    finally:
        await running.stop()
    assert done.ran == [b"early"]


def test_a_worker_needs_a_concurrency_of_two() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        MemoryJobs(concurrency=1)
