"""Delivering an event to an endpoint: the ``event_webhooks.deliver`` job, one per
delivery (its payload the organization and the delivery's id, never content).

Each attempt signs the stored body afresh (Standard Webhooks, ``signing``) with
the endpoint's current secret and POSTs it through the outbound guard
(``EventWebhookSender``), then records the attempt (status code, a short error,
the duration; never the secret). A 2xx delivers it; a 410 fails it and disables
the endpoint (the receiver said it is gone for good); anything else is tried again
on the Standard Webhooks schedule (``schedule``), asked of the job queue with
``Again``, until the schedule runs out. A delivery whose endpoint was disabled
meanwhile fails at its next attempt without a call. The job is idempotent: a
delivery no longer pending is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from uuid import UUID

import msgspec

from agentsvc_core.entities.event_webhook import (
    DeliveryAttempt,
    DeliveryStatus,
    EventDelivery,
    WebhookEndpoint,
)
from agentsvc_core.errors import DomainError, NotFound
from agentsvc_core.ports import Clock, SecretBox
from agentsvc_core.ports.event_webhooks import EventWebhookSender, EventWebhookStore, SendAnswer
from agentsvc_core.ports.jobs import Again, JobQueue
from agentsvc_core.use_cases.event_webhooks.schedule import retry_delay
from agentsvc_core.use_cases.event_webhooks.signing import signed_headers

__all__ = [
    "DELIVER_JOB",
    "DeliverySettings",
    "EventDeliveries",
    "enqueue_delivery",
    "outcome_of",
    "secret_context",
]

log = logging.getLogger("agentsvc.event_webhooks")

DELIVER_JOB = "event_webhooks.deliver"
GONE_REASON = "the endpoint answered 410 Gone"
RETENTION = timedelta(days=30)  # how long events and their deliveries are kept


def secret_context(org: str, endpoint_id: UUID) -> str:
    """What an endpoint's secret is sealed for."""
    return f"{org}:event_webhook:{endpoint_id}"


class _Job(msgspec.Struct, frozen=True, array_like=True):
    org: str
    delivery: UUID


class DeliverySettings(msgspec.Struct, frozen=True, kw_only=True):
    timeout_s: float = 15.0
    retry_scale: float = 1.0  # 1 / AGENTSVC_WEBHOOK_RETRY_SPEEDUP


async def enqueue_delivery(jobs: JobQueue, delivery: EventDelivery, delay_s: float = 0.0) -> bool:
    """Queue the delivery's job; False when its job is already waiting or running."""
    return await jobs.enqueue(
        DELIVER_JOB,
        msgspec.json.encode(_Job(delivery.org_id, delivery.id)),
        key=f"{DELIVER_JOB}:{delivery.id}",
        delay_s=delay_s,
    )


def outcome_of(
    answer: SendAnswer, attempts_made: int, scale: float
) -> tuple[DeliveryStatus, float | None, bool]:
    """Pure: (the delivery's status, seconds until its next attempt, whether the
    endpoint is to be disabled) after an attempt answered ``answer``, with
    ``attempts_made`` attempts made, that one included."""
    code = answer.status_code
    if code is not None and 200 <= code < 300:
        return "delivered", None, False
    if code == 410:
        return "failed", None, True
    delay = retry_delay(attempts_made, scale)
    return ("failed", None, False) if delay is None else ("pending", delay, False)


class EventDeliveries:
    def __init__(
        self,
        store: EventWebhookStore,
        sender: EventWebhookSender,
        box: SecretBox,
        jobs: JobQueue,
        clock: Clock,
        settings: DeliverySettings | None = None,
        *,
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        """``changed``: told when an endpoint is disabled (as ``EventWebhooks``'s)."""
        self._store = store
        self._sender = sender
        self._box = box
        self._jobs = jobs
        self._clock = clock
        self._settings = settings or DeliverySettings()
        self._changed = changed

    async def deliver(self, payload: bytes) -> Again | None:
        """The job: one attempt of one delivery."""
        job = msgspec.json.decode(payload, type=_Job)
        try:
            delivery = await self._store.get_delivery(job.org, job.delivery)
            if delivery.status != "pending":
                return None
            endpoint = await self._store.get_endpoint(job.org, delivery.endpoint_id)
            event = await self._store.get_event(job.org, delivery.event_id)
        except NotFound:
            return None  # deleted (the endpoint, or the thread whose text it held)
        if not endpoint.enabled:
            refused = SendAnswer(status_code=None, error="the endpoint is disabled", duration_ms=0)
            await self._record(delivery, refused, "failed", None)
            return None
        secret = self._box.open(endpoint.secret, secret_context(endpoint.org_id, endpoint.id))
        body = event.body.encode()
        headers = {
            **signed_headers(secret.decode(), event.id, self._clock.now(), body),
            "content-type": "application/json",
            "user-agent": "agentsvc-webhooks",
        }
        answer = await self._sender.send(endpoint.url, headers, body, self._settings.timeout_s)
        status, delay, disable = outcome_of(
            answer, len(delivery.attempts) + 1, self._settings.retry_scale
        )
        await self._record(delivery, answer, status, delay)
        if disable:
            await self._disable(endpoint)
        return None if delay is None else Again(delay)

    async def _record(
        self,
        delivery: EventDelivery,
        answer: SendAnswer,
        status: DeliveryStatus,
        delay: float | None,
    ) -> None:
        now = self._clock.now()
        attempt = DeliveryAttempt(
            at=now,
            status_code=answer.status_code,
            error=None if answer.error is None else answer.error[:300],
            duration_ms=answer.duration_ms,
        )
        after = None if delay is None else now + timedelta(seconds=delay)
        await self._store.record_attempt(delivery.org_id, delivery.id, attempt, status, after)

    async def _disable(self, endpoint: WebhookEndpoint) -> None:
        """Disabled, with compare-and-set (an admin's change meanwhile is kept, and
        the endpoint disabled over it)."""
        for _ in range(10):
            try:
                current = await self._store.get_endpoint(endpoint.org_id, endpoint.id)
            except NotFound:
                return
            off = msgspec.structs.replace(
                current, enabled=False, disabled_reason=GONE_REASON, updated_at=self._clock.now()
            )
            if await self._store.replace_endpoint(off, current):
                break
        self._changed()
        log.info("webhook endpoint %s disabled: it answered 410", endpoint.id)

    async def prune(self, limit: int = 1000) -> int:
        """The sweep's: events older than ``RETENTION`` go, with their deliveries
        (those with a delivery still pending stay until it ends)."""
        try:
            return await self._store.prune(self._clock.now() - RETENTION, limit)
        except DomainError as exc:
            log.warning("the sweep of old webhook events failed: %s", exc.detail)
            return 0

    async def resume(self, limit: int = 100) -> int:
        """The sweep's: enqueue again the pending deliveries well past due (their job
        was lost: a process died between storing an event and queuing it). The
        queue's key keeps a job still waiting from being doubled; the answer counts
        the jobs queued anew."""
        due = self._clock.now() - timedelta(minutes=1)
        queued = 0
        try:
            rows = await self._store.pending(due, limit)
            for delivery in rows:
                queued += await enqueue_delivery(self._jobs, delivery)
        except DomainError as exc:
            log.warning("the sweep of webhook deliveries failed: %s", exc.detail)
        return queued
