"""Re-attach: pick a reply's stream up again after a dropped connection.

``Streams.follow`` answers the events of a thread's running reply (or of a given
recent one) after the one a client saw last, then the live rest until the final
``done`` or ``error``, from whichever process runs it:

- the reply runs in this process: its ``Turn`` (every event, from memory);
- elsewhere, or it is over: the batches in storage (``ports/streams.py``). A reply
  running elsewhere is asked (``FollowRequests``) to write its events as they come,
  at most ``flush_s`` after they happen, and storage is read every ``poll_s``. A
  reply whose process died ends, for its followers, with an ``INTERRUPTED`` error.

Event ids are positions in the reply (1 for ``meta``), the same from every process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from uuid import UUID

from agentsvc_core.entities import Principal, Run
from agentsvc_core.errors import DomainError, NotFound
from agentsvc_core.ports import (
    Clock,
    ConversationStore,
    EventBatch,
    FollowRequests,
    StoredStream,
    StreamStore,
)
from agentsvc_core.use_cases.threads import Threads
from agentsvc_core.use_cases.turn._private import INTERRUPTED
from agentsvc_core.use_cases.turn.events import (
    TERMINAL,
    EventData,
    EventSource,
    Turn,
    decode_events,
    encode_events,
)

__all__ = ["MAX_BATCH", "NoStoredEvents", "StoredReply", "Streams", "store_as_it_comes"]

log = logging.getLogger("agentsvc.turn")

# while a follower in another process sees nothing new, the follow request is sent
# again this often (the reply's process may have missed it: its listener reconnected)
ASK_AGAIN_S = 5.0


class Streams:
    def __init__(
        self,
        threads: Threads,
        runs: ConversationStore,
        store: StreamStore,
        local: Callable[[UUID], Turn | None],
        clock: Clock,
        *,
        follows: FollowRequests | None = None,
        stale_after_s: float = 45.0,
        replay: timedelta = timedelta(minutes=10),
        poll_s: float = 0.25,
    ) -> None:
        """``local``: the ``Turn`` of a reply this process runs (``Conversation.turn``);
        ``replay``: how long after it ended a reply can be followed again."""
        self._threads = threads
        self._runs = runs
        self._store = store
        self._local = local
        self._clock = clock
        self._follows = follows
        self._stale = timedelta(seconds=stale_after_s)
        self._replay = replay
        self._poll_s = poll_s

    async def follow(
        self,
        who: Principal,
        thread_id: UUID,
        run_id: UUID | None,
        after: int,
        *,
        keep: timedelta | None = None,
    ) -> EventSource:
        """The reply's events from index ``after`` on (the SSE id ``after`` was the
        last one seen). Raises ``NotFound`` when the thread is not the caller's, has
        no running reply (without ``run_id``), or ``run_id`` is not one of its
        replies whose events are still kept (``keep`` after it ended: by default
        the replay window; a retried send's reply is kept as long as its key)."""
        thread = await self._threads.visible(who, thread_id)
        now = self._clock.now()
        if run_id is None:
            running = await self._runs.running(who.org_id, thread.id, now - self._stale)
            if running is None:
                raise NotFound("the thread has no running reply")
            run_id = running.id
        turn = self._local(run_id)
        if turn is not None and turn.thread_id == thread.id:
            return turn
        # from the batch that holds the last event seen: was it the reply's last?
        stored = await self._store.stream(who.org_id, run_id, max(after - 1, 0))
        if stored is None or stored.run.thread_id != thread.id:
            raise NotFound("no such reply on this thread")
        run = stored.run
        if run.finished_at is not None and run.finished_at < now - max(
            keep or self._replay, self._replay
        ):
            raise NotFound("the reply's events are no longer kept")
        reply = StoredReply(
            self._store,
            self._clock,
            self._stale,
            self._poll_s,
            self._ask,
            who.org_id,
            run_id,
            after,
        )
        reply.take(stored.run, stored.batches)
        if run.status == "running" and not reply.over:
            await self._ask(run_id)
        return reply

    async def _ask(self, run_id: UUID) -> None:
        if self._follows is not None:
            await self._follows.publish_follow(run_id)


class StoredReply(EventSource):
    """A reply followed through storage: what was read, and reads for the rest."""

    def __init__(
        self,
        store: StreamStore,
        clock: Clock,
        stale: timedelta,
        poll_s: float,
        ask: Callable[[UUID], Awaitable[None]],
        org_id: str,
        run_id: UUID,
        after: int,
    ) -> None:
        self._store = store
        self._clock = clock
        self._stale = stale
        self._poll_s = poll_s
        self._ask = ask
        self._org_id = org_id
        self._run_id = run_id
        self._base = after
        self._next = after  # the index of the next event to take from storage
        self._events: list[EventData] = []  # events[_base:_next]
        self.over = False  # the final event was taken (or made up: INTERRUPTED)

    def take(self, run: Run, batches: list[tuple[int, bytes]]) -> None:
        """Take the events of ``batches`` (by ``first``; overlapping, in order; the
        first may hold the last event taken, to tell whether it was the final one)
        from ``_next`` on; a reply over without a final event stored (its process
        died) ends with an ``INTERRUPTED`` error."""
        for first, data in batches:
            if first > self._next:
                break  # a gap: the batch between is on its way
            events = decode_events(data)
            end = first + len(events)
            if end > self._next:
                self._events.extend(events[self._next - first :])
                self._next = end
            if end == self._next and isinstance(events[-1], TERMINAL):
                self.over = True
        if not self.over and (
            run.status != "running" or run.heartbeat_at < self._clock.now() - self._stale
        ):
            self._interrupted()

    def _interrupted(self) -> None:
        """The reply ended without a final event for its followers (its process
        died, or its thread was deleted): end it with an ``INTERRUPTED`` error."""
        self._events.append(INTERRUPTED)
        self._next += 1
        self.over = True

    async def read(self, start: int, wait_s: float) -> list[EventData] | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        asked = loop.time()
        while start >= self._next:
            if self.over:
                return []
            left = deadline - loop.time()
            if left <= 0:
                return None
            await asyncio.sleep(min(self._poll_s, left))
            stored = await self._store.stream(self._org_id, self._run_id, max(self._next - 1, 0))
            if stored is None:  # the thread was deleted meanwhile
                self._interrupted()
                break
            seen = self._next
            self.take(stored.run, stored.batches)
            if self._next == seen and loop.time() - asked > ASK_AGAIN_S:
                asked = loop.time()
                await self._ask(self._run_id)
        return self._events[start - self._base :]


# the most events a batch written while followed holds
MAX_BATCH = 512


def follow_here(
    streams: StreamStore,
    org_id: str,
    turn: Turn | None,
    flush_s: float,
    clock: Clock,
    flushers: set[asyncio.Task[None]],
) -> None:
    """A client in another process follows ``turn``, a reply this process runs:
    from now on its events are stored in batches as they come (once per reply;
    the task is kept in ``flushers``)."""
    if turn is None or turn.followed:
        return
    turn.followed = True
    task = asyncio.create_task(
        store_as_it_comes(streams, org_id, turn, flush_s, clock),
        name=f"turn-events-{turn.run_id}",
    )
    flushers.add(task)
    task.add_done_callback(flushers.discard)


async def store_as_it_comes(
    streams: StreamStore, org_id: str, turn: Turn, flush_s: float, clock: Clock
) -> None:
    """Write a followed reply's events in batches: each at most ``flush_s`` after
    its first event, or once ``MAX_BATCH`` are waiting, until the reply ends (its
    final write stores the rest). A failed write is tried again with the next."""
    loop = asyncio.get_running_loop()
    while True:
        if await turn.read(turn.stored, 60.0) == []:
            return  # the reply is over: its final write stored everything
        deadline = loop.time() + flush_s
        while len(turn.events) - turn.stored < MAX_BATCH and (left := deadline - loop.time()) > 0:
            if await turn.read(len(turn.events), left) == []:
                return
        if turn.closed:
            return
        first, events = turn.stored, turn.events[turn.stored :]
        if not events:
            continue
        batch = EventBatch(
            first=first,
            count=len(events),
            data=encode_events(events),
            # kept while the reply runs on, then as long as its last batch
            keep_until=clock.now() + turn.keep + timedelta(hours=1),
        )
        try:
            await streams.append_events(org_id, turn.run_id, batch)
        except DomainError as exc:
            log.warning("events of reply %s not stored yet: %s", turn.run_id, exc.detail)
            await asyncio.sleep(flush_s)
            continue
        turn.stored = max(turn.stored, first + len(events))


class NoStoredEvents(StreamStore):
    """Without a stream store (unit tests): replies are followed only from memory."""

    async def append_events(self, org_id: str, run_id: UUID, batch: EventBatch) -> None:
        return None

    async def stream(self, org_id: str, run_id: UUID, after: int) -> StoredStream | None:
        return None

    async def purge_events(self, now: datetime) -> int:
        return 0
