"""What runs beside the requests: the job queue and its worker (knowledge
indexing, memory collection, runner runs, channels' answers, code sessions), the
sweep (replies and runs whose process died, analytics' sums, old traces), the
scheduler of cron ticks and, on PostgreSQL, the statistics of grown tables."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

from agentsvc_adapters.jobs import MemoryJobs, PgJobs
from agentsvc_adapters.postgres import PostgresStorage
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import Storage
from agentsvc_core.ports.jobs import JobHandler
from agentsvc_core.use_cases.channels import ANSWER_JOB
from agentsvc_core.use_cases.code_sessions import EXPIRE_JOB as CODE_SESSION_EXPIRY
from agentsvc_core.use_cases.code_sessions import RUN_JOB as CODE_SESSION_JOB
from agentsvc_core.use_cases.event_webhooks import DELIVER_JOB
from agentsvc_core.use_cases.knowledge.documents import INDEX_JOB
from agentsvc_core.use_cases.memories.collect import COLLECT_JOB
from agentsvc_core.use_cases.runners.runs import RUN_JOB
from agentsvc_web.settings import Settings

if TYPE_CHECKING:
    from agentsvc_web.bootstrap.services import Services

log = logging.getLogger("agentsvc")

SWEEP_EVERY_S = 30.0  # at most; shorter when replies go stale sooner


def job_queue(settings: Settings, storage: Storage) -> PgJobs | MemoryJobs:
    """Background jobs: in PostgreSQL (shared by every process) or in this process."""
    if isinstance(storage, PostgresStorage):
        return PgJobs(
            storage.pool,
            storage.conninfo,
            concurrency=settings.worker_concurrency,
            heartbeat_s=settings.job_heartbeat_s,
        )
    return MemoryJobs(concurrency=settings.worker_concurrency, heartbeat_s=settings.job_heartbeat_s)


def job_handlers(s: Services) -> dict[str, JobHandler]:
    """The background jobs this service runs, by kind."""
    return {
        INDEX_JOB: s.knowledge.index,
        COLLECT_JOB: s.memory_collector.collect,
        RUN_JOB: s.runner_engine.execute,
        ANSWER_JOB: s.channel_answers.answer,
        CODE_SESSION_JOB: s.code_session_engine.run,
        CODE_SESSION_EXPIRY: s.code_session_engine.expire,
        DELIVER_JOB: s.event_deliveries.deliver,
    }


async def sweep(s: Services) -> None:
    """Replies whose process died stop counting as running; indexings and runner
    runs whose job was lost are queued again; rows stored since the last sweep are
    folded into analytics' hourly and daily sums; traces kept long enough go;
    computers idle past their timeout stop; threads untouched past their
    organization's retention are deleted."""
    try:
        count = await s.conversation.sweep()
        if count:
            log.warning("marked %d replies interrupted (their process had stopped)", count)
    except DomainError as exc:
        log.warning("sweep of interrupted replies failed: %s", exc.detail)
    try:
        again = await s.knowledge.resume()
        if again:
            log.warning("queued again %d document indexings whose job was lost", again)
    except DomainError as exc:
        log.warning("the sweep of document indexings failed: %s", exc.detail)
    try:
        again = await s.runner_runs.resume_stale(timedelta(seconds=s.settings.run_stale_after_s))
        if again:
            log.warning("queued again %d runner runs whose job was lost", again)
    except DomainError as exc:
        log.warning("the sweep of runner runs failed: %s", exc.detail)
    again = await s.event_deliveries.resume()
    if again:
        log.warning("queued again %d webhook deliveries whose job was lost", again)
    if pruned := await s.event_deliveries.prune():
        log.info("pruned %d webhook events past their retention", pruned)
    try:
        stopped = await s.computers.sweep_idle()
        if stopped:
            log.info("stopped %d idle computer instances", stopped)
    except DomainError as exc:
        log.warning("the sweep of idle computers failed: %s", exc.detail)
    try:
        await s.analytics.roll_up()
        pruned = await s.traces.prune()
        if pruned:
            log.info("pruned %d traces past their retention", pruned)
    except DomainError as exc:
        log.warning("the sweep of traces and analytics failed: %s", exc.detail)
    await _retention(s)


async def _retention(s: Services) -> None:
    """Threads untouched past their organization's retention are deleted
    (``use_cases/erasure.py``: it looks once an hour unless a batch was full)."""
    try:
        deleted = await s.erasure.sweep()
        if deleted:
            log.info("deleted %d threads past their organization's retention", deleted)
    except DomainError as exc:
        log.warning("the sweep of threads past their retention failed: %s", exc.detail)


def start_loops(s: Services) -> list[asyncio.Task[None]]:
    """The periodic work of this process, until the caller cancels it: the sweep,
    the scheduler and (PostgreSQL, when on) the statistics of grown tables."""
    loops = [
        asyncio.create_task(_sweep_forever(s)),
        asyncio.create_task(_schedule_forever(s)),
    ]
    if isinstance(s.storage, PostgresStorage) and s.settings.analyze_every_ms:
        loops.append(asyncio.create_task(_analyze_forever(s.storage, s.settings)))
    return loops


async def _sweep_forever(s: Services) -> None:
    """The sweep every 30 s (after the one at start-up)."""
    while True:
        await asyncio.sleep(min(SWEEP_EVERY_S, s.settings.run_stale_after_s / 2))
        await sweep(s)


async def _schedule_forever(s: Services) -> None:
    """Due cron ticks (runners' triggers, agents' scheduled tasks) become runs:
    every process looks, and each tick is taken by one of them."""
    every = s.settings.scheduler_tick_ms / 1000
    while True:
        try:
            await s.runner_runs.fire_due()
        except DomainError as exc:
            log.warning("the scheduler could not fire due triggers: %s", exc.detail)
        await asyncio.sleep(every)


async def _analyze_forever(storage: PostgresStorage, settings: Settings) -> None:
    """Tables that doubled since their statistics get new ones, so the plans
    prepared while they were small are made again (postgres/statistics.py)."""
    every = settings.analyze_every_ms / 1000
    while True:
        try:
            analyzed = await storage.analyze_grown()
            if analyzed:
                log.info("analyzed %s: grown since their statistics", ", ".join(analyzed))
        except DomainError as exc:
            log.warning("the statistics of grown tables failed: %s", exc.detail)
        await asyncio.sleep(every)


@asynccontextmanager
async def working(s: Services) -> AsyncIterator[None]:
    """The background jobs' worker in this process (``AGENTSVC_WORKER``), for the
    block's life; at its end the jobs running get the shutdown grace to finish."""
    if not s.settings.worker:
        if isinstance(s.jobs, MemoryJobs):
            log.warning("AGENTSVC_WORKER is off with memory storage: no job will run")
        yield
        return
    worker = asyncio.create_task(s.jobs.work(job_handlers(s)))
    try:
        yield
    finally:
        s.jobs.stop()
        await _stop_worker(worker, s.settings.shutdown_grace_s)


async def _stop_worker(worker: asyncio.Task[None], grace_s: float) -> None:
    """Let the jobs running finish within ``grace_s``, then cancel them: a job
    cut short is picked again (its heartbeat goes stale) by another worker."""
    done, _ = await asyncio.wait({worker}, timeout=grace_s)
    if not done:
        log.warning("background jobs still running after %ss: stopped", grace_s)
        worker.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await worker
