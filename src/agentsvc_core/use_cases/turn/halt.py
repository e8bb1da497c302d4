"""Stopping a thread's reply and waiting for its end (a thread's deletion needs the
reply's final write done before it deletes: ``use_cases/erasure.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta
from uuid import UUID

from agentsvc_core.ports import Clock, ConversationStore, StopBus, StopSignal

HALT_POLL_S = 0.1  # how often a reply of another process is looked for again


async def halt(
    store: ConversationStore,
    stops: StopBus,
    running: Mapping[UUID, tuple[str, asyncio.Task[None], StopSignal]],
    where: tuple[str, UUID, Clock, timedelta],
    wait_s: float,
) -> bool:
    """Stop the running reply of the thread ``where`` names (organization, thread,
    the clock, and how old a heartbeat says a reply is dead), in whichever
    process runs it, and wait until it has ended, at most ``wait_s`` seconds: a
    reply of this process (``running``) is awaited, one of another process is
    looked for again every ``HALT_POLL_S``; a reply whose process is gone is marked
    interrupted at once. True when no reply runs any more."""
    org_id, thread_id, clock, stale_after = where
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    stopped: UUID | None = None
    while True:
        now = clock.now()
        run = await store.running(org_id, thread_id, now - stale_after)
        if run is None:
            return True
        entry = running.get(run.id)
        if entry is None and await store.interrupt_orphaned(org_id, run.id, now):
            return True
        if stopped != run.id:
            await stops.publish(run.id)
            stopped = run.id
        left = deadline - loop.time()
        if left <= 0:
            return False
        if entry is not None:
            await asyncio.wait({entry[1]}, timeout=left)
        else:
            await asyncio.sleep(min(HALT_POLL_S, left))
