"""The job queue on PgQueuer: durable in PostgreSQL, or in-process for memory storage.

Why PgQueuer (compared with procrastinate, the other maintained PostgreSQL queue
for asyncio, in the commit that brought it): both speak psycopg 3 async and wake
workers with LISTEN/NOTIFY, and both have cron schedules. PgQueuer re-picks a job
whose worker stopped sending heartbeats (``heartbeat_timeout``) as part of its
dequeue, where procrastinate leaves stalled jobs to a sweep of our own; it
deduplicates waiting and running jobs by key in one partial unique index; and it
has an in-memory driver with the same entrypoints, which the memory storage uses,
so one handler code runs on both.

Jobs run inside the service process (``AGENTSVC_WORKER=on``, the default) or in
``agentsvc worker`` processes; any number of them, on any number of machines,
share the work through the database: a job is picked by one worker (``FOR UPDATE
SKIP LOCKED``), its heartbeat renewed while it runs, and picked again by any
worker once the heartbeat is older than the timeout (a killed process).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import psycopg
from pgqueuer import PgQueuer, RetryRequested
from pgqueuer.adapters.drivers.psycopg import PsycopgDriver
from pgqueuer.adapters.persistence.queries import Queries
from pgqueuer.core.tm import TaskManager
from pgqueuer.ports import RepositoryPort
from pgqueuer.ports.driver import Driver, NotifyCallback
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from agentsvc_core.errors import Unavailable
from agentsvc_core.ports.jobs import Again, JobHandler, JobHandlers, JobQueue

if TYPE_CHECKING:
    from pgqueuer.models import Job

__all__ = ["MemoryJobs", "PgJobs"]

log = logging.getLogger("agentsvc.jobs")


def _job_handler(kind: str, handler: JobHandler) -> Any:
    async def run(job: Job) -> None:
        try:
            answer = await handler(job.payload or b"")
        except Exception:
            # The handler records what the job was for (a document's ``failed``);
            # an exception here is a defect: logged, and the job ends.
            log.exception("job %s of kind %s failed", job.id, kind)
            return
        if isinstance(answer, Again):
            # PgQueuer's own retry, asked for the only way it is (an exception out
            # of the entrypoint): the job's row goes back to ``queued`` with its
            # payload and dedupe key, to run after the delay (one statement, so
            # the key is never free in between)
            raise RetryRequested(delay=timedelta(seconds=max(0.0, answer.delay_s)))

    return run


async def _put(
    queries: RepositoryPort, kind: str, payload: bytes, key: str | None, delay_s: float
) -> bool:
    """``JobQueue.enqueue`` on either queue's queries: False when ``key`` is taken."""
    ids = await queries.enqueue(
        kind,
        payload,
        execute_after=timedelta(seconds=delay_s) if delay_s > 0 else None,
        dedupe_key=key,
        on_conflict="skip",
    )
    return ids[0] is not None


