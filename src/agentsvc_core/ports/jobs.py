"""Background work: a durable queue of jobs and the handlers that run them.

A job is a ``kind`` (which handler runs it) and a small payload (ids, never
content). It runs at least once: a process killed while running one leaves it
to be picked again once its heartbeat goes stale, so a handler must be
idempotent (doing a finished job again changes nothing). ``key`` deduplicates:
while a job with a key waits or runs, enqueuing the same key again is a no-op,
so "make sure this is being done" can be said as often as convenient.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

__all__ = ["JobHandler", "JobHandlers", "JobQueue"]

# A handler takes the payload it was enqueued with. An exception it raises is
# logged and ends the job (no automatic retry: a handler that wants another try
# records its state and enqueues again).
JobHandler = Callable[[bytes], Awaitable[None]]
JobHandlers = Mapping[str, JobHandler]


class JobQueue(Protocol):
    async def enqueue(
        self, kind: str, payload: bytes, *, key: str | None = None, delay_s: float = 0.0
    ) -> bool:
        """Queue a job of ``kind``, to run no sooner than ``delay_s`` from now.
        False (and nothing queued) when a job with the same ``key`` is waiting or
        running. Raises ``Unavailable`` when the queue's storage cannot be reached."""
        ...
