"""``StreamStore`` and ``IdempotencyStore`` (ports/streams.py, ports/idempotency.py),
the same on memory and PostgreSQL: a reply's events stored in batches (with the
final write, or while followed), read from an index on, per organization; keys
claimed once per organization, released, expired and purged."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from functools import partial

import msgspec
import pytest

from agentsvc_core.errors import IdempotencyKeyInUse, ThreadBusy
from agentsvc_core.ports import EventBatch
from agentsvc_core.ports.idempotency import IdempotencyClaim
from agentsvc_core.use_cases.turn.events import (
    Done,
    EventData,
    Meta,
    Token,
    decode_events,
    encode_events,
)
from tests.contract.conftest import Backend, now
from tests.contract.test_conversations_contract import a_message, a_run, stored_thread


def _batch(
    first: int, events: Sequence[EventData], keep: timedelta = timedelta(minutes=10)
) -> EventBatch:
    return EventBatch(
        first=first,
        count=len(events),
        data=encode_events(list(events)),
        keep_until=now() + keep,
    )


def _events(stored: list[tuple[int, bytes]]) -> list[tuple[int, object]]:
    """(index, event) of every stored event, overlaps included."""
    return [(first + i, e) for first, data in stored for i, e in enumerate(decode_events(data))]


def test_batches_with_the_final_write_are_read_from_an_index_on(backend: Backend) -> None:
    s = backend.storage
    th = stored_thread(backend)
    run = a_run(th)
    backend.run(s.conversations.begin_turn, run, [a_message(th)], now() - timedelta(minutes=1))
    meta = Meta(started_at=now(), run_id=run.id, thread_id=th.id, model="local")
    tokens = [Token(delta=f"w{i} ") for i in range(5)]
    # followed: two batches while it runs, the second overlapping the final one
    backend.run(s.streams.append_events, th.org_id, run.id, _batch(0, [meta, *tokens[:2]]))
    backend.run(s.streams.append_events, th.org_id, run.id, _batch(3, tokens[2:4]))
    backend.run(s.streams.append_events, th.org_id, run.id, _batch(3, tokens[2:4]))  # twice: once
    running = backend.run(s.streams.stream, th.org_id, run.id, 0)
    assert running is not None
    assert running.run.status == "running"
    assert [e for _, e in _events(running.batches)] == [meta, *tokens[:4]]

    done = Done(ok=True, content="".join(t.delta for t in tokens))
    final = msgspec.structs.replace(run, status="completed", finished_at=now())
    backend.run(s.conversations.finish_turn, final, [], [], _batch(3, [*tokens[2:], done]))
    over = backend.run(s.streams.stream, th.org_id, run.id, 0)
    assert over is not None
    assert over.run.status == "completed"
    merged: dict[int, object] = {}
    for i, e in _events(over.batches):
        assert merged.setdefault(i, e) == e  # overlapping batches agree
    assert [merged[i] for i in sorted(merged)] == [meta, *tokens, done]
    # from index 4 on: only the batches that hold events 4 and later (both from 3)
    late = backend.run(s.streams.stream, th.org_id, run.id, 4)
    assert late is not None
    assert [first for first, _ in late.batches] == [3, 3]
    after_all = backend.run(s.streams.stream, th.org_id, run.id, 7)
    assert after_all is not None
    assert after_all.batches == []
    # another organization, an unknown run: nothing
    assert backend.run(s.streams.stream, backend.fresh_org(), run.id, 0) is None
    assert backend.run(s.streams.stream, th.org_id, uuid.uuid4(), 0) is None


def test_a_run_without_events_and_the_purge(backend: Backend) -> None:
    s = backend.storage
    th = stored_thread(backend)
    run = a_run(th)
    backend.run(s.conversations.begin_turn, run, [], now() - timedelta(minutes=1))
    bare = backend.run(s.streams.stream, th.org_id, run.id, 0)
    assert bare is not None
    assert bare.batches == []
    backend.run(
        s.streams.append_events, th.org_id, run.id, _batch(0, [Token(delta="a")], timedelta(0))
    )
    backend.run(s.streams.append_events, th.org_id, run.id, _batch(1, [Token(delta="b")]))
    assert backend.run(s.streams.purge_events, now() + timedelta(seconds=1)) >= 1
    kept = backend.run(s.streams.stream, th.org_id, run.id, 0)
    assert kept is not None
    assert [first for first, _ in kept.batches] == [1]


def _claim(
    key: str, fp: bytes = b"fp", *, ttl: timedelta = timedelta(hours=24)
) -> IdempotencyClaim:
    t = now()
    return IdempotencyClaim(key=key, fingerprint=fp, at=t, expires_at=t + ttl)


def test_a_key_is_claimed_once_per_organization(backend: Backend) -> None:
    keys = backend.storage.idempotency
    org, other = backend.fresh_org(), backend.fresh_org()
    key = f"k-{uuid.uuid4().hex}"
    assert backend.run(keys.claim, org, _claim(key)) is None
    held = backend.run(keys.claim, org, _claim(key, b"another"))
    assert held is not None
    assert held.fingerprint == b"fp"
    assert held.status is None  # not answered yet
    assert backend.run(keys.claim, other, _claim(key)) is None  # another organization's
    backend.run(keys.complete, org, key, 201, "application/json", "sealed-body")
    done = backend.run(keys.find, org, key, now())
    assert done is not None
    assert (done.status, done.content_type, done.body) == (201, "application/json", "sealed-body")
    # released: free again
    backend.run(keys.release, other, key)
    assert backend.run(keys.find, other, key, now()) is None
    assert backend.run(keys.claim, other, _claim(key, b"new")) is None


def test_an_expired_key_is_free_and_purged(backend: Backend) -> None:
    keys = backend.storage.idempotency
    org = backend.fresh_org()
    key = f"k-{uuid.uuid4().hex}"
    assert backend.run(keys.claim, org, _claim(key, ttl=timedelta(0))) is None
    later = now() + timedelta(seconds=1)
    assert backend.run(keys.find, org, key, later) is None
    fresh = IdempotencyClaim(key=key, fingerprint=b"2", at=later, expires_at=later + timedelta(1))
    assert backend.run(keys.claim, org, fresh) is None
    found = backend.run(keys.find, org, key, later)
    assert found is not None
    assert found.fingerprint == b"2"
    gone = f"k-{uuid.uuid4().hex}"
    assert backend.run(keys.claim, org, _claim(gone, ttl=timedelta(0))) is None
    assert backend.run(keys.purge_keys, now() + timedelta(seconds=1)) >= 1
    assert backend.run(keys.find, org, gone, now() - timedelta(seconds=1)) is None


def test_a_send_claims_its_key_with_its_run(backend: Backend) -> None:
    s = backend.storage
    th = stored_thread(backend)
    key = f"send-{uuid.uuid4().hex}"
    run = a_run(th)
    stale = now() - timedelta(minutes=1)
    backend.run(s.conversations.begin_turn, run, [a_message(th)], stale, None, _claim(key))
    held = backend.run(s.idempotency.find, th.org_id, key, now())
    assert held is not None
    assert held.run_id == run.id
    # the key is held: nothing of a second send is stored, whatever the thread's state
    done = msgspec.structs.replace(run, status="completed", finished_at=now())
    backend.run(s.conversations.finish_turn, done, [], [])
    second = a_run(th)
    with pytest.raises(IdempotencyKeyInUse):
        backend.run(s.conversations.begin_turn, second, [a_message(th)], stale, None, _claim(key))
    assert backend.run(s.conversations.latest_run, th.org_id, th.id) == done
    page = backend.run(partial(s.conversations.history, offset=0, limit=10), th.org_id, th.id)
    assert len(page[0]) == 1
    # a busy thread refuses the run, and the key stays free
    busy = a_run(th)
    backend.run(s.conversations.begin_turn, busy, [], stale)
    other_key = f"send-{uuid.uuid4().hex}"
    with pytest.raises(ThreadBusy):
        backend.run(s.conversations.begin_turn, a_run(th), [], stale, None, _claim(other_key))
    assert backend.run(s.idempotency.find, th.org_id, other_key, now()) is None
