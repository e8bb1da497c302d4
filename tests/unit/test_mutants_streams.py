"""use_cases/turn/streams.py: what ``Streams.follow`` answers, a reply read from storage
(``StoredReply``) and a followed reply's batches (``store_as_it_comes``), over the
memory storage (mutation tests, docs/development.md)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import msgspec
import pytest

from agentsvc_core.entities import Run
from agentsvc_core.errors import NotFound, Upstream
from agentsvc_core.ports import EventBatch
from agentsvc_core.use_cases.threads import Threads
from agentsvc_core.use_cases.turn import streams as streams_module
from agentsvc_core.use_cases.turn._private import INTERRUPTED
from agentsvc_core.use_cases.turn.events import (
    Done,
    ErrorEvent,
    EventData,
    Token,
    Turn,
    decode_events,
    encode_events,
)
from agentsvc_core.use_cases.turn.streams import (
    MAX_BATCH,
    NoStoredEvents,
    StoredReply,
    Streams,
    store_as_it_comes,
)
from tests.contract.test_conversations_contract import a_thread
from tests.unit.turn_world import ORG, T0, WHO, World, a_stored_run, store_run, world

STALE = timedelta(seconds=45)


def tokens(*words: str) -> list[EventData]:
    return [Token(delta=w) for w in words]


class Follows:
    def __init__(self) -> None:
        self.asked: list[UUID] = []

    async def publish_follow(self, run_id: UUID) -> None:
        self.asked.append(run_id)

    def on_follow(self, callback: Callable[[UUID], None]) -> None:
        """The port's other half, for the process that runs the reply: Streams
        only publishes."""
        raise AssertionError("Streams does not listen for follow requests")


def streams_of(
    w: World,
    local: dict[UUID, Turn] | None = None,
    follows: Follows | None = None,
    **kw: Any,
) -> Streams:
    s = w.storage
    return Streams(
        Threads(s.threads, s.agents, s.conversations, w.clock),
        s.conversations,
        s.streams,
        (local or {}).get,
        w.clock,
        follows=follows,
        **kw,
    )


async def stored(w: World, run: Run, *batches: tuple[int, list[EventData]]) -> None:
    await store_run(w, run)
    for first, events in batches:
        await w.storage.streams.append_events(
            ORG,
            run.id,
            EventBatch(
                first, len(events), encode_events(events), w.clock.now() + timedelta(days=1)
            ),
        )


async def read_now(source: Any, start: int) -> list[EventData] | None:
    got: list[EventData] | None = await source.read(start, 0.0)
    return got


# --- Streams.follow ---


async def test_without_a_running_reply_there_is_nothing_to_follow() -> None:
    w = await world()
    with pytest.raises(NotFound, match=r"^the thread has no running reply$"):
        await streams_of(w).follow(WHO, w.thread.id, None, 0)
    await store_run(w, a_stored_run(w, status="done", finished_at=w.clock.now()))
    with pytest.raises(NotFound, match=r"^the thread has no running reply$"):
        await streams_of(w).follow(WHO, w.thread.id, None, 0)


async def test_a_running_reply_is_followed_until_its_heartbeat_is_stale() -> None:
    w = await world()
    run = a_stored_run(w)
    await stored(w, run, (0, tokens("a", "b")))
    w.clock.advance(45)
    source = await streams_of(w).follow(WHO, w.thread.id, None, 0)
    assert await read_now(source, 0) == tokens("a", "b")
    w.clock.advance(1)
    with pytest.raises(NotFound):
        await streams_of(w).follow(WHO, w.thread.id, None, 0)
    # named, a stale reply is over for its followers: interrupted
    source = await streams_of(w).follow(WHO, w.thread.id, run.id, 2)
    assert await read_now(source, 2) == [INTERRUPTED]


async def test_the_stale_limit_is_the_one_given() -> None:
    w = await world()
    await stored(w, a_stored_run(w), (0, tokens("a")))
    w.clock.advance(11)
    with pytest.raises(NotFound):
        await streams_of(w, stale_after_s=10.0).follow(WHO, w.thread.id, None, 0)


async def test_a_reply_this_process_runs_is_followed_from_memory() -> None:
    w = await world()
    run = a_stored_run(w)
    await store_run(w, run)
    turn = Turn(run.id, w.thread.id)
    follows = Follows()
    assert await streams_of(w, {run.id: turn}, follows).follow(WHO, w.thread.id, None, 3) is turn
    assert await streams_of(w, {run.id: turn}, follows).follow(WHO, w.thread.id, run.id, 0) is turn
    assert follows.asked == []


async def test_a_local_turn_of_another_thread_is_not_followed_here() -> None:
    w = await world()
    run = a_stored_run(w)
    await store_run(w, run)
    turn = Turn(run.id, uuid.uuid4())
    source = await streams_of(w, {run.id: turn}).follow(WHO, w.thread.id, run.id, 0)
    assert source is not turn
    assert isinstance(source, StoredReply)


async def test_an_unknown_reply_or_one_of_another_thread_is_not_found() -> None:
    w = await world()
    with pytest.raises(NotFound, match=r"^no such reply on this thread$"):
        await streams_of(w).follow(WHO, w.thread.id, uuid.uuid4(), 0)
    other = await w.storage.threads.add(a_thread(ORG, w.agent.id))
    run = a_stored_run(w, thread_id=other.id)
    w.store.runs_of(ORG, other.id).append(run)
    with pytest.raises(NotFound, match=r"^no such reply on this thread$"):
        await streams_of(w).follow(WHO, w.thread.id, run.id, 0)
    source = await streams_of(w).follow(WHO, other.id, run.id, 0)
    assert isinstance(source, StoredReply)


async def test_another_organizations_thread_is_not_found() -> None:
    w = await world()
    await stored(w, a_stored_run(w), (0, tokens("a")))
    with pytest.raises(NotFound):
        await streams_of(w).follow(
            msgspec.structs.replace(WHO, org_id="org-other"), w.thread.id, None, 0
        )


async def test_an_ended_reply_is_replayed_within_the_window_only() -> None:
    w = await world()
    run = a_stored_run(w, status="done", finished_at=w.clock.now())
    done = Done(ok=True, content="ab")
    await stored(w, run, (0, [*tokens("a", "b"), done]))
    w.clock.advance(600)
    source = await streams_of(w).follow(WHO, w.thread.id, run.id, 1)
    assert await read_now(source, 1) == [Token("b"), done]
    w.clock.advance(1)
    with pytest.raises(NotFound, match=r"^the reply's events are no longer kept$"):
        await streams_of(w).follow(WHO, w.thread.id, run.id, 1)
    source = await streams_of(w, replay=timedelta(minutes=11)).follow(WHO, w.thread.id, run.id, 0)
    assert await read_now(source, 0) == [*tokens("a", "b"), done]


async def test_keep_lengthens_the_window_and_never_shortens_it() -> None:
    w = await world()
    run = a_stored_run(w, status="done", finished_at=w.clock.now())
    await stored(w, run, (0, [Done(ok=True, content="")]))
    w.clock.advance(3600)
    source = await streams_of(w).follow(WHO, w.thread.id, run.id, 0, keep=timedelta(hours=1))
    assert await read_now(source, 0) == [Done(ok=True, content="")]
    w.clock.advance(1)
    with pytest.raises(NotFound):
        await streams_of(w).follow(WHO, w.thread.id, run.id, 0, keep=timedelta(hours=1))
    w2 = await world()
    run2 = a_stored_run(w2, status="done", finished_at=w2.clock.now())
    await stored(w2, run2, (0, [Done(ok=True, content="")]))
    w2.clock.advance(600)
    source = await streams_of(w2).follow(WHO, w2.thread.id, run2.id, 0, keep=timedelta(seconds=1))
    assert await read_now(source, 0) == [Done(ok=True, content="")]


async def test_a_client_that_saw_the_final_event_reads_nothing_more() -> None:
    w = await world()
    run = a_stored_run(w, status="done", finished_at=w.clock.now())
    events = [*tokens("a", "b"), Done(ok=True, content="ab")]
    await stored(w, run, (0, events[:1]), (1, events[1:]))
    source = await streams_of(w).follow(WHO, w.thread.id, run.id, 3)
    assert await read_now(source, 3) == []
    source = await streams_of(w).follow(WHO, w.thread.id, run.id, 2)
    assert await read_now(source, 2) == [events[2]]


async def test_a_reply_running_elsewhere_is_asked_to_write_its_events() -> None:
    w = await world()
    run = a_stored_run(w)
    await stored(w, run, (0, tokens("a")))
    follows = Follows()
    source = await streams_of(w, follows=follows).follow(WHO, w.thread.id, None, 0)
    assert follows.asked == [run.id]
    assert await read_now(source, 0) == tokens("a")
    # without follow requests (one process) nothing is asked and it still reads
    source = await streams_of(w).follow(WHO, w.thread.id, None, 1)
    assert await read_now(source, 1) is None


async def test_a_reply_over_in_storage_is_not_asked_for() -> None:
    w = await world()
    run = a_stored_run(w)
    await stored(w, run, (0, [Token("a"), ErrorEvent(code="X")]))
    follows = Follows()
    await streams_of(w, follows=follows).follow(WHO, w.thread.id, run.id, 0)
    ended = a_stored_run(w, status="done", finished_at=w.clock.now())
    await stored(w, ended, (0, tokens("a")))
    await streams_of(w, follows=follows).follow(WHO, w.thread.id, ended.id, 0)
    assert follows.asked == []


async def test_a_followed_reply_running_elsewhere_is_read_from_storage_as_it_comes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    w = await world()
    run = a_stored_run(w)
    await stored(w, run, (0, tokens("a")))
    follows = Follows()
    source = await streams_of(w, follows=follows).follow(WHO, w.thread.id, None, 1)
    await w.storage.streams.append_events(
        ORG, run.id, EventBatch(1, 1, encode_events(tokens("b")), w.clock.now() + timedelta(days=1))
    )
    assert await source.read(1, 5.0) == tokens("b")
    assert follows.asked == [run.id]
    monkeypatch.setattr(streams_module, "ASK_AGAIN_S", -1.0)
    assert await source.read(2, 0.3) is None
    assert follows.asked[1:]
    assert set(follows.asked) == {run.id}


# --- StoredReply.take / read ---


class Asks:
    def __init__(self) -> None:
        self.asked: list[UUID] = []

    async def __call__(self, run_id: UUID) -> None:
        self.asked.append(run_id)


async def a_reply(w: World, run: Run, after: int = 0, poll_s: float = 0.001) -> StoredReply:
    return StoredReply(w.storage.streams, w.clock, STALE, poll_s, Asks(), ORG, run.id, after)


def enc(events: list[EventData]) -> bytes:
    return encode_events(events)


async def test_overlapping_batches_give_each_event_once_in_order() -> None:
    w = await world()
    run = a_stored_run(w)
    reply = await a_reply(w, run)
    ev = tokens("a", "b", "c", "d", "e")
    reply.take(run, [(0, enc(ev[:3])), (2, enc(ev[2:4])), (1, enc(ev[1:5]))])
    assert await read_now(reply, 0) == ev
    assert await read_now(reply, 3) == ev[3:]
    assert not reply.over


async def test_events_after_a_gap_wait_for_the_batch_between() -> None:
    w = await world()
    run = a_stored_run(w)
    reply = await a_reply(w, run)
    ev = tokens("a", "b", "c", "d")
    reply.take(run, [(0, enc(ev[:2])), (3, enc(ev[3:]))])
    assert await read_now(reply, 0) == ev[:2]
    reply.take(run, [(2, enc(ev[2:3])), (3, enc(ev[3:]))])
    assert await read_now(reply, 0) == ev


async def test_from_after_the_events_before_it_are_not_taken() -> None:
    w = await world()
    run = a_stored_run(w)
    reply = await a_reply(w, run, after=2)
    ev = tokens("a", "b", "c", "d")
    reply.take(run, [(1, enc(ev[1:]))])
    assert await read_now(reply, 2) == ev[2:]
    assert await read_now(reply, 3) == ev[3:]


async def test_the_final_event_ends_the_reply() -> None:
    w = await world()
    run = a_stored_run(w)
    reply = await a_reply(w, run)
    done = Done(ok=True, content="a")
    reply.take(run, [(0, enc([Token("a"), done]))])
    assert reply.over
    assert await read_now(reply, 0) == [Token("a"), done]
    assert await reply.read(2, 5.0) == []


async def test_a_reply_over_without_its_final_event_ends_interrupted() -> None:
    w = await world()
    for status in ("done", "interrupted", "failed"):
        run = a_stored_run(w, status=status, finished_at=w.clock.now())
        reply = await a_reply(w, run)
        reply.take(run, [(0, enc(tokens("a")))])
        assert reply.over
        assert await read_now(reply, 0) == [Token("a"), INTERRUPTED]
        assert await read_now(reply, 2) == []


async def test_a_dead_reply_with_a_gap_ends_interrupted_after_what_came_before_it() -> None:
    w = await world()
    run = a_stored_run(w, status="interrupted", finished_at=w.clock.now())
    reply = await a_reply(w, run)
    reply.take(run, [(0, enc(tokens("a"))), (2, enc(tokens("c")))])
    assert reply.over
    assert await read_now(reply, 0) == [Token("a"), INTERRUPTED]


async def test_a_running_reply_whose_heartbeat_is_stale_ends_interrupted() -> None:
    w = await world()
    run = a_stored_run(w)
    w.clock.advance(45)
    reply = await a_reply(w, run)
    reply.take(run, [(0, enc(tokens("a")))])
    assert not reply.over
    w.clock.advance(1)
    reply.take(run, [(0, enc(tokens("a")))])
    assert reply.over
    assert await read_now(reply, 0) == [Token("a"), INTERRUPTED]
    assert await read_now(reply, 1) == [INTERRUPTED]


async def test_a_read_polls_storage_for_what_comes_next() -> None:
    w = await world()
    run = a_stored_run(w)
    ev = [*tokens("a", "b"), Done(ok=True, content="ab")]
    await stored(w, run, (0, ev[:1]))
    reply = await a_reply(w, run)
    task = asyncio.create_task(reply.read(0, 5.0))
    await asyncio.sleep(0)
    assert await task == ev[:1]
    await w.storage.streams.append_events(
        ORG, run.id, EventBatch(1, 2, enc(ev[1:]), w.clock.now() + timedelta(days=1))
    )
    assert await reply.read(1, 5.0) == ev[1:]
    assert reply.over
    assert await reply.read(3, 5.0) == []


async def test_a_read_with_nothing_new_times_out_with_none() -> None:
    w = await world()
    run = a_stored_run(w)
    await stored(w, run, (0, tokens("a")))
    reply = await a_reply(w, run)
    reply.take(run, [(0, enc(tokens("a")))])
    assert await reply.read(1, 0.0) is None
    assert await reply.read(1, 0.01) is None
    assert await reply.read(0, 0.0) == tokens("a")


async def test_a_reply_whose_thread_was_deleted_meanwhile_ends_interrupted() -> None:
    w = await world()
    run = a_stored_run(w)  # never stored: storage knows no such reply
    reply = await a_reply(w, run)
    reply.take(run, [(0, enc(tokens("a")))])
    assert await reply.read(1, 5.0) == [INTERRUPTED]
    assert reply.over
    assert await reply.read(2, 5.0) == []
    assert await reply.read(1, 5.0) == [INTERRUPTED]  # asked again, the same answer


async def test_a_reply_that_dies_while_read_ends_interrupted() -> None:
    w = await world()
    run = a_stored_run(w)
    await stored(w, run, (0, tokens("a")))
    reply = await a_reply(w, run)
    reply.take(run, [(0, enc(tokens("a")))])
    w.clock.advance(46)
    assert await reply.read(1, 5.0) == [INTERRUPTED]


async def test_a_reply_seen_quiet_is_asked_again_and_one_that_moves_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    w = await world()
    run = a_stored_run(w)
    await stored(w, run, (0, tokens("a")))
    asks = Asks()
    reply = StoredReply(w.storage.streams, w.clock, STALE, 0.001, asks, ORG, run.id, 0)
    assert await reply.read(0, 5.0) == tokens("a")  # moved: not asked
    assert asks.asked == []
    assert await reply.read(1, 0.02) is None  # quiet, but not for ASK_AGAIN_S yet
    assert asks.asked == []
    monkeypatch.setattr(streams_module, "ASK_AGAIN_S", -1.0)
    assert await reply.read(1, 0.02) is None
    assert asks.asked
    assert set(asks.asked) == {run.id}


def test_a_quiet_reply_is_asked_again_every_5_seconds() -> None:
    assert streams_module.ASK_AGAIN_S == 5.0


# --- store_as_it_comes ---


class Batches:
    """A stream store that records the batches written; ``fail`` writes fail first."""

    def __init__(self, fail: int = 0) -> None:
        self.batches: list[tuple[str, UUID, EventBatch]] = []
        self.fail = fail
        self.written = asyncio.Event()
        self.failed = asyncio.Event()

    async def append_events(self, org_id: str, run_id: UUID, batch: EventBatch) -> None:
        if self.fail:
            self.fail -= 1
            self.failed.set()
            raise Upstream("storage is down")
        self.batches.append((org_id, run_id, batch))
        self.written.set()

    async def wait(self) -> EventBatch:
        await asyncio.wait_for(self.written.wait(), 5.0)
        self.written.clear()
        return self.batches[-1][2]


class FixedClock:
    def __init__(self) -> None:
        self.at = T0

    def now(self) -> Any:
        return self.at


async def test_events_are_written_in_batches_at_most_flush_s_after_the_first() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    turn.keep = timedelta(minutes=5)
    store, clock = Batches(), FixedClock()
    task = asyncio.create_task(store_as_it_comes(store, ORG, turn, 0.01, clock))  # type: ignore[arg-type]
    turn.emit(Token("a"))
    turn.emit(Token("b"))
    batch = await store.wait()
    assert (batch.first, batch.count) == (0, 2)
    assert decode_events(batch.data) == tokens("a", "b")
    assert batch.keep_until == clock.at + timedelta(minutes=5) + timedelta(hours=1)
    assert store.batches[0][:2] == (ORG, turn.run_id)
    assert turn.stored == 2
    turn.emit(Token("c"))
    batch = await store.wait()
    assert (batch.first, batch.count) == (2, 1)
    assert decode_events(batch.data) == tokens("c")
    assert turn.stored == 3
    turn.close()
    await asyncio.wait_for(task, 5.0)
    assert len(store.batches) == 2


async def test_max_batch_events_are_written_without_waiting_for_the_flush() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    store = Batches()
    for i in range(MAX_BATCH + 3):
        turn.emit(Token(str(i)))
    task = asyncio.create_task(store_as_it_comes(store, ORG, turn, 3600.0, FixedClock()))  # type: ignore[arg-type]
    batch = await store.wait()
    assert (batch.first, batch.count) == (0, MAX_BATCH + 3)
    assert turn.stored == MAX_BATCH + 3
    turn.close()
    await asyncio.wait_for(task, 5.0)
    assert MAX_BATCH == 512


async def test_a_batch_fills_to_max_batch_then_is_written_at_once() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    store = Batches()
    task = asyncio.create_task(store_as_it_comes(store, ORG, turn, 3600.0, FixedClock()))  # type: ignore[arg-type]
    turn.emit(Token("first"))
    await asyncio.sleep(0)
    for i in range(MAX_BATCH - 1):
        turn.emit(Token(str(i)))
        await asyncio.sleep(0)
    batch = await store.wait()
    assert (batch.first, batch.count) == (0, MAX_BATCH)
    turn.close()
    await asyncio.wait_for(task, 5.0)


async def test_a_failed_write_is_tried_again_with_what_came_since() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    store = Batches(fail=1)
    task = asyncio.create_task(store_as_it_comes(store, ORG, turn, 0.01, FixedClock()))  # type: ignore[arg-type]
    turn.emit(Token("a"))
    await asyncio.wait_for(store.failed.wait(), 5.0)
    assert turn.stored == 0
    turn.emit(Token("b"))
    batch = await store.wait()
    assert batch.first == 0
    assert decode_events(batch.data) == tokens("a", "b")
    assert turn.stored == 2
    turn.close()
    await asyncio.wait_for(task, 5.0)


async def test_a_reply_that_closes_leaves_the_rest_to_its_final_write() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    store = Batches()
    task = asyncio.create_task(store_as_it_comes(store, ORG, turn, 3600.0, FixedClock()))  # type: ignore[arg-type]
    turn.emit(Token("a"))
    await asyncio.sleep(0)
    turn.emit(Token("b"))
    turn.close()
    await asyncio.wait_for(task, 5.0)
    assert store.batches == []
    closed = Turn(uuid.uuid4(), uuid.uuid4())
    closed.close()
    await asyncio.wait_for(store_as_it_comes(store, ORG, closed, 0.01, FixedClock()), 5.0)  # type: ignore[arg-type]
    assert store.batches == []


async def test_a_reply_that_closes_during_the_flush_wait_writes_nothing_more() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    store = Batches()
    turn.emit(Token("a"))
    task = asyncio.create_task(store_as_it_comes(store, ORG, turn, 3600.0, FixedClock()))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    turn.close()
    await asyncio.wait_for(task, 5.0)
    assert store.batches == []


async def test_after_a_full_batch_the_next_waits_for_the_flush_again() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    store = Batches()
    for i in range(MAX_BATCH):
        turn.emit(Token(str(i)))
    task = asyncio.create_task(store_as_it_comes(store, ORG, turn, 3600.0, FixedClock()))  # type: ignore[arg-type]
    await store.wait()
    turn.emit(Token("one more"))
    for _ in range(5):
        await asyncio.sleep(0)
    turn.close()
    await asyncio.wait_for(task, 5.0)
    assert len(store.batches) == 1


async def test_events_within_flush_s_of_the_first_go_in_one_batch() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    store = Batches()
    task = asyncio.create_task(store_as_it_comes(store, ORG, turn, 0.05, FixedClock()))  # type: ignore[arg-type]
    turn.emit(Token("a"))
    for _ in range(5):
        await asyncio.sleep(0)
    turn.emit(Token("b"))
    batch = await store.wait()
    assert (batch.first, batch.count) == (0, 2)
    turn.close()
    await asyncio.wait_for(task, 5.0)


class QuietTurn(Turn):
    """A turn whose first read times out (as after 60 s with no event)."""

    def __init__(self) -> None:
        super().__init__(uuid.uuid4(), uuid.uuid4())
        self.reads = 0
        self.third = asyncio.Event()

    async def read(self, start: int, wait_s: float) -> list[EventData] | None:
        self.reads += 1
        if self.reads >= 3:
            self.third.set()
        if self.reads == 1:
            return None
        return await super().read(start, wait_s)


async def test_a_reply_quiet_for_a_while_is_still_written_when_it_speaks() -> None:
    turn = QuietTurn()
    store = Batches()
    task = asyncio.create_task(store_as_it_comes(store, ORG, turn, 0.01, FixedClock()))  # type: ignore[arg-type]
    await asyncio.wait_for(turn.third.wait(), 5.0)
    turn.emit(Token("a"))
    batch = await store.wait()
    assert decode_events(batch.data) == tokens("a")
    turn.close()
    await asyncio.wait_for(task, 5.0)


async def test_without_a_stream_store_nothing_is_stored_nor_found() -> None:
    none = NoStoredEvents()
    batch = EventBatch(0, 1, encode_events(tokens("a")), T0)
    await none.append_events(ORG, uuid.uuid4(), batch)
    assert await none.stream(ORG, uuid.uuid4(), 0) is None
    assert await none.purge_events(T0) == 0
