"""The events of a reply, kept so a client can pick the stream up again (re-attach).

The process that runs a reply keeps its events in memory (``Turn``) and serves its
own followers from there. Storage holds them in batches: all of a reply's events
not yet written go with its final write (``ConversationStore.finish_turn``, in the
same statement), and while the reply runs, batches are written only when a client
in another process follows it (``FollowRequests``). A batch is the JSON array of
``[event name, data]`` pairs of the events ``first`` to ``first + count - 1``
(the SSE ids ``first + 1`` to ``first + count``); batches may overlap (a batch
written while the final one was on its way), never leave a gap.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities import Run


class EventBatch(msgspec.Struct, frozen=True):
    """Events ``first`` .. ``first + count - 1`` of a reply, encoded; kept until
    ``keep_until``."""

    first: int
    count: int
    data: bytes
    keep_until: datetime


class StoredStream(msgspec.Struct, frozen=True):
    """A reply as storage knows it: the run (status, heartbeat) and its batches
    that end after the event asked for, by ``first``."""

    run: Run
    batches: list[tuple[int, bytes]]


class StreamStore(Protocol):
    async def append_events(self, org_id: str, run_id: UUID, batch: EventBatch) -> None:
        """Store a batch of a running reply's events (idempotent: the same batch
        twice is stored once)."""

    async def stream(self, org_id: str, run_id: UUID, after: int) -> StoredStream | None:
        """The run and its stored batches holding events from index ``after`` on,
        read together (one snapshot); None when the organization has no such run.
        Batches kept past their ``keep_until`` may still be returned."""

    async def purge_events(self, now: datetime) -> int:
        """Drop the batches kept until before ``now``; returns how many."""


class FollowRequests(Protocol):
    """Carries "a client in another process follows this reply" to every process;
    the one that runs it writes its events in batches from then on, instead of only
    at the end."""

    async def publish_follow(self, run_id: UUID) -> None: ...

    def on_follow(self, callback: Callable[[UUID], None]) -> None: ...
