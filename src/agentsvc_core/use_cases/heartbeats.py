"""Heartbeats of this process's running replies (decisions.md "The conversation
turn"): a reply whose heartbeat is older than the stale span is taken for dead
(its process crashed) and marked interrupted by whoever sweeps or stops it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from uuid import UUID

from agentsvc_core.errors import DomainError
from agentsvc_core.ports import Clock, ConversationStore

__all__ = ["Heartbeats"]


class Heartbeats:
    """One task per process that refreshes every running reply's heartbeat: one
    write per beat for all of them (not a task and a write per reply). It ends when
    no reply is left; ``ensure`` starts it again."""

    def __init__(
        self,
        store: ConversationStore,
        clock: Clock,
        every_s: float,
        running: Mapping[UUID, tuple[str, object, object]],
    ) -> None:
        """``running``: run id -> (organization, ...), the caller's live registry."""
        self._store = store
        self._clock = clock
        self._every_s = every_s
        self._running = running
        self._task: asyncio.Task[None] | None = None

    def ensure(self) -> None:
        """Start the beats unless they run (in this event loop)."""
        task = self._task
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            self._task = asyncio.create_task(self._beat(), name="turn-heartbeats")

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _beat(self) -> None:
        try:
            while self._running:
                await asyncio.sleep(self._every_s)
                runs = [(entry[0], run_id) for run_id, entry in self._running.items()]
                if runs:
                    with contextlib.suppress(DomainError):
                        await self._store.heartbeat(runs, self._clock.now())
        finally:
            if self._task is asyncio.current_task():
                self._task = None
