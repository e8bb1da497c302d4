"""Heartbeats of this process's running replies: a reply whose heartbeat is older
than the stale span is taken for dead (its process crashed) and marked interrupted
by whoever sweeps or stops it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from uuid import UUID

from agentsvc_core.errors import DomainError
from agentsvc_core.ports import Clock, ConversationStore, StopSignal

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


# at shutdown, how long an interrupted reply has to store itself, then again once
# cancelled (a tool call ignores the stop): the drain ends within grace + twice this
INTERRUPT_WAIT_S = 1.0


async def drain(
    running: Mapping[UUID, tuple[str, asyncio.Task[None], StopSignal]],
    grace_s: float,
    interrupting: Callable[[], None],
) -> None:
    """Let this process's running replies finish for ``grace_s`` seconds, then
    interrupt the rest (``interrupting`` is called first: a reply stored from then
    on ends at once): each stores its partial text and ends its stream with an
    ``INTERRUPTED`` error."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    while running and (left := deadline - loop.time()) > 0:
        await asyncio.wait([task for _, task, _ in running.values()], timeout=left)
    interrupting()
    ending = list(running.values())
    for _, _, stop in ending:
        stop.interrupt()  # the model call ends at once; the reply stores what it has
    if ending:
        _, stuck = await asyncio.wait([task for _, task, _ in ending], timeout=INTERRUPT_WAIT_S)
        for task in stuck:
            task.cancel()  # in a tool call, which a stop does not cut short
        if stuck:
            await asyncio.wait(stuck, timeout=INTERRUPT_WAIT_S)
