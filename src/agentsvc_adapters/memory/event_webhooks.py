"""Event webhooks' endpoints, events and deliveries in memory."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from uuid import UUID

import msgspec

from agentsvc_core.entities.event_webhook import (
    DeliveryAttempt,
    DeliveryStatus,
    EventDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.event_webhooks import EventWebhookStore, Subscription


class MemoryEventWebhooks(EventWebhookStore):
    def __init__(self, thread_exists: Callable[[str, UUID], bool] = lambda o, t: True) -> None:
        """``thread_exists``: whether a thread is stored (an event about a deleted
        thread is not)."""
        self._thread_exists = thread_exists
        self._endpoints: dict[tuple[str, UUID], WebhookEndpoint] = {}
        self._events: dict[tuple[str, str], WebhookEvent] = {}
        self._deliveries: dict[tuple[str, UUID], EventDelivery] = {}

    async def add_endpoint(self, endpoint: WebhookEndpoint) -> None:
        self._endpoints[(endpoint.org_id, endpoint.id)] = endpoint

    async def get_endpoint(self, org_id: str, endpoint_id: UUID) -> WebhookEndpoint:
        try:
            return self._endpoints[(org_id, endpoint_id)]
        except KeyError:
            raise NotFound("webhook endpoint not found") from None

    async def list_endpoints(self, org_id: str) -> list[WebhookEndpoint]:
        return sorted(
            (e for (o, _), e in self._endpoints.items() if o == org_id),
            key=lambda e: (e.created_at, e.id),
        )

    async def replace_endpoint(self, endpoint: WebhookEndpoint, previous: WebhookEndpoint) -> bool:
        stored = await self.get_endpoint(endpoint.org_id, endpoint.id)
        if (stored.updated_at, stored.secret) != (previous.updated_at, previous.secret):
            return False
        self._endpoints[(endpoint.org_id, endpoint.id)] = endpoint
        return True

    async def delete_endpoint(self, org_id: str, endpoint_id: UUID) -> None:
        await self.get_endpoint(org_id, endpoint_id)
        del self._endpoints[(org_id, endpoint_id)]
        for key, d in list(self._deliveries.items()):
            if d.org_id == org_id and d.endpoint_id == endpoint_id:
                del self._deliveries[key]

    async def subscriptions(self) -> list[Subscription]:
        return [
            Subscription(e.org_id, e.id, frozenset(e.events))
            for e in self._endpoints.values()
            if e.enabled
        ]

    async def add_event(self, event: WebhookEvent, deliveries: Sequence[EventDelivery]) -> bool:
        if (event.org_id, event.id) in self._events:
            return False
        if event.thread_id is not None and not self._thread_exists(event.org_id, event.thread_id):
            return False
        present = [d for d in deliveries if (d.org_id, d.endpoint_id) in self._endpoints]
        self._events[(event.org_id, event.id)] = event
        for d in present:
            self._deliveries[(d.org_id, d.id)] = d
        return True

    async def get_event(self, org_id: str, event_id: str) -> WebhookEvent:
        try:
            return self._events[(org_id, event_id)]
        except KeyError:
            raise NotFound("webhook event not found") from None

    async def add_delivery(self, delivery: EventDelivery) -> None:
        await self.get_event(delivery.org_id, delivery.event_id)
        await self.get_endpoint(delivery.org_id, delivery.endpoint_id)
        self._deliveries[(delivery.org_id, delivery.id)] = delivery

    async def get_delivery(self, org_id: str, delivery_id: UUID) -> EventDelivery:
        try:
            return self._deliveries[(org_id, delivery_id)]
        except KeyError:
            raise NotFound("webhook delivery not found") from None

    async def record_attempt(
        self,
        org_id: str,
        delivery_id: UUID,
        attempt: DeliveryAttempt,
        status: DeliveryStatus,
        next_attempt_at: datetime | None,
    ) -> EventDelivery:
        current = await self.get_delivery(org_id, delivery_id)
        changed = msgspec.structs.replace(
            current,
            attempts=(*current.attempts, attempt),
            status=status,
            next_attempt_at=next_attempt_at,
            updated_at=attempt.at,
        )
        self._deliveries[(org_id, delivery_id)] = changed
        return changed

    async def deliveries(
        self,
        org_id: str,
        endpoint_id: UUID,
        *,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> tuple[list[EventDelivery], bool]:
        rows = sorted(
            (
                d
                for (o, _), d in self._deliveries.items()
                if o == org_id
                and d.endpoint_id == endpoint_id
                and (before is None or (d.created_at, d.id) < before)
            ),
            key=lambda d: (d.created_at, d.id),
            reverse=True,
        )
        return rows[:limit], len(rows) > limit

    async def pending(self, due_before: datetime, limit: int) -> list[EventDelivery]:
        rows = [
            d
            for d in self._deliveries.values()
            if d.status == "pending"
            and d.next_attempt_at is not None
            and d.next_attempt_at < due_before
        ]
        return sorted(rows, key=lambda d: (d.next_attempt_at or d.created_at, d.id))[:limit]

    async def prune(self, before: datetime, limit: int) -> int:
        pending = {
            (d.org_id, d.event_id) for d in self._deliveries.values() if d.status == "pending"
        }
        old = sorted(
            (e for k, e in self._events.items() if e.created_at < before and k not in pending),
            key=lambda e: (e.created_at, e.id),
        )[:limit]
        for e in old:
            del self._events[(e.org_id, e.id)]
        gone = {(e.org_id, e.id) for e in old}
        for key, d in list(self._deliveries.items()):
            if (d.org_id, d.event_id) in gone:
                del self._deliveries[key]
        return len(old)

    async def delete_for_thread(self, org_id: str, thread_id: UUID) -> int:
        gone = {i for (o, i), e in self._events.items() if o == org_id and e.thread_id == thread_id}
        for event_id in gone:
            del self._events[(org_id, event_id)]
        for key, d in list(self._deliveries.items()):
            if d.org_id == org_id and d.event_id in gone:
                del self._deliveries[key]
        return len(gone)

    async def sealed_secrets(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        return [
            (o, i, e.secret)
            for (o, i), e in self._endpoints.items()
            if org_id is None or o == org_id
        ]

    async def reseal(self, org_id: str, endpoint_id: UUID, old: str, new: str) -> bool:
        endpoint = self._endpoints.get((org_id, endpoint_id))
        if endpoint is None or endpoint.secret != old:
            return False
        self._endpoints[(org_id, endpoint_id)] = msgspec.structs.replace(endpoint, secret=new)
        return True
