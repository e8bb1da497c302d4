"""Sequenced logs followed live: a runner run's events (``runners.events``) and a
code session's timeline (``code_sessions.timeline``) are each a log of events
numbered 1, 2, 3... per run or session, stored in the same statement as the
change they tell, and read by pages (``after``: the last ``seq`` seen) or
followed as they come.

``Followers`` is the one follower both use. A write with events sends the log's
id as news (``ThreadNews``: PostgreSQL's NOTIFY across processes, or in-process);
a follower wakes on it and reads the store, and reads it every ``poll_s`` anyway,
so a missed word costs that much at most: the store, not the word, is the truth.
A follower ends once its log has ended and every event was given, or once the
log's last event (``last``) was given, or when the log is gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Protocol, TypeVar
from uuid import UUID

from agentsvc_core.errors import NotFound
from agentsvc_core.ports import ThreadNews

__all__ = ["BATCH", "Followers", "Sequenced", "next_after"]

BATCH = 100  # the most events a follower reads at once


class Sequenced(Protocol):
    @property
    def seq(self) -> int: ...


E = TypeVar("E", bound=Sequenced)


def next_after(rows: Sequence[Sequenced], limit: int) -> int | None:
    """A page's ``next_after``: the last ``seq`` of a full page; None when the page
    is not full (nothing more for now)."""
    return rows[-1].seq if len(rows) == limit else None


def _never(_: object) -> bool:
    return False


class Followers:
    """The followers of logs, woken by their id's news."""

    def __init__(self, news: ThreadNews | None = None, poll_s: float = 1.0) -> None:
        self._poll_s = poll_s
        self._waiters: dict[UUID, set[asyncio.Event]] = {}
        if news is not None:
            news.on_news(self.wake)

    def wake(self, key: UUID) -> None:
        """Wake this process's followers of ``key`` (news came, or it was written here)."""
        for event in self._waiters.get(key, ()):
            event.set()

    async def follow(
        self,
        key: UUID,
        after: int,
        keepalive_s: float,
        *,
        read: Callable[[int], Awaitable[list[E]]],
        ended: Callable[[], Awaitable[bool]],
        last: Callable[[E], bool] = _never,
    ) -> AsyncGenerator[list[E] | None]:
        """Batches of ``key``'s events after ``after`` as they are stored (``read``:
        the next ones after a seq); None when nothing came for ``keepalive_s``. Ends
        after an event ``last`` calls the last, or once ``ended()`` says the log
        has ended and a read after it finds nothing more (its last events were
        stored with its end, maybe just after the read before it), or when
        ``ended()`` finds the log gone (``NotFound``)."""
        wake = asyncio.Event()
        self._waiters.setdefault(key, set()).add(wake)
        try:
            quiet = 0.0
            while True:
                wake.clear()  # before the read: news during it wakes the wait below
                batch = await read(after)
                if not batch:
                    try:
                        over = await ended()
                    except NotFound:
                        return  # deleted meanwhile
                    if over:
                        batch = await read(after)
                        if not batch:
                            return
                if batch:
                    after = batch[-1].seq
                    quiet = 0.0
                    yield batch
                    if last(batch[-1]):
                        return
                    continue
                try:
                    await asyncio.wait_for(wake.wait(), self._poll_s)
                except TimeoutError:
                    quiet += self._poll_s
                    if quiet >= keepalive_s:
                        quiet = 0.0
                        yield None
        finally:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(wake)
                if not waiters:
                    del self._waiters[key]
