"""Publishing an event: what the areas call where it happens (``EventPublisher``).

The turn calls it for every message and reply, so an organization without an
endpoint for the event's type must cost nothing: each process keeps a snapshot of
every enabled endpoint's subscriptions (one small read of all of them), answers
from it, and reads it again in the background once it is older than ``ttl_s``
(the answer meanwhile comes from the snapshot it has). A change made in this
process (``invalidate``) is seen at the next publish; one made in another process
within about ``ttl_s`` (10 s by default). Only the first publish of a process
waits for the first read.

When endpoints take the type, the event (its id, the JSON body every delivery
signs) is stored with one pending delivery per endpoint in one transaction, and
one delivery job per endpoint is queued (ids only). ``key`` makes the event's id
deterministic, so the same key published twice (a retried job) stores nothing
the second time.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities.event_webhook import EVENT_TYPES, EventDelivery, WebhookEvent
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import Clock
from agentsvc_core.ports.event_webhooks import EventPublisher, EventWebhookStore, Subscription
from agentsvc_core.ports.jobs import JobQueue
from agentsvc_core.use_cases.event_webhooks.delivery import enqueue_delivery

__all__ = ["EventWebhookPublisher", "event_body", "event_id"]

log = logging.getLogger("agentsvc.event_webhooks")

_NAMESPACE = uuid.UUID("6f0b7a8e-3c1d-4c52-9a53-0e6c2f1b9d47")


def event_id(org_id: str, type_: str, key: str | None) -> str:
    """``msg_`` and 32 hex digits: random, or derived from ``key``."""
    if key is None:
        return f"msg_{uuid.uuid4().hex}"
    return f"msg_{uuid.uuid5(_NAMESPACE, f'{org_id}:{type_}:{key}').hex}"


def event_body(type_: str, at: datetime, data: Mapping[str, Any]) -> str:
    """``{"type", "timestamp", "data"}``, as Standard Webhooks suggests."""
    return msgspec.json.encode({"type": type_, "timestamp": at, "data": data}).decode()


class EventWebhookPublisher(EventPublisher):
    def __init__(
        self, store: EventWebhookStore, jobs: JobQueue, clock: Clock, *, ttl_s: float = 10.0
    ) -> None:
        self._store = store
        self._jobs = jobs
        self._clock = clock
        self._ttl = timedelta(seconds=ttl_s)
        # org -> its enabled endpoints' subscriptions; None: to be read before use
        self._snapshot: dict[str, list[Subscription]] | None = None
        self._read_at: datetime | None = None
        self._reading: asyncio.Task[None] | None = None  # a refresh in the background
        self._loading: asyncio.Task[None] | None = None  # a read publishes wait for
        self._generation = 0  # bumped by invalidate: a read begun before is not kept

    def invalidate(self) -> None:
        """An endpoint changed in this process: read again before the next publish."""
        self._generation += 1
        self._snapshot = None

    async def _read(self) -> None:
        generation = self._generation
        subscriptions = await self._store.subscriptions()
        if generation != self._generation:
            return  # changed meanwhile: this read may predate it
        snapshot: dict[str, list[Subscription]] = {}
        for s in subscriptions:
            snapshot.setdefault(s.org_id, []).append(s)
        self._snapshot, self._read_at = snapshot, self._clock.now()

    def _refresh_in_background(self) -> None:
        if self._reading is not None and not self._reading.done():
            return
        task = asyncio.create_task(self._quietly_read(), name="event-webhooks-subscriptions")
        self._reading = task

    async def _quietly_read(self) -> None:
        try:
            await self._read()
        except DomainError as exc:
            log.warning("could not read the webhook subscriptions: %s", exc.detail)

    async def _first_read(self) -> None:
        """The read a publish waits for: one at a time, whoever asks (a burst of
        publishes at start-up makes one read, not one each)."""
        if self._loading is None or self._loading.done():
            self._loading = asyncio.create_task(self._read(), name="event-webhooks-first-read")
        await asyncio.shield(self._loading)

    async def _subscribers(self, org_id: str, type_: str) -> list[UUID]:
        if self._snapshot is None:
            await self._first_read()
        elif self._read_at is None or self._clock.now() - self._read_at >= self._ttl:
            self._refresh_in_background()
        snapshot = self._snapshot or {}
        return [s.endpoint_id for s in snapshot.get(org_id, ()) if type_ in s.events]

    async def publish(
        self,
        org_id: str,
        type: str,
        data: Mapping[str, Any],
        *,
        thread_id: UUID | None = None,
        key: str | None = None,
    ) -> None:
        assert type in EVENT_TYPES, type  # a defect of the caller, not of the event
        try:
            endpoints = await self._subscribers(org_id, type)
            if not endpoints:
                return
            await self._store_and_queue(org_id, type, data, thread_id, key, endpoints)
        except DomainError as exc:
            log.warning("could not publish a %s event: %s", type, exc.detail)

    async def _store_and_queue(
        self,
        org_id: str,
        type_: str,
        data: Mapping[str, Any],
        thread_id: UUID | None,
        key: str | None,
        endpoints: list[UUID],
    ) -> None:
        now = self._clock.now()
        event = WebhookEvent(
            id=event_id(org_id, type_, key),
            org_id=org_id,
            type=type_,
            thread_id=thread_id,
            body=event_body(type_, now, data),
            created_at=now,
        )
        deliveries = [
            EventDelivery(
                id=uuid.uuid4(),
                org_id=org_id,
                endpoint_id=endpoint_id,
                event_id=event.id,
                event_type=type_,
                status="pending",
                attempts=(),
                next_attempt_at=now,
                created_at=now,
                updated_at=now,
            )
            for endpoint_id in endpoints
        ]
        if not await self._store.add_event(event, deliveries):
            return  # published before (the same key), or its thread is gone
        for delivery in deliveries:
            await enqueue_delivery(self._jobs, delivery)
