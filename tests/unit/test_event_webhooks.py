"""Event webhooks' core: the Standard Webhooks signature (checked with the
specification's reference library), the retry schedule, the endpoints' rules,
the publisher's cache and the delivery job (the sender is a fake here; the real
one is tested end to end in tests/e2e/test_event_webhooks_e2e.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks import Webhook, WebhookVerificationError

from agentsvc_adapters.crypto import AesGcmBox
from agentsvc_adapters.memory.event_webhooks import MemoryEventWebhooks
from agentsvc_core.entities import Message, Principal
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports.event_webhooks import SendAnswer, Subscription
from agentsvc_core.ports.jobs import Again
from agentsvc_core.use_cases.event_webhooks import (
    DELIVER_JOB,
    DeliverySettings,
    EndpointChanges,
    EndpointDraft,
    EventDeliveries,
    EventWebhookPublisher,
    EventWebhooks,
)
from agentsvc_core.use_cases.event_webhooks.delivery import outcome_of
from agentsvc_core.use_cases.event_webhooks.payloads import messages_stored
from agentsvc_core.use_cases.event_webhooks.publishing import event_id
from agentsvc_core.use_cases.event_webhooks.replies import reply_events
from agentsvc_core.use_cases.event_webhooks.schedule import (
    MAX_ATTEMPTS,
    RETRY_DELAYS_S,
    retry_delay,
)
from agentsvc_core.use_cases.event_webhooks.signing import (
    new_secret,
    signature,
    signed_headers,
)
from agentsvc_core.use_cases.turn.events import TurnEnded
from tests.unit.published import Published
from tests.unit.turn_world import Clock

ORG = "org-events"
ADMIN = Principal(org_id=ORG, method="api_key")
MEMBER = Principal(org_id=ORG, method="jwt", user_id="mia", role="member")
URL = "https://hooks.example/events"


# --- signing -------------------------------------------------------------------


def test_a_secret_is_whsec_and_the_base64_of_32_random_bytes() -> None:
    one, two = new_secret(), new_secret()
    assert one.startswith("whsec_")
    assert one != two
    assert len(base64.b64decode(one.removeprefix("whsec_"))) == 32


def test_the_reference_library_verifies_the_signed_headers() -> None:
    secret = new_secret()
    body = b'{"type":"message.created","timestamp":"2026-11-01T12:00:00Z","data":{"x":"\xc3\xa9"}}'
    headers = signed_headers(secret, "msg_1", datetime.now(UTC), body)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-signature"].startswith("v1,")
    assert Webhook(secret).verify(body, headers)["data"] == {"x": "é"}
    # the library's own signature is ours
    at = datetime.now(UTC)
    theirs = Webhook(secret).sign("msg_1", at, body.decode())
    assert signature(secret, "msg_1", int(at.timestamp()), body) == theirs
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body + b" ", headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, {**headers, "webhook-id": "msg_2"})


@settings(max_examples=50, deadline=None)
@given(
    body=st.text(max_size=300),
    msg_id=st.from_regex(r"msg_[A-Za-z0-9_-]{1,40}", fullmatch=True),
    key=st.binary(min_size=24, max_size=64),
)
def test_any_message_verifies_with_the_library(body: str, msg_id: str, key: bytes) -> None:
    secret = "whsec_" + base64.b64encode(key).decode()
    headers = signed_headers(secret, msg_id, datetime.now(UTC), body.encode())
    assert Webhook(secret).verify(body.encode(), headers, json_parse=False) is None


# --- the schedule and what an answer comes to ------------------------------------


def test_the_retry_schedule_is_standard_webhooks() -> None:
    assert retry_delay(0) == 0.0  # the first attempt is immediate
    assert [retry_delay(n) for n in range(1, 8)] == [5, 300, 1800, 7200, 18000, 36000, 36000]
    assert retry_delay(8) is None
    assert retry_delay(9) is None
    assert MAX_ATTEMPTS == 8
    assert 24 * 3600 < sum(RETRY_DELAYS_S) < 28 * 3600  # about a day
    assert retry_delay(2, 0.001) == pytest.approx(0.3)


def _answer(code: int | None) -> SendAnswer:
    return SendAnswer(status_code=code, error=None, duration_ms=1)


def test_what_an_attempt_comes_to() -> None:
    assert outcome_of(_answer(200), 1, 1.0) == ("delivered", None, False)
    assert outcome_of(_answer(299), 8, 1.0) == ("delivered", None, False)
    assert outcome_of(_answer(410), 1, 1.0) == ("failed", None, True)
    assert outcome_of(_answer(300), 1, 1.0) == ("pending", 5.0, False)
    assert outcome_of(_answer(404), 2, 1.0) == ("pending", 300.0, False)
    assert outcome_of(_answer(None), 7, 1.0) == ("pending", 36000.0, False)
    assert outcome_of(_answer(500), 8, 1.0) == ("failed", None, False)
    assert outcome_of(_answer(199), 1, 0.5) == ("pending", 2.5, False)


# --- the world ---------------------------------------------------------------------


class Urls:
    refuse: str | None = None

    def refusal(self, url: str) -> str | None:
        return self.refuse


class Jobs:
    def __init__(self) -> None:
        self.queued: list[tuple[str, bytes, str | None, float]] = []

    async def enqueue(
        self, kind: str, payload: bytes, *, key: str | None = None, delay_s: float = 0.0
    ) -> bool:
        if any(k == key for _, _, k, _ in self.queued):
            return False
        self.queued.append((kind, payload, key, delay_s))
        return True


class Counting(MemoryEventWebhooks):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def subscriptions(self) -> list[Subscription]:
        self.reads += 1
        return await super().subscriptions()


class Sender:
    def __init__(self, *codes: int | None) -> None:
        self.codes = list(codes)
        self.sent: list[tuple[str, dict[str, str], bytes]] = []

    async def send(
        self, url: str, headers: Mapping[str, str], body: bytes, timeout_s: float
    ) -> SendAnswer:
        self.sent.append((url, dict(headers), body))
        code = self.codes.pop(0)
        return SendAnswer(status_code=code, error=None if code else "unreachable", duration_ms=7)


class World:
    def __init__(self, *codes: int | None) -> None:
        self.store = Counting()
        self.box = AesGcmBox([("k1", b"\x05" * 32)])
        self.urls = Urls()
        self.jobs = Jobs()
        self.clock = Clock(datetime.now(UTC))
        self.publisher = EventWebhookPublisher(self.store, self.jobs, self.clock, ttl_s=10)
        self.hooks = EventWebhooks(
            self.store, self.box, self.urls, self.jobs, self.clock, self.publisher.invalidate
        )
        self.sender = Sender(*codes)
        self.deliveries = EventDeliveries(
            self.store,
            self.sender,
            self.box,
            self.jobs,
            self.clock,
            DeliverySettings(retry_scale=0.01),
            changed=self.publisher.invalidate,
        )

    async def endpoint(self, *events: str) -> tuple[Any, str]:
        draft = EndpointDraft(url=URL, events=list(events or ("message.created",)))
        return await self.hooks.create(ADMIN, draft)

    def job(self, n: int = -1) -> bytes:
        kind, payload, _, _ = self.jobs.queued[n]
        assert kind == DELIVER_JOB
        return payload


# --- endpoints -----------------------------------------------------------------------


async def test_an_endpoint_keeps_its_secret_sealed_and_shows_it_once() -> None:
    w = World()
    endpoint, secret = await w.endpoint("reply.failed", "message.created", "reply.failed")
    assert endpoint.events == ("message.created", "reply.failed")  # sorted, once each
    assert secret.startswith("whsec_")
    assert secret not in endpoint.secret
    assert w.box.open(endpoint.secret, f"{ORG}:event_webhook:{endpoint.id}").decode() == secret
    rotated, fresh = await w.hooks.rotate_secret(ADMIN, endpoint.id)
    assert fresh != secret
    assert fresh.startswith("whsec_")
    assert w.box.open(rotated.secret, f"{ORG}:event_webhook:{endpoint.id}").decode() == fresh


@pytest.mark.parametrize(
    ("events", "field"),
    [([], "events"), (["message.created", "nope"], "events")],
)
async def test_events_must_be_known_and_not_empty(events: list[str], field: str) -> None:
    w = World()
    with pytest.raises(InvalidInput) as caught:
        await w.hooks.create(ADMIN, EndpointDraft(url=URL, events=events))
    assert caught.value.field == field
    endpoint, _ = await w.endpoint()
    with pytest.raises(InvalidInput):
        await w.hooks.update(ADMIN, endpoint.id, EndpointChanges(events=events))


async def test_the_url_goes_through_the_outbound_policy() -> None:
    w = World()
    w.urls.refuse = "only https:// URLs are allowed"
    with pytest.raises(InvalidInput) as caught:
        await w.endpoint()
    assert caught.value.field == "url"
    w.urls.refuse = None
    with pytest.raises(InvalidInput):
        await w.hooks.create(
            ADMIN, EndpointDraft(url="https://a.example/\n", events=["run.failed"])
        )


async def test_only_admins_read_or_write() -> None:
    w = World()
    endpoint, _ = await w.endpoint()
    for call in (
        w.hooks.list_all(MEMBER),
        w.hooks.get(MEMBER, endpoint.id),
        w.hooks.create(MEMBER, EndpointDraft(url=URL, events=["run.failed"])),
        w.hooks.update(MEMBER, endpoint.id, EndpointChanges(enabled=False)),
        w.hooks.delete(MEMBER, endpoint.id),
        w.hooks.rotate_secret(MEMBER, endpoint.id),
        w.hooks.deliveries(MEMBER, endpoint.id, before=None, limit=10),
    ):
        with pytest.raises(PermissionDenied):
            await call
    other = Principal(org_id="org-other", method="api_key")
    with pytest.raises(NotFound):
        await w.hooks.get(other, endpoint.id)


async def test_enabling_again_clears_why_it_was_disabled() -> None:
    w = World()
    endpoint, _ = await w.endpoint()
    assert await w.store.replace_endpoint(
        msgspec.structs.replace(endpoint, enabled=False, disabled_reason="gone"), endpoint
    )
    again = await w.hooks.update(ADMIN, endpoint.id, EndpointChanges(enabled=True))
    assert again.enabled
    assert again.disabled_reason is None
    off = await w.hooks.update(ADMIN, endpoint.id, EndpointChanges(enabled=False))
    assert not off.enabled


# --- publishing ------------------------------------------------------------------------


async def test_publishing_without_a_subscriber_reads_nothing_more() -> None:
    w = World()
    await w.publisher.publish(ORG, "message.created", {"a": 1})
    assert w.store.reads == 1  # the first publish of a process reads the snapshot
    for _ in range(50):
        await w.publisher.publish(ORG, "message.created", {"a": 1})
    assert w.store.reads == 1
    assert w.jobs.queued == []
    # an endpoint of another type: still nothing stored
    await w.endpoint("run.failed")
    await w.publisher.publish(ORG, "message.created", {"a": 1})
    assert w.store.reads == 2
    assert w.jobs.queued == []


async def test_the_snapshot_is_read_again_in_the_background_after_its_ttl() -> None:
    w = World()
    await w.publisher.publish(ORG, "run.failed", {})
    # another process adds an endpoint: this one sees it once the snapshot is old
    other = EventWebhooks(w.store, w.box, w.urls, w.jobs, w.clock)
    await other.create(ADMIN, EndpointDraft(url=URL, events=["run.failed"]))
    w.clock.advance(5)
    await w.publisher.publish(ORG, "run.failed", {})
    assert w.jobs.queued == []
    assert w.store.reads == 1
    w.clock.advance(5)
    await w.publisher.publish(ORG, "run.failed", {})  # answered from the old snapshot...
    await asyncio.sleep(0)  # ...while it is read again
    assert w.store.reads == 2
    await w.publisher.publish(ORG, "run.failed", {})
    assert len(w.jobs.queued) == 1


async def test_a_published_event_is_stored_once_with_a_delivery_per_endpoint() -> None:
    w = World()
    a, _ = await w.endpoint("message.created")
    b, _ = await w.endpoint("message.created", "run.failed")
    thread = uuid.uuid4()
    await w.publisher.publish(ORG, "message.created", {"content": "hi"}, thread_id=thread, key="m1")
    assert len(w.jobs.queued) == 2
    payloads = [json.loads(p) for _, p, _, _ in w.jobs.queued]
    assert all(p[0] == ORG and len(p) == 2 for p in payloads)
    assert all("hi" not in p.decode() for _, p, _, _ in w.jobs.queued)  # ids only
    for endpoint in (a, b):
        rows, _ = await w.hooks.deliveries(ADMIN, endpoint.id, before=None, limit=10)
        assert [r.event_type for r in rows] == ["message.created"]
    event = await w.store.get_event(ORG, event_id(ORG, "message.created", "m1"))
    assert event.thread_id == thread
    body = json.loads(event.body)
    assert body["type"] == "message.created"
    assert body["data"] == {"content": "hi"}
    assert datetime.fromisoformat(body["timestamp"]) == w.clock.now()
    # the same key again: nothing more
    await w.publisher.publish(ORG, "message.created", {"content": "hi"}, key="m1")
    assert len(w.jobs.queued) == 2
    # a disabled endpoint takes nothing
    await w.hooks.update(ADMIN, a.id, EndpointChanges(enabled=False))
    await w.publisher.publish(ORG, "message.created", {"content": "again"})
    assert len(w.jobs.queued) == 3


# --- delivering ---------------------------------------------------------------------------


async def test_a_failing_endpoint_is_retried_on_the_schedule_until_it_answers() -> None:
    w = World(500, None, 503, 200)
    endpoint, secret = await w.endpoint()
    await w.publisher.publish(ORG, "message.created", {"content": "hé"})
    payload = w.job()
    waits = []
    for _ in range(3):
        went = await w.deliveries.deliver(payload)
        assert isinstance(went, Again)
        waits.append(went.delay_s)
        w.clock.advance(went.delay_s)
    assert waits == pytest.approx([0.05, 3.0, 18.0])  # 5 s, 5 min, 30 min at 0.01
    assert await w.deliveries.deliver(payload) is None
    assert await w.deliveries.deliver(payload) is None  # delivered: left alone
    assert len(w.sender.sent) == 4
    ids = {h["webhook-id"] for _, h, _ in w.sender.sent}
    assert len(ids) == 1  # every attempt is the same message
    url, headers, body = w.sender.sent[-1]
    assert url == URL
    assert headers["content-type"] == "application/json"
    assert Webhook(secret).verify(body, headers)["data"] == {"content": "hé"}
    [delivery], _ = await w.hooks.deliveries(ADMIN, endpoint.id, before=None, limit=5)
    assert delivery.status == "delivered"
    assert [a.status_code for a in delivery.attempts] == [500, None, 503, 200]
    assert delivery.attempts[1].error == "unreachable"
    assert all(secret not in repr(a) for a in delivery.attempts)


async def test_the_schedule_runs_out_and_the_delivery_fails() -> None:
    w = World(*([500] * 8))
    endpoint, _ = await w.endpoint()
    await w.publisher.publish(ORG, "message.created", {})
    for _ in range(7):
        assert isinstance(await w.deliveries.deliver(w.job()), Again)
    assert await w.deliveries.deliver(w.job()) is None
    [delivery], _ = await w.hooks.deliveries(ADMIN, endpoint.id, before=None, limit=5)
    assert delivery.status == "failed"
    assert len(delivery.attempts) == 8
    assert (await w.hooks.get(ADMIN, endpoint.id)).enabled  # only a 410 disables


async def test_a_410_fails_the_delivery_and_disables_the_endpoint() -> None:
    w = World(410)
    endpoint, _ = await w.endpoint()
    await w.publisher.publish(ORG, "message.created", {})
    await w.publisher.publish(ORG, "message.created", {})
    assert await w.deliveries.deliver(w.job(0)) is None
    now = await w.hooks.get(ADMIN, endpoint.id)
    assert not now.enabled
    assert now.disabled_reason == "the endpoint answered 410 Gone"
    # the other delivery fails at its attempt, without a call
    assert await w.deliveries.deliver(w.job(1)) is None
    assert len(w.sender.sent) == 1
    rows, _ = await w.hooks.deliveries(ADMIN, endpoint.id, before=None, limit=5)
    assert {r.status for r in rows} == {"failed"}
    # and nothing more is published to it
    await w.publisher.publish(ORG, "message.created", {})
    assert len(w.jobs.queued) == 2


async def test_a_resend_is_a_new_delivery_of_the_same_message() -> None:
    w = World(200, 200)
    endpoint, secret = await w.endpoint()
    await w.publisher.publish(ORG, "message.created", {"n": 1})
    await w.deliveries.deliver(w.job())
    [first], _ = await w.hooks.deliveries(ADMIN, endpoint.id, before=None, limit=5)
    w.clock.advance(3600)
    again = await w.hooks.resend(ADMIN, endpoint.id, first.id)
    assert again.id != first.id
    assert again.event_id == first.event_id
    assert await w.deliveries.deliver(w.job()) is None
    (_, h1, b1), (_, h2, b2) = w.sender.sent
    assert h1["webhook-id"] == h2["webhook-id"]
    assert b1 == b2
    assert int(h2["webhook-timestamp"]) - int(h1["webhook-timestamp"]) == 3600
    # signed afresh at the time of the attempt (the library checks it against
    # the real clock, which this test's has left behind: checked as it would)
    at = int(h2["webhook-timestamp"])
    assert h2["webhook-signature"] == signature(secret, h1["webhook-id"], at, b2)
    assert Webhook(secret).verify(b1, h1)["data"] == {"n": 1}
    rows, _ = await w.hooks.deliveries(ADMIN, endpoint.id, before=None, limit=5)
    assert [r.id for r in rows] == [again.id, first.id]
    other, _ = await w.endpoint()
    with pytest.raises(InvalidInput):
        await w.hooks.resend(ADMIN, other.id, first.id)


async def test_a_delivery_whose_rows_are_gone_ends_quietly() -> None:
    w = World()
    endpoint, _ = await w.endpoint()
    thread = uuid.uuid4()
    await w.publisher.publish(ORG, "message.created", {}, thread_id=thread)
    assert await w.store.delete_for_thread(ORG, thread) == 1
    assert await w.deliveries.deliver(w.job()) is None
    await w.publisher.publish(ORG, "message.created", {})
    await w.hooks.delete(ADMIN, endpoint.id)
    assert await w.deliveries.deliver(w.job()) is None
    assert w.sender.sent == []


async def test_the_sweep_queues_again_deliveries_past_due() -> None:
    w = World()
    await w.endpoint()
    await w.publisher.publish(ORG, "message.created", {})
    w.jobs.queued.clear()  # the job was lost
    assert await w.deliveries.resume() == 0  # not yet a minute late
    w.clock.advance(120)
    assert await w.deliveries.resume() == 1
    assert len(w.jobs.queued) == 1


async def test_the_key_rotation_reseals_endpoint_secrets_with_the_newest_key() -> None:
    w = World()
    endpoint, secret = await w.endpoint()
    newer = AesGcmBox([("k2", b"\x06" * 32), ("k1", b"\x05" * 32)])
    hooks = EventWebhooks(w.store, newer, w.urls, w.jobs, w.clock)
    assert await hooks.rotate_secrets() == 1
    assert await hooks.rotate_secrets() == 0
    stored = await w.store.get_endpoint(ORG, endpoint.id)
    assert newer.is_current(stored.secret)
    assert newer.open(stored.secret, f"{ORG}:event_webhook:{endpoint.id}").decode() == secret


# --- what the turn publishes ------------------------------------------------------


def _ended(status: str) -> TurnEnded:
    return TurnEnded(
        org_id=ORG,
        agent_id=uuid.uuid4(),
        thread_id=uuid.uuid4(),
        run_id=uuid.uuid4(),
        status=status,
        model_id="local",
        user_id=None,
        records={},
        metadata={},
    )


async def test_a_reply_publishes_completed_or_failed_and_nothing_else() -> None:
    published = Published()
    hook = reply_events(published)
    for status in ("completed", "failed", "stopped", "interrupted", "requires_action"):
        await hook(_ended(status))
    assert published.types() == ["reply.completed", "reply.failed"]
    done = published.events[0]
    assert done.key == done.data["run_id"]  # one event per reply
    assert done.thread_id is not None
    assert done.data["thread_id"] == str(done.thread_id)
    assert (done.data["status"], done.data["model"]) == ("completed", "local")


async def test_only_the_user_messages_of_a_send_are_published() -> None:
    published = Published()
    thread, at = uuid.uuid4(), datetime.now(UTC)

    def message(role: Any, content: str) -> Message:
        return Message(
            id=uuid.uuid4(), org_id=ORG, thread_id=thread, role=role, content=content, created_at=at
        )

    await messages_stored(published, [message("tool", "42"), message("user", "hello")])
    [event] = published.events
    assert (event.type, event.thread_id, event.data["content"]) == (
        "message.created",
        thread,
        "hello",
    )


async def test_the_sweep_prunes_events_past_their_retention() -> None:
    w = World(200)
    endpoint, _ = await w.endpoint()
    await w.publisher.publish(ORG, "message.created", {})
    await w.deliveries.deliver(w.job())
    w.clock.advance(29 * 86400)
    assert await w.deliveries.prune() == 0
    w.clock.advance(2 * 86400)
    assert await w.deliveries.prune() == 1
    assert await w.hooks.deliveries(ADMIN, endpoint.id, before=None, limit=5) == ([], False)


async def test_a_burst_of_first_publishes_reads_the_subscriptions_once() -> None:
    w = World()
    await w.endpoint("run.failed")
    await asyncio.gather(*(w.publisher.publish(ORG, "run.failed", {}) for _ in range(10)))
    assert w.store.reads == 1
    assert len(w.jobs.queued) == 10


class Racing(Counting):
    """A store whose endpoint changes under the first ``n`` compare-and-sets."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    async def replace_endpoint(self, endpoint: Any, previous: Any) -> bool:
        if self.n > 0:
            self.n -= 1
            return False
        return await super().replace_endpoint(endpoint, previous)


async def test_a_change_is_tried_again_when_the_endpoint_changed_meanwhile() -> None:
    w = World()
    endpoint, _ = await w.endpoint()
    racing = Racing(9)
    await racing.add_endpoint(endpoint)
    hooks = EventWebhooks(racing, w.box, w.urls, w.jobs, w.clock)
    assert (
        await hooks.update(ADMIN, endpoint.id, EndpointChanges(description="x"))
    ).description == "x"
    racing.n = 10
    with pytest.raises(Conflict):
        await hooks.update(ADMIN, endpoint.id, EndpointChanges(description="y"))
