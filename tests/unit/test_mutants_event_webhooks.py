"""Event webhooks (``agentsvc_core.use_cases.event_webhooks``) in the details the
first mutation run (`make mutation SELECTION=event_webhooks`) found untested: each
event's ``data`` whole (docs/webhooks.md), the organization it goes to, each
refusal's field and wording, the bounds at their edges, what an attempt records,
the stamps of each write, the sweeps' limits, counts and log lines, and the
publisher's snapshot kept consistent with changes made while it is read."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from agentsvc_adapters.crypto import AesGcmBox
from agentsvc_core.entities import Message, Principal
from agentsvc_core.errors import Conflict, InvalidInput, PermissionDenied, Unavailable
from agentsvc_core.ports.event_webhooks import SendAnswer, Subscription
from agentsvc_core.rules import MAX_DESCRIPTION
from agentsvc_core.use_cases.event_webhooks import (
    DeliverySettings,
    EndpointChanges,
    EndpointDraft,
    EventDeliveries,
    EventWebhookPublisher,
    EventWebhooks,
)
from agentsvc_core.use_cases.event_webhooks.delivery import enqueue_delivery
from agentsvc_core.use_cases.event_webhooks.endpoints import MAX_ENDPOINTS, checked_events
from agentsvc_core.use_cases.event_webhooks.payloads import (
    channel_data,
    code_session_data,
    message_data,
    messages_stored,
    run_data,
    run_event,
    status_changed,
)
from agentsvc_core.use_cases.event_webhooks.replies import reply_events
from agentsvc_core.use_cases.event_webhooks.signing import new_secret, secret_bytes
from agentsvc_core.use_cases.turn.events import TurnEnded
from tests.unit.published import Published
from tests.unit.test_event_webhooks import ADMIN, MEMBER, ORG, URL, Counting, World

T = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _as(**fields: Any) -> Any:
    """A stand-in with just the attributes a payload reads."""
    return SimpleNamespace(**fields)


# --- what each event says ---------------------------------------------------------------


@pytest.mark.parametrize("run_id", [None, uuid.uuid4()])
def test_a_message_event_says_all_of_the_message(run_id: uuid.UUID | None) -> None:
    m = Message(
        id=uuid.uuid4(),
        org_id=ORG,
        thread_id=uuid.uuid4(),
        role="user",
        content="hello",
        created_at=T,
        sender_id="u-1",
        sender_name="Uma",
        run_id=run_id,
    )
    assert message_data(m) == {
        "thread_id": str(m.thread_id),
        "message_id": str(m.id),
        "role": "user",
        "content": "hello",
        "sender_id": "u-1",
        "sender_name": "Uma",
        "run_id": None if run_id is None else str(run_id),
        "created_at": "2026-05-01T12:00:00+00:00",
    }


async def test_a_message_event_goes_to_the_messages_organization() -> None:
    published = Published()
    m = Message(
        id=uuid.uuid4(), org_id="org-x", thread_id=uuid.uuid4(), role="user", content="hi",
        created_at=T,
    )  # fmt: skip
    await messages_stored(published, [m])
    assert [e.org_id for e in published.events] == ["org-x"]


@pytest.mark.parametrize(
    ("status", "event"),
    [
        ("succeeded", "run.completed"),
        ("paused", "run.paused"),
        ("failed", "run.failed"),
        ("running", None),
        ("cancelled", None),
    ],
)
def test_which_run_states_are_events(status: str, event: str | None) -> None:
    assert run_event(_as(status=status)) == event


@pytest.mark.parametrize("runner_id", [None, uuid.uuid4()])
def test_a_run_event_says_the_run_its_runner_and_why(runner_id: uuid.UUID | None) -> None:
    run = _as(
        id=uuid.uuid4(), runner_id=runner_id, status="paused", paused_reason="budget", error="e"
    )
    assert run_data(run) == {
        "run_id": str(run.id),
        "runner_id": None if runner_id is None else str(runner_id),
        "status": "paused",
        "paused_reason": "budget",
        "error": "e",
    }


def test_a_code_session_event_says_the_session_and_its_pull_request() -> None:
    s = _as(
        id=uuid.uuid4(),
        code_agent_id=uuid.uuid4(),
        status="finished",
        error=None,
        pr_url="https://git.example/pr/1",
    )
    assert code_session_data(s) == {
        "session_id": str(s.id),
        "code_agent_id": str(s.code_agent_id),
        "status": "finished",
        "error": None,
        "pr_url": "https://git.example/pr/1",
    }


async def test_a_channel_event_is_published_when_its_status_changes_and_only_then() -> None:
    published = Published()
    before = _as(id=uuid.uuid4(), org_id="org-c", type="telegram", status="connected")
    same = _as(**vars(before) | {"status_reason": "again"})
    await status_changed(published, before, same)
    assert published.events == []
    after = _as(**vars(before) | {"status": "error", "status_reason": "token revoked"})
    await status_changed(published, before, after)
    [event] = published.events
    assert (event.org_id, event.type) == ("org-c", "channel.status_changed")
    assert event.data == channel_data(after)
    assert event.data == {
        "channel_id": str(before.id),
        "type": "telegram",
        "status": "error",
        "reason": "token revoked",
    }


async def test_a_reply_event_says_the_reply_and_goes_to_its_organization() -> None:
    published = Published()
    ended = TurnEnded(
        org_id="org-r",
        agent_id=uuid.uuid4(),
        thread_id=uuid.uuid4(),
        run_id=uuid.uuid4(),
        status="failed",
        model_id="local",
        user_id=None,
        records={},
        metadata={},
    )
    await reply_events(published)(ended)
    [event] = published.events
    assert event.org_id == "org-r"
    assert event.data == {
        "thread_id": str(ended.thread_id),
        "run_id": str(ended.run_id),
        "agent_id": str(ended.agent_id),
        "status": "failed",
        "model": "local",
    }


# --- endpoints: refusals, bounds, stamps ------------------------------------------------


def test_the_event_types_refusals_say_what_is_wrong() -> None:
    with pytest.raises(InvalidInput) as empty:
        checked_events([])
    assert (empty.value.field, empty.value.problem) == ("events", "name at least one event type")
    with pytest.raises(InvalidInput) as unknown:
        checked_events(["run.failed", "zz.top", "aa.nope"])
    assert (unknown.value.field, unknown.value.problem) == (
        "events",
        "unknown event type 'aa.nope'",
    )


async def test_a_member_is_told_who_manages_webhooks() -> None:
    w = World()
    with pytest.raises(PermissionDenied) as denied:
        await w.hooks.list_all(MEMBER)
    assert denied.value.detail == "webhooks are managed by the organization's admins"


async def _refused(w: World, **draft: Any) -> InvalidInput:
    fields: dict[str, Any] = {"url": URL, "events": ["run.failed"]} | draft
    with pytest.raises(InvalidInput) as refused:
        await w.hooks.create(ADMIN, EndpointDraft(**fields))
    return refused.value


async def test_an_endpoints_url_and_description_are_checked_by_name() -> None:
    w = World()
    assert (await _refused(w, url="")).field == "url"
    assert (await _refused(w, url="https://a.example/" + "x" * 4079)).field == "url"
    long_ok = "https://a.example/" + "x" * 4078  # 4,096 characters
    assert len(long_ok) == 4096
    endpoint, _ = await w.hooks.create(ADMIN, EndpointDraft(url=long_ok, events=["run.failed"]))
    assert endpoint.url == long_ok
    assert (await _refused(w, url="https://a.example/\x7f")).field == "url"
    assert (await _refused(w, description="d" * (MAX_DESCRIPTION + 1))).field == "description"


async def test_the_outbound_policy_is_asked_about_the_endpoints_own_url() -> None:
    w = World()
    asked: list[str] = []

    def refusal(url: str) -> str | None:
        asked.append(url)
        return "that host is private" if "private" in url else None

    w.urls.refusal = refusal  # type: ignore[method-assign]
    refused = await _refused(w, url="https://private.example/hook")
    assert (refused.field, refused.problem) == ("url", "that host is private")
    assert asked == ["https://private.example/hook"]


async def test_an_organization_has_at_most_fifty_endpoints() -> None:
    w = World()
    for _ in range(MAX_ENDPOINTS - 1):
        await w.endpoint()
    await w.endpoint()  # the fiftieth
    refused = await _refused(w)
    assert (refused.field, refused.problem) == ("url", "an organization has at most 50 endpoints")


async def test_an_endpoints_writes_are_stamped_with_the_clock() -> None:
    w = World()
    created, _ = await w.endpoint()
    assert created.created_at == created.updated_at == w.clock.now()
    w.clock.advance(60)
    changed = await w.hooks.update(ADMIN, created.id, EndpointChanges(description="x"))
    assert changed.updated_at == w.clock.now()
    assert changed.created_at == created.created_at
    w.clock.advance(60)
    rotated, _ = await w.hooks.rotate_secret(ADMIN, created.id)
    assert rotated.updated_at == w.clock.now()
    assert (await w.store.get_endpoint(ORG, created.id)).updated_at == w.clock.now()


async def test_an_organization_lists_only_its_own_endpoints() -> None:
    w = World()
    mine, _ = await w.endpoint()
    other = Principal(org_id="org-other", method="api_key")
    theirs, _ = await w.hooks.create(other, EndpointDraft(url=URL, events=["run.failed"]))
    assert [e.id for e in await w.hooks.list_all(ADMIN)] == [mine.id]
    assert [e.id for e in await w.hooks.list_all(other)] == [theirs.id]


async def test_a_change_that_keeps_losing_its_race_says_to_try_again() -> None:
    w = World()
    endpoint, _ = await w.endpoint()

    async def never(updated: Any, previous: Any) -> bool:
        return False

    w.store.replace_endpoint = never  # type: ignore[method-assign,assignment]
    with pytest.raises(Conflict) as lost:
        await w.hooks.update(ADMIN, endpoint.id, EndpointChanges(description="y"))
    assert lost.value.detail == "the endpoint is being changed by another request; try again"


async def test_the_deliveries_are_read_a_page_at_a_time() -> None:
    w = World()
    endpoint, _ = await w.endpoint()
    for _ in range(3):
        await w.publisher.publish(ORG, "message.created", {})
        w.clock.advance(1)
    first, more = await w.hooks.deliveries(ADMIN, endpoint.id, before=None, limit=2)
    assert more
    last = first[-1]
    rest, more = await w.hooks.deliveries(
        ADMIN, endpoint.id, before=(last.created_at, last.id), limit=2
    )
    assert not more
    assert len(rest) == 1
    assert rest[0].id not in {d.id for d in first}


async def test_a_resend_names_the_delivery_of_another_endpoint_and_copies_the_event() -> None:
    w = World()
    endpoint, _ = await w.endpoint()
    other, _ = await w.endpoint()
    await w.publisher.publish(ORG, "message.created", {})
    [mine, _] = [d for e in (endpoint, other) for d in (await w.hooks.deliveries(
        ADMIN, e.id, before=None, limit=5))[0]]  # fmt: skip
    with pytest.raises(InvalidInput) as refused:
        await w.hooks.resend(ADMIN, other.id, mine.id)
    assert (refused.value.field, refused.value.problem) == (
        "deliveryId",
        "is not a delivery of this endpoint",
    )
    w.clock.advance(30)
    again = await w.hooks.resend(ADMIN, endpoint.id, mine.id)
    stored = await w.store.get_delivery(ORG, again.id)
    assert stored.event_type == "message.created"
    assert stored.next_attempt_at == stored.created_at == stored.updated_at == w.clock.now()
    _, _, key, delay = w.jobs.queued[-1]
    assert (key, delay) == (f"event_webhooks.deliver:{again.id}", 0.0)


async def test_the_key_rotation_of_one_organization_reseals_only_its_endpoints() -> None:
    w = World()
    await w.endpoint()
    other = Principal(org_id="org-other", method="api_key")
    await w.hooks.create(other, EndpointDraft(url=URL, events=["run.failed"]))
    newer = AesGcmBox([("k2", b"\x06" * 32), ("k1", b"\x05" * 32)])
    hooks = EventWebhooks(w.store, newer, w.urls, w.jobs, w.clock)
    assert await hooks.rotate_secrets(ORG) == 1
    assert await hooks.rotate_secrets() == 1  # the other organization's, left till now


# --- delivering ------------------------------------------------------------------------


class _Sender:
    """Answers ``answer`` and records the bound each call was given."""

    def __init__(self, answer: SendAnswer) -> None:
        self.answer = answer
        self.calls: list[tuple[dict[str, str], float]] = []

    async def send(self, url: str, headers: Any, body: bytes, timeout_s: float) -> SendAnswer:
        self.calls.append((dict(headers), timeout_s))
        return self.answer


def _deliveries(w: World, answer: SendAnswer, **settings: Any) -> tuple[EventDeliveries, _Sender]:
    sender = _Sender(answer)
    deliveries = EventDeliveries(
        w.store,
        sender,
        w.box,
        w.jobs,
        w.clock,
        DeliverySettings(**settings),
        changed=w.publisher.invalidate,
    )
    return deliveries, sender


async def _one_delivery(w: World) -> tuple[Any, bytes]:
    endpoint, _ = await w.endpoint()
    await w.publisher.publish(ORG, "message.created", {})
    return endpoint, w.job()


async def test_an_attempt_is_sent_with_the_settings_bound_and_the_services_agent() -> None:
    w = World()
    _, job = await _one_delivery(w)
    deliveries, sender = _deliveries(w, SendAnswer(status_code=200, error=None, duration_ms=5),
                                     timeout_s=7.5)  # fmt: skip
    assert await deliveries.deliver(job) is None
    [(headers, bound)] = sender.calls
    assert bound == 7.5
    assert headers["user-agent"] == "agentsvc-webhooks"


async def test_what_a_failed_attempt_records_and_when_it_comes_again() -> None:
    w = World()
    endpoint, job = await _one_delivery(w)
    long = "e" * 400
    deliveries, _ = _deliveries(w, SendAnswer(status_code=503, error=long, duration_ms=1234))
    again = await deliveries.deliver(job)
    assert again is not None
    assert again.delay_s == 5.0
    [delivery], _ = await w.hooks.deliveries(ADMIN, endpoint.id, before=None, limit=5)
    [attempt] = delivery.attempts
    assert attempt.at == w.clock.now()
    assert attempt.status_code == 503
    assert attempt.error == "e" * 300
    assert attempt.duration_ms == 1234
    assert delivery.status == "pending"
    assert delivery.next_attempt_at == w.clock.now() + timedelta(seconds=5)


async def test_a_delivery_to_an_endpoint_disabled_meanwhile_records_why_without_a_call() -> None:
    w = World()
    endpoint, job = await _one_delivery(w)
    await w.hooks.update(ADMIN, endpoint.id, EndpointChanges(enabled=False))
    deliveries, sender = _deliveries(w, SendAnswer(status_code=200, error=None, duration_ms=5))
    assert await deliveries.deliver(job) is None
    assert sender.calls == []
    [delivery], _ = await w.hooks.deliveries(ADMIN, endpoint.id, before=None, limit=5)
    [attempt] = delivery.attempts
    assert (attempt.status_code, attempt.error, attempt.duration_ms) == (
        None,
        "the endpoint is disabled",
        0,
    )
    assert delivery.status == "failed"


async def test_a_410_disables_the_endpoint_stamped_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = World()
    endpoint, job = await _one_delivery(w)
    w.clock.advance(90)
    deliveries, _ = _deliveries(w, SendAnswer(status_code=410, error="HTTP 410", duration_ms=5))
    with caplog.at_level(logging.INFO, logger="agentsvc.event_webhooks"):
        await deliveries.deliver(job)
    off = await w.store.get_endpoint(ORG, endpoint.id)
    assert off.enabled is False
    assert off.updated_at == w.clock.now()
    assert [r.getMessage() for r in caplog.records if r.name == "agentsvc.event_webhooks"] == [
        f"webhook endpoint {endpoint.id} disabled: it answered 410"
    ]


async def test_jobs_are_queued_at_once_unless_told_to_wait() -> None:
    w = World()
    await _one_delivery(w)
    [(_, _, key, delay)] = w.jobs.queued
    assert delay == 0.0
    delivery = (await w.store.pending(w.clock.now() + timedelta(days=1), 10))[0]
    w.jobs.queued.clear()
    assert await enqueue_delivery(w.jobs, delivery, 12.5)
    assert w.jobs.queued[-1][2:] == (key, 12.5)


class _Limits(Counting):
    """Records the limits the sweeps ask with; ``fail`` makes them fail."""

    def __init__(self) -> None:
        super().__init__()
        self.limits: list[tuple[str, int]] = []
        self.fail = False

    async def prune(self, before: datetime, limit: int) -> int:
        self.limits.append(("prune", limit))
        if self.fail:
            raise Unavailable("the database is away")
        return await super().prune(before, limit)

    async def pending(self, due_before: datetime, limit: int) -> list[Any]:
        self.limits.append(("pending", limit))
        if self.fail:
            raise Unavailable("the database is away")
        return await super().pending(due_before, limit)


def _sweeping(w: World, store: _Limits) -> EventDeliveries:
    sender = _Sender(SendAnswer(status_code=200, error=None, duration_ms=1))
    return EventDeliveries(store, sender, w.box, w.jobs, w.clock)


async def test_the_sweeps_default_limits_and_their_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = World()
    store = _Limits()
    sweeps = _sweeping(w, store)
    assert await sweeps.prune() == 0
    assert await sweeps.resume() == 0
    assert store.limits == [("prune", 1000), ("pending", 100)]
    store.fail = True
    with caplog.at_level(logging.WARNING, logger="agentsvc.event_webhooks"):
        assert await sweeps.prune() == 0
        assert await sweeps.resume() == 0
    assert [r.getMessage() for r in caplog.records if r.name == "agentsvc.event_webhooks"] == [
        "the sweep of old webhook events failed: the database is away",
        "the sweep of webhook deliveries failed: the database is away",
    ]


async def test_the_sweep_counts_every_job_it_queues_anew() -> None:
    w = World()
    store = _Limits()
    hooks = EventWebhooks(store, w.box, w.urls, w.jobs, w.clock)
    publisher = EventWebhookPublisher(store, w.jobs, w.clock)
    await hooks.create(ADMIN, EndpointDraft(url=URL, events=["run.failed"]))
    await hooks.create(ADMIN, EndpointDraft(url=URL, events=["run.failed"]))
    await publisher.publish(ORG, "run.failed", {})
    w.jobs.queued.clear()  # lost
    w.clock.advance(120)
    assert await _sweeping(w, store).resume() == 2


# --- publishing ------------------------------------------------------------------------


async def test_a_published_event_and_its_deliveries_are_stored_whole() -> None:
    w = World()
    endpoint, _ = await w.endpoint()
    await w.publisher.publish(ORG, "message.created", {}, key="k1")
    [delivery], _ = await w.hooks.deliveries(ADMIN, endpoint.id, before=None, limit=5)
    event = await w.store.get_event(ORG, delivery.event_id)
    assert event.type == "message.created"
    assert delivery.updated_at == delivery.created_at == w.clock.now()


class _Failing(Counting):
    def __init__(self) -> None:
        super().__init__()
        self.fail_reads = False
        self.fail_adds = False

    async def subscriptions(self) -> list[Subscription]:
        if self.fail_reads:
            raise Unavailable("the database is away")
        return await super().subscriptions()

    async def add_event(self, event: Any, deliveries: Any) -> bool:
        if self.fail_adds:
            raise Unavailable("the database is busy")
        return await super().add_event(event, deliveries)


async def test_a_publish_that_fails_is_logged_and_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = World()
    store = _Failing()
    publisher = EventWebhookPublisher(store, w.jobs, w.clock, ttl_s=10)
    await EventWebhooks(store, w.box, w.urls, w.jobs, w.clock).create(
        ADMIN, EndpointDraft(url=URL, events=["run.failed"])
    )
    await publisher.publish(ORG, "run.failed", {})  # the first read
    store.fail_adds = store.fail_reads = True
    w.clock.advance(10)
    with caplog.at_level(logging.WARNING, logger="agentsvc.event_webhooks"):
        await publisher.publish(ORG, "run.failed", {})  # stored: fails; read: fails
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    assert [r.getMessage() for r in caplog.records if r.name == "agentsvc.event_webhooks"] == [
        "could not publish a run.failed event: the database is busy",
        "could not read the webhook subscriptions: the database is away",
    ]


class _Slow(Counting):
    """Subscriptions read only when the test lets them (one gate per read)."""

    def __init__(self) -> None:
        super().__init__()
        self.gates: list[asyncio.Event] = []

    async def subscriptions(self) -> list[Subscription]:
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        return await super().subscriptions()


async def _reading(store: _Slow, n: int) -> None:
    """Until the ``n``-th read is out."""
    for _ in range(100):
        if len(store.gates) >= n:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"read {n} never began")


async def test_one_background_read_at_a_time() -> None:
    w = World()
    store = _Slow()
    publisher = EventWebhookPublisher(store, w.jobs, w.clock, ttl_s=10)
    first = asyncio.create_task(publisher.publish(ORG, "run.failed", {}))
    await _reading(store, 1)
    store.gates[0].set()
    await first
    w.clock.advance(10)
    for _ in range(3):  # each past the ttl, while the refresh is still out
        await publisher.publish(ORG, "run.failed", {})
        await asyncio.sleep(0)
    assert len(store.gates) == 2  # reads begun: the first, and one refresh
    store.gates[1].set()
    await asyncio.sleep(0)


async def test_a_read_begun_before_a_change_is_not_kept() -> None:
    """A change in this process while the subscriptions are read: the read may
    predate it, so the next publish reads again and sees the change."""
    w = World()
    store = _Slow()
    publisher = EventWebhookPublisher(store, w.jobs, w.clock, ttl_s=10)
    hooks = EventWebhooks(store, w.box, w.urls, w.jobs, w.clock, publisher.invalidate)
    publisher.invalidate()  # an earlier change, before anything was read
    for _ in range(2):
        reading = asyncio.create_task(publisher.publish(ORG, "run.failed", {}))
        await _reading(store, len(store.gates) + 1)
        created = asyncio.create_task(
            hooks.create(ADMIN, EndpointDraft(url=URL, events=["run.failed"]))
        )
        await created  # invalidates while the read is out
        store.gates[-1].set()
        await reading
    await asyncio.gather(
        publisher.publish(ORG, "run.failed", {}),
        _open_gates(store),
    )
    assert len(w.jobs.queued) == 2  # one event, both endpoints


async def _open_gates(store: _Slow) -> None:
    for _ in range(10):
        for gate in store.gates:
            gate.set()
        await asyncio.sleep(0)


def test_new_secrets_are_32_random_bytes() -> None:
    assert len(secret_bytes(new_secret())) == 32
    assert msgspec.json.encode(new_secret())  # plain ASCII text


async def test_the_snapshot_is_ten_seconds_old_at_most_by_default() -> None:
    """docs: a change in another process is seen within about 10 s."""
    w = World()
    publisher = EventWebhookPublisher(w.store, w.jobs, w.clock)
    await publisher.publish(ORG, "run.failed", {})
    w.clock.advance(9.9)
    await publisher.publish(ORG, "run.failed", {})
    await asyncio.sleep(0)
    assert w.store.reads == 1
    w.clock.advance(0.1)
    await publisher.publish(ORG, "run.failed", {})
    await asyncio.sleep(0)
    assert w.store.reads == 2
