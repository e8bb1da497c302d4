"""Event webhooks (docs/webhooks.md): an organization's endpoints, the events the
service tells them about, and each delivery of an event to an endpoint."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

import msgspec

__all__ = [
    "EVENT_TYPES",
    "DeliveryAttempt",
    "DeliveryStatus",
    "EventDelivery",
    "WebhookEndpoint",
    "WebhookEvent",
]

# Every event type an endpoint may subscribe to, with what it says (the listing of
# ``GET /api/webhooks/event-types``); the order is the documentation's.
EVENT_TYPES: dict[str, str] = {
    "message.created": "a message was stored on a thread (a person's or a client's)",
    "reply.completed": "an agent's reply finished",
    "reply.failed": "an agent's reply failed",
    "run.completed": "a runner's run succeeded",
    "run.paused": "a runner's run paused (its budget)",
    "run.failed": "a runner's run failed",
    "knowledge.document.ready": "a knowledge document was indexed",
    "knowledge.document.failed": "a knowledge document could not be indexed",
    "code_session.finished": "a code session ended (succeeded, failed or cancelled)",
    "channel.status_changed": "a channel's connection status changed",
}

# pending: an attempt is due (now or after a backoff); delivered: an endpoint
# answered 2xx; failed: no more attempts (the schedule ran out, the endpoint
# answered 410, or it is gone or disabled)
DeliveryStatus = Literal["pending", "delivered", "failed"]


class WebhookEndpoint(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    org_id: str
    url: str
    description: str
    events: tuple[str, ...]  # a non-empty subset of EVENT_TYPES, sorted
    enabled: bool
    secret: str  # sealed (SecretBox): the ``whsec_`` text, shown once
    disabled_reason: str | None  # why the service disabled it (a 410), if it did
    created_at: datetime
    updated_at: datetime


class WebhookEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One event, as it is sent: ``id`` is the ``webhook-id`` every delivery and
    resend of it carries; ``body`` the exact JSON signed and sent."""

    id: str
    org_id: str
    type: str
    thread_id: UUID | None  # the thread whose text it holds: deleted with it
    body: str
    created_at: datetime


class DeliveryAttempt(msgspec.Struct, frozen=True, kw_only=True):
    at: datetime
    status_code: int | None  # the endpoint's answer, if there was one
    error: str | None  # why it did not count, short (never a secret)
    duration_ms: int


class EventDelivery(msgspec.Struct, frozen=True, kw_only=True):
    """One event on its way to one endpoint: its attempts, oldest first. A resend
    is a new delivery of the same event."""

    id: UUID
    org_id: str
    endpoint_id: UUID
    event_id: str
    event_type: str
    status: DeliveryStatus
    attempts: tuple[DeliveryAttempt, ...]
    next_attempt_at: datetime | None  # when pending: not before
    created_at: datetime
    updated_at: datetime
