"""A session's timeline: every write of a session goes through ``Timeline.change``
(the store's atomic change, then a word to the followers), and a follower reads
the events after the last one it saw (``follow``).

Followers in any process: after a write with events, ``ThreadNews`` carries the
session's id to every process (PostgreSQL's NOTIFY, or in-process); a follower
wakes on it and reads the store. A missed word costs at most ``poll_s``: the
follower reads the store that often anyway, so the store, not the word, is the
truth."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from uuid import UUID

from agentsvc_core.entities.code_session import CodeSession, SessionEvent
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import ThreadNews
from agentsvc_core.ports.code_sessions import Change, CodeSessionStore

__all__ = ["Timeline"]


class Timeline:
    def __init__(
        self, store: CodeSessionStore, news: ThreadNews | None = None, poll_s: float = 1.0
    ) -> None:
        self._store = store
        self._news = news
        self._poll_s = poll_s
        self._waiters: dict[UUID, set[asyncio.Event]] = {}
        if news is not None:
            news.on_news(self._woken)

    def _woken(self, session_id: UUID) -> None:
        for event in self._waiters.get(session_id, ()):
            event.set()

    async def change(
        self, org_id: str, session_id: UUID, change: Change
    ) -> tuple[CodeSession, list[SessionEvent]]:
        session, events = await self._store.change(org_id, session_id, change)
        if events:
            self._woken(session_id)  # this process's followers, at once
            if self._news is not None:
                # best effort: a follower that misses the word reads the store
                # within ``poll_s`` anyway
                with contextlib.suppress(DomainError):
                    await self._news.publish_news(session_id)
        return session, events

    async def follow(
        self, org_id: str, session_id: UUID, after: int, keepalive_s: float
    ) -> AsyncGenerator[list[SessionEvent] | None]:
        """Batches of events after ``after`` as they are written; None when
        nothing came for ``keepalive_s``; ends once the session has ended and
        every event was given."""
        wake = asyncio.Event()
        self._waiters.setdefault(session_id, set()).add(wake)
        try:
            quiet = 0.0
            while True:
                wake.clear()
                batch = await self._store.events(org_id, session_id, after=after, limit=100)
                if batch:
                    after = batch[-1].seq
                    quiet = 0.0
                    yield batch
                    continue
                session = await self._store.get_session(org_id, session_id)
                if session.ended and session.last_event_seq <= after:
                    return
                try:
                    await asyncio.wait_for(wake.wait(), self._poll_s)
                except TimeoutError:
                    quiet += self._poll_s
                    if quiet >= keepalive_s:
                        quiet = 0.0
                        yield None
        finally:
            waiters = self._waiters.get(session_id)
            if waiters is not None:
                waiters.discard(wake)
                if not waiters:
                    del self._waiters[session_id]
