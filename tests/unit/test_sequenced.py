"""The one follower of sequenced logs (use_cases/sequenced.py), which a runner run's
events and a code session's timeline both use: every event after the one seen, in
order and once; woken by news (its own process's or another's), by a poll when a
word is missed; a keep-alive when nothing comes; an end after the last event, once
the log has ended, or when it is gone; nothing left behind."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from uuid import UUID

import pytest

from agentsvc_core.errors import NotFound
from agentsvc_core.use_cases.sequenced import BATCH, Followers, next_after


@dataclass(frozen=True)
class Ev:
    seq: int
    type: str = "note"


class News:
    def __init__(self) -> None:
        self.callbacks: list[Callable[[UUID], None]] = []

    async def publish_news(self, thread_id: UUID) -> None:
        for callback in self.callbacks:
            callback(thread_id)

    def on_news(self, callback: Callable[[UUID], None]) -> None:
        self.callbacks.append(callback)


@dataclass
class Log:
    """A log in memory: ``read`` and ``ended`` as a store answers them."""

    events: list[Ev] = field(default_factory=list)
    over: bool = False
    gone: bool = False
    reads: list[tuple[int, int]] = field(default_factory=list)  # (after, how many read)
    on_read: Callable[[], None] | None = None  # runs inside a read (news during it)

    def add(self, n: int = 1, kind: str = "note") -> None:
        for _ in range(n):
            self.events.append(Ev(len(self.events) + 1, kind))

    async def read(self, after: int) -> list[Ev]:
        batch = [e for e in self.events if e.seq > after][:BATCH]
        self.reads.append((after, len(batch)))
        if self.on_read is not None:
            hook, self.on_read = self.on_read, None
            hook()
        return batch

    async def ended(self) -> bool:
        if self.gone:
            raise NotFound("log not found")
        return self.over


def follow(
    f: Followers, key: UUID, log: Log, after: int = 0, keepalive_s: float = 60, **kw: object
) -> AsyncGenerator[list[Ev] | None]:
    return f.follow(key, after, keepalive_s, read=log.read, ended=log.ended, **kw)  # type: ignore[arg-type]


async def drain(feed: AsyncGenerator[list[Ev] | None]) -> list[list[Ev] | None]:
    async with asyncio.timeout(2):  # a follower that does not end fails the test
        return [batch async for batch in feed]


def seqs(batches: list[list[Ev] | None]) -> list[int]:
    return [e.seq for b in batches if b for e in b]


def test_next_after_is_the_last_seq_of_a_full_page_only() -> None:
    assert next_after([Ev(4), Ev(5)], 2) == 5
    assert next_after([Ev(4)], 2) is None
    assert next_after([], 2) is None
    assert next_after([Ev(7), Ev(9), Ev(12)], 3) == 12


async def test_an_ended_log_gives_what_follows_after_and_ends() -> None:
    log = Log()
    log.add(BATCH + 5)
    log.over = True
    f = Followers(poll_s=30)  # nothing waits: it ends by itself
    batches = await drain(follow(f, uuid.uuid4(), log, after=3))
    assert seqs(batches) == list(range(4, BATCH + 6))
    assert [len(b) for b in batches if b] == [BATCH, 2]  # read a batch at a time
    assert None not in batches
    assert log.reads[0] == (3, BATCH)
    assert f._waiters == {}


async def test_a_log_that_ended_with_nothing_more_ends_at_once() -> None:
    log = Log()
    log.add(2)
    log.over = True
    f = Followers(poll_s=30)
    assert await drain(follow(f, uuid.uuid4(), log, after=2)) == []


async def test_the_events_stored_with_the_end_are_given_before_the_end() -> None:
    # the first read finds nothing; the log ends with its last events just after
    # it: the read after ``ended()`` gives them
    log = Log()
    log.add(1)

    def end_now() -> None:
        log.add(2, "final")
        log.over = True

    log.on_read = end_now
    f = Followers(poll_s=30)
    batches = await drain(follow(f, uuid.uuid4(), log, after=1))
    assert seqs(batches) == [2, 3]


async def test_it_ends_after_the_last_event_without_asking_whether_the_log_ended() -> None:
    log = Log()
    log.add(2)
    log.add(1, "final")
    f = Followers(poll_s=30)  # the log never says it ended: only ``last`` ends it
    key = uuid.uuid4()
    batches = await drain(follow(f, key, log, last=lambda e: e.type == "final"))
    assert seqs(batches) == [1, 2, 3]
    log2 = Log()
    log2.add(1, "final")
    calls: list[int] = []

    async def ended() -> bool:
        calls.append(1)
        return False

    feed = f.follow(key, 0, 60, read=log2.read, ended=ended, last=lambda e: e.type == "final")
    assert seqs(await drain(feed)) == [1]
    assert calls == []


async def test_a_gone_log_ends_the_follower_quietly() -> None:
    log = Log(gone=True)
    f = Followers(poll_s=30)
    assert await drain(follow(f, uuid.uuid4(), log)) == []
    assert f._waiters == {}


async def test_a_wake_reads_at_once_and_only_the_new_events() -> None:
    log = Log()
    log.add(2)
    f = Followers(poll_s=30)  # only a wake can bring the next batch in time
    key = uuid.uuid4()
    feed = follow(f, key, log)
    assert seqs([await anext(feed)]) == [1, 2]
    pending = asyncio.ensure_future(anext(feed))
    await asyncio.sleep(0.05)
    assert not pending.done()
    assert len(f._waiters[key]) == 1
    log.add(1)
    f.wake(uuid.uuid4())  # another log's news wakes nobody here
    await asyncio.sleep(0.05)
    assert not pending.done()
    f.wake(key)
    batch = await asyncio.wait_for(pending, 2)
    assert seqs([batch]) == [3]
    assert log.reads[-1] == (2, 1)
    await feed.aclose()
    assert f._waiters == {}


async def test_news_from_another_process_wakes_the_follower() -> None:
    news = News()
    f = Followers(news, poll_s=30)
    assert news.callbacks == [f.wake]
    log = Log()
    key = uuid.uuid4()
    feed = follow(f, key, log)
    pending = asyncio.ensure_future(anext(feed))
    await asyncio.sleep(0.05)
    log.add(1)
    await news.publish_news(key)
    assert seqs([await asyncio.wait_for(pending, 2)]) == [1]
    await feed.aclose()


async def test_news_that_comes_during_a_read_is_not_lost() -> None:
    # the word arrives while the follower reads (and finds nothing yet): the wait
    # after the read must return at once, not after poll_s
    log = Log()
    f = Followers(poll_s=30)
    key = uuid.uuid4()

    def news_now() -> None:
        log.add(1)
        f.wake(key)

    log.on_read = news_now
    feed = follow(f, key, log)
    batch = await asyncio.wait_for(anext(feed), 2)
    assert seqs([batch]) == [1]
    await feed.aclose()


async def test_a_missed_word_costs_a_poll_and_quiet_gives_keepalives() -> None:
    log = Log()
    f = Followers(poll_s=0.02)
    feed = follow(f, uuid.uuid4(), log, keepalive_s=0.1)
    started = asyncio.get_running_loop().time()
    assert await asyncio.wait_for(anext(feed), 2) is None  # a keep-alive
    assert asyncio.get_running_loop().time() - started >= 0.09
    log.add(1)  # no word: the poll finds it
    assert seqs([await asyncio.wait_for(anext(feed), 2)]) == [1]
    # after a batch the quiet counts from zero again: the next keep-alive comes a
    # whole keepalive_s later
    started = asyncio.get_running_loop().time()
    assert await asyncio.wait_for(anext(feed), 2) is None
    assert asyncio.get_running_loop().time() - started >= 0.09
    log.over = True
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(feed), 2)


async def test_followers_of_one_log_leave_one_by_one() -> None:
    log = Log()
    f = Followers(poll_s=30)
    key = uuid.uuid4()
    a, b = follow(f, key, log), follow(f, key, log)
    ta, tb = asyncio.ensure_future(anext(a)), asyncio.ensure_future(anext(b))
    await asyncio.sleep(0.05)
    assert len(f._waiters[key]) == 2
    log.add(1)
    f.wake(key)
    assert seqs([await asyncio.wait_for(ta, 2)]) == [1]
    assert seqs([await asyncio.wait_for(tb, 2)]) == [1]
    await a.aclose()
    assert len(f._waiters[key]) == 1
    await b.aclose()
    assert f._waiters == {}
