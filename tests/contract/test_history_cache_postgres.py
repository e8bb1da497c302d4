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
from agentsvc_adapters.postgres.turns import _Cached, _Histories, _weight
from agentsvc_core.entities import Message, Organization, Thread, ToolCall
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
    with psycopg.connect(pg_url, autocommit=True) as conn:  # a seq free below the thread's
        conn.execute("SELECT nextval(pg_get_serial_sequence('messages', 'seq'))")
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


def test_begin_turn_sees_a_message_committed_out_of_seq_order(
    pg_url: str, two: tuple[PostgresStorage, PostgresStorage], portal: BlockingPortal
) -> None:
    """Between a turn's read and its write, a message commits with a seq below the
    highest one read (seq is shared by all threads): begin_turn must not take the
    history for unchanged."""
    a, _ = two
    t = thread_in(portal, a)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # a seq free below the thread's
        conn.execute("SELECT nextval(pg_get_serial_sequence('messages', 'seq'))")
    turn(portal, a, t, "one")
    inputs = portal.call(a.turn_reader.turn_inputs, t.org_id, t.id, [])
    late = a_message(t, content="late")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        first = conn.execute(
            "SELECT min(seq) FROM messages WHERE org_id = %s AND thread_id = %s",
            (t.org_id, t.id),
        ).fetchone()
        assert first is not None
        assert first[0] > 1
        conn.execute(
            "INSERT INTO messages (org_id, thread_id, seq, id, role, content, status, visible,"
            " created_at) OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s, 'user', %s,"
            " 'complete', true, %s)",
            (t.org_id, t.id, first[0] - 1, late.id, late.content, late.created_at),
        )
    fresh = portal.call(
        a.conversations.begin_turn,
        a_run(t),
        [a_message(t, content="two")],
        now() - timedelta(seconds=45),
        inputs.history_mark,
    )
    assert fresh is not None
    assert [m.content for m in fresh] == ["late", "one", "re: one", "two"]


def weighing(n: int) -> tuple[Message, ...]:
    return (a_message(a_thread("o"), content="x" * (n - 600)),)


def test_the_cache_is_bounded() -> None:
    cache = _Histories(max_threads=2, max_bytes=8000)
    t1, t2, t3 = (("o", uuid.uuid4()) for _ in range(3))
    one = weighing(1000)
    cache.put(t1, _Cached(1, one, _weight(one)))
    cache.put(t2, _Cached(1, one, _weight(one)))
    assert cache.get(t1).messages == one  # t1 is now the most recent
    cache.put(t3, _Cached(1, one, _weight(one)))
    assert len(cache.get(t2).messages) == 0  # the least recent went
    assert len(cache.get(t1).messages) == 1
    heavy = weighing(2001)  # more than a quarter of the room: not kept
    cache.put(t1, _Cached(1, heavy, _weight(heavy)))
    assert len(cache.get(t1).messages) == 0
    big = weighing(1900)
    cache = _Histories(max_threads=10, max_bytes=8000)
    for k in (t1, t2, t3, ("o", uuid.uuid4()), ("o", uuid.uuid4())):
        cache.put(k, _Cached(1, big, _weight(big)))
    # five of 1900 bytes do not fit in 8000: the oldest went
    assert [len(cache.get(k).messages) for k in (t1, t2, t3)] == [0, 1, 1]


def test_the_weight_counts_text_tool_calls_and_blocks() -> None:
    t = a_thread("o")
    plain = a_message(t, content="")
    call = ToolCall(id="c", name="n", arguments={"q": "y" * 1000})
    assert _weight([plain]) == 600
    assert _weight([a_message(t, content="z" * 100)]) == 700
    assert _weight([a_message(t, "assistant", "", tool_calls=(call,))]) > 1600
    assert _weight([a_message(t, "assistant", "", provider_blocks=({"c": "w" * 500},))]) > 1100
