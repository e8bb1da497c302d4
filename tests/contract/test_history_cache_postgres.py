"""PostgreSQL only: begin_turn's per-process history cache never returns an
incomplete or stale history, whatever other processes write."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import msgspec
import pytest
from anyio.from_thread import BlockingPortal

from agentsvc_adapters.postgres import PostgresStorage
from agentsvc_adapters.postgres.conversations import _Cached, _HistoryCache
from agentsvc_core.entities import Organization, Thread
from tests.contract.conftest import now
from tests.contract.test_conversations_contract import a_message, a_run, a_thread

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def two(pg_url: str, portal: BlockingPortal) -> Iterator[tuple[PostgresStorage, PostgresStorage]]:
    """Two storages on one database: two service processes."""
    a = PostgresStorage(pg_url, min_size=1, max_size=4)
    b = PostgresStorage(pg_url, min_size=1, max_size=4)
    portal.call(a.open)
    portal.call(b.open)
    try:
        yield a, b
    finally:
        portal.call(a.close)
        portal.call(b.close)


def thread_in(portal: BlockingPortal, storage: PostgresStorage) -> Thread:
    t = a_thread(f"org-{uuid.uuid4().hex[:16]}")
    portal.call(storage.organizations.ensure, Organization(id=t.org_id, created_at=now()))
    return portal.call(storage.threads.add, t)


def turn(portal: BlockingPortal, storage: PostgresStorage, t: Thread, text: str) -> list[str]:
    """One whole turn through ``storage``: the history it was given, then the reply."""
    run = a_run(t)
    history = portal.call(
        storage.conversations.begin_turn,
        run,
        [a_message(t, content=text)],
        now() - timedelta(seconds=45),
    )
    done = msgspec.structs.replace(run, status="completed", finished_at=now())
    reply = a_message(t, "assistant", f"re: {text}", run_id=run.id)
    portal.call(storage.conversations.finish_turn, done, [reply], [])
    return [m.content for m in history]


def test_turns_through_two_processes_always_see_the_whole_thread(
    two: tuple[PostgresStorage, PostgresStorage], portal: BlockingPortal
) -> None:
    a, b = two
    t = thread_in(portal, a)
    expected: list[str] = []
    for i, storage in enumerate([a, a, b, a, b, b, a]):
        expected.append(f"m{i}")
        assert turn(portal, storage, t, f"m{i}") == expected
        expected.append(f"re: m{i}")
    # the full read agrees with what the caches produced
    context = portal.call(a.conversations.begin_turn, a_run(t), [], now() - timedelta(seconds=45))
    assert [m.content for m in context] == expected


def test_a_cache_missing_a_message_is_detected_and_read_again(
    two: tuple[PostgresStorage, PostgresStorage], portal: BlockingPortal
) -> None:
    """The safety net: a message this process did not see (committed out of seq
    order, say) makes the counts differ, and the whole thread is read."""
    a, _ = two
    t = thread_in(portal, a)
    turn(portal, a, t, "one")
    turn(portal, a, t, "two")
    cache: _HistoryCache = a.conversations._histories  # type: ignore[attr-defined]
    key = (t.org_id, t.id)
    entry = cache.get(key)
    assert entry is not None
    assert [m.content for m in entry.messages] == ["one", "re: one", "two"]
    # pretend "re: one" was never seen although a later seq was
    cache.put(key, _Cached(entry.count - 1, entry.last_seq, (entry.messages[0], entry.messages[2])))
    assert turn(portal, a, t, "three") == ["one", "re: one", "two", "re: two", "three"]


def test_the_cache_is_bounded() -> None:
    cache = _HistoryCache(max_threads=2, max_messages=3)
    t1, t2, t3 = (("o", a_thread("o").id) for _ in range(3))
    cache.put(t1, _Cached(1, 1, ()))
    cache.put(t2, _Cached(1, 1, ()))
    assert cache.get(t1) is not None  # t1 is now the most recent
    cache.put(t3, _Cached(1, 1, ()))
    assert cache.get(t2) is None  # the least recent went
    assert cache.get(t1) is not None
    cache.put(t1, _Cached(4, 4, ()))  # too long a thread: not kept
    assert cache.get(t1) is None
