"""Event webhooks (docs/webhooks.md): where endpoints, events and deliveries are
kept, how an event is published, and the HTTP call that delivers one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities.event_webhook import (
    DeliveryAttempt,
    DeliveryStatus,
    EventDelivery,
    WebhookEndpoint,
    WebhookEvent,
)

__all__ = [
    "EventPublisher",
    "EventWebhookSender",
    "EventWebhookStore",
    "NoEvents",
    "SendAnswer",
    "Subscription",
]


class Subscription(msgspec.Struct, frozen=True):
    """An enabled endpoint and the event types it takes."""

    org_id: str
    endpoint_id: UUID
    events: frozenset[str]


class EventWebhookStore(Protocol):
    async def add_endpoint(self, endpoint: WebhookEndpoint) -> None: ...

    async def get_endpoint(self, org_id: str, endpoint_id: UUID) -> WebhookEndpoint:
        """Raises ``NotFound`` (also for another organization's)."""
        ...

    async def list_endpoints(self, org_id: str) -> list[WebhookEndpoint]:
        """Oldest first."""
        ...

    async def replace_endpoint(self, endpoint: WebhookEndpoint, previous: WebhookEndpoint) -> bool:
        """Store the changed endpoint if the stored one is still ``previous`` (its
        ``updated_at`` and sealed secret): False when it changed meanwhile (a
        concurrent change, a 410's disabling, a key rotation's reseal). Raises
        ``NotFound``."""
        ...

    async def delete_endpoint(self, org_id: str, endpoint_id: UUID) -> None:
        """With its deliveries. Raises ``NotFound``."""
        ...

    async def subscriptions(self) -> list[Subscription]:
        """Every enabled endpoint of every organization (the publishers' cache)."""
        ...

    async def add_event(self, event: WebhookEvent, deliveries: Sequence[EventDelivery]) -> bool:
        """Store the event and its deliveries together (one transaction). False, and
        nothing stored, when an event with that id exists (a repeated publish) or
        the thread it is about is gone (deleted while it was published: an erasure
        finds every event stored before it, ``delete_for_thread``)."""
        ...

    async def get_event(self, org_id: str, event_id: str) -> WebhookEvent:
        """Raises ``NotFound``."""
        ...

    async def add_delivery(self, delivery: EventDelivery) -> None:
        """A further delivery of a stored event (a resend). Raises ``NotFound`` when
        the event or the endpoint is gone."""
        ...

    async def get_delivery(self, org_id: str, delivery_id: UUID) -> EventDelivery:
        """Raises ``NotFound``."""
        ...

    async def record_attempt(
        self,
        org_id: str,
        delivery_id: UUID,
        attempt: DeliveryAttempt,
        status: DeliveryStatus,
        next_attempt_at: datetime | None,
    ) -> EventDelivery:
        """Append ``attempt`` and set the status. Raises ``NotFound``."""
        ...

    async def deliveries(
        self,
        org_id: str,
        endpoint_id: UUID,
        *,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> tuple[list[EventDelivery], bool]:
        """The endpoint's deliveries, newest first (``created_at``, then id), older
        than ``before``; and whether there are more."""
        ...

    async def pending(self, due_before: datetime, limit: int) -> list[EventDelivery]:
        """Pending deliveries due before ``due_before`` (the sweep's: their job
        may be lost)."""
        ...

    async def prune(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` events (of every organization) made before
        ``before`` that have no pending delivery, with their deliveries. Answers
        how many events."""
        ...

    async def delete_for_thread(self, org_id: str, thread_id: UUID) -> int:
        """Delete the events that hold the thread's text, with their deliveries
        (the thread is being deleted). Answers how many events."""
        ...

    async def sealed_secrets(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        """(org, id, sealed secret) of every endpoint (all organizations when
        ``org_id`` is None: the key-rotation command)."""
        ...

    async def reseal(self, org_id: str, endpoint_id: UUID, old: str, new: str) -> bool:
        """Replace the sealed secret if it is still ``old``."""
        ...


class EventPublisher(Protocol):
    """What the areas call where an event happens. Never raises: a failure to
    record an event is logged, and what happened stays done. Costs no storage
    round trip when no endpoint of the organization takes ``type``."""

    async def publish(
        self,
        org_id: str,
        type: str,
        data: Mapping[str, Any],
        *,
        thread_id: UUID | None = None,
        key: str | None = None,
    ) -> None:
        """``thread_id``: the thread whose text ``data`` holds (deleted with it).
        ``key``: the same key twice (within the organization and type) is one
        event: a retried job publishes nothing new."""
        ...


class NoEvents(EventPublisher):
    """A publisher that publishes nothing (areas built without event webhooks)."""

    async def publish(
        self,
        org_id: str,
        type: str,
        data: Mapping[str, Any],
        *,
        thread_id: UUID | None = None,
        key: str | None = None,
    ) -> None:
        return None


class SendAnswer(msgspec.Struct, frozen=True, kw_only=True):
    status_code: int | None  # None: no answer (refused, unreachable, timed out)
    error: str | None  # why there is no usable answer, readable, no secret
    duration_ms: int


class EventWebhookSender(Protocol):
    async def send(
        self, url: str, headers: Mapping[str, str], body: bytes, timeout_s: float
    ) -> SendAnswer:
        """POST ``body`` with ``headers`` through the outbound guard, no redirects,
        bounded by ``timeout_s``; the answer's body is read and dropped. Never
        raises for a failure of the call."""
        ...
