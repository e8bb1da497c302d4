"""Event webhooks on PostgreSQL (tables ``event_webhook_endpoints``, ``_events``
and ``_deliveries``; deliveries go with their endpoint or event by foreign keys)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_adapters.postgres.pool import Repo, translate
from agentsvc_core.entities.event_webhook import (
    DeliveryAttempt,
    DeliveryStatus,
    EventDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.event_webhooks import EventWebhookStore, Subscription

_ENDPOINT = (
    "org_id, id, url, description, events, enabled, secret_sealed, disabled_reason,"
    " created_at, updated_at"
)
_EVENT = "org_id, id, type, thread_id, body, created_at"
_DELIVERY = (
    "org_id, id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at,"
    " created_at, updated_at"
)
_enc = msgspec.json.Encoder()


def _endpoint(r: tuple[Any, ...]) -> WebhookEndpoint:
    return WebhookEndpoint(
        org_id=r[0],
        id=r[1],
        url=r[2],
        description=r[3],
        events=tuple(r[4]),
        enabled=r[5],
        secret=r[6],
        disabled_reason=r[7],
        created_at=r[8],
        updated_at=r[9],
    )


def _event(r: tuple[Any, ...]) -> WebhookEvent:
    return WebhookEvent(org_id=r[0], id=r[1], type=r[2], thread_id=r[3], body=r[4], created_at=r[5])


def _delivery(r: tuple[Any, ...]) -> EventDelivery:
    # jsonb arrives parsed (psycopg's loader): converted back through msgspec
    attempts = msgspec.convert(r[6], tuple[DeliveryAttempt, ...])
    return EventDelivery(
        org_id=r[0],
        id=r[1],
        endpoint_id=r[2],
        event_id=r[3],
        event_type=r[4],
        status=r[5],
        attempts=attempts,
        next_attempt_at=r[7],
        created_at=r[8],
        updated_at=r[9],
    )


def _delivery_params(d: EventDelivery) -> tuple[Any, ...]:
    return (
        d.org_id,
        d.id,
        d.endpoint_id,
        d.event_id,
        d.event_type,
        d.status,
        _enc.encode(d.attempts).decode(),
        d.next_attempt_at,
        d.created_at,
        d.updated_at,
    )


class PostgresEventWebhooks(Repo, EventWebhookStore):
    async def add_endpoint(self, endpoint: WebhookEndpoint) -> None:
        e = endpoint
        await self._one(
            f"INSERT INTO event_webhook_endpoints ({_ENDPOINT})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (
                e.org_id,
                e.id,
                e.url,
                e.description,
                list(e.events),
                e.enabled,
                e.secret,
                e.disabled_reason,
                e.created_at,
                e.updated_at,
            ),
        )

    async def get_endpoint(self, org_id: str, endpoint_id: UUID) -> WebhookEndpoint:
        row = await self._one(
            f"SELECT {_ENDPOINT} FROM event_webhook_endpoints WHERE org_id = %s AND id = %s",
            (org_id, endpoint_id),
        )
        if row is None:
            raise NotFound("webhook endpoint not found")
        return _endpoint(row)

    async def list_endpoints(self, org_id: str) -> list[WebhookEndpoint]:
        rows = await self._all(
            f"SELECT {_ENDPOINT} FROM event_webhook_endpoints WHERE org_id = %s"
            " ORDER BY created_at, id",
            (org_id,),
        )
        return [_endpoint(r) for r in rows]

    async def replace_endpoint(self, endpoint: WebhookEndpoint, previous: WebhookEndpoint) -> bool:
        e = endpoint
        row = await self._one(
            "UPDATE event_webhook_endpoints SET url = %s, description = %s, events = %s,"
            " enabled = %s, secret_sealed = %s, disabled_reason = %s, updated_at = %s"
            " WHERE org_id = %s AND id = %s AND updated_at = %s AND secret_sealed = %s"
            " RETURNING id",
            (
                e.url,
                e.description,
                list(e.events),
                e.enabled,
                e.secret,
                e.disabled_reason,
                e.updated_at,
                e.org_id,
                e.id,
                previous.updated_at,
                previous.secret,
            ),
        )
        if row is not None:
            return True
        await self.get_endpoint(e.org_id, e.id)  # NotFound when it is gone
        return False

    async def delete_endpoint(self, org_id: str, endpoint_id: UUID) -> None:
        row = await self._one(
            "DELETE FROM event_webhook_endpoints WHERE org_id = %s AND id = %s RETURNING id",
            (org_id, endpoint_id),
        )
        if row is None:
            raise NotFound("webhook endpoint not found")

    async def subscriptions(self) -> list[Subscription]:
        rows = await self._all(
            "SELECT org_id, id, events FROM event_webhook_endpoints WHERE enabled", ()
        )
        return [Subscription(r[0], r[1], frozenset(r[2])) for r in rows]

    async def add_event(self, event: WebhookEvent, deliveries: Sequence[EventDelivery]) -> bool:
        e = event
        async with translate(), self._pool.connection() as conn, conn.transaction():
            if e.thread_id is not None:
                # the thread's row, share-locked: an erasure (which takes it FOR UPDATE
                # before deleting it, then this table's rows of it) either waits for
                # this transaction and deletes the event too, or has deleted the
                # thread already and no event of its text is stored
                cur = await conn.execute(
                    "SELECT 1 FROM threads WHERE org_id = %s AND id = %s FOR KEY SHARE",
                    (e.org_id, e.thread_id),
                )
                if await cur.fetchone() is None:
                    return False
            cur = await conn.execute(
                f"INSERT INTO event_webhook_events ({_EVENT}) VALUES (%s, %s, %s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING RETURNING id",
                (e.org_id, e.id, e.type, e.thread_id, e.body, e.created_at),
            )
            if await cur.fetchone() is None:
                return False
            for d in deliveries:
                # an endpoint deleted since the publisher's snapshot: no delivery
                await conn.execute(
                    f"INSERT INTO event_webhook_deliveries ({_DELIVERY})"
                    " SELECT %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s"
                    " WHERE EXISTS (SELECT 1 FROM event_webhook_endpoints"
                    " WHERE org_id = %s AND id = %s)",
                    (*_delivery_params(d), d.org_id, d.endpoint_id),
                )
        return True

    async def get_event(self, org_id: str, event_id: str) -> WebhookEvent:
        row = await self._one(
            f"SELECT {_EVENT} FROM event_webhook_events WHERE org_id = %s AND id = %s",
            (org_id, event_id),
        )
        if row is None:
            raise NotFound("webhook event not found")
        return _event(row)

    async def add_delivery(self, delivery: EventDelivery) -> None:
        d = delivery
        row = await self._one(
            f"INSERT INTO event_webhook_deliveries ({_DELIVERY})"
            " SELECT %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s"
            " WHERE EXISTS (SELECT 1 FROM event_webhook_endpoints WHERE org_id = %s AND id = %s)"
            " AND EXISTS (SELECT 1 FROM event_webhook_events WHERE org_id = %s AND id = %s)"
            " RETURNING id",
            (*_delivery_params(d), d.org_id, d.endpoint_id, d.org_id, d.event_id),
        )
        if row is None:
            raise NotFound("the delivery's event or endpoint is gone")

    async def get_delivery(self, org_id: str, delivery_id: UUID) -> EventDelivery:
        row = await self._one(
            f"SELECT {_DELIVERY} FROM event_webhook_deliveries WHERE org_id = %s AND id = %s",
            (org_id, delivery_id),
        )
        if row is None:
            raise NotFound("webhook delivery not found")
        return _delivery(row)

    async def record_attempt(
        self,
        org_id: str,
        delivery_id: UUID,
        attempt: DeliveryAttempt,
        status: DeliveryStatus,
        next_attempt_at: datetime | None,
    ) -> EventDelivery:
        row = await self._one(
            "UPDATE event_webhook_deliveries SET attempts = attempts || %s::jsonb,"
            " status = %s, next_attempt_at = %s, updated_at = %s"
            f" WHERE org_id = %s AND id = %s RETURNING {_DELIVERY}",
            (
                _enc.encode([attempt]).decode(),
                status,
                next_attempt_at,
                attempt.at,
                org_id,
                delivery_id,
            ),
        )
        if row is None:
            raise NotFound("webhook delivery not found")
        return _delivery(row)

    async def deliveries(
        self,
        org_id: str,
        endpoint_id: UUID,
        *,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> tuple[list[EventDelivery], bool]:
        at, last = before if before is not None else (None, None)
        rows = await self._all(
            f"SELECT {_DELIVERY} FROM event_webhook_deliveries"
            " WHERE org_id = %s AND endpoint_id = %s"
            " AND (%s::timestamptz IS NULL OR (created_at, id) < (%s, %s::uuid))"
            " ORDER BY created_at DESC, id DESC LIMIT %s",
            (org_id, endpoint_id, at, at, last, limit + 1),
        )
        return [_delivery(r) for r in rows[:limit]], len(rows) > limit

    async def pending(self, due_before: datetime, limit: int) -> list[EventDelivery]:
        rows = await self._all(
            f"SELECT {_DELIVERY} FROM event_webhook_deliveries"
            " WHERE status = 'pending' AND next_attempt_at < %s"
            " ORDER BY next_attempt_at, id LIMIT %s",
            (due_before, limit),
        )
        return [_delivery(r) for r in rows]

    async def prune(self, before: datetime, limit: int) -> int:
        rows = await self._all(
            "DELETE FROM event_webhook_events WHERE (org_id, id) IN ("
            " SELECT e.org_id, e.id FROM event_webhook_events e WHERE e.created_at < %s"
            " AND NOT EXISTS (SELECT 1 FROM event_webhook_deliveries d"
            " WHERE d.org_id = e.org_id AND d.event_id = e.id AND d.status = 'pending')"
            " ORDER BY e.created_at LIMIT %s) RETURNING id",
            (before, limit),
        )
        return len(rows)

    async def delete_for_thread(self, org_id: str, thread_id: UUID) -> int:
        rows = await self._all(
            "DELETE FROM event_webhook_events WHERE org_id = %s AND thread_id = %s RETURNING id",
            (org_id, thread_id),
        )
        return len(rows)

    async def sealed_secrets(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        rows = await self._all(
            "SELECT org_id, id, secret_sealed FROM event_webhook_endpoints"
            " WHERE %s::text IS NULL OR org_id = %s",
            (org_id, org_id),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    async def reseal(self, org_id: str, endpoint_id: UUID, old: str, new: str) -> bool:
        row = await self._one(
            "UPDATE event_webhook_endpoints SET secret_sealed = %s"
            " WHERE org_id = %s AND id = %s AND secret_sealed = %s RETURNING id",
            (new, org_id, endpoint_id, old),
        )
        return row is not None
