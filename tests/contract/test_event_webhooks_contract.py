"""Event webhooks' endpoints, events and deliveries: the memory and PostgreSQL
adapters agree."""

from __future__ import annotations

import functools
import uuid
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities.event_webhook import (
    DeliveryAttempt,
    EventDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.event_webhooks import Subscription
from tests.contract.conftest import Backend, now
from tests.contract.test_conversations_contract import a_thread


def endpoint(org: str, **over: Any) -> WebhookEndpoint:
    t = now()
    base = WebhookEndpoint(
        id=uuid.uuid4(),
        org_id=org,
        url="https://hooks.example/events",
        description="",
        events=("message.created", "reply.completed"),
        enabled=True,
        secret="sealed",
        disabled_reason=None,
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def event(org: str, **over: Any) -> WebhookEvent:
    base = WebhookEvent(
        id=f"msg_{uuid.uuid4().hex}",
        org_id=org,
        type="message.created",
        thread_id=None,
        body='{"type":"message.created"}',
        created_at=now(),
    )
    return msgspec.structs.replace(base, **over)


def delivery(e: WebhookEvent, ep: WebhookEndpoint, **over: Any) -> EventDelivery:
    t = now()
    base = EventDelivery(
        id=uuid.uuid4(),
        org_id=e.org_id,
        endpoint_id=ep.id,
        event_id=e.id,
        event_type=e.type,
        status="pending",
        attempts=(),
        next_attempt_at=t,
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def test_endpoints_round_trip_scoped_by_organization(backend: Backend) -> None:
    org, other = backend.fresh_org(), backend.fresh_org()
    store = backend.storage.event_webhooks
    t = now()
    first = endpoint(org, created_at=t, updated_at=t)
    second = endpoint(org, created_at=t + timedelta(seconds=1), enabled=False)
    theirs = endpoint(other)
    for e in (second, first, theirs):
        backend.run(store.add_endpoint, e)
    assert backend.run(store.get_endpoint, org, first.id) == first
    assert backend.run(store.list_endpoints, org) == [first, second]
    with pytest.raises(NotFound):
        backend.run(store.get_endpoint, other, first.id)
    changed = msgspec.structs.replace(
        first,
        url="https://other.example/",
        events=("run.failed",),
        disabled_reason="gone",
        updated_at=t + timedelta(seconds=5),
    )
    assert backend.run(store.replace_endpoint, changed, first) is True
    assert backend.run(store.get_endpoint, org, first.id) == changed
    # compare-and-set: a change from what is no longer stored is refused
    stale = msgspec.structs.replace(first, description="stale")
    assert backend.run(store.replace_endpoint, stale, first) is False
    assert backend.run(store.get_endpoint, org, first.id) == changed
    assert backend.run(store.reseal, org, first.id, "sealed", "resealed") is True
    assert backend.run(store.replace_endpoint, stale, changed) is False  # resealed meanwhile
    theirs_now = msgspec.structs.replace(first, org_id=other)
    with pytest.raises(NotFound):
        backend.run(store.replace_endpoint, theirs_now, theirs_now)
    # only enabled endpoints subscribe
    mine = {s for s in backend.run(store.subscriptions) if s.org_id in {org, other}}
    assert mine == {
        Subscription(org, first.id, frozenset({"run.failed"})),
        Subscription(other, theirs.id, frozenset(theirs.events)),
    }
    backend.run(store.delete_endpoint, org, first.id)
    with pytest.raises(NotFound):
        backend.run(store.delete_endpoint, org, first.id)
    assert backend.run(store.list_endpoints, org) == [second]


def test_an_event_is_stored_once_with_its_deliveries(backend: Backend) -> None:
    org = backend.fresh_org()
    store = backend.storage.event_webhooks
    a, b = endpoint(org), endpoint(org)
    backend.run(store.add_endpoint, a)
    backend.run(store.add_endpoint, b)
    e = event(org)
    da, db = delivery(e, a), delivery(e, b)
    assert backend.run(store.add_event, e, [da, db]) is True
    assert backend.run(store.get_event, org, e.id) == e
    assert backend.run(store.get_delivery, org, da.id) == da
    # the same id again: nothing stored
    again = delivery(e, a)
    assert backend.run(store.add_event, e, [again]) is False
    with pytest.raises(NotFound):
        backend.run(store.get_delivery, org, again.id)
    # an endpoint deleted since the publisher's snapshot gets no delivery
    gone = endpoint(org)
    e2 = event(org)
    lost = delivery(e2, gone)
    assert backend.run(store.add_event, e2, [lost]) is True
    with pytest.raises(NotFound):
        backend.run(store.get_delivery, org, lost.id)


def test_attempts_are_appended_and_deliveries_listed_newest_first(backend: Backend) -> None:
    org = backend.fresh_org()
    store = backend.storage.event_webhooks
    ep = endpoint(org)
    backend.run(store.add_endpoint, ep)
    t = now()
    rows = []
    for i in range(5):
        e = event(org)
        d = delivery(e, ep, created_at=t + timedelta(seconds=i))
        backend.run(store.add_event, e, [d])
        rows.append(d)
    first = DeliveryAttempt(at=t, status_code=500, error="HTTP 500", duration_ms=12)
    later = t + timedelta(seconds=5)
    got = backend.run(store.record_attempt, org, rows[0].id, first, "pending", later)
    assert got.attempts == (first,)
    assert got.status == "pending"
    assert got.next_attempt_at == later
    second = DeliveryAttempt(at=t, status_code=None, error="could not reach x", duration_ms=3)
    got = backend.run(store.record_attempt, org, rows[0].id, second, "failed", None)
    assert got == backend.run(store.get_delivery, org, rows[0].id)
    assert got.attempts == (first, second)
    assert got.status == "failed"
    assert got.next_attempt_at is None
    with pytest.raises(NotFound):
        backend.run(store.record_attempt, org, uuid.uuid4(), first, "failed", None)
    page, more = backend.run(functools.partial(store.deliveries, org, ep.id, before=None, limit=2))
    assert [d.id for d in page] == [rows[4].id, rows[3].id]
    assert more
    cursor = (page[-1].created_at, page[-1].id)
    page, more = backend.run(
        functools.partial(store.deliveries, org, ep.id, before=cursor, limit=3)
    )
    assert [d.id for d in page] == [rows[2].id, rows[1].id, rows[0].id]
    assert not more


def test_a_resend_is_a_further_delivery_and_pending_ones_are_found(backend: Backend) -> None:
    org = backend.fresh_org()
    store = backend.storage.event_webhooks
    ep = endpoint(org)
    backend.run(store.add_endpoint, ep)
    e = event(org)
    t = now()
    old = delivery(e, ep, next_attempt_at=t - timedelta(minutes=10))
    backend.run(store.add_event, e, [old])
    resend = delivery(e, ep, next_attempt_at=t + timedelta(minutes=10))
    backend.run(store.add_delivery, resend)
    assert backend.run(store.get_delivery, org, resend.id) == resend
    with pytest.raises(NotFound):
        backend.run(store.add_delivery, delivery(event(org), ep))
    due = [d.id for d in backend.run(store.pending, t - timedelta(minutes=1), 1000)]
    assert old.id in due
    assert resend.id not in due


def test_deleting_a_thread_or_an_endpoint_takes_their_rows(backend: Backend) -> None:
    org = backend.fresh_org()
    store = backend.storage.event_webhooks
    ep = endpoint(org)
    backend.run(store.add_endpoint, ep)
    thread = backend.run(backend.storage.threads.add, a_thread(org)).id
    about = event(org, thread_id=thread)
    other = event(org, thread_id=backend.run(backend.storage.threads.add, a_thread(org)).id)
    d_about, d_other = delivery(about, ep), delivery(other, ep)
    backend.run(store.add_event, about, [d_about])
    backend.run(store.add_event, other, [d_other])
    assert backend.run(store.delete_for_thread, org, thread) == 1
    with pytest.raises(NotFound):
        backend.run(store.get_event, org, about.id)
    with pytest.raises(NotFound):
        backend.run(store.get_delivery, org, d_about.id)
    assert backend.run(store.get_delivery, org, d_other.id) == d_other
    backend.run(store.delete_endpoint, org, ep.id)
    with pytest.raises(NotFound):
        backend.run(store.get_delivery, org, d_other.id)


def test_an_event_about_a_thread_that_is_gone_is_not_stored(backend: Backend) -> None:
    # an erasure deletes the thread, then its events: an event published about it
    # after that (a reply's last message, say) would keep its text for good
    org = backend.fresh_org()
    store = backend.storage.event_webhooks
    ep = endpoint(org)
    backend.run(store.add_endpoint, ep)
    thread = backend.run(backend.storage.threads.add, a_thread(org))
    assert backend.run(backend.storage.erasure.erase_thread, org, thread.id, now()) is True
    late = event(org, thread_id=thread.id)
    assert backend.run(store.add_event, late, [delivery(late, ep)]) is False
    with pytest.raises(NotFound):
        backend.run(store.get_event, org, late.id)
    assert backend.run(functools.partial(store.deliveries, org, ep.id, before=None, limit=9)) == (
        [],
        False,
    )
    free = event(org)  # an event about no thread (a runner's run) is stored as before
    assert backend.run(store.add_event, free, [delivery(free, ep)]) is True


def test_secrets_are_resealed_only_when_unchanged(backend: Backend) -> None:
    org = backend.fresh_org()
    store = backend.storage.event_webhooks
    ep = endpoint(org, secret="old")
    backend.run(store.add_endpoint, ep)
    assert (org, ep.id, "old") in backend.run(store.sealed_secrets, org)
    assert backend.run(store.reseal, org, ep.id, "stale", "new") is False
    assert backend.run(store.reseal, org, ep.id, "old", "new") is True
    assert backend.run(store.get_endpoint, org, ep.id).secret == "new"


def test_old_events_are_pruned_unless_a_delivery_is_pending(backend: Backend) -> None:
    org = backend.fresh_org()
    store = backend.storage.event_webhooks
    ep = endpoint(org)
    backend.run(store.add_endpoint, ep)
    t = now()
    old_done, old_pending, fresh = (
        event(org, created_at=t - timedelta(days=40)),
        event(org, created_at=t - timedelta(days=40)),
        event(org, created_at=t - timedelta(days=1)),
    )
    delivered = delivery(old_done, ep, status="delivered")
    backend.run(store.add_event, old_done, [delivered])
    backend.run(store.add_event, old_pending, [delivery(old_pending, ep)])
    backend.run(store.add_event, fresh, [delivery(fresh, ep, status="failed")])
    assert backend.run(store.prune, t - timedelta(days=30), 1000) >= 1
    with pytest.raises(NotFound):
        backend.run(store.get_event, org, old_done.id)
    with pytest.raises(NotFound):
        backend.run(store.get_delivery, org, delivered.id)
    assert backend.run(store.get_event, org, old_pending.id) == old_pending
    assert backend.run(store.get_event, org, fresh.id) == fresh
