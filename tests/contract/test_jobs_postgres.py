"""PgJobs (adapters/jobs.py) on a fresh migrated database: the behaviours MemoryJobs
has (tests/unit/test_jobs.py), and what only a shared database gives: workers
share the jobs, each job runs once, and a job whose worker was killed is picked
again by another once its heartbeat is stale."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import psycopg
import pytest

from agentsvc_adapters.jobs import PgJobs
from agentsvc_adapters.postgres import PostgresStorage, migrate
from agentsvc_core.ports.jobs import JobHandler
from tests.pg import fresh_database
from tests.unit import jobs_world as w

pytestmark = pytest.mark.postgres

HEARTBEAT_S = 2


@pytest.fixture(scope="module")
def jobs_url(pg_admin_url: str) -> Iterator[str]:
    """A database of these tests' own: the queue's table holds only their jobs."""
    with fresh_database(pg_admin_url) as url:
        asyncio.run(migrate(url))
        yield url


@pytest.fixture
async def make(jobs_url: str) -> AsyncIterator[Callable[[], PgJobs]]:
    storage = PostgresStorage(jobs_url, min_size=1, max_size=8)
    await storage.open()
    try:
        yield lambda: PgJobs(storage.pool, storage.conninfo, heartbeat_s=HEARTBEAT_S)
    finally:
        await storage.close()


async def test_a_job_runs_once(make: Callable[[], PgJobs]) -> None:
    await w.a_job_runs_once(make)


async def test_a_key_dedupes_while_waiting_and_running_and_is_free_after(
    make: Callable[[], PgJobs],
) -> None:
    await w.a_key_dedupes_while_waiting_and_running(make)


async def test_delay_s_delays_a_job(make: Callable[[], PgJobs]) -> None:
    await w.delay_s_delays(make)


async def test_again_runs_the_job_again_under_its_own_key(make: Callable[[], PgJobs]) -> None:
    await w.again_runs_the_job_again_under_its_own_key(make)


async def test_a_failing_handler_is_logged_and_the_worker_goes_on(
    make: Callable[[], PgJobs], caplog: pytest.LogCaptureFixture
) -> None:
    await w.a_failing_handler_is_logged_and_the_worker_goes_on(make, caplog)


async def test_stop_lets_a_running_job_finish(make: Callable[[], PgJobs]) -> None:
    await w.stop_lets_a_running_job_finish(make)


async def test_two_workers_share_the_jobs_each_runs_exactly_once(
    make: Callable[[], PgJobs],
) -> None:
    k, n = w.kind(), 60
    ran: list[tuple[str, bytes]] = []
    everything = asyncio.Event()

    def handler(name: str) -> JobHandler:
        async def run(payload: bytes) -> None:
            await asyncio.sleep(0.01)  # long enough for the other worker to take some
            ran.append((name, payload))
            if len({p for _, p in ran}) == n:
                everything.set()

        return run

    producer = make()
    for i in range(n):
        assert await producer.enqueue(k, f"{i}".encode())
    one, two = make(), make()
    workers = [w.Running(one, {k: handler("one")}), w.Running(two, {k: handler("two")})]
    try:
        await w.within(everything.wait())
    finally:
        for running in workers:
            await running.stop()
    payloads = [p for _, p in ran]
    assert set(payloads) == {f"{i}".encode() for i in range(n)}
    assert len(payloads) == n  # none twice


async def test_a_killed_workers_job_is_picked_again_once_its_heartbeat_is_stale(
    make: Callable[[], PgJobs],
) -> None:
    k = w.kind()
    first = w.Blocking()  # never released: the process "dies" mid-job
    second = w.Recorder()
    queue = make()
    assert await queue.enqueue(k, b"survivor", key=f"key-{k}")
    doomed = make()
    task = asyncio.create_task(doomed.work({k: first}))
    await w.within(first.started.wait())
    # killed: no stop(); the cancel cuts the job short (a hung job cannot hold the
    # worker's end) and records no completion
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await w.within(asyncio.shield(task))
    assert first.finished == []
    # while it is "picked", the key still dedupes
    assert await queue.enqueue(k, b"again", key=f"key-{k}") is False
    heir = w.Running(make(), {k: second})
    try:
        await second.count(1)
    finally:
        await heir.stop()
    assert second.ran == [b"survivor"]
    assert first.starts == 1


async def test_a_worker_whose_listening_connection_dies_listens_again(
    make: Callable[[], PgJobs], jobs_url: str
) -> None:
    """The worker listens on a connection of its own (adapters/jobs.py): when that
    connection dies, the worker opens its connections again and listens anew,
    and a job queued after that runs."""

    async def listeners() -> list[int]:
        async with await psycopg.AsyncConnection.connect(jobs_url, autocommit=True) as c:
            cur = await c.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND query LIKE 'LISTEN %%' AND pid <> pg_backend_pid()"
            )
            return [r[0] for r in await cur.fetchall()]

    k = w.kind()
    ran = w.Recorder()
    worker = w.Running(make(), {k: ran})
    try:
        await w.until(lambda: _async_len(listeners, 1))
        [first] = await listeners()
        async with await psycopg.AsyncConnection.connect(jobs_url, autocommit=True) as c:
            await c.execute("SELECT pg_terminate_backend(%s)", (first,))
        await w.until(lambda: _async_other(listeners, first))
        queue = make()
        assert await queue.enqueue(k, b"after")
        await ran.count(1)
        assert ran.ran == [b"after"]
    finally:
        await worker.stop()


async def _async_len(read: Callable[[], Awaitable[list[int]]], n: int) -> bool:
    return len(await read()) == n


async def _async_other(read: Callable[[], Awaitable[list[int]]], old: int) -> bool:
    now = await read()
    return len(now) == 1 and now[0] != old
