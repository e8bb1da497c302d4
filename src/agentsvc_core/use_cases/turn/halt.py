"""Stopping a thread's reply and waiting for its end (a thread's deletion needs the
reply's final write done before it deletes: ``use_cases/erasure.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta
from uuid import UUID

from agentsvc_core.ports import Clock, ConversationStore, StopBus, StopSignal

HALT_POLL_S = 0.1  # how often a reply of another process is looked for again


class Halting:
    """``Conversation.halting``: the replies of this process (``running``, the
    conversation's live registry) and of the others (``store``, ``stops``)."""

    def __init__(
        self,
        store: ConversationStore,
        stops: StopBus,
        running: Mapping[UUID, tuple[str, asyncio.Task[None], StopSignal]],
        clock: Clock,
        stale_after: timedelta,
    ) -> None:
        """``stale_after``: a running reply whose heartbeat is older is taken for dead."""
        self._store = store
        self._stops = stops
        self._running = running
        self._clock = clock
        self._stale_after = stale_after

    async def halt(self, org_id: str, thread_id: UUID, wait_s: float) -> bool:
        """Stop the thread's running reply, in whichever process runs it, and wait
        until it has ended (its final write done), at most ``wait_s`` seconds: a
        reply of this process is awaited, one of another process is looked for
        again every ``HALT_POLL_S``; a reply whose process is gone is marked
        interrupted at once. True when no reply runs any more."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        stopped: UUID | None = None
        while True:
            now = self._clock.now()
            run = await self._store.running(org_id, thread_id, now - self._stale_after)
            if run is None:
                return True
            entry = self._running.get(run.id)
            if entry is None and await self._store.interrupt_orphaned(org_id, run.id, now):
                return True
            if stopped != run.id:
                await self._stops.publish(run.id)
                stopped = run.id
            left = deadline - loop.time()
            if left <= 0:
                return False
            if entry is not None:
                await asyncio.wait({entry[1]}, timeout=left)
            else:
                await asyncio.sleep(min(HALT_POLL_S, left))
