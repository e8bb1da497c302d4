"""A session's timeline (use_cases/code_sessions/timeline.py): a write with events
wakes this process's followers at once and tells the others (``ThreadNews``); a
follower gets every event after the one it saw, a keep-alive when nothing comes,
and its end once the session has ended; followers leave nothing behind."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from uuid import UUID

from agentsvc_adapters.memory.code_sessions import MemoryCodeSessions
from agentsvc_core.entities.code_session import SessionEvent
from agentsvc_core.errors import Unavailable
from agentsvc_core.ports.code_sessions import Change, NewEvent
from agentsvc_core.use_cases.code_sessions import Timeline
from tests.unit.code_sessions_world import world
from tests.unit.turn_world import WHO


class News:
    def __init__(self, fail: bool = False) -> None:
        self.published: list[UUID] = []
        self.callbacks: list[Callable[[UUID], None]] = []
        self.fail = fail

    async def publish_news(self, thread_id: UUID) -> None:
        if self.fail:
            raise Unavailable("the database is away")
        self.published.append(thread_id)

    def on_news(self, callback: Callable[[UUID], None]) -> None:
        self.callbacks.append(callback)


def note(text: str) -> Change:
    return lambda s: (s, [NewEvent("notice", {"text": text})])


async def next_of(feed: AsyncGenerator[list[SessionEvent] | None]) -> list[SessionEvent] | None:
    return await anext(feed)


async def test_a_write_with_events_is_published_and_one_without_is_not() -> None:
    w = world()
    news = News()
    timeline = Timeline(w.store, news, poll_s=5)
    assert len(news.callbacks) == 1
    s = await w.start()
    session, events = await timeline.change(WHO.org_id, s.id, note("a"))
    assert [e.seq for e in events] == [3]
    assert session.last_event_seq == 3
    assert news.published == [s.id]
    _, none = await timeline.change(WHO.org_id, s.id, lambda x: (x, []))
    assert none == []
    assert news.published == [s.id]
    failing = Timeline(w.store, News(fail=True))
    _, more = await failing.change(WHO.org_id, s.id, note("b"))  # the word is best effort
    assert [e.seq for e in more] == [4]


async def test_a_follower_is_woken_at_once_by_another_process_word() -> None:
    w = world()
    news = News()
    timeline = Timeline(w.store, news, poll_s=30)  # only a word can wake it in time
    s = await w.start()
    feed = timeline.follow(WHO.org_id, s.id, 2, keepalive_s=60)
    first = asyncio.create_task(next_of(feed))
    await asyncio.sleep(0.05)
    assert not first.done()
    await w.store.change(WHO.org_id, s.id, note("from elsewhere"))  # another process's write
    news.callbacks[0](s.id)  # and its word
    batch = await asyncio.wait_for(first, 2)
    assert batch is not None
    assert [e.seq for e in batch] == [3]
    news.callbacks[0](s.id)  # a word for nobody's session is harmless
    await feed.aclose()
    assert timeline._followers._waiters == {}


async def test_keepalives_while_quiet_and_the_end_once_ended() -> None:
    w = world()
    timeline = Timeline(w.store, None, poll_s=0.02)
    s = await w.start()
    feed = timeline.follow(WHO.org_id, s.id, 0, keepalive_s=0.05)
    batch = await anext(feed)
    assert batch is not None
    assert [e.seq for e in batch] == [1, 2]
    assert await asyncio.wait_for(anext(feed), 2) is None  # quiet: a keep-alive
    ended = await w.sessions.cancel(WHO, s.id)
    assert ended.status == "cancelled"
    rest = [b async for b in feed]
    assert [[e.data for e in b] for b in rest if b] == [[{"status": "cancelled"}]]
    assert timeline._followers._waiters == {}


async def test_a_follower_of_an_ended_session_gets_the_rest_and_ends() -> None:
    w = world()
    timeline = Timeline(w.store, None, poll_s=0.02)
    s = await w.start()
    await w.sessions.cancel(WHO, s.id)
    batches = [b async for b in timeline.follow(WHO.org_id, s.id, 1, keepalive_s=5)]
    assert [[e.seq for e in b] for b in batches if b] == [[2, 3]]
    assert [b async for b in timeline.follow(WHO.org_id, s.id, 3, keepalive_s=5)] == []


async def test_a_follower_of_a_session_that_goes_ends_quietly() -> None:
    # its organization deleted mid-stream: the stream ends, it does not fail
    w = world()
    timeline = Timeline(w.store, None, poll_s=0.02)
    s = await w.start()
    feed = timeline.follow(WHO.org_id, s.id, 0, keepalive_s=60)
    assert [e.seq for e in await anext(feed) or []] == [1, 2]
    del w.store._sessions[s.id], w.store._events[s.id]
    assert [b async for b in feed] == []
    assert timeline._followers._waiters == {}


async def test_two_followers_of_one_session_are_both_woken() -> None:
    w = world()
    timeline = Timeline(w.store, None, poll_s=30)
    s = await w.start()
    feeds = [timeline.follow(WHO.org_id, s.id, 2, keepalive_s=60) for _ in range(2)]
    waits = [asyncio.create_task(next_of(f)) for f in feeds]
    await asyncio.sleep(0.05)
    assert len(timeline._followers._waiters[s.id]) == 2
    await timeline.change(WHO.org_id, s.id, note("x"))
    for got in await asyncio.wait_for(asyncio.gather(*waits), 2):
        assert got is not None
        assert [e.seq for e in got] == [3]
    await feeds[0].aclose()
    assert len(timeline._followers._waiters[s.id]) == 1
    await feeds[1].aclose()
    assert timeline._followers._waiters == {}


class Reads:
    """Counts a store's reads of the events (the follower's polls)."""

    def __init__(self, store: MemoryCodeSessions) -> None:
        self.n = 0
        read = store.events

        async def events(
            org_id: str, session_id: UUID, *, after: int, limit: int
        ) -> list[SessionEvent]:
            self.n += 1
            return await read(org_id, session_id, after=after, limit=limit)

        store.events = events  # type: ignore[method-assign]


async def test_a_keepalive_comes_once_quiet_has_lasted_exactly_its_time() -> None:
    w = world()
    s = await w.start()
    store, reads = w.store, Reads(w.store)
    timeline = Timeline(store, None, poll_s=0.125)  # exact in binary: 2 polls = 0.25
    feed = timeline.follow(WHO.org_id, s.id, 2, keepalive_s=0.25)
    assert await asyncio.wait_for(anext(feed), 5) is None
    assert reads.n == 2  # two quiet polls, not three
    assert await asyncio.wait_for(anext(feed), 5) is None
    assert reads.n == 4  # quiet counts again from nothing after a keep-alive
    await store.change(WHO.org_id, s.id, note("one"))  # no word: the poll finds it
    batch = await asyncio.wait_for(anext(feed), 5)
    assert batch is not None
    assert [e.seq for e in batch] == [3]
    seen = reads.n
    assert await asyncio.wait_for(anext(feed), 5) is None
    assert reads.n == seen + 2  # and from nothing after a batch
    await feed.aclose()


async def test_a_word_wakes_the_follower_once_and_batches_are_at_most_100() -> None:
    w = world()
    s = await w.start()
    store, reads = w.store, Reads(w.store)
    timeline = Timeline(store, None, poll_s=30)
    for i in range(150):
        await store.change(WHO.org_id, s.id, note(str(i)))
    feed = timeline.follow(WHO.org_id, s.id, 0, keepalive_s=60)
    first = await anext(feed)
    second = await anext(feed)
    assert first is not None
    assert second is not None
    assert [len(first), len(second)] == [100, 52]
    waiting = asyncio.create_task(next_of(feed))
    await asyncio.sleep(0.05)
    await timeline.change(WHO.org_id, s.id, note("woken"))
    batch = await asyncio.wait_for(waiting, 2)
    assert batch is not None
    assert [e.seq for e in batch] == [153]
    seen = reads.n
    later = asyncio.create_task(next_of(feed))
    await asyncio.sleep(0.1)
    assert reads.n == seen + 1  # the word was used up: it waits again
    later.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await later
    await feed.aclose()
    assert timeline._followers._waiters == {}
