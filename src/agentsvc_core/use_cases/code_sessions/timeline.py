"""A session's timeline: every write of a session goes through ``Timeline.change``
(the store's atomic change, then a word to the followers), and a follower reads
the events after the last one it saw (``follow``).

Followers in any process are ``sequenced.Followers``, as a runner run's events':
after a write with events, ``ThreadNews`` carries the session's id to every
process (PostgreSQL's NOTIFY, or in-process); a follower wakes on it and reads
the store, and reads it every ``poll_s`` anyway, so the store, not the word, is
the truth."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from uuid import UUID

from agentsvc_core.entities.code_session import CodeSession, SessionEvent
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import ThreadNews
from agentsvc_core.ports.code_sessions import Change, CodeSessionStore
from agentsvc_core.use_cases.sequenced import BATCH, Followers, next_after

__all__ = ["Timeline"]


class Timeline:
    def __init__(
        self, store: CodeSessionStore, news: ThreadNews | None = None, poll_s: float = 1.0
    ) -> None:
        self._store = store
        self._news = news
        self._followers = Followers(news, poll_s)

    async def change(
        self, org_id: str, session_id: UUID, change: Change
    ) -> tuple[CodeSession, list[SessionEvent]]:
        session, events = await self._store.change(org_id, session_id, change)
        if events:
            self._followers.wake(session_id)  # this process's followers, at once
            if self._news is not None:
                # best effort: a follower that misses the word reads the store
                # within ``poll_s`` anyway
                with contextlib.suppress(DomainError):
                    await self._news.publish_news(session_id)
        return session, events

    async def page(
        self, org_id: str, session_id: UUID, *, after: int, limit: int
    ) -> tuple[list[SessionEvent], int | None]:
        """A page of the timeline, oldest first, and the ``after`` of the next page
        (None: nothing more for now)."""
        rows = await self._store.events(org_id, session_id, after=after, limit=limit)
        return rows, next_after(rows, limit)

    def follow(
        self, org_id: str, session_id: UUID, after: int, keepalive_s: float
    ) -> AsyncGenerator[list[SessionEvent] | None]:
        """Batches of events after ``after`` as they are written; None when
        nothing came for ``keepalive_s``; ends once the session has ended and
        every event was given (or it is gone)."""

        async def read(seen: int) -> list[SessionEvent]:
            return await self._store.events(org_id, session_id, after=seen, limit=BATCH)

        async def ended() -> bool:
            return (await self._store.get_session(org_id, session_id)).ended

        return self._followers.follow(session_id, after, keepalive_s, read=read, ended=ended)