class _SplitDriver(Driver):
    """PgQueuer's driver over two connections: one for its statements, one that
    only listens. PgQueuer's own psycopg driver listens on the connection its
    statements use, and psycopg holds that connection's lock while it waits for a
    notification (up to a second each time), so every dequeue, heartbeat and
    completion waited behind the listener: a job started about 1 s after it was
    queued and an idle worker took 3 to 4 s to stop. Here the listener waits on a
    connection of its own with no timeout, and is cancelled when the run ends."""

    def __init__(
        self,
        statements: psycopg.AsyncConnection[Any],
        listener: psycopg.AsyncConnection[Any],
        lost: Callable[[], None],
    ) -> None:
        """``lost``: called when the listener's connection fails."""
        self._statements = PsycopgDriver(statements)
        self._listener = listener
        self._lost = lost
        self._callbacks: dict[str, list[NotifyCallback]] = {}
        self._shutdown = asyncio.Event()
        self._tm = TaskManager()
        self._watcher: asyncio.Task[None] | None = None
        self._entered = 0

    @property
    def shutdown(self) -> asyncio.Event:
        return self._shutdown

    @property
    def tm(self) -> TaskManager:
        return self._tm

    async def fetch(self, query: str, *args: object) -> list[dict[str, object]]:
        return await self._statements.fetch(query, *args)

    async def execute(self, query: str, *args: object) -> str:
        return await self._statements.execute(query, *args)

    async def notify(self, channel: str, payload: str) -> None:
        await self._statements.notify(channel, payload)

    async def add_listener(self, channel: str, callback: NotifyCallback) -> None:
        # (PgQueuer listens on one channel, before the watcher starts: a LISTEN once
        # the watcher waits would wait for its connection's lock)
        if channel not in self._callbacks:
            await self._listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            self._callbacks[channel] = []
        self._callbacks[channel].append(callback)
        if self._watcher is None:
            self._watcher = asyncio.create_task(self._watch(), name="agentsvc-jobs-listener")
            self._tm.add(self._watcher)

    async def _watch(self) -> None:
        try:
            async for note in self._listener.notifies():
                for callback in list(self._callbacks.get(note.channel, ())):
                    try:
                        callback(note.payload)
                    except Exception:
                        log.exception("a job queue notification's callback failed")
        except psycopg.Error as exc:
            # The listener's connection is gone (a server restart, a terminated
            # backend). Dequeues would still run every ``dequeue_timeout``, but
            # late: the run ends (its jobs finish) and ``work`` opens both again.
            log.warning("the job worker lost its listening connection (%s)", type(exc).__name__)
            self._lost()

    async def __aenter__(self) -> _SplitDriver:
        if self._entered == 0:
            self._shutdown.clear()
        self._entered += 1
        return self

    async def __aexit__(self, *_: object) -> None:
        # PgQueuer.run enters the driver from two managers: the last exit stops
        # listening (the listener connection is closed by its owner, ``work``)
        self._entered -= 1
        if self._entered > 0:
            return
        self._shutdown.set()
        if self._watcher is not None:
            self._watcher.cancel()
        await self._tm.gather_tasks()
        self._watcher = None
        self._callbacks.clear()


