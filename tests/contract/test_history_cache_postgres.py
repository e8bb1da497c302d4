"""PostgreSQL only: the turn reader's per-process history cache never gives a turn
an incomplete or stale history, whatever other processes write."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from datetime import timedelta

import msgspec
import psycopg
import pytest
from anyio.from_thread import BlockingPortal

from agentsvc_adapters.postgres import PostgresStorage
from agentsvc_adapters.postgres.turns import _Cached, _Histories
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


def history(portal: BlockingPortal, storage: PostgresStorage, t: Thread) -> list[str]:
    got = portal.call(storage.turn_reader.turn_inputs, t.org_id, t.id, [])
    return [m.content for m in got.history]


def turn(portal: BlockingPortal, storage: PostgresStorage, t: Thread, text: str) -> list[str]:
    """One whole turn through ``storage`` as the service makes it: read, begin with
    the read's mark, finish. Returns the history the model was given."""
    inputs = portal.call(storage.turn_reader.turn_inputs, t.org_id, t.id, [])
    run = a_run(t)
    new = [a_message(t, content=text)]
    fresh = portal.call(
        storage.conversations.begin_turn,
        run,
        new,
        now() - timedelta(seconds=45),
        inputs.history_mark,
    )
    done = msgspec.structs.replace(run, status="completed", finished_at=now())
    reply = a_message(t, "assistant", f"re: {text}", run_id=run.id)
    portal.call(storage.conversations.finish_turn, done, [reply], [])
    return [m.content for m in (fresh if fresh is not None else [*inputs.history, *new])]


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
    assert history(portal, a, t) == expected
    assert history(portal, b, t) == expected


def test_a_message_committed_out_of_seq_order_is_not_missed(
    pg_url: str, two: tuple[PostgresStorage, PostgresStorage], portal: BlockingPortal
) -> None:
    """The safety net: a message whose seq is below what this process has cached
    (it committed after a later one) makes the counts differ; the whole thread is
    read again, in seq order."""
    a, _ = two
    t = thread_in(portal, a)
    turn(portal, a, t, "one")
    turn(portal, a, t, "two")
    assert history(portal, a, t) == ["one", "re: one", "two", "re: two"]
    late = a_message(t, content="late")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        seqs = [
            r[0]
            for r in conn.execute(
                "SELECT seq FROM messages WHERE org_id = %s AND thread_id = %s ORDER BY seq",
                (t.org_id, t.id),
            )
        ]
        # a seq between the second and the third message, else below the first
        gaps = (s + 1 for s, n in itertools.pairwise(seqs) if n - s > 1)
        below = next(gaps, seqs[0] - 1)
        assert 0 < below < seqs[-1], f"no free seq below the last in {seqs}"
        conn.execute(
            "INSERT INTO messages (org_id, thread_id, seq, id, role, content, status, visible,"
            " created_at) OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s, 'user', %s,"
            " 'complete', true, %s)",
            (t.org_id, t.id, below, late.id, late.content, late.created_at),
        )
    got = history(portal, a, t)
    assert sorted(got) == sorted(["one", "re: one", "two", "re: two", "late"])
    assert got.index("late") == sum(s < below for s in seqs)
    # and the cache goes on from there
    assert turn(portal, a, t, "three")[-1] == "three"
    assert history(portal, a, t)[-2:] == ["three", "re: three"]


def test_the_cache_is_bounded() -> None:
    cache = _Histories(max_threads=2, max_messages=8)
    t1, t2, t3 = (("o", uuid.uuid4()) for _ in range(3))
    one = (a_message(a_thread("o")),)
    cache.put(t1, _Cached(1, 1, one))
    cache.put(t2, _Cached(1, 1, one))
    assert cache.get(t1).messages == one  # t1 is now the most recent
    cache.put(t3, _Cached(1, 1, one))
    assert cache.get(t2).size == 0  # the least recent went
    assert cache.get(t1).size == 1
    cache.put(t1, _Cached(3, 3, one * 3))  # too long a thread for its share: not kept
    assert cache.get(t1).size == 0
    cache.put(t1, _Cached(2, 2, one * 2))
    cache.put(t3, _Cached(2, 2, one * 2))
    cache.put(t2, _Cached(2, 2, one * 2))  # three threads: the oldest goes
    assert [cache.get(k).size for k in (t1, t2, t3)] == [0, 2, 2]
