"""Background work: a durable queue of jobs and the handlers that run them.

A job is a ``kind`` (which handler runs it) and a small payload (ids, never
content). It runs at least once: a process killed while running one leaves it
to be picked again once its heartbeat goes stale, so a handler must be
idempotent (doing a finished job again changes nothing). ``key`` deduplicates:
while a job with a key waits or runs, enqueuing the same key again is a no-op,
so "make sure this is being done" can be said as often as convenient.

A handler that must run again later (what it waits for is not there yet) answers
``Again(delay_s)``: the queue runs the same job (its kind, payload and key) again
no sooner than ``delay_s`` from then, and the key stays taken while it waits, so
a job enqueued meanwhile under that key is still a no-op. No new key is needed
for the second try, and none is left behind.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import msgspec

__all__ = ["Again", "JobHandler", "JobHandlers", "JobQueue"]


class Again(msgspec.Struct, frozen=True):
    """A handler's answer: run this job again, under its own key, no sooner than
    ``delay_s`` seconds from now."""

    delay_s: float


# A handler takes the payload it was enqueued with and answers None (done) or
# ``Again``. An exception it raises is logged and ends the job (no automatic
# retry: a handler that wants another try answers ``Again``).
JobHandler = Callable[[bytes], Awaitable[Again | None]]
JobHandlers = Mapping[str, JobHandler]


class JobQueue(Protocol):
    async def enqueue(
        self, kind: str, payload: bytes, *, key: str | None = None, delay_s: float = 0.0
    ) -> bool:
        """Queue a job of ``kind``, to run no sooner than ``delay_s`` from now.
        False (and nothing queued) when a job with the same ``key`` is waiting or
        running. Raises ``Unavailable`` when the queue's storage cannot be reached."""
        ...