class _Worker:
    """What runs the handlers, shared by both queues: the entrypoints of one
    PgQueuer and its run loop, stopped by ``stop`` (jobs running finish first)."""

    def __init__(self, *, concurrency: int, heartbeat_s: float) -> None:
        if concurrency < 2:
            raise ValueError("the worker's concurrency is at least 2")
        self._concurrency = concurrency
        self._heartbeat = timedelta(seconds=heartbeat_s)
        self._current: PgQueuer | None = None
        self._stopping = False

    def _register(self, pgq: PgQueuer, handlers: JobHandlers) -> None:
        for kind, handler in handlers.items():
            pgq.entrypoint(kind)(_job_handler(kind, handler))

    async def _run(
        self, pgq: PgQueuer, abandon: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """PgQueuer's run loop until ``stop``. Cancelled, the running jobs are cut
        short with no completion recorded (``abandon`` first takes away what would
        record it): a killed process's jobs are picked again elsewhere."""
        self._current = pgq
        run = asyncio.create_task(
            pgq.run(
                batch_size=max(1, self._concurrency // 2),
                max_concurrent_tasks=self._concurrency,
                heartbeat_timeout=self._heartbeat,
                # a missed NOTIFY (a reconnect) costs at most this much delay
                dequeue_timeout=timedelta(seconds=10),
            )
        )
        try:
            # asyncio.wait does not pass a cancel on to ``run``: see below
            await asyncio.wait({run})
        except asyncio.CancelledError:
            # A cancelled worker is a stopped process (a shutdown past its grace):
            # its jobs end now and are picked again elsewhere once their heartbeat
            # is stale. PgQueuer answers one cancel by waiting for the running jobs
            # (an unbounded wait); cancelling again while it waits cuts them short,
            # and it would then log them ``canceled`` (done, never picked again),
            # so its connection goes first.
            if abandon is not None:
                await abandon()
            while not run.done():
                run.cancel()
                await asyncio.wait({run}, timeout=0.05)
            raise
        finally:
            self._current = None
        run.result()

    def stop(self) -> None:
        """Take no new jobs; ``work`` returns once the running ones end."""
        self._stopping = True
        if self._current is not None:
            self._current.shutdown.set()


class PgJobs(_Worker, JobQueue):
    """Jobs in PostgreSQL. ``enqueue`` uses the storage's pool (one statement);
    ``work`` holds two connections of its own: one for dequeues and heartbeats,
    one for LISTEN (``_SplitDriver``)."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        conninfo: str,
        *,
        concurrency: int = 4,
        heartbeat_s: float = 30.0,
    ) -> None:
        super().__init__(concurrency=concurrency, heartbeat_s=heartbeat_s)
        self._pool = pool
        self._conninfo = conninfo

    async def enqueue(
        self, kind: str, payload: bytes, *, key: str | None = None, delay_s: float = 0.0
    ) -> bool:
        try:
            async with self._pool.connection() as conn:
                return await _put(Queries(PsycopgDriver(conn)), kind, payload, key, delay_s)
        except (PoolTimeout, psycopg.OperationalError) as exc:
            raise Unavailable("the job queue's database is unreachable; try again") from exc

    async def work(self, handlers: JobHandlers) -> None:
        """Run jobs until ``stop``; a lost connection (either) is opened again
        (with a growing pause), never the end of the worker."""
        pause = 0.5
        while not self._stopping:
            try:
                if await self._session(handlers):
                    return
                pause = 0.5  # the listener was lost: connect again soon
            except (psycopg.Error, OSError) as exc:
                log.warning("the job worker lost its database connection (%s)", type(exc).__name__)
            await asyncio.sleep(pause + random.uniform(0, pause))  # noqa: S311 (jitter)
            pause = min(pause * 2, 30.0)

    async def _session(self, handlers: JobHandlers) -> bool:
        """One pair of connections: True once stopped, False when the listener's
        connection was lost (the run ended once its jobs had)."""
        lost = asyncio.Event()

        def listener_lost() -> None:
            lost.set()
            pgq.shutdown.set()

        async with self._connection() as conn, self._connection() as listener:
            pgq = PgQueuer(_SplitDriver(conn, listener, listener_lost))
            self._register(pgq, handlers)
            if not self._stopping:
                await self._run(pgq, abandon=conn.close)
        return not lost.is_set()

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        # keepalives: a listener's connection that dies silently (a half-open TCP
        # connection) is noticed in about a minute, and the worker connects again
        conn = await psycopg.AsyncConnection.connect(
            self._conninfo,
            autocommit=True,
            keepalives=1,
            keepalives_idle=30,
            keepalives_interval=10,
            keepalives_count=3,
        )
        async with conn:
            yield conn


class MemoryJobs(_Worker, JobQueue):
    """Jobs in this process's memory (the memory storage's queue): the same
    library and handlers, nothing durable. ``work`` may start after ``enqueue``:
    jobs wait for it."""

    def __init__(self, *, concurrency: int = 4, heartbeat_s: float = 30.0) -> None:
        super().__init__(concurrency=concurrency, heartbeat_s=heartbeat_s)
        self._pgq = PgQueuer.in_memory()

    async def enqueue(
        self, kind: str, payload: bytes, *, key: str | None = None, delay_s: float = 0.0
    ) -> bool:
        assert self._pgq.queries is not None
        return await _put(self._pgq.queries, kind, payload, key, delay_s)

    async def work(self, handlers: JobHandlers) -> None:
        self._register(self._pgq, handlers)
        if not self._stopping:
            await self._run(self._pgq)
