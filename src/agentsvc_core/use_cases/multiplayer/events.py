"""A multiplayer thread's live events (``GET /api/threads/{id}/events``): each message
and reply as it is stored, whoever posted it and whichever process stored it.

The events are the thread's history (``ConversationStore.history``: its user and
assistant messages) read as it grows: ``message`` for a person's message, ``reply``
for the agent's, each with the SSE id of its position in the history (1 for the
first message), the same from every process. A follower that reconnects with the
last id it saw (``Last-Event-ID``) gets what it missed, then the live rest.
``reply_started`` (no id: it is not replayed) says the agent began answering.

A follower reads storage again when the thread has news (``ThreadNews``: a message
stored, a reply begun or stored, in any process; ``posts.py`` sends it), and every
``poll_s`` seconds anyway (a notice may be lost while a listener reconnects).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta
from uuid import UUID

import msgspec

from agentsvc_core.entities import Message, Principal
from agentsvc_core.errors import InvalidInput, Unavailable
from agentsvc_core.ports import Clock, ConversationStore, ThreadNews
from agentsvc_core.use_cases.threads import Threads

__all__ = [
    "PAGE",
    "MessageEvent",
    "ReplyEvent",
    "ReplyStarted",
    "ThreadEvent",
    "ThreadEvents",
    "ThreadFeed",
]

PAGE = 100  # the most messages one read of the history takes


class MessageEvent(msgspec.Struct, frozen=True):
    """``message``: a person's message, stored."""

    id: UUID
    sender_id: str | None
    sender_name: str | None
    content: str
    created_at: datetime


class ReplyEvent(msgspec.Struct, frozen=True):
    """``reply``: the agent's message, stored (a reply may store more than one, as
    the history shows them)."""

    id: UUID
    run_id: UUID | None
    content: str
    status: str
    created_at: datetime


class ReplyStarted(msgspec.Struct, frozen=True):
    """``reply_started``: the agent began answering (live only, not replayed)."""

    run_id: UUID
    started_at: datetime


class ThreadEvent(msgspec.Struct, frozen=True):
    """One event: its SSE id (the position of its message in the history; None for
    ``reply_started``), its name and its data."""

    id: int | None
    name: str
    data: MessageEvent | ReplyEvent | ReplyStarted


def event_of(position: int, m: Message) -> ThreadEvent:
    if m.role == "user":
        data: MessageEvent | ReplyEvent = MessageEvent(
            id=m.id,
            sender_id=m.sender_id,
            sender_name=m.sender_name,
            content=m.content,
            created_at=m.created_at,
        )
        return ThreadEvent(id=position, name="message", data=data)
    data = ReplyEvent(
        id=m.id, run_id=m.run_id, content=m.content, status=m.status, created_at=m.created_at
    )
    return ThreadEvent(id=position, name="reply", data=data)


class ThreadEvents:
    def __init__(
        self,
        threads: Threads,
        store: ConversationStore,
        news: ThreadNews,
        clock: Clock,
        *,
        stale_after_s: float = 45.0,
        poll_s: float = 5.0,
    ) -> None:
        """``stale_after_s``: a running reply whose heartbeat is older is not
        announced (its process died); ``poll_s``: how often a follower reads
        storage without news."""
        self._threads = threads
        self._store = store
        self._clock = clock
        self._stale = timedelta(seconds=stale_after_s)
        self.poll_s = poll_s
        # thread id -> the wake-up events of this process's followers of it
        self._followers: dict[UUID, set[asyncio.Event]] = {}
        self.closed = False  # the process is shutting down: the feeds end
        news.on_news(self._woken)

    def close(self) -> None:
        """End every feed (the process is shutting down: its followers reconnect,
        with their last id, to another one) and refuse new ones."""
        self.closed = True
        for wakes in self._followers.values():
            for wake in wakes:
                wake.set()

    def _woken(self, thread_id: UUID) -> None:
        for wake in self._followers.get(thread_id, ()):
            wake.set()

    async def follow(self, who: Principal, thread_id: UUID, after: int | None) -> ThreadFeed:
        """Follow the thread from the event with id ``after`` on (None: from now,
        only what comes next). Raises ``NotFound``/``PermissionDenied`` as reading
        the thread does, ``InvalidInput`` for a thread that is not multiplayer. The
        feed must be ``close``d."""
        thread = await self._threads.visible(who, thread_id)
        if thread.kind != "multiplayer":
            raise InvalidInput("kind", "live events belong to multiplayer threads")
        if self.closed:
            raise Unavailable("the service is shutting down; follow again in a moment")
        if after is None:
            _, after = await self._store.history(who.org_id, thread.id, offset=0, limit=0)
        wake = asyncio.Event()
        self._followers.setdefault(thread.id, set()).add(wake)
        return ThreadFeed(self, who.org_id, thread.id, after, wake)

    def leave(self, thread_id: UUID, wake: asyncio.Event) -> None:
        followers = self._followers.get(thread_id)
        if followers is not None:
            followers.discard(wake)
            if not followers:
                del self._followers[thread_id]

    async def read_since(
        self, org_id: str, thread_id: UUID, after: int, announced: UUID | None
    ) -> tuple[list[ThreadEvent], UUID | None]:
        """The events after position ``after`` (one page), then ``reply_started`` if
        a reply other than ``announced`` runs; and the reply announced now."""
        messages, _ = await self._store.history(org_id, thread_id, offset=after, limit=PAGE)
        events = [event_of(after + i, m) for i, m in enumerate(messages, start=1)]
        running = await self._store.running(org_id, thread_id, self._clock.now() - self._stale)
        if running is not None and running.id != announced:
            started = ReplyStarted(run_id=running.id, started_at=running.started_at)
            events.append(ThreadEvent(id=None, name="reply_started", data=started))
            announced = running.id
        return events, announced


class ThreadFeed:
    """One follower of a thread's events (``ThreadEvents.follow``)."""

    def __init__(
        self, owner: ThreadEvents, org_id: str, thread_id: UUID, after: int, wake: asyncio.Event
    ) -> None:
        self._owner = owner
        self._org_id = org_id
        self.thread_id = thread_id
        self.seen = after  # the position of the last message sent
        self._announced: UUID | None = None  # the last reply told as started
        self._wake = wake

    async def read(self, wait_s: float) -> list[ThreadEvent] | None:
        """The next events, waiting up to ``wait_s`` seconds for them (None: none came;
        ``[]``: the feed is over, the process is shutting down)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            if self._owner.closed:
                return []
            self._wake.clear()  # before the read: news during it wakes the wait below
            events, self._announced = await self._owner.read_since(
                self._org_id, self.thread_id, self.seen, self._announced
            )
            if events:
                self.seen = max([self.seen, *(e.id for e in events if e.id is not None)])
                return events
            left = deadline - loop.time()
            if left <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(left, self._owner.poll_s))

    def close(self) -> None:
        self._owner.leave(self.thread_id, self._wake)
